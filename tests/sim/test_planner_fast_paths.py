"""Schedule identity of the fast paths of ``klein_perez`` and ``coorm_equipartition`` (issue 17).

``KleinPerez.decide`` places only the jobs left to place, keeps the last cycle's placements
when a recomputation gives them again, and stops once no job left could start now;
``KleinPerez.plan`` is the plain Algorithm 1 over every job. ``EquiPartition`` stops its
conservative backfilling once no job left could start now. Here each runs on a slice of a
real trace with half the jobs elastic: every cycle's decisions must be the plain algorithm's,
and every path must be taken.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from elastic_slurm.model.decisions import Decision
from elastic_slurm.plugins.kit.kept_plan import KeptPlan
from elastic_slurm.plugins.policies import coorm, klein_perez
from elastic_slurm.plugins.registry import make_policy
from elastic_slurm.simulator import LinaConversion, Simulation, Workload, from_swf, read_swf
from elastic_slurm.simulator.workload import make_elastic

WORKLOADS = Path("/work/shared/workloads")
TRACES = ["lublin_256.swf.gz", "SDSC-SP2-1998-4.2-cln.swf.gz"]
needs_traces = pytest.mark.skipif(
    not WORKLOADS.is_dir(), reason=f"the shared traces are not here ({WORKLOADS})"
)


@cache
def _slice(name: str, skip: int, count: int) -> Workload:
    trace = read_swf(WORKLOADS / name, max_records=skip + count + 500)
    whole = from_swf(trace, max_jobs=skip + count)
    rigid = Workload(whole.jobs[skip:], whole.nodes)
    return make_elastic(rigid, LinaConversion(elastic_fraction=0.5), 1)


@needs_traces
@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("fit", ["noX", "2X+c"])
def test_klein_perez_decides_what_the_plain_algorithm_plans(
    trace: str, fit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = _slice(trace, 3000, 400)
    policy = make_policy("klein_perez", {"fit": fit})
    assert isinstance(policy, klein_perez.KleinPerez)
    fast = policy._fast_decide
    kept: list[bool] = []
    follows = KeptPlan.follows
    paths: list[bool] = []

    def counted(self: Any, *args: Any) -> bool:
        kept.append(follows(self, *args))
        return kept[-1]

    def checked(snapshot: Any, trigger: Any) -> list[Decision]:
        out = fast(snapshot)
        paths.append(out is not None)
        got = list(policy.plan(snapshot, complete=False).decisions) if out is None else out
        assert got == list(policy.plan(snapshot, complete=True).decisions), snapshot.time_s
        return got

    monkeypatch.setattr(KeptPlan, "follows", counted)
    policy.decide = checked  # type: ignore[method-assign]
    Simulation(workload.jobs, policy, workload.nodes).run()
    assert all(paths), "jobs without profiles are one step each: the fast path every cycle"
    assert any(kept) and not all(kept), "placements must be both kept and recomputed"


def _coorm_run(workload: Workload) -> tuple[Any, ...]:
    policy = make_policy("coorm_equipartition", None)
    decided: list[tuple[float, list[Decision]]] = []
    decide = policy.decide

    def logged(snapshot: Any, trigger: Any) -> list[Decision]:
        out = decide(snapshot, trigger)
        decided.append((snapshot.time_s, out))
        return out

    policy.decide = logged  # type: ignore[method-assign]
    result = Simulation(workload.jobs, policy, workload.nodes).run()
    return tuple(decided), result.records, result.timeline, result.metrics


@needs_traces
@pytest.mark.parametrize("trace", TRACES)
def test_coorm_stops_placing_only_when_nothing_else_could_start_now(
    trace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = _slice(trace, 3000, 500)
    cuts: list[bool] = []
    may_start = coorm._may_start

    def counted(*args: Any) -> bool:
        cuts.append(may_start(*args))
        return cuts[-1]

    monkeypatch.setattr(coorm, "_may_start", counted)
    shipped = _coorm_run(workload)
    assert not all(cuts), "the scan must stop early somewhere"
    # the plain scan: every job of some duration may start now, until no node is left now
    monkeypatch.setattr(coorm, "_may_start", lambda occ, ask, cap, now: ask[2] > 0.0)
    plain = _coorm_run(workload)
    assert shipped[0] == plain[0]  # every decision, in order, with its reason
    assert shipped[1:] == plain[1:]  # records, allocation changes, metrics
