"""``kit.kept_plan``: when a cycle may keep last cycle's places (each condition on its own)."""

from __future__ import annotations

from elastic_slurm.plugins.kit.kept_plan import KeptPlan
from elastic_slurm.plugins.kit.occupancy import Occupancy


def _holds(*spans: tuple[float, float, int], now: float = 0.0) -> Occupancy:
    """Holds as a cycle at ``now`` builds them (from ``now`` on)."""
    occ = Occupancy(now)
    for start, end, nodes in spans:
        occ.add(max(start, now), end, nodes)
    return occ


QUEUE = ["a", "b", "c"]


def _plan() -> KeptPlan[Occupancy]:
    base = _holds((0.0, 100.0, 4))
    final = _holds((0.0, 100.0, 4), (100.0, 200.0, 8))
    return KeptPlan.of(10.0, 16, base, final, QUEUE[1:], [100.0])


def test_a_cycle_that_changed_nothing_keeps_the_places() -> None:
    plan = _plan()
    assert plan.ids == [id("b"), id("c")]
    assert plan.follows(20.0, 16, _holds((0.0, 100.0, 4), now=20.0), ["b", "c", "d"])


def test_each_condition_alone_makes_the_cycle_recompute() -> None:
    plan = _plan()
    same = _holds((0.0, 100.0, 4), now=20.0)
    assert not plan.follows(5.0, 16, same, ["b", "c"]), "time went backwards"
    assert not plan.follows(20.0, 32, same, ["b", "c"]), "another machine"
    assert not plan.follows(20.0, 16, _holds((0.0, 50.0, 4), now=20.0), ["b", "c"]), (
        "a job ended early"
    )
    assert not plan.follows(20.0, 16, same, ["c", "b"]), "the queue was reordered"
    assert not plan.follows(20.0, 16, same, ["b"]), "a job left the queue"
    assert not plan.follows(150.0, 16, _holds(now=150.0), ["b", "c"]), "a place is past"


def test_items_are_named_by_the_callable_given() -> None:
    items = [(0, "x"), (1, "y")]
    plan = KeptPlan.of(0.0, 4, _holds(), _holds(), items, [], lambda i: id(i[1]))
    assert plan.follows(0.0, 4, _holds(), [(9, "x"), (9, "y")], lambda i: id(i[1]))
    assert not plan.follows(0.0, 4, _holds(), [(0, "y"), (1, "x")], lambda i: id(i[1]))
