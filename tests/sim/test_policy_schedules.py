"""Schedule identity: policies that keep last cycle's reservations against recomputing them.

``conservative_backfill`` and ``coorm_equipartition`` keep the reservations of their last
cycle and reuse those that a recomputation would give again (``kit.kept_plan.KeptPlan``, or
for ``coorm_equipartition`` with the compiled kernel ``kit.compiled_placement.QueuePlan``).
Here each runs on a slice of a real trace with half the jobs elastic, once as shipped and once
forced to recompute every reservation every cycle (the plain algorithm, as the papers state
it); every decision, job record and allocation change must be the same, and both paths must
be taken (except where no plan can fail: ``conservative_backfill`` on a trace whose estimates
are its run times).
"""

from __future__ import annotations

from typing import Any

import pytest

from elastic_slurm.plugins.kit.compiled_placement import QueuePlan
from elastic_slurm.plugins.kit.kept_plan import KeptPlan
from elastic_slurm.plugins.registry import make_policy

from .trace_runs import TRACES, logged_run, needs_traces, trace_slice


def _run(workload: Any, name: str, *, recompute: bool) -> tuple[Any, ...]:
    policy = make_policy(name, None)

    def forget() -> None:
        policy._plan = None  # type: ignore[attr-defined]  # recompute everything

    return logged_run(workload, policy, forget if recompute else None)


@needs_traces
@pytest.mark.parametrize("trace", TRACES)
@pytest.mark.parametrize("name", ["conservative_backfill", "coorm_equipartition"])
def test_kept_reservations_give_the_schedule_of_recomputed_ones(
    trace: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = KeptPlan
    workload = trace_slice(trace, 3000, 700)
    answers: list[bool] = []
    follows = plan.follows

    def counted(self: Any, *args: Any) -> bool:
        answers.append(follows(self, *args))
        return answers[-1]

    cycle = QueuePlan.cycle  # coorm's compiled cycle says whether it kept its plan

    def compiled(self: Any, *args: Any) -> tuple[list[int], Any, bool]:
        out = cycle(self, *args)
        answers.append(out[2])
        return out

    monkeypatch.setattr(plan, "follows", counted)
    monkeypatch.setattr(QueuePlan, "cycle", compiled)
    kept = _run(workload, name, recompute=False)
    exact = all(job.walltime_s == job.runtime_s for job in workload.jobs)
    if name == "conservative_backfill" and exact:
        # every job ends at its estimated end (lublin's estimates are its run times) and a
        # rigid policy resizes nothing: its plan always holds, nothing is ever recomputed
        assert all(answers), "a plan that always holds was recomputed"
    else:
        assert any(answers) and not all(answers), "both paths must be taken"
    recomputed = _run(workload, name, recompute=True)
    assert kept[0] == recomputed[0]  # every decision, in order, with its reason
    assert kept[1:] == recomputed[1:]  # records, allocation changes, metrics
