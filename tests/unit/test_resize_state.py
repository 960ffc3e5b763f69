"""The resize phases and their one transition table: ``controller/resize_state.py``."""

from __future__ import annotations

import pytest

from elastic_slurm.controller.journal import PHASES
from elastic_slurm.controller.resize_state import (
    OPEN_PHASES,
    TRANSITIONS,
    IllegalTransition,
    ResizeEvent,
    ResizePhase,
    transition,
)

P, E = ResizePhase, ResizeEvent

ALLOWED = [
    (P.GRANTING, E.GRANTED, P.ORDERING),
    (P.ORDERING, E.OFFERED, P.OFFERED),
    (P.ORDERING, E.EXPAND_ORDERED, P.AWAITING_DONE),
    (P.ORDERING, E.SHRINK_ORDERED, P.AWAITING_VACATE),
    (P.OFFERED, E.OFFERED, P.OFFERED),
    (P.OFFERED, E.EXPAND_ORDERED, P.AWAITING_DONE),
    (P.OFFERED, E.SHRINK_ORDERED, P.AWAITING_VACATE),
    (P.OFFERED, E.DECLINED, P.CLOSED),
    (P.AWAITING_VACATE, E.VACATED, P.AWAITING_DONE),
    (P.AWAITING_VACATE, E.ACKNOWLEDGED, P.CLOSED),
    (P.AWAITING_DONE, E.ACKNOWLEDGED, P.CLOSED),
    (P.OFFERED, E.RESUMED, P.OFFERED),
    (P.AWAITING_VACATE, E.RESUMED, P.AWAITING_VACATE),
    (P.AWAITING_DONE, E.RESUMED, P.AWAITING_DONE),
    (P.GRANTING, E.ABORTED, P.CLOSED),
    (P.ORDERING, E.ABORTED, P.CLOSED),
    (P.OFFERED, E.ABORTED, P.CLOSED),
    (P.AWAITING_VACATE, E.ABORTED, P.CLOSED),
    (P.AWAITING_DONE, E.ABORTED, P.CLOSED),
]


@pytest.mark.parametrize(("phase", "event", "after"), ALLOWED)
def test_every_allowed_transition(
    phase: ResizePhase, event: ResizeEvent, after: ResizePhase
) -> None:
    assert transition(phase, event) is after
    assert transition(phase.value, event) is after  # as the journal stores it


def test_the_table_is_exactly_the_allowed_transitions() -> None:
    assert TRANSITIONS == {(p, e): a for p, e, a in ALLOWED}


@pytest.mark.parametrize(
    ("phase", "event"),
    [
        (P.GRANTING, E.EXPAND_ORDERED),  # no order before the grant
        (P.GRANTING, E.OFFERED),
        (P.ORDERING, E.ACKNOWLEDGED),  # no ack before the order
        (P.ORDERING, E.VACATED),
        (P.ORDERING, E.RESUMED),
        (P.AWAITING_DONE, E.VACATED),  # vacating comes before done, never after
        (P.AWAITING_DONE, E.SHRINK_ORDERED),  # one order per resize
        (P.AWAITING_VACATE, E.DECLINED),  # an order is not an offer
        (P.CLOSED, E.ABORTED),  # closed is final
        (P.CLOSED, E.RESUMED),
        (P.CLOSED, E.GRANTED),
    ],
)
def test_refused_transitions_raise(phase: ResizePhase, event: ResizeEvent) -> None:
    with pytest.raises(IllegalTransition, match=f"from {phase.value} on {event.value}"):
        transition(phase, event)


def test_every_state_but_closed_can_be_aborted_and_closed_is_final() -> None:
    for phase in P:
        if phase is P.CLOSED:
            assert not any(p is P.CLOSED for p, _ in TRANSITIONS)
        else:
            assert transition(phase, E.ABORTED) is P.CLOSED


def test_journaled_phases_are_the_enum_values() -> None:
    # journals written before the enum hold these strings: they must still load
    assert tuple(p.value for p in OPEN_PHASES) == PHASES
    assert [ResizePhase(s) for s in PHASES] == list(OPEN_PHASES)


def test_an_unknown_phase_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="'resizing'"):
        transition("resizing", E.ABORTED)
