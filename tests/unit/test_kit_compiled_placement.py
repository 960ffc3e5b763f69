"""kit.compiled_placement: the compiled scans against the policies' Python scans.

The Python scans (``coorm._Cycle._scan`` and ``klein_perez_fast._backfill`` without columns,
over :class:`Occupancy`) are the definition; the kernel of :mod:`kit.placement`, compiled by
Numba and as plain Python, must give the same places, starts, stopping position and profile
on random profiles and queues. Without Numba (or when it cannot compile) the policies fall
back to the Python scans.
"""

from __future__ import annotations

import logging
import math
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from elastic_slurm.plugins.kit import compiled_placement
from elastic_slurm.plugins.kit.compiled_placement import (
    ArrayProfile,
    Kernel,
    ListPlan,
    QueuePlan,
    kernel,
    plain,
)
from elastic_slurm.plugins.kit.holds import holds_from
from elastic_slurm.plugins.kit.occupancy import Occupancy
from elastic_slurm.plugins.policies import coorm, klein_perez_fast
from elastic_slurm.simulator import Workload, run
from elastic_slurm.simulator.generators.downey import DowneyModel

INF = math.inf
DUE = klein_perez_fast._DUE_S

# small integral times collide often (equal starts and ends); halves land between them, and
# klein_perez_fast's horizon (now + 1 us) matters for its stop
TIMES = st.one_of(st.integers(0, 30).map(lambda k: k / 2.0), st.sampled_from([DUE, 2 * DUE]))
ENDS = st.one_of(TIMES, st.just(INF))
DURATIONS = st.one_of(
    st.integers(0, 24).map(lambda k: k / 2.0),
    st.sampled_from([0.0, DUE, 2 * DUE, 3 * DUE, INF]),
)
HOLDS = st.lists(st.tuples(TIMES, ENDS, st.integers(1, 6)), max_size=20)


def kernels() -> list[Kernel]:
    compiled = kernel()
    assert compiled is not None, "numba is installed with the test extra"
    return [compiled, plain()]


def profile(holds: list[tuple[float, float, int]]) -> Occupancy:
    occ = Occupancy(0.0)
    for start, end, nodes in holds:
        occ.add(start, end, nodes)
    return occ


def copy(occ: Occupancy) -> Occupancy:
    return occ.after(occ.times[0])


class _Asks:
    """``coorm._Requests`` for a queue of positions: ``of(k)`` is ``(k, need, duration)``."""

    def __init__(self, queue: list[tuple[int, float]]) -> None:
        self.queue = queue

    def of(self, k: int, config: object) -> tuple[int, int, float]:
        return (k, *self.queue[k])


def coorm_scan(
    occ: Occupancy, queue: list[tuple[int, float]], first: int, cap: int, free: int
) -> tuple[list[float], list[int], int]:
    """``coorm._Cycle._scan`` itself, on a queue of ``(nodes, duration)``."""
    cycle = object.__new__(coorm._Cycle)
    cycle.now, cycle.cap, cycle.config = 0.0, cap, coorm.EquiPartition.Config()
    places: list[float] = []
    started: list[int] = []
    pending: Any = list(range(len(queue)))
    stop = cycle._scan(pending, _Asks(queue), occ, places, started, first, free)  # type: ignore[arg-type]
    return places, started, stop


@settings(max_examples=300, deadline=None)
@given(
    HOLDS,
    st.lists(st.tuples(st.integers(1, 10), DURATIONS), max_size=25),
    st.integers(1, 9),
    st.data(),
)
def test_queue_scan_is_coorm_s_scan(
    holds: list[tuple[float, float, int]],
    queue: list[tuple[int, float]],
    cap: int,
    data: st.DataObject,
) -> None:
    occ = profile(holds)
    free = cap - occ.value_at(0.0)
    if free <= 0:
        return  # the policy scans only when a node is free now
    first = data.draw(st.integers(0, len(queue)))
    ref = copy(occ)
    expected = coorm_scan(ref, queue, first, cap, free)
    need = np.array([n for n, _ in queue], np.int64)
    duration = np.array([d for _, d in queue], float)
    for k in kernels():
        got = copy(occ)
        assert k.queue_scan(got, need, duration, first, cap, 0.0, free) == expected
        assert (got.times, got.vals) == (ref.times, ref.vals)
        kept = ArrayProfile.of(occ, data.draw(st.integers(0, 60)))  # in arrays, room or not
        assert k.queue_scan(kept, need, duration, first, cap, 0.0, free) == expected
        assert kept.same(ref) and kept.occupancy().same(ref)


@settings(max_examples=300, deadline=None)
@given(HOLDS, st.integers(1, 10), DURATIONS, st.integers(1, 9), TIMES)
def test_the_kernel_s_earliest_is_occupancy_s(
    holds: list[tuple[float, float, int]], need: int, duration: float, cap: int, t0: float
) -> None:
    # the kernel walks a candidate's segments forward, Occupancy.earliest backward
    from elastic_slurm.plugins.kit import placement

    occ = profile(holds)
    times, vals = np.array(occ.times), np.array(occ.vals, np.int64)
    got = placement.earliest(times, vals, len(times), need, duration, cap, t0)
    assert got == copy(occ).earliest(need, duration, cap, t0)


@pytest.fixture(scope="module")
def hinted() -> list[dict[str, Any]]:
    """``earliest_at`` and ``add_at``: compiled by Numba (on first call) and as written."""
    import numba

    from elastic_slurm.plugins.kit import placement

    compiled = compiled_placement._jit(placement, numba.njit(cache=False)).functions
    return [placement.__dict__, compiled]


@settings(max_examples=300, deadline=None)
@given(HOLDS, st.integers(1, 10), DURATIONS, st.integers(1, 9), TIMES)
@example([(1.0, 4.0, 2)], 1, 1.0, 2, 0.5)  # found mid-segment: a new start breakpoint
@example([(1.0, 4.0, 2)], 1, 1.0, 2, 1.5)  # a start inside a busy segment, past its end
def test_a_request_added_where_earliest_at_found_it_is_added_as_add_adds_it(
    hinted: list[dict[str, Any]],
    holds: list[tuple[float, float, int]],
    need: int,
    duration: float,
    cap: int,
    t0: float,
) -> None:
    from elastic_slurm.plugins.kit import placement

    occ = profile(holds)
    for f in hinted:
        n = len(occ.times)
        times, vals = np.zeros(n + 4), np.zeros(n + 4, np.int64)
        times[:n], vals[:n] = occ.times, occ.vals
        begin, i, j = f["earliest_at"](times, vals, n, need, duration, cap, t0)
        assert begin == placement.earliest(times, vals, n, need, duration, cap, t0)
        if begin == INF:
            continue
        want = copy(occ)
        want.add(begin, begin + duration, need)
        m = f["add_at"](times, vals, n, i, j, begin, begin + duration, need)
        assert (times[:m].tolist(), vals[:m].tolist()) == (want.times, want.vals)


@settings(max_examples=200, deadline=None)
@given(HOLDS, TIMES, TIMES)
def test_an_array_profile_is_its_occupancy(
    holds: list[tuple[float, float, int]], t: float, at: float
) -> None:
    occ = profile(holds)
    kept = ArrayProfile.of(occ)
    assert kept.same(occ) and kept.same(ArrayProfile.of(occ, 5))
    assert kept.value_at(at) == occ.value_at(at)
    later = kept.after(t)  # (t at or after the origin, 0)
    assert later.occupancy().same(occ.after(t))
    assert later.same(ArrayProfile.of(occ.after(t)))
    assert later.value_at(at) == occ.after(t).value_at(at)


@settings(max_examples=300, deadline=None)
@given(
    HOLDS,
    st.lists(st.tuples(DURATIONS, st.integers(1, 10), st.integers(0, 3)), max_size=25),
    st.integers(1, 9),
    st.integers(0, 25),
    st.lists(TIMES, max_size=25),
)
# found by random search against mutants: a growing item placed later must not leave the
# last item known to fit; the horizon's end is in it
@example([], [(5.0, 1, 0), (3 * DUE, 3, 1), (0.5, 1, 1)], 2, 0, [])
@example(
    [(2.0, 4.0, 2), (0.0, DUE, 2)],
    [(INF, 1, 0), (3.0, 2, 2), (0.0, 2, 0), (2.0, 1, 0), (0.0, 1, 1), (DUE, 2, 2)],
    2,
    0,
    [],
)
def test_list_scan_is_klein_perez_fast_s_backfill(
    holds: list[tuple[float, float, int]],
    queue: list[tuple[float, int, int]],
    cap: int,
    first: int,
    placed: list[float],
) -> None:
    items = []
    for k, (d, n, own) in enumerate(queue):
        own = min(own, n)  # a running job waiting to grow reserves its size (< its need)
        action = "grow" if own else "start"
        items.append((float(k), k, object(), d, n, own, action))
        holds = [*holds, (0.0, d, own)]  # its reservation, from now
    occ = profile(holds)
    first = min(first, len(items), len(placed))
    placed = placed[:first]  # the first items' places, in the profile already, say
    ref = copy(occ)
    expected = klein_perez_fast._backfill(items, ref, cap, 0.0, list(placed))
    nodes = np.array([i[4] for i in items], np.int64)  # the columns _Queue keeps
    duration = np.array([i[3] for i in items], np.float64)
    own = np.array([i[5] for i in items], np.int64)
    for k in kernels():
        got = copy(occ)
        placed_now, stop = k.list_scan(got, duration, nodes, own, first, cap, 0.0)
        assert (placed + placed_now + [INF] * (len(items) - stop), stop) == expected
        assert (got.times, got.vals) == (ref.times, ref.vals)


class _Cycles(klein_perez_fast.FastPath):
    """The end of ``FastPath``'s cycle alone: Python (KeptPlan) or compiled (ListPlan)."""

    def __init__(self) -> None:
        self._last = None
        self._plan = _Plan()


class _Plan(ListPlan):
    """A :class:`ListPlan` that notes whether each cycle kept the last plan."""

    __slots__ = ("followed",)

    def cycle(self, *args: Any) -> tuple[list[int], bool]:
        due, self.followed = super().cycle(*args)
        return due, self.followed


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 9),
    st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.0, DUE, 0.5, 2.0]),  # time since the last cycle
            st.booleans(),  # the holds: last cycle's with its starts (else drawn anew)
            st.booleans(),  # the queue: last plan's, then arrivals (else all new)
            st.lists(st.tuples(ENDS, st.integers(0, 4)), max_size=6),  # holds drawn
            st.lists(st.tuples(DURATIONS, st.integers(1, 10), st.integers(0, 3)), max_size=8),
            st.booleans(),  # the arrivals may be running jobs waiting to grow (nothing kept)
        ),
        min_size=1,
        max_size=6,
    ),
)
# the starts of a cycle join its holds, and the next cycle at the same time keeps its plan
@example(2, [(0.0, True, True, [], [(1.0, 1, 0), (5.0, 2, 0)], False)] * 2)
def test_list_plan_cycles_are_the_python_cycles(cap: int, cycles: list[Any]) -> None:
    # the compiled cycle (holds, kept plan, scan, starts due, plan kept) against the Python
    # one, cycle after cycle: the same starts due, plans kept or not alike, the same plans
    for k in kernels():
        python, compiled = _Cycles(), _Cycles()
        now, ends, nodes, started = 0.0, [], [], []
        made = 0
        for dt, same_holds, same_queue, holds, queue, grow in cycles:
            if same_holds:  # last cycle's starts run, as the simulator starts them
                ends = [*ends, *(now + i[3] for i in started)]
                nodes = [*nodes, *(i[4] for i in started)]
            else:
                ends, nodes = [e for e, _ in holds], [n for _, n in holds]
            now += dt
            last = python._last
            items = list(last.keep) if last is not None and same_queue else []
            for d, n, own in queue:
                own = min(own, n) if grow else 0
                items.append((now, made, object(), d, n, own, "grow" if own else "start"))
                made += 1
                if own:  # its reservation
                    ends, nodes = [*ends, now + d], [*nodes, own]
            grows = [i for i in items if i[5]]
            needs = [klein_perez_fast._need(i) for i in items]
            columns = tuple(
                np.array([i[f] for i in items], t)
                for f, t in ((4, np.int64), (3, np.float64), (5, np.int64))
            )
            base = holds_from(now, zip(ends, nodes, strict=True))
            followed = (
                last is not None
                and not grows
                and last.follows(now, cap, base, items, klein_perez_fast._VIEW_ID)
            )
            due = python._python_cycle(items, needs, ends, nodes, now, cap, grows)
            got = compiled._compiled_cycle(k, items, columns, ends, nodes, now, cap, grows)
            assert got == due
            assert compiled._plan.followed == followed
            last, plan = python._last, compiled._plan
            assert (plan.queue is None) == (last is None)
            if last is not None:
                assert [id(i[2]) for i in plan.queue] == last.ids
                assert (plan.now, plan.cap) == (last.now, last.basis)
                assert plan.kept[4][: plan.p].tolist() == last.places
                base_t, base_v = plan.kept[0][: plan.base_n], plan.kept[1][: plan.base_n]
                assert (base_t.tolist(), base_v.tolist()) == (last.base.times, last.base.vals)
                assert ArrayProfile(plan.kept[2], plan.kept[3], plan.final_n).same(last.final)
            started = [items[j] for j in due]


def _records(policy: str, workload: Workload) -> tuple[Any, ...]:
    result = run(workload, policy, elastic_fraction=0.5, seed=1)
    return result.records, result.timeline, result.metrics


@pytest.fixture
def no_kernel(monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """:func:`kernel` as it is where Numba is not installed."""
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    kernel.cache_clear()
    yield
    monkeypatch.undo()
    kernel.cache_clear()


@pytest.mark.parametrize("policy", ["coorm_equipartition", "klein_perez"])
def test_without_numba_the_policies_schedule_the_same(
    policy: str, no_kernel: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = DowneyModel(jobs=300, nodes=64, size_range=(1, 64), load=0.9).generate(seed=3)
    assert kernel() is None
    without = _records(policy, workload)
    kernel.cache_clear()
    sys.modules.pop("numba")
    assert kernel() is not None
    calls: list[str] = []
    for owner, name in (
        (Kernel, "queue_scan"),
        (Kernel, "list_scan"),
        (ListPlan, "cycle"),
        (QueuePlan, "cycle"),
    ):
        scan = getattr(owner, name)  # and the policy does use the compiled scan

        def counted(*args: Any, scan: Any = scan, name: str = f"{owner.__name__}.{name}") -> Any:
            calls.append(name)
            return scan(*args)

        monkeypatch.setattr(owner, name, counted)
    assert _records(policy, workload) == without
    used = "QueuePlan.cycle" if policy == "coorm_equipartition" else "ListPlan.cycle"
    assert calls and set(calls) == {used}


def test_without_numba_a_warning_names_the_extra_once(
    no_kernel: None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert kernel() is None
        assert kernel() is None
    hints = [r.getMessage() for r in caplog.records if "is not installed" in r.getMessage()]
    assert len(hints) == 1
    assert "numba is not installed" in hints[0]
    assert "elastic-slurm[sim]" in hints[0]


def test_when_numba_cannot_compile_the_kernel_the_python_scans_run(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(compiled: Kernel, np: Any) -> None:
        raise RuntimeError("numba: cannot compile")

    monkeypatch.setattr(compiled_placement, "_warm_up", refuse)
    kernel.cache_clear()
    try:
        with caplog.at_level(logging.WARNING):
            assert kernel() is None
        assert "numba could not compile the placement kernel" in caplog.text
    finally:
        monkeypatch.undo()
        kernel.cache_clear()
    assert kernel() is not None


@pytest.mark.parametrize("policy", ["coorm_equipartition", "klein_perez"])
def test_the_policies_that_use_the_kernel_load_it_when_prepared(policy: str) -> None:
    from elastic_slurm.plugins.registry import make_policy

    compiled_placement.kernel.cache_clear()
    make_policy(policy).prepare()
    assert compiled_placement.kernel.cache_info().currsize == 1
