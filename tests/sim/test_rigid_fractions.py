"""Issue 17: a rigid policy's schedule does not depend on the elastic fraction.

Rigid policies start every job at its requested size and never resize, so converting jobs
to elastic (Lina et al.'s conversion) must leave every job's start and end unchanged, to the
last bit: every elastic comparison is made against that one rigid baseline. Evolving jobs
still make their (non-blocking, never served) requests; those milestones must not move a
job's end by a rounding error, which reorders it with an arrival or another end at the same
second and changes later backfilling decisions.
"""

from __future__ import annotations

import pytest

from elastic_slurm.plugins.registry import make_policy
from elastic_slurm.simulator import Simulation, Workload

from .trace_runs import needs_traces, trace_slice

TRACES = ["lublin_256.swf.gz", "SDSC-SP2-1998-4.2-cln.swf.gz", "KTH-SP2-1996-2.1-cln.swf.gz"]
FRACTIONS = (0.0, 0.5, 1.0)


def _schedule(workload: Workload, policy: str) -> list[tuple[int, float, float, int]]:
    result = Simulation(workload.jobs, make_policy(policy), workload.nodes).run()
    return [(r.job_id, r.start_s, r.end_s, r.nodes_start) for r in result.records]


@needs_traces
@pytest.mark.parametrize("policy", ["easy_backfill", "conservative_backfill"])
@pytest.mark.parametrize("trace", TRACES)
def test_rigid_schedule_same_at_every_elastic_fraction(trace: str, policy: str) -> None:
    base = _schedule(trace_slice(trace, 0, 400, 0.0), policy)
    for fraction in FRACTIONS[1:]:
        got = _schedule(trace_slice(trace, 0, 400, fraction), policy)
        diff = [(a, b) for a, b in zip(base, got, strict=True) if a != b]
        assert not diff, f"fraction {fraction}: {len(diff)} jobs differ, first {diff[:3]}"
