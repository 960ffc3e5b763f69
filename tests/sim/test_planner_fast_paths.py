"""Schedule identity of the fast paths of ``klein_perez`` and ``coorm_equipartition`` (issue 17).

``KleinPerez.decide`` places only the jobs left to place, keeps the last cycle's placements
when a recomputation gives them again, and stops once no job left could start now;
``KleinPerez.plan`` is the plain Algorithm 1 over every job. ``EquiPartition`` stops its
conservative backfilling once no job left could start now. Here each runs on a slice of a
real trace with half the jobs elastic: every cycle's decisions must be the plain algorithm's,
and every path must be taken.
"""

from __future__ import annotations

from typing import Any

import pytest

from elastic_slurm.model.decisions import Decision
from elastic_slurm.plugins.kit import compiled_placement
from elastic_slurm.plugins.kit.kept_plan import KeptPlan
from elastic_slurm.plugins.policies import coorm, klein_perez, klein_perez_fast
from elastic_slurm.plugins.registry import make_policy
from elastic_slurm.simulator import Simulation, Workload

from .trace_runs import TRACES, logged_run, needs_traces, trace_slice


@needs_traces
@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("fit", ["noX", "2X+c"])
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_klein_perez_decides_what_the_plain_algorithm_plans(
    trace: str, fit: str, compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not compiled:  # the Python scan and KeptPlan, as without Numba
        monkeypatch.setattr(compiled_placement, "kernel", lambda: None)
    workload = trace_slice(trace, 3000, 400)
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

    cycle = compiled_placement.ListPlan.cycle

    def compiled(self: Any, *args: Any) -> tuple[list[int], bool]:
        due, followed = cycle(self, *args)
        kept.append(followed)
        return due, followed

    least_of = klein_perez_fast._Queue.least_of
    unfollowed: list[bool] = []  # least_of answered for a new pending tuple (no follow)

    def least(self: Any, pending: Any) -> float | None:
        out = least_of(self, pending)
        unfollowed.append(out is not None and pending is not self.views)
        return out

    monkeypatch.setattr(klein_perez_fast._Queue, "least_of", least)
    monkeypatch.setattr(KeptPlan, "follows", counted)  # the Python scan's plan
    monkeypatch.setattr(compiled_placement.ListPlan, "cycle", compiled)  # the compiled one's
    policy.decide = checked  # type: ignore[method-assign]
    Simulation(workload.jobs, policy, workload.nodes).run()
    assert all(paths), "jobs without profiles are one step each: the fast path every cycle"
    assert any(kept) and not all(kept), "placements must be both kept and recomputed"
    assert any(unfollowed), "cycles that end on the arrivals' requests alone must be taken"


def _coorm_run(workload: Workload) -> tuple[Any, ...]:
    return logged_run(workload, make_policy("coorm_equipartition", None))


@needs_traces
@pytest.mark.parametrize("trace", TRACES)
def test_coorm_stops_placing_only_when_nothing_else_could_start_now(
    trace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = trace_slice(trace, 3000, 500)
    # the Python scan, which calls _may_start (the compiled one gives the same places and
    # stops at the same job: tests/unit/test_kit_compiled_placement.py)
    monkeypatch.setattr(compiled_placement, "kernel", lambda: None)
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
