"""Schedule identity: policies that keep last cycle's reservations against recomputing them.

``conservative_backfill`` and ``coorm_equipartition`` keep the reservations of their last
cycle and reuse those that a recomputation would give again (``kit.kept_plan.KeptPlan``).
Here each runs on a slice of a real trace with half the jobs elastic, once as shipped and once
forced to recompute every reservation every cycle (the plain algorithm, as the papers state
it); every decision, job record and allocation change must be the same, and both paths must
be taken.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from elastic_slurm.model.decisions import Decision
from elastic_slurm.plugins.kit.kept_plan import KeptPlan
from elastic_slurm.plugins.registry import make_policy
from elastic_slurm.simulator import LinaConversion, Simulation, Workload, from_swf, read_swf
from elastic_slurm.simulator.workload import make_elastic

WORKLOADS = Path("/work/shared/workloads")
TRACES = ["lublin_256.swf.gz", "SDSC-SP2-1998-4.2-cln.swf.gz"]


@cache
def _slice(name: str, skip: int, count: int, fraction: float) -> Workload:
    trace = read_swf(WORKLOADS / name, max_records=skip + count + 500)
    whole = from_swf(trace, max_jobs=skip + count)
    rigid = Workload(whole.jobs[skip:], whole.nodes)
    return make_elastic(rigid, LinaConversion(elastic_fraction=fraction), 1)


def _run(workload: Workload, name: str, *, recompute: bool) -> tuple[Any, ...]:
    policy = make_policy(name, None)
    decided: list[tuple[float, list[Decision]]] = []
    decide = policy.decide

    def logged(snapshot: Any, trigger: Any) -> list[Decision]:
        if recompute:
            policy._plan = None  # type: ignore[attr-defined]  # forget: recompute everything
        out = decide(snapshot, trigger)
        decided.append((snapshot.time_s, out))
        return out

    policy.decide = logged  # type: ignore[method-assign]
    result = Simulation(workload.jobs, policy, workload.nodes).run()
    return tuple(decided), result.records, result.timeline, result.metrics


@pytest.mark.skipif(not WORKLOADS.is_dir(), reason=f"the shared traces are not here ({WORKLOADS})")
@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("name", ["conservative_backfill", "coorm_equipartition"])
def test_kept_reservations_give_the_schedule_of_recomputed_ones(
    trace: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = KeptPlan
    workload = _slice(trace, 3000, 700, 0.5)
    answers: list[bool] = []
    follows = plan.follows

    def counted(self: Any, *args: Any) -> bool:
        answers.append(follows(self, *args))
        return answers[-1]

    monkeypatch.setattr(plan, "follows", counted)
    kept = _run(workload, name, recompute=False)
    assert any(answers) and not all(answers), "both paths must be taken"
    recomputed = _run(workload, name, recompute=True)
    assert kept[0] == recomputed[0]  # every decision, in order, with its reason
    assert kept[1:] == recomputed[1:]  # records, allocation changes, metrics
