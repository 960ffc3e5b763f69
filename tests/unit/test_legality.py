"""The one legality function both the simulator and the controller call: ``plugins/legality.py``."""

from __future__ import annotations

import pytest

from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState, JobView, NodeState, NodeView
from elastic_slurm.plugins.legality import check

R, M, L, E = JobKind.RIGID, JobKind.MOLDABLE, JobKind.MALLEABLE, JobKind.EVOLVING


def running(job_id: int, kind: JobKind, nodes: str, lo: int, hi: int, **kw) -> JobView:
    names = tuple(nodes.split(","))
    return JobView(job_id, kind, JobState.RUNNING, names, len(names), lo, hi, 0.0, **kw)


def pending(job_id: int, kind: JobKind, n: int, lo: int, hi: int) -> JobView:
    return JobView(job_id, kind, JobState.PENDING, (), n, lo, hi, 1.0)


def snap(*jobs: JobView, idle: int = 2, busy: int = 4) -> ClusterSnapshot:
    nodes = [NodeView(f"b{i}", NodeState.ALLOCATED) for i in range(busy)]
    nodes += [NodeView(f"i{i}", NodeState.IDLE) for i in range(idle)]
    return ClusterSnapshot(10.0, tuple(jobs), tuple(nodes))


CLUSTER = snap(
    running(1, R, "b0,b1", 2, 2),
    running(2, L, "b2,b3", 1, 3),
    running(3, M, "b4", 1, 4),
    running(4, E, "b5", 1, 4, evolving_request=2),
    running(5, L, "b6,b7", 1, 8, resizing=True),
    pending(6, R, 2, 2, 2),
    pending(7, M, 2, 1, 3),
    pending(8, E, 3, 1, 4),
    idle=2,
    busy=8,
)


def reasons(decisions: list[Decision], cluster: ClusterSnapshot = CLUSTER) -> list[str]:
    return [v.reason for v in check(cluster, decisions)]


@pytest.mark.parametrize(
    ("decision", "reason"),
    [
        (Expand(1, 1), "a rigid job cannot be resized while it runs"),
        (Shrink(3, 1), "a moldable job cannot be resized while it runs"),
        (Expand(2, 2), "the job would have 4 node(s), outside its range 1-3"),
        (Shrink(2, 2), "the job would have 0 node(s), outside its range 1-3"),
        (Expand(2, 0), "the count must be at least 1"),
        (Expand(5, 1), "the job is already resizing"),
        (Expand(6, 1), "job 6 is not running"),
        (Shrink(99, 1), "job 99 is not running"),
        (Expand(4, 3), "an evolving job is resized only to serve its request (it asks for +2"),
        (Shrink(4, 1), "an evolving job is resized only to serve its request (it asks for +2"),
        (Start(1, 2), "job 1 is not pending"),
        (Start(6, 1), "a rigid job starts at its requested size, 2"),
        (Start(8, 2), "an evolving job starts at its requested size, 3"),
        (Start(7, 4), "the size must be within the job's range 1-3"),
        (Start(7, 3), "it needs 3 node(s) but only 2 are idle"),
        (Start(7, 2.0), "the node count must be an int"),
        (Expand(2, True), "the node count must be an int"),
        ("expand 2", "this is not a Start, Expand or Shrink"),
    ],
)
def test_an_illegal_decision_says_why(decision: Decision, reason: str) -> None:
    (got,) = reasons([decision])
    assert got.startswith(reason), got


@pytest.mark.parametrize(
    "decision", [Expand(2, 1), Shrink(2, 1), Expand(4, 2), Expand(4, 1), Start(6, 2), Start(7, 1)]
)
def test_a_legal_decision_is_legal(decision: Decision) -> None:
    (verdict,) = check(CLUSTER, [decision])
    assert verdict.legal and verdict.reason == "" and verdict.decision is decision


def test_earlier_decisions_of_the_batch_count() -> None:
    # two idle nodes: a start takes them, so an expansion after it finds none free
    assert reasons([Start(6, 2), Expand(2, 1)]) == ["", "it needs 1 node(s) but only 0 are free"]
    # a shrink's nodes can be used by a later start of the same batch
    assert reasons([Shrink(2, 1), Start(7, 3)]) == ["", ""]
    # one resize at a time, even within a batch; a started job is not pending any more
    assert reasons([Expand(2, 1), Shrink(2, 1)]) == ["", "the job is already resizing"]
    assert reasons([Start(7, 1), Start(7, 1)]) == ["", "job 7 is not pending"]
    # an illegal decision changes nothing for those after it
    assert reasons([Start(7, 3), Start(6, 2)]) == ["it needs 3 node(s) but only 2 are idle", ""]


def test_a_job_started_in_the_batch_can_be_resized_only_once_running() -> None:
    cluster = snap(pending(1, L, 2, 1, 4), idle=3, busy=0)
    assert reasons([Start(1, 2), Expand(1, 1)], cluster) == ["", ""]
    assert reasons([Start(1, 2), Expand(1, 3)], cluster) == [
        "",
        "the job would have 5 node(s), outside its range 1-4",
    ]
    # started on nodes still being released: not running yet
    assert reasons([Start(1, 4), Expand(1, 1)], snap(pending(1, L, 2, 1, 4), idle=3, busy=0)) == [
        "it needs 4 node(s) but only 3 are idle",
        "job 1 is not running",
    ]
    verdicts = check(cluster, [Start(1, 4), Expand(1, 1)], releasing=1)
    assert [v.reason for v in verdicts] == ["", "job 1 is not running"]


def test_nodes_being_released_count_as_free() -> None:
    cluster = snap(pending(1, R, 3, 3, 3), idle=2, busy=2)
    assert reasons([Start(1, 3)], cluster) == ["it needs 3 node(s) but only 2 are idle"]
    assert [v.reason for v in check(cluster, [Start(1, 3)], releasing=1)] == [""]
    (verdict,) = check(cluster, [Start(1, 3)], releasing=0)
    assert not verdict.legal


def test_down_nodes_are_not_free() -> None:
    nodes = (NodeView("n1", NodeState.IDLE), NodeView("n2", NodeState.UNAVAILABLE))
    cluster = ClusterSnapshot(0.0, (running(1, L, "n0", 1, 4),), nodes)
    assert reasons([Expand(1, 2)], cluster) == ["it needs 2 node(s) but only 1 are free"]
    assert reasons([Expand(1, 1)], cluster) == [""]
