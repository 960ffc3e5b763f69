"""The placement kernel compiled with Numba, and what policies call it with.

:mod:`~elastic_slurm.plugins.kit.placement` writes the scan of conservative backfilling
(Mu'alem and Feitelson, IEEE TPDS 12(6), 2001, section 2) over a busy-nodes profile (Klein
and Pérez 2011, section 3.1) as plain Python over NumPy arrays; :func:`kernel` compiles it
with ``numba.njit``. A policy asks :func:`kernel` once per cycle and, when it gets one,
runs its cycle in one call with a :class:`QueuePlan` (``coorm``) or a :class:`ListPlan`
(``klein_perez_fast``), which keep last cycle's plan in arrays, with its queue's requests in
NumPy columns it keeps itself; :meth:`Kernel.queue_scan` and :meth:`Kernel.list_scan` run the
scans alone (on an :class:`~elastic_slurm.plugins.kit.occupancy.Occupancy` or an
:class:`ArrayProfile`, which they read and update). The results are those of the policy's
own Python scan, which stays its definition.

How it degrades: Numba and NumPy are optional (the ``sim`` extra installs them). Without
them, or when Numba cannot compile the kernel (a warning says so, once), :func:`kernel`
returns ``None`` and the policies run their Python scans: the same schedules, slower.
"""

from __future__ import annotations

import functools
import logging
import types
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from elastic_slurm.plugins.kit.occupancy import Occupancy

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


class Kernel:
    """The compiled scans, called on an :class:`Occupancy`.

    Parameters
    ----------
    functions
        :mod:`~elastic_slurm.plugins.kit.placement`'s functions by name, compiled (or not:
        the tests run the plain ones through the same calls).
    """

    def __init__(self, functions: dict[str, Callable[..., Any]]) -> None:
        self.functions = functions  # all of them, by name (the tests call some alone)
        self._queue_scan = functions["queue_scan"]
        self._list_scan = functions["list_scan"]
        self._list_cycle = functions["list_cycle"]
        self._queue_cycle = functions["queue_cycle"]
        self._queue_cycle_rows = functions["queue_cycle_rows"]
        self._list_cycle_rows = functions["list_cycle_rows"]

    def queue_scan(
        self,
        occ: Occupancy,
        need: np.ndarray,
        duration_s: np.ndarray,
        first: int,
        cap: int,
        now_s: float,
        free: int,
    ) -> tuple[list[float], list[int], int]:
        """Conservative backfilling of ``need[first:]`` until none may start now (``coorm``).

        :func:`~elastic_slurm.plugins.kit.placement.queue_scan` on ``occ`` (from ``now_s``
        on), which it updates.

        Parameters
        ----------
        occ
            The busy nodes (an :class:`Occupancy` or an :class:`ArrayProfile`); the requests
            placed are added to it.
        need, duration_s
            The whole queue's requests: nodes (int64) and seconds (float64, ``inf`` for no
            limit), shapes ``(q,)``.
        first
            Requests before it are placed already.
        cap
            Nodes in the machine.
        now_s
            The cycle's time (seconds).
        free
            Nodes free now in ``occ`` (at least one).

        Returns
        -------
        tuple
            ``(places, started, stop)``: the starts of requests ``first .. stop - 1``
            (seconds, ``inf`` for never), the positions of those starting now, and where the
            scan stopped.
        """
        import numpy as np

        q = need.shape[0]
        times, vals, n = _arrays(occ, 2 * (q - first))
        places = np.empty(max(q - first, 0))
        started = np.empty(max(q - first, 0), np.int64)
        n, stop, s = self._queue_scan(
            times, vals, n, need, duration_s, first, cap, now_s, free, places, started
        )
        _update(occ, times, vals, n)
        return places[: stop - first].tolist(), started[:s].tolist(), stop

    def list_scan(
        self,
        occ: Occupancy,
        duration_s: np.ndarray,
        need: np.ndarray,
        own: np.ndarray,
        first: int,
        cap: int,
        now_s: float,
    ) -> tuple[list[float], int]:
        """Klein and Pérez's list scheduling of one-step items (``klein_perez_fast``).

        :func:`~elastic_slurm.plugins.kit.placement.list_scan` on ``occ`` (from ``now_s``
        on, with the items' reservations and the first ``first`` items' places), which it
        updates. ``duration_s``, ``need``, ``own``: per item, seconds (float64), nodes and
        nodes reserved from now (int64), shapes ``(q,)``.

        Returns
        -------
        tuple
            ``(starts, stop)``: the starts of items ``first .. stop - 1`` (seconds, ``inf``
            for never) and where the scan stopped.
        """
        import numpy as np

        q = need.shape[0]
        times, vals, n = _arrays(occ, 6 * (q - first))
        starts = np.empty(q)
        n, stop = self._list_scan(times, vals, n, duration_s, need, own, first, cap, now_s, starts)
        _update(occ, times, vals, n)
        return starts[first:stop].tolist(), stop


class _PlanRows:
    """The arrays a compiled plan keeps from cycle to cycle, as rows of two 2-D arrays.

    Shared by :class:`ListPlan` and :class:`QueuePlan`. ``floats`` (float64, ``(float_rows,
    room)``): the holds' ends, then (base times, final times, places) for sides 0 and 1,
    interleaved, then the plan's own rows; ``ints`` (int64, ``(6, room)``): the holds' nodes,
    then (base values, final values) for sides 0 and 1, interleaved, then the starts due
    (``due``, ``started``). One side is the kept plan (:attr:`kept`), the other the next
    one's buffers; a call passing two arrays costs less than one passing each row.
    """

    __slots__ = (
        "_float_rows",
        "_floats",
        "_int_rows",
        "_ints",
        "_memory",
        "_side",
        "_sizes",
        "base_n",
        "cap",
        "final_n",
        "now",
        "p",
        "queue",
    )

    def __init__(self, float_rows: int) -> None:
        import numpy as np

        self.queue: Any = None  # the kept plan's items or requests, None: no plan
        self.now, self.cap, self.p, self.base_n, self.final_n = 0.0, 0, 0, 1, 1
        self._floats = np.zeros((float_rows, 16))
        self._ints = np.zeros((6, 16), np.int64)
        self._float_rows, self._int_rows = list(self._floats), list(self._ints)  # views
        self._side = 0  # the kept plan's side
        self._memory, self._sizes = _stacked_memory(0)  # the scan's, for its searches

    @property
    def kept(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The kept plan's base times and values, final times and values, and places.

        Rows with room to spare: the first :attr:`base_n`, :attr:`final_n` and :attr:`p`
        entries are the plan's.
        """
        k, floats, ints = 1 + self._side, self._float_rows, self._int_rows
        return floats[k], ints[k], floats[2 + k], ints[2 + k], floats[4 + k]

    def _prepare(self, room: int, ends: Sequence[float], nodes: Sequence[int], cap: int) -> None:
        """At least ``room`` columns, the holds in their rows, the search memory for ``cap``."""
        if self._floats.shape[1] < room:
            self._grow(2 * room)
        self._float_rows[0][: len(ends)] = ends
        self._int_rows[0][: len(nodes)] = nodes
        if self._sizes.shape[0] <= cap:
            self._memory, self._sizes = _stacked_memory(cap)

    def _grow(self, room: int) -> None:
        """New arrays of ``room`` columns, the kept plan copied over."""
        import numpy as np

        floats = np.zeros((self._floats.shape[0], room))
        ints = np.zeros((6, room), np.int64)
        old = self._floats.shape[1]
        floats[:, :old] = self._floats
        ints[:, :old] = self._ints
        self._floats, self._ints = floats, ints
        self._float_rows, self._int_rows = list(floats), list(ints)


class ListPlan(_PlanRows):
    """``klein_perez_fast``'s cycles from the holds on, one compiled call each, with the kept plan.

    :func:`~elastic_slurm.plugins.kit.placement.list_cycle` does in one call what the policy's
    Python path does with :func:`~elastic_slurm.plugins.kit.holds.holds_from`,
    :meth:`KeptPlan.follows <elastic_slurm.plugins.kit.kept_plan.KeptPlan.follows>`, its scan
    and ``_kept``; this keeps last cycle's plan for it in NumPy arrays (its holds with its
    starts added, its final profile, its places, its time and machine size) and the
    buffers the next plan is written to (the two swap when a cycle's plan is kept).
    :attr:`queue` holds the plan's items (those not started, in order), which the caller
    compares with the next queue (:meth:`KeptPlan.follows`' condition 2).

    The arrays are rows of two 2-D arrays, passed whole
    (:func:`~elastic_slurm.plugins.kit.placement.list_cycle_rows`: a call passing fewer
    arrays costs less); :attr:`kept` gives the kept plan's.
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(8)  # and the items' starts (``due`` is the last int row)

    def cycle(
        self,
        kernel: Kernel,
        ends: list[float],
        nodes: list[int],
        now_s: float,
        cap: int,
        columns: tuple[np.ndarray, np.ndarray, np.ndarray],
        keep: bool,
        update: bool,
    ) -> tuple[list[int], bool]:
        """Place the items of ``columns`` from ``now_s``; the positions of those due now.

        Parameters
        ----------
        kernel
            The kernel to run (:func:`kernel`, or :func:`plain`).
        ends, nodes
            The holds from now: ``[now_s, ends[i])`` of ``nodes[i]`` nodes (``holds_from``).
        now_s, cap
            The cycle's time (seconds) and the machine's nodes.
        columns
            The items' ``(nodes, duration_s, own)`` (int64, float64, int64; shapes ``(q,)``).
        keep
            Whether the items begin with :attr:`queue` (the kept plan's), with no item
            reserving nodes; else the plan is not kept.
        update
            Make this cycle's plan the kept one (``queue`` is then the caller's to set).

        Returns
        -------
        tuple
            ``(due, kept)``: the positions of the items placed to start by ``now_s +
            1 us``, ascending, and whether last cycle's plan was kept.
        """
        need, duration, own = columns
        q, r = len(need), len(ends)
        # base: r + 2 q + 4; final: max(final_n, r + 1) + 6 q + 4; holds r; the items' q
        self._prepare(max(self.final_n, r + 1) + 6 * q + 4, ends, nodes, cap)
        floats, ints = self._floats, self._ints
        keep = keep and self.queue is not None
        side = self._side
        base_n, final_n, p, d, followed = kernel._list_cycle_rows(
            floats, ints, side, r, now_s, cap, duration, need, own, keep,
            self.now, self.cap, self.base_n, self.final_n, self.p, self._memory, self._sizes,
        )  # fmt: skip
        if update:
            self._side = 1 - side
            self.now, self.cap, self.p, self.base_n, self.final_n = now_s, cap, p, base_n, final_n
        return (self._int_rows[5][:d].tolist() if d else []), bool(followed)


class QueuePlan(_PlanRows):
    """``coorm``'s step 1 from the holds on, one compiled call a cycle, with the kept plan.

    :func:`~elastic_slurm.plugins.kit.placement.queue_cycle` does in one call what the
    policy's Python path does with :func:`~elastic_slurm.plugins.kit.holds.holds_from`,
    :meth:`KeptPlan.follows <elastic_slurm.plugins.kit.kept_plan.KeptPlan.follows>`, its scan
    (``_Cycle._scan``), the zero durations and the holds of its starts; this keeps last
    cycle's plan for it in NumPy arrays (its holds with its starts added, its final profile,
    its places, its time and machine size) and the buffers the next plan is written to (the
    two swap every cycle). :attr:`queue` holds the plan's requests' views (those not started,
    in order), which the caller compares with the next queue and sets after each cycle.

    The arrays are rows of two 2-D arrays, passed whole
    (:func:`~elastic_slurm.plugins.kit.placement.queue_cycle_rows`: a call passing fewer
    arrays costs less); :attr:`kept` gives the kept plan's.
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(7)  # (``started`` is the last int row)

    def cycle(
        self,
        kernel: Kernel,
        ends: Sequence[float],
        nodes: Sequence[int],
        now_s: float,
        cap: int,
        need: np.ndarray,
        duration_s: np.ndarray,
        keep: bool,
    ) -> tuple[list[int], ArrayProfile, bool]:
        """Place the requests of ``need``, ``duration_s`` from ``now_s``; those starting now.

        Makes this cycle's plan the kept one (:attr:`queue` is then the caller's to set).

        Parameters
        ----------
        kernel
            The kernel to run (:func:`kernel`, or :func:`plain`).
        ends, nodes
            The holds from now: ``[now_s, ends[i])`` of ``nodes[i]`` nodes (``holds_from``).
        now_s, cap
            The cycle's time (seconds) and the machine's nodes.
        need, duration_s
            The queue's requests: nodes (int64) and seconds (float64, ``inf`` for no limit),
            shapes ``(q,)``.
        keep
            Whether the queue begins with :attr:`queue` (the kept plan's); else the plan is
            not kept.

        Returns
        -------
        tuple
            ``(started, occ, kept)``: the positions of the requests starting now, ascending,
            the profile after the scan (the holds, the starts and the reservations, from
            ``now_s`` on; valid until the next cycle), and whether last cycle's plan was kept.
        """
        q, r = len(need), len(ends)
        # base: r + 2 q + 4; final: max(final_n, r + 1) + 2 q + 4; holds r; places, started q
        self._prepare(max(self.final_n, r + 1) + 2 * q + 4, ends, nodes, cap)
        floats, ints = self._floats, self._ints
        keep = keep and self.queue is not None
        side = self._side
        base_n, final_n, p, s, followed = kernel._queue_cycle_rows(
            floats, ints, side, r, now_s, cap, need, duration_s, keep,
            self.now, self.cap, self.base_n, self.final_n, self.p, self._memory, self._sizes,
        )  # fmt: skip
        self._side = side = 1 - side
        self.now, self.cap, self.p, self.base_n, self.final_n = now_s, cap, p, base_n, final_n
        occ = ArrayProfile(self._float_rows[3 + side], self._int_rows[3 + side], final_n)
        return (self._int_rows[5][:s].tolist() if s else []), occ, bool(followed)


def _stacked_memory(cap: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~elastic_slurm.plugins.kit.placement.new_memory` with its first two in one array.

    ``(memory, sizes)``: float64 ``(2, cap + 1, MEMORY)`` (durations, ends) and int64
    ``(cap + 1,)``.
    """
    import numpy as np

    from elastic_slurm.plugins.kit import placement

    durations, ends, sizes = placement.new_memory(cap)
    return np.stack((durations, ends)), sizes


class ArrayProfile:
    """An :class:`Occupancy`'s step function kept in NumPy arrays, for the compiled scans.

    The same profile (``vals[i]`` nodes busy on ``[times[i], times[i + 1])``, ``vals[n - 1]``
    from ``times[n - 1]`` on, seconds and nodes) as a profile of
    :mod:`~elastic_slurm.plugins.kit.placement`: ``times`` (float64) and ``vals`` (int64)
    with room to grow, ``n`` entries in use. A policy that scans every cycle and continues
    from last cycle's profile (``coorm``'s kept plan) keeps it so: the scans read and update
    it in place, without a copy to Python lists and back per cycle. It offers what a kept
    plan and the policy ask of a profile: :meth:`after`, :meth:`same`, :meth:`value_at`.

    >>> occ = Occupancy(0.0)
    >>> occ.add(0.0, 10.0, 3)
    >>> later = ArrayProfile.of(occ).after(4.0)
    >>> later.value_at(5.0), later.same(occ.after(4.0)), later.occupancy().times
    (3, True, [4.0, 10.0])
    """

    __slots__ = ("n", "times", "vals")

    def __init__(self, times: np.ndarray, vals: np.ndarray, n: int) -> None:
        self.times, self.vals, self.n = times, vals, n

    @classmethod
    def of(cls, occ: Occupancy | ArrayProfile, room: int = 0) -> ArrayProfile:
        """``occ``'s step function in new arrays, with ``room`` entries to spare."""
        return cls(*_arrays(occ, room))

    def after(self, t: float) -> ArrayProfile:
        """A copy that starts at ``t`` (at or after ``times[0]``): :meth:`Occupancy.after`."""
        import numpy as np

        n = self.n
        j = max(bisect_right(self.times, t, 0, n) - 1, 0)  # (bisect: no ufunc's cost)
        m = n - j
        room = m + 64  # for a scan's new breakpoints, mostly: a copy only past that
        times, vals = np.empty(m + room), np.empty(m + room, np.int64)
        times[:m] = self.times[j:n]
        times[0] = t
        vals[:m] = self.vals[j:n]
        return ArrayProfile(times, vals, m)

    def same(self, other: Occupancy | ArrayProfile) -> bool:
        """True when ``other`` has the same breakpoints and values (the same step function)."""
        if isinstance(other, ArrayProfile):
            n = self.n
            return bool(
                n == other.n
                and (self.times[:n] == other.times[:n]).all()
                and (self.vals[:n] == other.vals[:n]).all()
            )
        return self.occupancy().same(other)

    def value_at(self, t: float) -> int:
        """Nodes busy at time ``t`` (seconds)."""
        j = bisect_right(self.times, t, 0, self.n) - 1
        return 0 if j < 0 else int(self.vals[j])

    def occupancy(self) -> Occupancy:
        """The same step function as an :class:`Occupancy`."""
        n = self.n
        occ = Occupancy(float(self.times[0]) if n else 0.0)
        occ.reset(self.times[:n].tolist(), self.vals[:n].tolist())
        return occ


def _update(occ: Occupancy | ArrayProfile, times: np.ndarray, vals: np.ndarray, n: int) -> None:
    """Make ``occ`` the profile ``times[:n]``, ``vals[:n]`` that a scan left."""
    if isinstance(occ, ArrayProfile):
        occ.times, occ.vals, occ.n = times, vals, n
    else:
        occ.reset(times[:n].tolist(), vals[:n].tolist())


def _arrays(occ: Occupancy | ArrayProfile, room: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``occ`` as a profile of :mod:`~elastic_slurm.plugins.kit.placement`, ``room`` to spare.

    An :class:`ArrayProfile` with that much room already gives its own arrays (the scans add
    to it in place).
    """
    import numpy as np

    if isinstance(occ, ArrayProfile):
        n = occ.n
        if len(occ.times) >= n + room + 2:
            return occ.times, occ.vals, n
        times = np.empty(n + room + 2)
        vals = np.empty(n + room + 2, np.int64)
        times[:n] = occ.times[:n]
        vals[:n] = occ.vals[:n]
        return times, vals, n
    n = len(occ.times)
    times = np.empty(n + room + 2)
    vals = np.empty(n + room + 2, np.int64)
    times[:n] = occ.times
    vals[:n] = occ.vals
    return times, vals, n


def plain() -> Kernel:
    """The kernel not compiled: :mod:`~elastic_slurm.plugins.kit.placement` as written."""
    from elastic_slurm.plugins.kit import placement

    return Kernel(_functions(placement))


@functools.cache
def kernel() -> Kernel | None:
    """The compiled kernel, or ``None`` without Numba (or when Numba cannot compile it).

    Either way a warning says so, once per process (the result is cached).

    Compiled here, on a small queue, so that a failure shows now: Numba keeps the machine
    code in a cache on disk (beside :mod:`~elastic_slurm.plugins.kit.placement`, else in the
    user's cache directory) and loads it in later processes; where it can write no cache,
    the kernel is compiled in memory at each start (about 10 s of CPU on the 2-core test machine;
    loading it from the cache takes about 1 s).
    """
    try:
        import numba
        import numpy as np

        from elastic_slurm.plugins.kit import placement
    except ImportError as exc:
        log.warning(
            "%s is not installed: the planning policies (klein_perez, coorm_equipartition) "
            "run their Python scans, with the same schedules but 2-5x slower; "
            "pip install 'elastic-slurm[sim]' installs it",
            exc.name or "numba",
        )
        return None
    for cache in (True, False):
        try:
            jit, inlined = numba.njit(cache=cache), numba.njit(cache=cache, inline="always")
            compiled = _jit(placement, jit, inlined)
            _warm_up(compiled, np)
            return compiled
        except Exception as exc:  # noqa: BLE001 - numba's errors have no common base
            log.debug("numba could not compile the placement kernel (cache %s): %s", cache, exc)
    log.warning("numba could not compile the placement kernel: the policies' Python scans run")
    return None


# the small functions each placement calls: inlined into their callers by Numba (a call
# passing arrays costs reference counts, a fifth of a deep queue's scan time without this).
# Numba's disk cache keys each function by its signature, its bytecode and the source file
# it is defined in (placement.py), not by the jit options given here: after changing this
# set or the options in kernel(), remove the cache (placement's __pycache__/*.nbi, *.nbc)
# or the old machine code is loaded again.
_INLINED = frozenset(
    {
        "_insert",
        "_learn",
        "_may_start_now",
        "add",
        "add_at",
        "bisect_left",
        "bisect_right",
        "busiest",
        "earliest",
        "earliest_at",
        "remembered_earliest",
        "remembered_earliest_at",
        "value_at",
    }
)


def _jit(
    module: types.ModuleType,
    jit: Callable[[Any], Any],
    inlined: Callable[[Any], Any] | None = None,
) -> Kernel:
    """``module``'s functions compiled by ``jit``, each calling the others compiled.

    Those named in ``_INLINED`` are compiled by ``inlined`` instead, when given.
    """
    namespace = dict(vars(module))  # the functions' globals: the compiled ones replace them
    for name, f in _functions(module).items():
        copy = types.FunctionType(f.__code__, namespace, name, f.__defaults__, f.__closure__)
        copy.__qualname__ = f.__qualname__
        namespace[name] = (inlined if inlined and name in _INLINED else jit)(copy)
    return Kernel(namespace)


def _functions(module: types.ModuleType) -> dict[str, types.FunctionType]:
    """The functions defined in ``module``, by name."""
    return {
        name: f
        for name, f in vars(module).items()
        if isinstance(f, types.FunctionType) and f.__module__ == module.__name__
    }


def _warm_up(compiled: Kernel, np: Any) -> None:
    """Run both scans once on a two-request queue (which compiles them)."""
    occ = Occupancy(0.0)
    occ.add(0.0, 10.0, 1)
    need, duration = np.array([1, 2], np.int64), np.array([5.0, 5.0])
    compiled.queue_scan(occ, need, duration, 0, 2, 0.0, 1)
    compiled.list_scan(Occupancy(0.0), duration, need, np.zeros(2, np.int64), 0, 2, 0.0)
    plan = ListPlan()
    columns = (need, duration, np.zeros(2, np.int64))
    plan.cycle(compiled, [10.0], [1], 0.0, 2, columns, False, True)
    plan.queue = ()
    plan.cycle(compiled, [10.0], [1], 1.0, 2, columns, True, True)
    queue = QueuePlan()
    queue.cycle(compiled, [10.0], [1], 0.0, 2, need, duration, False)
    queue.queue = ()
    queue.cycle(compiled, [10.0], [1], 1.0, 2, need, duration, True)


__all__ = ["ArrayProfile", "Kernel", "ListPlan", "QueuePlan", "kernel", "plain"]
