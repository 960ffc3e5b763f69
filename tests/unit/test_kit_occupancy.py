"""kit.occupancy: every query against a plain reference, over profiles built by random adds.

The reference keeps the adds themselves and answers each query by the obvious scan over the
segment starts (no search, no hints). Queries are interleaved with adds, removals included,
so that whatever :class:`Occupancy` remembers between queries is exercised too.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_slurm.plugins.kit.occupancy import Occupancy

INF = math.inf


class Reference:
    """Nodes busy over time as the list of adds made; each query a linear scan."""

    def __init__(self, origin: float) -> None:
        self.origin = origin
        self.adds: list[tuple[float, float, int]] = []

    def add(self, start: float, end: float, nodes: int) -> None:
        if end > start and nodes != 0:
            self.adds.append((start, end, nodes))

    def value_at(self, t: float) -> int:
        return sum(n for s, e, n in self.adds if s <= t < e)

    def times(self) -> list[float]:
        points = {self.origin}
        for s, e, _ in self.adds:
            points.add(s)
            if e < INF:
                points.add(e)
        return sorted(points)

    def vals(self) -> list[int]:
        return [self.value_at(t) for t in self.times()]

    def segments(self) -> list[tuple[float, float, int]]:
        """``(start, end, nodes)`` of every segment, with ``(-inf, times[0], 0)`` first."""
        times, vals = self.times(), self.vals()
        ends = [*times[1:], INF]
        return [(-INF, times[0], 0), *zip(times, ends, vals, strict=True)]

    def earliest(self, need: int, duration: float, cap: int, t0: float) -> float:
        if need > cap:
            return INF
        if not duration > 0.0:
            return t0
        limit = cap - need
        for s in [t0, *(t for t in self.times() if t > t0)]:
            end = s + duration
            if all(v <= limit for a, b, v in self.segments() if b > s and (a < end or a <= s)):
                return s
        return INF

    def max_and_last_end(self, t0: float, t1: float) -> tuple[int, float]:
        if not t1 > t0:
            return 0, t0
        over = [(v, b) for a, b, v in self.segments() if b > t0 and a < t1]
        best = max(v for v, _ in over)
        return best, [b for v, b in over if v == best][-1]

    def max_and_first_start(self, t0: float, t1: float) -> tuple[int, float]:
        if not t1 > t0:
            return 0, t1
        over = [(v, a) for a, b, v in self.segments() if b > t0 and a < t1]
        best = max(v for v, _ in over)
        return best, [a for v, a in over if v == best][0]

    def after(self, t: float) -> tuple[list[float], list[int]]:
        times = [t, *(x for x in self.times() if x > t)]
        return times, [self.value_at(x) for x in times]


# small integral times collide often (equal starts and ends); halves land between them
TIMES = st.integers(0, 40).map(lambda k: k / 2.0)
ENDS = st.one_of(TIMES, st.just(INF))
DURATIONS = st.one_of(st.integers(-1, 24).map(lambda k: k / 2.0), st.just(INF))
ADD = st.tuples(st.just("add"), TIMES, ENDS, st.integers(-3, 6))
QUERY = st.tuples(st.just("query"), st.integers(0, 9), DURATIONS, st.integers(0, 9), TIMES, TIMES)


def check(occ: Occupancy, ref: Reference, need: int, d: float, cap: int, t0: float, t1: float):
    assert (occ.times, occ.vals) == (ref.times(), ref.vals())
    assert occ.earliest(need, d, cap, t0) == ref.earliest(need, d, cap, t0), (need, d, cap, t0)
    assert occ.max_and_last_end(t0, t1) == ref.max_and_last_end(t0, t1)
    assert occ.max_and_first_start(t0, t1) == ref.max_and_first_start(t0, t1)
    assert occ.value_at(t0) == ref.value_at(t0)
    assert occ.value_at(t1) == ref.value_at(t1)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([0.0, 3.0]), st.lists(st.one_of(ADD, QUERY), max_size=40))
def test_every_query_is_the_plain_scans(origin: float, ops: list[tuple]) -> None:
    occ, ref = Occupancy(origin), Reference(origin)
    for op in ops:
        if op[0] == "add":
            _, start, end, nodes = op
            occ.add(start, end, nodes)
            ref.add(start, end, nodes)
        else:
            _, need, d, cap, t0, t1 = op
            check(occ, ref, need, d, cap, t0, t1)
    assert (occ.times, occ.vals) == (ref.times(), ref.vals())


def test_a_long_request_before_the_origin_rules_out_nothing_for_a_short_one() -> None:
    """Before the origin nothing is busy: a short request fits there, a long one may not."""
    occ = Occupancy(5.0)
    occ.add(5.0, 10.0, 3)
    assert occ.earliest(2, 10.0, 4, 0.0) == 10.0
    assert occ.earliest(2, 1.0, 4, 0.0) == 0.0  # was 10.0 when the first search was made


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(TIMES, ENDS, st.integers(0, 6)), max_size=25),
    st.lists(st.tuples(st.integers(0, 9), DURATIONS, TIMES), max_size=25),
    st.integers(0, 9),
)
def test_a_deep_queue_placed_in_turn(
    holds: list[tuple[float, float, int]], queue: list[tuple[int, float, float]], cap: int
) -> None:
    """Conservative backfilling as the policies do it: each request at its earliest, added."""
    occ, ref = Occupancy(0.0), Reference(0.0)
    for start, end, nodes in holds:
        occ.add(start, end, nodes)
        ref.add(start, end, nodes)
    for need, d, t0 in queue:
        s = occ.earliest(need, d, cap, t0)
        assert s == ref.earliest(need, d, cap, t0), (need, d, cap, t0)
        occ.add(s, s + d, need)
        ref.add(s, s + d, need)
    assert (occ.times, occ.vals) == (ref.times(), ref.vals())


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(TIMES, ENDS, st.integers(-3, 6)), max_size=25),
    st.lists(st.tuples(TIMES, st.integers(0, 9), DURATIONS, st.integers(0, 9)), max_size=6),
)
def test_after_and_same(
    adds: list[tuple[float, float, int]], cuts: list[tuple[float, int, float, int]]
) -> None:
    occ, ref = Occupancy(1.0), Reference(1.0)
    for start, end, nodes in adds:
        occ.add(start, end, nodes)
        ref.add(start, end, nodes)
    for t, need, d, cap in cuts:
        t = max(t, occ.times[0])
        later = occ.after(t)
        assert (later.times, later.vals) == ref.after(t)
        assert later.same(occ.after(t)) and occ.same(occ)
        assert later.same(occ) == ((later.times, later.vals) == (occ.times, occ.vals))
        fresh = Reference(t)
        for start, end, nodes in zip(later.times, [*later.times[1:], INF], later.vals, strict=True):
            fresh.add(start, end, nodes)
        assert later.earliest(need, d, cap, t) == fresh.earliest(need, d, cap, t)
        later.add(t, t + 1.0, 1)
        assert not later.same(occ.after(t))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(TIMES, ENDS, st.integers(1, 6)), min_size=1, max_size=20),
    st.lists(st.tuples(st.integers(0, 9), DURATIONS, st.integers(0, 9), TIMES), max_size=12),
    st.data(),
)
def test_removing_nodes_forgets_what_searches_ruled_out(
    holds: list[tuple[float, float, int]],
    queries: list[tuple[int, float, int, float]],
    data: st.DataObject,
) -> None:
    """The same searches, before and after a hold is lifted: the second ones see it gone."""
    occ, ref = Occupancy(0.0), Reference(0.0)
    for start, end, nodes in holds:
        occ.add(start, end, nodes)
        ref.add(start, end, nodes)
    for query in queries:
        assert occ.earliest(*query) == ref.earliest(*query), query
    start, end, nodes = data.draw(st.sampled_from(holds))
    occ.add(start, end, -nodes)
    ref.add(start, end, -nodes)
    for query in queries:
        assert occ.earliest(*query) == ref.earliest(*query), query


def test_a_lifted_hold_is_seen_by_the_next_search() -> None:
    occ = Occupancy(0.0)
    occ.add(0.0, 10.0, 3)
    assert occ.earliest(2, 5.0, 4, 0.0) == 10.0
    occ.add(0.0, 10.0, -3)
    assert occ.earliest(2, 5.0, 4, 0.0) == 0.0
