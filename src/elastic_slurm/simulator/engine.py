"""The discrete-event core: a deterministic future-event list and the simulation clock.

Events are kept in a heap keyed by ``(time_s, priority, seq)``, as SimPy's ``Environment``
does (``cristiklein/simpy:simpy/core.py``): at equal times the lower priority goes first, and
at equal priorities the event scheduled first (``seq``, a counter) goes first. Nothing else
breaks ties, so a run is a function of its inputs alone.

Events known from the start and already in time order (a workload's arrivals) can be given
at once with :meth:`EventQueue.push_sorted`: they wait in a list of their own, merged with the
heap as the clock reaches them, so that the heap holds only the events the run makes (a few
per running job) instead of every arrival to come. The order is the same as pushing each.

The clock is injected: :meth:`EventQueue.advance_to` is the one place where time moves, and a
subclass can override it, for example to pace a run in real time (SimPy's ``rt.py`` overrides
only ``step()`` in the same way).
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterable
from typing import Any

_heappush, _heappop = heapq.heappush, heapq.heappop  # read once per event: module globals


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
        # events given by push_sorted, in (time_s, priority, seq) order; _next is the first
        # not yet popped
        self._sorted: list[tuple[float, int, int, Any]] = []
        self._next = 0
        self._seq = 0
        self.now_s = float(start_s)

    def __len__(self) -> int:
        return len(self._heap) + len(self._sorted) - self._next

    def push(self, time_s: float, priority: int, payload: Any) -> None:
        """Schedule ``payload`` at ``time_s`` (seconds) with ``priority``.

        Raises
        ------
        ValueError
            When ``time_s`` is before the clock (events cannot go back in time) or not a number.
        """
        if not time_s >= self.now_s:
            raise ValueError(f"cannot schedule an event at {time_s} s, before now ({self.now_s} s)")
        seq = self._seq = self._seq + 1
        _heappush(self._heap, (time_s, priority, seq, payload))

    def push_sorted(self, events: Iterable[tuple[float, int, Any]]) -> None:
        """Schedule ``(time_s, priority, payload)`` events, as :meth:`push` would one by one.

        For many events known in advance (a workload's arrivals): when they come in ``(time_s,
        priority)`` order and no event given this way is still waiting, they are kept in a
        list beside the heap (see the module docstring); otherwise each is pushed.

        Raises
        ------
        ValueError
            As :meth:`push` does, for an event before the clock.
        """
        items = list(events)
        ordered = all(a[:2] <= b[:2] for a, b in zip(items, items[1:], strict=False))
        if not ordered or self._next < len(self._sorted) or not items:
            for time_s, priority, payload in items:
                self.push(time_s, priority, payload)
            return
        if not items[0][0] >= self.now_s:
            raise ValueError(
                f"cannot schedule an event at {items[0][0]} s, before now ({self.now_s} s)"
            )
        seq = self._seq
        self._sorted = [(t, p, seq + k, x) for k, (t, p, x) in enumerate(items, 1)]
        self._next = 0
        self._seq = seq + len(items)

    def peek_time_s(self) -> float | None:
        """Time of the next event, ``None`` when there is none."""
        heap, later, k = self._heap, self._sorted, self._next
        if k < len(later) and (not heap or later[k][0] < heap[0][0]):
            return later[k][0]
        return heap[0][0] if heap else None

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
        heap, later, k = self._heap, self._sorted, self._next
        if k < len(later):
            time_s = later[k][0]
            if heap:
                first_s = heap[0][0]
                if first_s == time_s:
                    return self._pop_merged(time_s)
                if first_s > time_s:
                    return self._pop_sorted(time_s)
            else:
                return self._pop_sorted(time_s)
        # the heap alone has events at its next time (the common case once the arrivals are in)
        pop = _heappop
        time_s, priority, _, payload = pop(heap)
        self.advance_to(time_s)
        batch = [(priority, payload)]
        while heap and heap[0][0] == time_s:
            _, priority, _, payload = pop(heap)
            batch.append((priority, payload))
        return time_s, batch

    def _pop_sorted(self, time_s: float) -> tuple[float, list[tuple[int, Any]]]:
        """:meth:`pop_batch` from the arrivals' list alone (the heap has nothing at ``time_s``)."""
        later, k = self._sorted, self._next
        n = len(later)
        batch = []
        while k < n:
            _, priority, _, payload = later[k]
            batch.append((priority, payload))
            k += 1
            if k == n or later[k][0] != time_s:
                break
        self._next = k
        if k == n:
            self._sorted, self._next = [], 0  # let the list go
        self.advance_to(time_s)
        return time_s, batch

    def _pop_merged(self, time_s: float) -> tuple[float, list[tuple[int, Any]]]:
        """:meth:`pop_batch` when the heap and the arrivals' list both have events at ``time_s``.

        The two are merged by ``(priority, seq)``.
        """
        heap, later, k = self._heap, self._sorted, self._next
        entries = []
        while heap and heap[0][0] == time_s:
            entries.append(heapq.heappop(heap))
        n = len(later)
        while k < n and later[k][0] == time_s:
            entries.append(later[k])
            k += 1
        self._next = k
        if k == n:
            self._sorted, self._next = [], 0  # let the list go
        entries.sort(key=_rank)
        self.advance_to(time_s)
        return time_s, [(priority, payload) for _, priority, _, payload in entries]


def _rank(entry: tuple[float, int, int, Any]) -> tuple[int, int]:
    """An event's order within its instant: ``(priority, seq)``."""
    return entry[1], entry[2]


__all__ = ["EventKind", "EventQueue"]
