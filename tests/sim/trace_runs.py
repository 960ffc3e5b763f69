"""Shared by the schedule-identity tests: slices of the shared traces, and runs that log
every cycle's decisions."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from elastic_slurm.model.decisions import Decision
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.simulator import LinaConversion, Simulation, Workload, from_swf, read_swf
from elastic_slurm.simulator.workload import make_elastic

WORKLOADS = Path("/work/shared/workloads")
TRACES = ["lublin_256.swf.gz", "SDSC-SP2-1998-4.2-cln.swf.gz"]
needs_traces = pytest.mark.skipif(
    not WORKLOADS.is_dir(), reason=f"the shared traces are not here ({WORKLOADS})"
)


@cache
def trace_slice(name: str, skip: int, count: int, fraction: float = 0.5) -> Workload:
    """Jobs ``skip .. skip + count`` of a shared trace, ``fraction`` of them made elastic."""
    trace = read_swf(WORKLOADS / name, max_records=skip + count + 500)
    whole = from_swf(trace, max_jobs=skip + count)
    rigid = Workload(whole.jobs[skip:], whole.nodes)
    return make_elastic(rigid, LinaConversion(elastic_fraction=fraction), 1)


def logged_run(
    workload: Workload, policy: Policy, before: Callable[[], None] | None = None
) -> tuple[Any, ...]:
    """Simulate ``policy`` on ``workload``: every cycle's ``(time, decisions)``, then the
    records, the allocation timeline and the metrics. ``before`` runs before each cycle."""
    decided: list[tuple[float, list[Decision]]] = []
    decide = policy.decide

    def logged(snapshot: Any, trigger: Any) -> list[Decision]:
        if before is not None:
            before()
        out = decide(snapshot, trigger)
        decided.append((snapshot.time_s, out))
        return out

    policy.decide = logged  # type: ignore[method-assign]
    result = Simulation(workload.jobs, policy, workload.nodes).run()
    return tuple(decided), result.records, result.timeline, result.metrics
