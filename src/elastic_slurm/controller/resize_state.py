"""The phases of a resize under way, and the one table of how it moves between them.

A resize is in one :class:`ResizePhase` at a time; it moves only by an :class:`ResizeEvent`
that :data:`TRANSITIONS` allows from there (:func:`transition`; anything else raises
:class:`IllegalTransition`). The journal stores a phase's value (``granting``, ``ordering``,
``offered``, ``awaiting_vacate``, ``awaiting_done``: the strings journals have always held),
so journals written before this module existed still load. ``closed`` is never journaled as a
phase: a closed resize's row is closed with its outcome
(:meth:`~elastic_slurm.controller.journal.Journal.close_resize`).

::

    expand:  granting --granted--> ordering --expand_ordered--> awaiting_done
    shrink:  ordering --shrink_ordered--> awaiting_vacate --vacated--> awaiting_done
    then:    awaiting_done --acknowledged--> closed (awaiting_vacate too: the job failed)
    offers:  ordering --offered--> offered --offered--> offered (the final offer)
             offered --expand_ordered/shrink_ordered--> (accepted, or forced)
             offered --declined--> closed
    anything still open --aborted--> closed (no grant, job ended, forced, requeued, rolled back)
    offered, awaiting_vacate, awaiting_done --resumed--> the same (a restarted controller)
"""

from __future__ import annotations

import enum


class ResizePhase(enum.StrEnum):
    """Where a resize is (the values are what the journal stores)."""

    GRANTING = "granting"  # an expansion asked Slurm for nodes
    ORDERING = "ordering"  # the offer or the order is being written to the job
    OFFERED = "offered"  # offered to a job that negotiates; its answer is awaited
    AWAITING_VACATE = "awaiting_vacate"  # a shrink waits for the job to leave the nodes
    AWAITING_DONE = "awaiting_done"  # the job follows the order; its final ack is awaited
    CLOSED = "closed"  # finished, whatever the outcome (never journaled as a phase)


class ResizeEvent(enum.StrEnum):
    """What happens to a resize."""

    GRANTED = "granted"  # Slurm granted an expansion's nodes
    OFFERED = "offered"  # an offer (or the final offer after a counter) was written
    EXPAND_ORDERED = "expand_ordered"  # an expansion's order was written to the job
    SHRINK_ORDERED = "shrink_ordered"  # a shrink's order was written to the job
    VACATED = "vacated"  # the job left the nodes it gives back (they went back to Slurm)
    ACKNOWLEDGED = "acknowledged"  # the job's final ack (done, or failed) arrived
    DECLINED = "declined"  # the job rejected the offer, or let it lapse
    ABORTED = "aborted"  # closed otherwise: no grant, job ended, forced, requeued, rolled back
    RESUMED = "resumed"  # a restarted controller takes the resize up where it was


P, E = ResizePhase, ResizeEvent

#: The only phase changes there are: ``(phase, event) -> next phase``.
TRANSITIONS: dict[tuple[ResizePhase, ResizeEvent], ResizePhase] = {
    (P.GRANTING, E.GRANTED): P.ORDERING,
    (P.ORDERING, E.OFFERED): P.OFFERED,
    (P.ORDERING, E.EXPAND_ORDERED): P.AWAITING_DONE,
    (P.ORDERING, E.SHRINK_ORDERED): P.AWAITING_VACATE,
    (P.OFFERED, E.OFFERED): P.OFFERED,
    (P.OFFERED, E.EXPAND_ORDERED): P.AWAITING_DONE,
    (P.OFFERED, E.SHRINK_ORDERED): P.AWAITING_VACATE,
    (P.OFFERED, E.DECLINED): P.CLOSED,
    (P.AWAITING_VACATE, E.VACATED): P.AWAITING_DONE,
    (P.AWAITING_VACATE, E.ACKNOWLEDGED): P.CLOSED,  # failed before vacating
    (P.AWAITING_DONE, E.ACKNOWLEDGED): P.CLOSED,
    (P.OFFERED, E.RESUMED): P.OFFERED,
    (P.AWAITING_VACATE, E.RESUMED): P.AWAITING_VACATE,
    (P.AWAITING_DONE, E.RESUMED): P.AWAITING_DONE,
    **{(p, E.ABORTED): P.CLOSED for p in P if p is not P.CLOSED},
}

#: Phases a resize can be in while open (those the journal stores).
OPEN_PHASES: tuple[ResizePhase, ...] = tuple(p for p in P if p is not P.CLOSED)


class IllegalTransition(RuntimeError):
    """A phase change the table does not allow: a bug in the caller, never a job's doing."""


def transition(phase: ResizePhase | str, event: ResizeEvent) -> ResizePhase:
    """The phase after ``event`` happens in ``phase``.

    Parameters
    ----------
    phase
        The current phase (or its journaled value).
    event
        What happened.

    Raises
    ------
    ValueError
        ``phase`` is not a phase's value.
    IllegalTransition
        :data:`TRANSITIONS` has no such change.

    >>> transition("granting", ResizeEvent.GRANTED)
    <ResizePhase.ORDERING: 'ordering'>
    """
    current = ResizePhase(phase)
    try:
        return TRANSITIONS[(current, event)]
    except KeyError:
        raise IllegalTransition(
            f"a resize cannot go from {current.value} on {event.value}"
        ) from None


__all__ = [
    "OPEN_PHASES",
    "TRANSITIONS",
    "IllegalTransition",
    "ResizeEvent",
    "ResizePhase",
    "transition",
]
