"""The immutable cluster view a policy sees: ``model/snapshot.py``."""

from __future__ import annotations

import pytest

from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState, JobView, NodeState, NodeView


def _job(
    job_id: int, state: JobState, nodes: tuple[str, ...] = (), requested: int = 2, **kw: object
) -> JobView:
    return JobView(
        job_id=job_id,
        kind=kw.pop("kind", JobKind.RIGID),  # type: ignore[arg-type]
        state=state,
        nodes=nodes,
        nodes_requested=requested,
        nodes_min=1,
        nodes_max=4,
        submit_time_s=float(job_id),
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("view", "size"),
    [
        (_job(1, JobState.RUNNING, ("n1", "n2", "n3"), requested=2), 3),  # allocated nodes
        (_job(2, JobState.PENDING, (), requested=4), 4),
        (_job(3, JobState.COMPLETING, ("n1",), requested=2), 2),
        (_job(4, JobState.RUNNING, (), requested=2), 0),
    ],
)
def test_job_size(view: JobView, size: int) -> None:
    assert view.size == size


@pytest.mark.parametrize(
    ("kind", "malleable"),
    [
        (JobKind.RIGID, False),
        (JobKind.MOLDABLE, False),
        (JobKind.MALLEABLE, True),
        (JobKind.EVOLVING, False),  # the application resizes it, not the resource manager
    ],
)
def test_job_malleable(kind: JobKind, malleable: bool) -> None:
    assert _job(1, JobState.RUNNING, ("n1",), kind=kind).malleable is malleable


def test_job_view_defaults() -> None:
    view = _job(1, JobState.PENDING)
    assert (view.start_time_s, view.resizing, view.batch_host, view.name) == (None, False, None, "")


SNAP = ClusterSnapshot(
    time_s=50.0,
    jobs=(
        _job(1, JobState.RUNNING, ("n1", "n2")),
        _job(2, JobState.PENDING),
        _job(3, JobState.COMPLETING, ("n3",)),
        _job(4, JobState.PENDING),
        _job(5, JobState.RUNNING, ("n4",)),
        _job(6, JobState.UNKNOWN),
    ),
    nodes=(
        NodeView("n1", NodeState.ALLOCATED),
        NodeView("n2", NodeState.ALLOCATED),
        NodeView("n3", NodeState.IDLE, cpus=8),
        NodeView("n4", NodeState.UNAVAILABLE),
        NodeView("n5", NodeState.IDLE),
        NodeView("n6", NodeState.UNKNOWN),
    ),
)


def test_snapshot_selections() -> None:
    assert SNAP.idle_nodes() == ("n3", "n5")
    assert SNAP.node_count == len(SNAP.nodes)
    assert [j.job_id for j in SNAP.pending()] == [2, 4]
    assert [j.job_id for j in SNAP.running()] == [1, 5]
    assert SNAP.job(3).nodes == ("n3",)
    assert NodeView("x", NodeState.IDLE).cpus == 1


def test_snapshot_job_missing() -> None:
    with pytest.raises(KeyError) as info:
        SNAP.job(99)
    assert info.value.args == (99,)


def test_empty_snapshot() -> None:
    empty = ClusterSnapshot(0.0, (), ())
    assert (empty.idle_nodes(), empty.pending(), empty.running()) == ((), (), ())


def test_views_are_frozen() -> None:
    with pytest.raises(AttributeError):
        SNAP.jobs[0].nodes = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        SNAP.time_s = 1.0  # type: ignore[misc]
