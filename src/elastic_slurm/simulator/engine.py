"""The discrete-event core: a deterministic future-event list and the simulation clock.

Events are kept in a heap keyed by ``(time_s, priority, seq)``, as SimPy's ``Environment``
does (``cristiklein/simpy:simpy/core.py``): at equal times the lower priority goes first, and
at equal priorities the event scheduled first (``seq``, a counter) goes first. Nothing else
breaks ties, so a run is a function of its inputs alone.

The clock is injected: :meth:`EventQueue.advance_to` is the one place where time moves, and a
subclass can override it, for example to pace a run in real time (SimPy's ``rt.py`` overrides
only ``step()`` in the same way).
"""

from __future__ import annotations

import enum
import heapq
from typing import Any


class EventKind(enum.IntEnum):
    """Event types; the value is the priority among events at the same time (lower first).

    Ends and finished resizes come before new requests and arrivals, so the nodes they free
    are seen by the scheduling cycle of that instant.
    """

    JOB_END = 0
    RESIZE_DONE = 1
    EVOLVING_REQUEST = 2
    JOB_SUBMIT = 3
    PERIODIC = 4


class EventQueue:
    """A deterministic future-event list with a clock.

    Parameters
    ----------
    start_s
        The clock's initial time, in seconds.

    Notes
    -----
    Each event is ``(time_s, priority, seq, payload)``; ``payload`` is never compared.

    >>> q = EventQueue()
    >>> q.push(5.0, EventKind.JOB_SUBMIT, "b")
    >>> q.push(5.0, EventKind.JOB_END, "a")
    >>> q.push(7.0, EventKind.JOB_END, "c")
    >>> q.pop_batch()
    (5.0, [(<EventKind.JOB_END: 0>, 'a'), (<EventKind.JOB_SUBMIT: 3>, 'b')])
    >>> q.now_s, len(q)
    (5.0, 1)
    """

    def __init__(self, start_s: float = 0.0) -> None:
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self.now_s = float(start_s)

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, time_s: float, priority: int, payload: Any) -> None:
        """Schedule ``payload`` at ``time_s`` (seconds) with ``priority``.

        Raises
        ------
        ValueError
            When ``time_s`` is before the clock (events cannot go back in time) or not a number.
        """
        if not time_s >= self.now_s:
            raise ValueError(f"cannot schedule an event at {time_s} s, before now ({self.now_s} s)")
        self._seq += 1
        heapq.heappush(self._heap, (time_s, priority, self._seq, payload))

    def peek_time_s(self) -> float | None:
        """Time of the next event, ``None`` when there is none."""
        return self._heap[0][0] if self._heap else None

    def advance_to(self, time_s: float) -> None:
        """Move the clock to ``time_s`` (the injection point: override to pace a run)."""
        self.now_s = time_s

    def pop_batch(self) -> tuple[float, list[tuple[int, Any]]]:
        """Advance to the next event time and remove every event scheduled for it.

        Returns
        -------
        tuple
            ``(time_s, [(priority, payload), ...])`` in ``(priority, seq)`` order. Events pushed
            later for the same time come in a later batch.

        Raises
        ------
        IndexError
            When the queue is empty.
        """
        heap = self._heap
        pop = heapq.heappop
        time_s, priority, _, payload = pop(heap)
        self.advance_to(time_s)
        batch = [(priority, payload)]
        while heap and heap[0][0] == time_s:
            _, priority, _, payload = pop(heap)
            batch.append((priority, payload))
        return time_s, batch


__all__ = ["EventKind", "EventQueue"]
