"""The simulator's job views, built without ``JobView.from_fields``' check (issue 17).

``simulator/cluster.py`` builds its views without the check of the field names that
``JobView.from_fields`` makes on every call (a pending view names every field itself; a running
view is its pending view's fields with the running state's). These tests are that check,
made on every view of a run with rigid, malleable and evolving jobs: each names every field of
:class:`~elastic_slurm.model.snapshot.JobView` and equals (same hash) ``JobView(**fields)``.
"""

from __future__ import annotations

from dataclasses import fields

import pytest

from elastic_slurm.model import ClusterSnapshot, Decision, JobKind, JobState, JobView, Trigger
from elastic_slurm.plugins.policies.lina import LinaElastic
from elastic_slurm.simulator import run
from elastic_slurm.simulator.generators.downey import lina_synthetic

FIELDS = {f.name for f in fields(JobView)}


class _Watching(LinaElastic):
    """``lina_elastic``, keeping every view it is shown."""

    def __init__(self) -> None:
        super().__init__()
        self.views: list[JobView] = []

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        assert snapshot.starts_known()  # the guarantee test_starts_are_as_guaranteed checks
        self.views.extend(snapshot.pending())
        self.views.extend(snapshot.running())
        return super().decide(snapshot, trigger)


@pytest.fixture(scope="module")
def views() -> list[JobView]:
    workload = lina_synthetic(jobs=150, nodes=64, load=0.75).generate(seed=3)
    policy = _Watching()
    result = run(workload, policy, elastic_fraction=0.5, seed=1)
    assert result.metrics.expansions > 0 and result.metrics.shrinks > 0  # resizes were seen
    return policy.views


def test_every_view_names_every_field_and_equals_the_checked_one(views: list[JobView]) -> None:
    kinds = {v.kind for v in views}
    assert {JobKind.RIGID, JobKind.MALLEABLE, JobKind.EVOLVING} <= kinds
    assert any(v.evolving_request for v in views)
    for view in views:
        state = dict(view.__dict__)
        assert set(state) == FIELDS, view.job_id
        checked = JobView(**state)
        assert checked == view and hash(checked) == hash(view)


def test_starts_are_as_guaranteed(views: list[JobView]) -> None:
    # The simulator's snapshots say starts_known (split_by_start then skips its check): no
    # pending view has a start time, and every running one has one.
    assert {v.state for v in views} == {JobState.PENDING, JobState.RUNNING}
    for view in views:
        assert (view.start_time_s is None) == (view.state is JobState.PENDING), view
