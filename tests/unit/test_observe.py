"""Slurm's view turned into the policy's snapshot: ``controller/observe.py``, from recordings."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from elastic_slurm.adapter.backend import EXPANDER_PREFIX
from elastic_slurm.adapter.parse import SlurmJob, SlurmNode, parse_sinfo_nodes, parse_squeue_json
from elastic_slurm.controller.observe import job_view, snapshot
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState, JobView, NodeState, NodeView

pytestmark = pytest.mark.usefixtures("fictional_users")

if TYPE_CHECKING:
    from conftest import Golden


@pytest.fixture
def recorded(golden: Golden) -> tuple[list[SlurmJob], list[SlurmNode]]:
    jobs = parse_squeue_json(golden.recorded("squeue_running_pending_expander.json"))
    nodes = parse_sinfo_nodes(golden.recorded("sinfo_nodes.txt"))
    return jobs, nodes


def test_snapshot_of_the_recording(recorded: tuple[list[SlurmJob], list[SlurmNode]]) -> None:
    jobs, nodes = recorded
    snap = snapshot(jobs, nodes, resizing={4}, now_s=1795312860.0)
    assert snap == ClusterSnapshot(
        time_s=1795312860.0,
        jobs=(
            JobView(
                job_id=4,
                kind=JobKind.MALLEABLE,
                state=JobState.RUNNING,
                nodes=("n1", "n2"),
                nodes_requested=2,
                nodes_min=1,
                nodes_max=4,
                submit_time_s=1795312853.0,
                start_time_s=1795312854.0,
                resizing=True,
                batch_host="n1",
                name='heat "2d"; x',
                walltime_s=525600 * 60.0,  # from squeue's time_limit (minutes)
                estimated_end_s=1826848854.0,  # squeue's end_time
            ),
            JobView(
                job_id=6,
                kind=JobKind.RIGID,
                state=JobState.PENDING,
                nodes=(),
                nodes_requested=3,
                nodes_min=3,
                nodes_max=3,
                submit_time_s=1795312855.0,
                start_time_s=None,
                resizing=False,
                batch_host=None,
                name="wrap",
            ),
        ),
        nodes=(
            NodeView("n1", NodeState.ALLOCATED, 1),
            NodeView("n2", NodeState.ALLOCATED, 1),
            NodeView("n3", NodeState.ALLOCATED, 1),  # the expander's node shows as allocated
            NodeView("n4", NodeState.IDLE, 1),
        ),
    )
    assert snap.idle_nodes() == ("n4",)
    assert [j.job_id for j in snap.running()] == [4]
    assert [j.job_id for j in snap.pending()] == [6]


def test_snapshot_excludes_expanders_and_ended_jobs(
    recorded: tuple[list[SlurmJob], list[SlurmNode]],
) -> None:
    jobs, nodes = recorded
    snap = snapshot(jobs, nodes, now_s=0.0)
    ids = [j.job_id for j in snap.jobs]
    assert ids == [4, 6]
    assert 5 not in ids  # expand:4, running
    assert not any(j.name.startswith(EXPANDER_PREFIX) for j in snap.jobs)
    assert snap.job(4).resizing is False


def test_snapshot_time_defaults_to_now(recorded: tuple[list[SlurmJob], list[SlurmNode]]) -> None:
    before = time.time()
    snap = snapshot(*recorded)
    assert before <= snap.time_s <= time.time()


def _slurm_job(job_id: int, submit: float, state: str = "PENDING", **kw: object) -> SlurmJob:
    fields: dict[str, object] = {
        "job_id": job_id,
        "name": f"j{job_id}",
        "state": state,
        "nodes": (),
        "node_count": 1,
        "comment": "",
        "submit_time_s": submit,
        "start_time_s": None,
        "batch_host": None,
        "workdir": "/w",
        "user": "u",
        "partition": "p",
        "account": "a",
        "qos": "normal",
        "reason": "",
    }
    fields.update(kw)
    return SlurmJob(**fields)  # type: ignore[arg-type]


def test_snapshot_sort_order_and_states() -> None:
    jobs = [
        _slurm_job(9, 20.0),
        _slurm_job(3, 20.0),  # same submit time: lower id first
        _slurm_job(5, 10.0, "RUNNING", nodes=("n1",), start_time_s=11.0),
        _slurm_job(7, 5.0, "COMPLETING", nodes=("n2",)),
        _slurm_job(8, 1.0, "CANCELLED by 0"),
        _slurm_job(2, 2.0, "SOMETHING_NEW"),
        _slurm_job(4, 3.0, "RESIZING", nodes=("n3",)),
        _slurm_job(6, 0.5, "RUNNING", nodes=("n4",), name="expand:5"),
    ]
    snap = snapshot(jobs, [], now_s=1.0)
    assert [(j.job_id, j.state) for j in snap.jobs] == [
        (4, JobState.RUNNING),
        (5, JobState.RUNNING),
        (3, JobState.PENDING),
        (9, JobState.PENDING),
    ]
    assert snap.nodes == ()


@pytest.mark.parametrize(
    ("comment", "kind", "lo", "hi"),
    [
        ("elastic-slurm:kind=moldable;min=2;max=6", JobKind.MOLDABLE, 2, 6),
        ("elastic-slurm:kind=evolving;min=1;max=3", JobKind.EVOLVING, 1, 3),
        ("elastic-slurm:kind=malleable;min=4;max=2", JobKind.RIGID, 3, 3),  # malformed: rigid
        ("my own comment", JobKind.RIGID, 3, 3),
        ("", JobKind.RIGID, 3, 3),
    ],
)
def test_job_view_kind_from_tag(comment: str, kind: JobKind, lo: int, hi: int) -> None:
    view = job_view(_slurm_job(1, 0.0, node_count=3, comment=comment))
    assert (view.kind, view.nodes_min, view.nodes_max, view.nodes_requested) == (kind, lo, hi, 3)


def test_job_view_running_size_is_its_nodes() -> None:
    job = _slurm_job(1, 0.0, "RUNNING", nodes=("n1", "n2", "n3"), node_count=2, batch_host="n1")
    view = job_view(job, resizing=True)
    assert (view.nodes, view.nodes_requested, view.nodes_min, view.nodes_max) == (
        ("n1", "n2", "n3"),
        3,
        3,
        3,
    )
    assert (view.resizing, view.batch_host, view.size) == (True, "n1", 3)


def test_job_view_running_without_nodes_uses_node_count() -> None:
    view = job_view(_slurm_job(1, 0.0, "RUNNING", node_count=2))
    assert (view.nodes, view.nodes_requested) == ((), 2)


def test_job_view_completing_job_shows_no_nodes() -> None:
    view = job_view(_slurm_job(1, 0.0, "COMPLETING", nodes=("n1", "n2"), node_count=2))
    assert (view.state, view.nodes, view.nodes_requested, view.size) == (
        JobState.COMPLETING,
        (),
        2,
        2,
    )


def test_job_view_keeps_times_and_name() -> None:
    job = _slurm_job(1, 12.5, "RUNNING", nodes=("n1",), start_time_s=13.0, name="x y")
    view = job_view(job)
    assert (view.submit_time_s, view.start_time_s, view.name) == (12.5, 13.0, "x y")
    assert view.resizing is False


def test_stale_helpers_are_those_no_resize_will_use(tmp_path) -> None:  # noqa: ANN001
    from elastic_slurm.controller.observe import stale_helpers
    from elastic_slurm.model.resize_order import AckStatus, ResizeAck, ResizeAction, ResizeOrder
    from elastic_slurm.protocol.jobdir import JobDir

    w = str(tmp_path)
    run = {"state": "RUNNING", "workdir": w}
    jobs = [
        _slurm_job(1, 0.0, nodes=("n1",), start_time_s=1.0, **run),
        _slurm_job(2, 0.0, nodes=("n2",), start_time_s=1.0, name="expand:1", **run),
        _slurm_job(3, 0.0, nodes=("n3",), start_time_s=1.0, **run),
        _slurm_job(4, 0.0, nodes=("n4",), start_time_s=1.0, name="sibling:3", **run),
        _slurm_job(5, 0.0, nodes=("n5",), start_time_s=1.0, name="sibling:3", **run),
        _slurm_job(6, 0.0, nodes=("n6",), start_time_s=95.0, name="expand:3", **run),
        _slurm_job(7, 0.0, start_time_s=1.0, name="expand:3", workdir=w),  # pending: salloc's
    ]
    # job 3 grew onto n4 (order 1, done): sibling 4 is in use, sibling 5 is not
    jobdir = JobDir.for_job(w, 3)
    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n3", "n4"), 1.0))
    jobdir.write_ack(ResizeAck(1, AckStatus.DONE, ("n3", "n4"), 2.0, ranks=2))
    assert stale_helpers(jobs, (), now_s=100.0, min_age_s=30.0) == [2, 5]
    assert stale_helpers(jobs, (1, 3), now_s=100.0, min_age_s=30.0) == []  # resizing
    assert stale_helpers(jobs, (), now_s=20.0, min_age_s=30.0) == []  # too young to tell
    # an order not yet acknowledged: its job's helpers may be in use
    jobdir.write_order(ResizeOrder(2, ResizeAction.SHRINK, ("n3",), 3.0))
    assert stale_helpers(jobs, (), now_s=100.0, min_age_s=30.0) == [2]


def test_stale_helpers_keep_the_helpers_of_a_job_whose_directory_breaks(tmp_path) -> None:  # noqa: ANN001
    from elastic_slurm.controller.observe import stale_helpers
    from elastic_slurm.protocol.jobdir import JobDir

    def job(job_id: int, name: str, nodes: tuple[str, ...]) -> SlurmJob:
        return SlurmJob(
            job_id, name, "RUNNING", nodes, len(nodes), "", 1.0, 1.0, nodes[0], str(tmp_path),
            "u", "p", "a", "q", "None",
        )  # fmt: skip

    orders = JobDir.for_job(tmp_path, 1).path / "orders"
    orders.mkdir(parents=True)
    (orders / "000001.json").write_text("{")  # unreadable, and no acknowledgement
    (JobDir.for_job(tmp_path, 1).path / "acks").mkdir()
    (JobDir.for_job(tmp_path, 1).path / "acks" / "000001.done.json").write_text("[")
    listed = [job(1, "heat", ("n1",)), job(2, "sibling:1", ("n2",))]
    errors: list[tuple[int, Exception]] = []
    assert (
        stale_helpers(listed, (), 1000.0, 10.0, on_error=lambda j, e: errors.append((j, e))) == []
    )
    assert [j for j, _ in errors] == [1]
    from elastic_slurm.errors import JobInputError

    with pytest.raises(JobInputError):  # without on_error the error is the caller's
        stale_helpers(listed, (), 1000.0, 10.0)
