"""EventQueue.push_sorted: the same batches, in the same order, as one push per event."""

from __future__ import annotations

import heapq
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_slurm.simulator.engine import EventKind, EventQueue

TIMES = st.integers(0, 6).map(float)
PRIORITIES = st.sampled_from(list(EventKind))


class PlainQueue:
    """The reference: every event in one heap, keyed ``(time_s, priority, seq)``."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, Any]] = []
        self.seq = 0

    def push(self, time_s: float, priority: int, payload: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time_s, priority, self.seq, payload))

    def pop_batch(self) -> tuple[float, list[tuple[int, Any]]]:
        time_s = self.heap[0][0]
        batch = []
        while self.heap and self.heap[0][0] == time_s:
            _, priority, _, payload = heapq.heappop(self.heap)
            batch.append((priority, payload))
        return time_s, batch


@settings(max_examples=300, deadline=None)
@given(
    first=st.lists(st.tuples(TIMES, PRIORITIES), max_size=12),
    later=st.lists(st.tuples(st.integers(0, 3).map(float), PRIORITIES), max_size=12),
    pops_between=st.integers(0, 4),
)
def test_push_sorted_gives_the_batches_of_one_push_each(
    first: list[tuple[float, int]], later: list[tuple[float, int]], pops_between: int
) -> None:
    events = [(t, p, f"a{k}") for k, (t, p) in enumerate(first)]
    ordered = sorted(events, key=lambda e: e[:2])
    queue, plain = EventQueue(), PlainQueue()
    queue.push_sorted(ordered)
    for event in ordered:
        plain.push(*event)
    assert len(queue) == len(plain.heap)
    # pop a few batches, then push events relative to the clock, then pop everything
    for _ in range(pops_between):
        if not plain.heap:
            break
        assert queue.peek_time_s() == plain.heap[0][0]
        assert queue.pop_batch() == plain.pop_batch()
    for k, (dt, p) in enumerate(later):
        queue.push(queue.now_s + dt, p, f"b{k}")
        plain.push(queue.now_s + dt, p, f"b{k}")
    while plain.heap:
        assert len(queue) == len(plain.heap)
        assert queue.peek_time_s() == plain.heap[0][0]
        assert queue.pop_batch() == plain.pop_batch()
    assert len(queue) == 0 and queue.peek_time_s() is None


def test_push_sorted_out_of_order_or_twice_still_orders_every_event() -> None:
    queue = EventQueue()
    queue.push_sorted([(2.0, EventKind.JOB_SUBMIT, "b"), (1.0, EventKind.JOB_SUBMIT, "a")])
    queue.push_sorted([(1.0, EventKind.JOB_END, "e"), (3.0, EventKind.JOB_SUBMIT, "c")])
    assert queue.pop_batch() == (1.0, [(EventKind.JOB_END, "e"), (EventKind.JOB_SUBMIT, "a")])
    assert queue.pop_batch() == (2.0, [(EventKind.JOB_SUBMIT, "b")])
    assert queue.pop_batch() == (3.0, [(EventKind.JOB_SUBMIT, "c")])
    assert len(queue) == 0


def test_push_sorted_refuses_the_past() -> None:
    queue = EventQueue()
    queue.push(5.0, EventKind.JOB_END, "x")
    queue.pop_batch()
    with pytest.raises(ValueError, match="before now"):
        queue.push_sorted([(4.0, EventKind.JOB_SUBMIT, "late"), (6.0, EventKind.JOB_SUBMIT, "y")])
