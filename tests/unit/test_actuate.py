"""Which nodes a shrinking job keeps: ``controller/actuate.py:choose_keep``."""

from __future__ import annotations

import pytest

from elastic_slurm.controller.actuate import choose_keep
from elastic_slurm.errors import ResizeError

pytestmark = pytest.mark.usefixtures("fictional_users")

N4 = ["n1", "n2", "n3", "n4"]


@pytest.mark.parametrize(
    ("nodes", "batch_host", "count", "keep"),
    [
        (N4, "n1", 2, ("n1", "n2")),
        (N4, "n1", 1, ("n1", "n2", "n3")),
        (N4, "n1", 3, ("n1",)),
        (N4, "n4", 3, ("n4",)),  # the batch host is kept even when it is last
        (N4, "n4", 2, ("n1", "n4")),
        (N4, "n3", 2, ("n1", "n3")),
        (["n1", "n2", "n3"], "n3", 1, ("n1", "n3")),
        (N4, None, 2, ("n1", "n2")),  # no batch host: the last ones go
        (N4, "n9", 2, ("n1", "n2")),  # a batch host outside the list changes nothing
        (["n3", "n1", "n2"], "n2", 1, ("n3", "n2")),  # Slurm's order is kept
        (("n1", "n2"), "n2", 1, ("n2",)),
    ],
)
def test_choose_keep(
    nodes: list[str], batch_host: str | None, count: int, keep: tuple[str, ...]
) -> None:
    assert choose_keep(nodes, batch_host, count) == keep


@pytest.mark.parametrize(
    ("nodes", "count", "message"),
    [
        (N4, 0, "cannot give back 0 of 4 node(s)"),
        (N4, -1, "cannot give back -1 of 4 node(s)"),
        (N4, 4, "cannot give back 4 of 4 node(s)"),
        (N4, 5, "cannot give back 5 of 4 node(s)"),
        (["n1"], 1, "cannot give back 1 of 1 node(s)"),
        ([], 1, "cannot give back 1 of 0 node(s)"),
    ],
)
def test_choose_keep_errors(nodes: list[str], count: int, message: str) -> None:
    with pytest.raises(ResizeError) as info:
        choose_keep(nodes, "n1", count)
    assert str(info.value) == message


def test_repeated_start_decisions_are_journaled_once() -> None:
    from elastic_slurm.controller.actuate import Actuator
    from elastic_slurm.controller.journal import Journal
    from elastic_slurm.model.decisions import Start
    from elastic_slurm.model.request import JobKind
    from elastic_slurm.model.snapshot import ClusterSnapshot, JobState, JobView, NodeState, NodeView

    waiting = JobView(7, JobKind.MOLDABLE, JobState.PENDING, (), 2, 1, 4, 0.0)
    nodes = tuple(NodeView(f"n{i}", NodeState.IDLE) for i in range(1, 5))
    snap = ClusterSnapshot(0.0, (waiting,), nodes)
    journal = Journal()
    actuator = Actuator(slurm=None, journal=journal)  # type: ignore[arg-type]  # Start: no Slurm
    for _ in range(3):
        actuator.apply([Start(7, 2, "fits")], {}, snapshot=snap)
    actuator.apply([Start(7, 3, "more room")], {}, snapshot=snap)
    starts = [(r["job_id"], r["count"]) for r in journal.records if r["decision"] == "Start"]
    assert starts == [(7, 2), (7, 3)]
