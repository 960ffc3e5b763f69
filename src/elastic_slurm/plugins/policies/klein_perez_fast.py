"""Klein and Pérez's list scheduling made incremental: the fast path of :class:`KleinPerez`.

When every job left to place has one step (pending jobs, and running jobs without a profile
waiting to grow), Algorithm 1 of Klein and Pérez (CoreGRID 2011, section 4) is conservative
backfilling in list order against the running jobs' holds. :class:`FastPath` (a mixin of
:class:`~elastic_slurm.plugins.policies.klein_perez.KleinPerez`) places only those jobs, from
a per-view cache, keeps the last cycle's placements when placing again would give the same
(:mod:`~elastic_slurm.plugins.kit.kept_plan`), and stops once no job left could start now
(:func:`_backfill`). Its
decisions are :meth:`KleinPerez.plan`'s (``tests/sim/test_planner_fast_paths.py`` checks it
at every cycle of trace slices); the paper's algorithm itself stays in ``klein_perez.py`` and
``klein_perez_fit.py``.
"""

from __future__ import annotations

import bisect
import functools
import math
import operator
from collections.abc import Sequence
from itertools import accumulate, compress
from typing import TYPE_CHECKING, Any

from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.plugins.kit import compiled_placement
from elastic_slurm.plugins.kit.holds import holds_from, split_by_start
from elastic_slurm.plugins.kit.kept_plan import IdOf, KeptPlan, same_entries
from elastic_slurm.plugins.kit.occupancy import Occupancy
from elastic_slurm.plugins.kit.view_memo import ViewMemo
from elastic_slurm.plugins.policies.klein_perez_fit import Step

if TYPE_CHECKING:
    from elastic_slurm.plugins.policies.klein_perez import _Entry

INFINITY = math.inf

_TIME_DIGITS = 6  # times taken from a snapshot are snapped to the microsecond
_DUE_S = 1e-6  # a start planned this close after now is due now


def _snap(t: float) -> float:
    """Round a time to the microsecond, so that ends and starts computed apart coincide."""
    return t if t in (INFINITY, -INFINITY) else round(t, _TIME_DIGITS)


_REQUESTED = operator.attrgetter("nodes_requested")
_ITEM = operator.itemgetter(1)
_NEED = operator.itemgetter(2)  # a pending view's cached need (see _need)
_ORDER = operator.itemgetter(0, 1)  # an item's place in the list: submit time, then job id
# a running view's memo entry (view, snapped estimated end or None, size, nodes held)
_END, _SIZE, _HELD = operator.itemgetter(1), operator.itemgetter(2), operator.itemgetter(3)
_IS_NOT_NONE = functools.partial(operator.is_not, None)

_Item = tuple[float, int, JobView, float, int, int, str]
"""A job to place in :meth:`KleinPerez._fast_decide`: submit time, id, view, its one step's
duration and nodes, the nodes it reserves from now for that long (a running job waiting to
grow keeps its size), and its action (``"start"`` or ``"grow"``)."""


def _backfill(
    items: Sequence[_Item],
    occ: Occupancy,
    cap: int,
    now: float,
    first: list[float],
) -> tuple[list[float], int]:
    """Place each item in turn at its earliest start (Algorithm 2 for one step).

    Returns every item's start and how many were placed: ``first`` (the starts of the first
    items, already in ``occ``: see :func:`_kept`), then those placed here.

    ``occ`` holds the running jobs' holds and the items' reservations. An item's
    reservation is lifted while it is placed; a running job that does not grow now keeps its
    nodes until it does. The list is cut as :meth:`KleinPerez.plan` cuts it (:func:`_slack`)
    and, finer, once no item left could start now (:func:`_may_fit_now`: each placement
    busies at least the nodes its item reserved, so what cannot start now never will in
    this cycle). Items not placed get ``inf``.

    The compiled kernel runs the same scan
    (:func:`~elastic_slurm.plugins.kit.placement.list_scan`, within
    :func:`~elastic_slurm.plugins.kit.placement.list_cycle`).
    """
    needs = [(i[4] - i[5] if i[3] > 0.0 else -INFINITY) for i in items]
    slack = list(accumulate(reversed(needs), min))[::-1]
    starts = first + [INFINITY] * (len(items) - len(first))
    last = len(items) - 1  # the last item that may still be given nodes now
    k = len(first)
    fits = False  # known: items[last] may start now against occ
    for k in range(len(first), len(items)):
        _, _, _, d, n, own, _ = items[k]
        free = cap - _least_busy(occ, now)
        if free < slack[k]:
            break
        while last >= k and (
            needs[last] > free or not (fits or _may_fit_now(occ, items[last], cap, now))
        ):
            last -= 1
            fits = False
        if last < k:
            break  # nobody from here on can be given nodes now
        fits = True  # items[last] may start now, until a placement busies its time
        if own:
            occ.add(now, now + d, -own)
        s = occ.earliest(n, d, cap, now)
        if own and s > now:
            occ.add(now, s, own)
        occ.add(s, s + d, n)
        starts[k] = s
        fits = s >= now + items[last][3] and not own
    else:
        k = len(items)
    return starts, k


def _with_grows(
    items: Sequence[_Item],
    needs: list[float],
    grows: list[_Item],
    columns: Any,
) -> tuple[list[_Item], list[float], Any]:
    """The pending items with the running jobs waiting to grow, in list order.

    ``items`` and ``needs`` (:func:`_need`) of the pending jobs, in list order; ``grows``,
    items of running jobs; ``columns``, ``None`` or a callable returning the pending items'
    request columns (:meth:`_Queue.columns`). Returns the merged items, their needs and,
    with ``columns``, a callable returning their columns: each grow goes where sorting by
    submit time, then id, would put it.
    """
    grows = sorted(grows, key=_ORDER)
    at = [bisect.bisect(items, _ORDER(g), key=_ORDER) for g in grows]  # in the pending list
    merged, merged_needs = list(items), list(needs)
    for k, g in enumerate(grows):  # k grows before it, inserted already
        merged.insert(at[k] + k, g)
        merged_needs.insert(at[k] + k, _need(g))

    def merged_columns() -> tuple[Any, Any, Any]:
        import numpy as np

        out = []
        for column, field in zip(columns(), (4, 3, 5), strict=True):  # nodes, duration, own
            merged_column = np.empty(len(column) + len(grows), column.dtype)
            lo = 0
            for k, p in enumerate(at):  # rows lo .. p - 1 move down k, grow k goes at p + k
                merged_column[lo + k : p + k] = column[lo:p]
                merged_column[p + k] = grows[k][field]
                lo = p
            merged_column[lo + len(at) :] = column[lo:]
            out.append(merged_column)
        return out[0], out[1], out[2]

    return merged, merged_needs, None if columns is None else merged_columns


def _need(item: _Item) -> float:
    """Nodes an item must find free now beyond its reservation (``-inf`` for no duration)."""
    return item[4] - item[5] if item[3] > 0.0 else -INFINITY


def _kept(
    now: float,
    cap: int,
    base: Occupancy,
    final: Occupancy | compiled_placement.ArrayProfile,
    items: Sequence[_Item],
    places: list[float],
    due: Sequence[int],
) -> KeptPlan[Any]:
    """The cycle's placements to build on (:mod:`~elastic_slurm.plugins.kit.kept_plan`).

    ``places``: the starts of the first items (taken over); ``due``: the positions, ascending,
    of those placed to start by ``now + _DUE_S``, which count as started: their holds join
    ``base``. Running jobs waiting to grow are never kept (their steps change with the time).
    With none due, the plan keeps ``items`` itself (a tuple, when the next cycle's queue is
    the same tuple, is known to be the same queue at once).
    """
    queue = items
    if due:
        queue = list(items)
        for k in reversed(due):
            s, d, n = places[k], items[k][3], items[k][4]
            base.add(s, s + d, n)
            del queue[k], places[k]
    return KeptPlan.of(now, cap, base, final, queue, places, _VIEW_ID)


_VIEW_ID = IdOf(2)  # an item's name in a kept plan: its view's ``id()``


def _may_fit_now(occ: Occupancy, item: _Item, cap: int, now: float) -> bool:
    """False when ``item`` cannot start in ``[now, now + _DUE_S]`` against ``occ`` (or more).

    A start there covers ``[now + _DUE_S, now + d)``: too busy there (less the item's own
    reservation, which covers ``[now, now + d)``), it can only start later.
    """
    d, n, own = item[3], item[4], item[5]
    if n > cap:
        return False
    if not d > 2 * _DUE_S:
        return True
    return occ.max_and_last_end(now + _DUE_S, now + d)[0] - own + n <= cap


def _least_busy(occ: Occupancy | compiled_placement.ArrayProfile, now: float) -> int:
    """The fewest nodes busy at any time in ``[now, now + _DUE_S]``.

    ``occ``: a profile as lists (:class:`Occupancy`) or in arrays (``ArrayProfile``).
    """
    times, vals = occ.times, occ.vals
    n = len(times) if isinstance(occ, Occupancy) else occ.n
    j = max(0, bisect.bisect_right(times, now, 0, n) - 1)
    least = vals[j] if times[j] <= now else 0
    horizon = now + _DUE_S
    j += 1
    while j < n and times[j] <= horizon:
        least = min(least, vals[j])
        j += 1
    return int(least)


def _simple_end(job: JobView, profile: tuple[Step, ...] | None) -> float | None:
    """A running job that only holds its size until its estimated end: that end, snapped.

    ``None`` for the others (evolving jobs with a profile or a request, resizing jobs, no
    estimated end in the view): their entries are built each cycle.
    """
    if job.estimated_end_s is None:
        return None
    if job.kind is JobKind.EVOLVING:
        request = 0 if job.resizing else job.evolving_request
        if profile is not None or request != 0:
            return None
    return _snap(job.estimated_end_s)


def _without(seq: Any, positions: Sequence[int]) -> Any:
    """``seq`` (a tuple or a list) without the entries at ``positions`` (ascending)."""
    if not positions:
        return seq
    out, lo = seq[:0], 0
    for k in positions:
        out += seq[lo:k]
        lo = k + 1
    return out + seq[lo:]


class _Queue:
    """The pending jobs' items, followed from one pending tuple to the next.

    The simulator hands the policy the same pending tuple until the queue changes, and the
    next one is mostly this one without the jobs the policy started (:attr:`gone`) and with
    arrivals at the end. :meth:`follow` checks that (one comparison of tuples, in C) and then
    only takes the started jobs' entries out and adds the arrivals'; any other change builds
    every entry again. Per view of the pending tuple, in its order: its item
    (:data:`_Item`, ``None`` for a job of several steps), its need (:func:`_need`) and its
    ``nodes_requested``; the items' requests also in NumPy columns for the compiled scan
    (:meth:`columns`). The same as building them from the tuple each time (every entry of a
    view is a function of the view's fields, and views equal field by field give equal
    entries).
    """

    __slots__ = (
        "_columns",
        "_least",
        "_sliced",
        "gone",
        "items",
        "needs",
        "requested",
        "several",
        "views",
    )

    def __init__(self) -> None:
        self.views: Sequence[JobView] = ()  # the pending tuple described
        self.items: tuple[_Item | None, ...] = ()
        self.needs: list[float] = []
        self.requested: list[int] = []
        self.several = 0  # how many items are None
        self.gone: Sequence[int] = ()  # positions in views expected to leave next (started)
        self._least: float | None = INFINITY  # min(requested); None: to compute
        # (nodes, duration_s, own) buffers, the items' rows first, and how many rows are set
        self._columns: tuple[Any, Any, Any, int] | None = None
        self._sliced: tuple[Any, tuple[Any, Any, Any]] = (None, ())  # columns(), and of what

    def follow(self, pending: Sequence[JobView], entry: Any) -> None:
        """Describe ``pending`` (a tuple); ``entry(view)`` is a view's ``(view, item, need)``."""
        if pending is self.views:
            return
        old, gone = self.views, self.gone
        self.gone = ()
        kept = _without(old, gone)
        m = len(kept)
        if type(pending) is tuple and len(pending) >= m and pending[:m] == kept:
            if gone:  # the started jobs' entries out
                out = [self.items[k] for k in gone]
                self.items = _without(self.items, gone)
                self.needs = _without(self.needs, gone)
                lost = [self.requested[k] for k in gone]
                self.requested = _without(self.requested, gone)
                self.several -= out.count(None)
                if self._least is not None and min(lost) <= self._least:
                    self._least = None
                self._drop_rows(gone)
        else:
            m = 0
            self.items, self.needs, self.requested, self.several = (), [], [], 0
            self._least, self._columns = INFINITY, None
        if len(pending) > m:  # the arrivals' entries in
            hits = list(map(entry, pending[m:]))
            items = tuple(map(_ITEM, hits))
            self.items += items
            self.needs += map(_NEED, hits)
            added = list(map(_REQUESTED, pending[m:]))
            self.requested += added
            self.several += items.count(None)
            if self._least is not None:
                self._least = min(self._least, *added)
            self._add_rows(m, items)
        self.views = pending

    def least_requested(self) -> float:
        """The fewest nodes a pending job requests (``inf`` for none)."""
        if self._least is None:
            self._least = min(self.requested, default=INFINITY)
        return self._least

    def least_of(self, pending: Sequence[JobView]) -> float | None:
        """:meth:`least_requested` of ``pending`` before :meth:`follow`; ``None``: follow first.

        Known without building the arrivals' entries when ``pending`` is the described tuple
        with arrivals at its end and no started job to take out: the described jobs' least
        and the arrivals' ``nodes_requested``. A cycle in which nothing fits the idle nodes
        then ends without following the queue (the next :meth:`follow` takes these arrivals
        in with the later ones).
        """
        if pending is self.views:
            return self.least_requested()
        old = self.views
        m = len(old)
        if self.gone or self._least is None or type(pending) is not tuple or len(pending) <= m:
            return None
        if pending[:m] != old:
            return None
        return min(self._least, *map(_REQUESTED, pending[m:]))

    def columns(self) -> tuple[Any, Any, Any]:
        """The items' ``(nodes, duration_s, own)`` (int64, float64, int64; shapes ``(q,)``).

        Views of buffers that the next :meth:`follow` changes: read them before. Only for
        items all of one step.
        """
        cols = self._columns
        if cols is not None and self._sliced[0] is cols:  # (the buffers as they were)
            return self._sliced[1]
        import numpy as np

        q = len(self.items)
        if cols is None or cols[3] != q:
            room = 2 * q + 256
            nodes, duration, own = (
                np.empty(room, np.int64),
                np.empty(room),
                np.zeros(room, np.int64),
            )
            nodes[:q] = [i[4] for i in self.items]  # type: ignore[index]
            duration[:q] = [i[3] for i in self.items]  # type: ignore[index]
            cols = self._columns = (nodes, duration, own, q)
        sliced = cols[0][:q], cols[1][:q], cols[2][:q]
        self._sliced = (cols, sliced)
        return sliced

    def _drop_rows(self, gone: Sequence[int]) -> None:
        """Take the rows at ``gone`` (ascending) out of the columns; the rows after move up."""
        cols = self._columns
        if cols is None:
            return
        nodes, duration, own, m = cols
        for i, k in enumerate(gone):  # rows k + 1 .. next - 1 move up i + 1
            stop = gone[i + 1] if i + 1 < len(gone) else m
            nodes[k - i : stop - i - 1] = nodes[k + 1 : stop]
            duration[k - i : stop - i - 1] = duration[k + 1 : stop]
        self._columns = (nodes, duration, own, m - len(gone))

    def _add_rows(self, m: int, items: tuple[_Item | None, ...]) -> None:
        """Set the rows from ``m`` on to ``items``' requests (when the buffers have room)."""
        cols = self._columns
        if cols is None or cols[3] != m or m + len(items) > len(cols[0]) or None in items:
            self._columns = None  # built again when asked
            return
        nodes, duration, own, _ = cols
        nodes[m : m + len(items)] = [i[4] for i in items]  # type: ignore[index]
        duration[m : m + len(items)] = [i[3] for i in items]  # type: ignore[index]
        self._columns = (nodes, duration, own, m + len(items))


class FastPath:
    """The fast path of :class:`~elastic_slurm.plugins.policies.klein_perez.KleinPerez`.

    A mixin: it uses the policy's ``_entry``, ``_profile``, ``_warn_unprofiled``, ``config``
    and its caches ``_views`` and ``_last``.
    """

    _views: ViewMemo
    _last: KeptPlan[Any] | None  # last cycle's plan (the Python scan's)
    _plan: compiled_placement.ListPlan | None = None  # the same, for the compiled one
    _queue: _Queue | None = None  # the pending jobs' items, followed from cycle to cycle
    _warned: bool
    config: Any

    def prepare(self) -> None:
        """Load the compiled placement kernel (:func:`~.compiled_placement.kernel`) now."""
        compiled_placement.kernel()

    def _fast_decide(self, snapshot: ClusterSnapshot) -> list[Decision] | None:
        """:meth:`plan`'s decisions (``complete=False``) for jobs of one step; else ``None``.

        When every job left to place has one step (pending jobs, and running jobs without a
        profile waiting to grow), Algorithm 1 is conservative backfilling in list order
        against the holds of the running jobs: only the jobs to place are visited (a hold's
        entry places nothing), pending ones from a per-view cache, with :meth:`plan`'s cut
        and a finer one (:func:`_backfill`), whose first cut is checked before the scan is
        called (each pending item's need, :func:`_need`, is cached with its view). A cycle
        with a running job waiting to grow places every item again and leaves the kept plan
        of the cycle before it for later cycles (:meth:`KeptPlan.follows` checks that they
        may keep it). ``None`` (use :meth:`plan`) for a job with several steps left.

        From the holds on (their profile, the kept plan, the scan, the starts due now), a
        cycle is :meth:`_python_cycle`, or with the compiled kernel one call of it
        (:meth:`_compiled_cycle`): the same starts.
        """
        now = _snap(snapshot.time_s)
        running, pending = split_by_start(snapshot)
        self._forget(pending, running)
        held, ends, nodes, others = self._holds(running, now)
        actors: list[_Entry] = []  # running entries due now (release, or grow by nodes_max)
        grows: list[_Item] = []
        if others and not self._others(others, now, snapshot, ends, nodes, actors, grows):
            return None
        if not pending and not grows and not actors:
            return []
        idle = len(snapshot.idle_nodes())
        cap = idle + held
        if self._nothing_fits(pending, now, snapshot, idle, actors, grows):
            return []  # nothing can start or grow, whatever the schedule
        queue = self._pending(pending, now, snapshot)  # (followed already, or now)
        if queue.several:
            return None
        kernel = compiled_placement.kernel()
        items: Sequence[_Item] = queue.items  # type: ignore[assignment]
        needs = queue.needs
        columns = queue.columns if kernel is not None else None
        if grows:  # into the list order (submit time, then id), as sorting would
            items, needs, columns = _with_grows(items, needs, grows, columns)
        if columns is not None:  # compiled: the rest of the cycle in one call
            due = self._compiled_cycle(kernel, items, columns(), ends, nodes, now, cap, grows)
        else:
            due = self._python_cycle(items, needs, ends, nodes, now, cap, grows)
        if not grows:  # (items are the pending jobs, in order) started, unless too big
            queue.gone = due
        return self._fast_decisions(snapshot, actors, items, due)

    def _holds(
        self, running: Sequence[JobView], now: float
    ) -> tuple[int, list[float], list[int], list[JobView]]:
        """The running jobs' plain holds: ``(held, ends, nodes, others)``.

        ``held``: the nodes the running jobs hold (:func:`~.nodes.machine_nodes` counts
        these and the idle ones). Each job with a plain end (:func:`_simple_end`, read once
        per view through the memo) holds ``nodes[i]`` nodes over ``[now, ends[i])`` (seconds;
        an end past or close to now moves to ``now + 2 * _DUE_S``: the job ends soon);
        ``others`` are the running jobs without one, in list order (:meth:`_others`).
        """
        views, floor = self._views, now + 2 * _DUE_S
        hits = list(map(views.get, map(id, running)))  # each running view's memo entry
        if None in hits:
            for k in compress(range(len(hits)), map(operator.not_, hits)):
                job = running[k]
                end = _simple_end(job, self._profile(job))
                hits[k] = views.remember((job, end, job.size, len(job.nodes)))
        held = sum(map(_HELD, hits))
        ends: list[float] = list(map(_END, hits))
        nodes: list[int] = list(map(_SIZE, hits))
        others: list[JobView] = []
        if None in ends:
            others = [h[0] for h in hits if h[1] is None]
            nodes = list(compress(nodes, map(_IS_NOT_NONE, ends)))
            ends = list(compress(ends, map(_IS_NOT_NONE, ends)))
        if ends and min(ends) <= floor:
            ends = [end if end > floor else floor for end in ends]
        return held, ends, nodes, others

    def _others(
        self,
        others: list[JobView],
        now: float,
        snapshot: ClusterSnapshot,
        ends: list[float],
        nodes: list[int],
        actors: list[_Entry],
        grows: list[_Item],
    ) -> bool:
        """Add the running jobs without a plain hold to the holds; ``False``: not one step.

        A job waiting to grow without a profile becomes an item of ``grows`` (placed like a
        pending job, reserving its own size until its growth starts); a job with an action
        due now (a release, or a growth by ``nodes_max``) goes to ``actors``, its fixed holds
        (all from now) to ``ends`` and ``nodes``. ``False`` (use :meth:`plan`) for a job of
        several steps, one compactable, one with a hold that does not start now, or one with
        an action not due now.
        """
        for job in others:  # in list order
            e = self._entry(job, now, snapshot)
            if e.steps:  # waiting to grow without a profile: placed like a pending job
                if len(e.steps) > 1 or e.compactable or e.fixed or e.action != "grow":
                    return False
                (d, n), own = e.steps[0], min(e.steps[0][1], job.size)
                grows.append((job.submit_time_s, job.job_id, job, d, n, own, "grow"))
                ends.append(now + d)
                nodes.append(own)
                continue
            if e.action and not e.due_now:
                return False
            for s, t, n in e.fixed:
                if s != now:
                    return False
                ends.append(t)
                nodes.append(n)
            if e.action:
                actors.append(e)
        return True

    def _nothing_fits(
        self,
        pending: Sequence[JobView],
        now: float,
        snapshot: ClusterSnapshot,
        idle: int,
        actors: list[_Entry],
        grows: list[_Item],
    ) -> bool:
        """Whether no job can start or grow now, whatever the schedule (``idle`` nodes).

        A start needs its ``nodes_requested`` idle, a growth its ``1 <= want`` idle; a
        release (an actor) frees nodes, so with one this is never known. The pending jobs'
        least request is known without following the queue when only arrivals were added
        (:meth:`_Queue.least_of`); otherwise the queue is followed first.
        """
        if any(e.action == "release" for e in actors):
            return False
        queue = self._queue
        least = None if queue is None else queue.least_of(pending)
        if least is None:
            least = self._pending(pending, now, snapshot).least_requested()
        for job in [g[2] for g in grows] + [e.job for e in actors]:
            want = min(job.evolving_request, job.nodes_max - job.size)
            least = min(least, want if want >= 1 else INFINITY)
        return least > idle

    def _python_cycle(
        self,
        items: Sequence[_Item],
        needs: list[float],
        ends: list[float],
        nodes: list[int],
        now: float,
        cap: int,
        grows: list[_Item],
    ) -> list[int]:
        """Place ``items`` against the holds (``[now, ends[i])`` of ``nodes[i]``); those due.

        The holds' profile (:func:`holds_from`), last cycle's plan kept when it may be
        (:meth:`KeptPlan.follows`), the scan (:func:`_backfill`), and this cycle's plan kept
        for the next (:func:`_kept`) unless a running job waits to grow (``grows``). Returns
        the positions in ``items`` of those placed to start by ``now + _DUE_S``, ascending.
        """
        base = holds_from(now, zip(ends, nodes, strict=True))
        last = self._last
        if not grows and last is not None and last.follows(now, cap, base, items, _VIEW_ID):
            occ, first = last.final.after(now), last.places  # (read, not changed)
        else:
            occ, first = base.after(now), []
        if len(first) >= len(items) or cap - _least_busy(occ, now) < min(needs[len(first) :]):
            # the scan's first cut, before anything is placed: spare the scan itself
            starts, placed = first + [INFINITY] * (len(items) - len(first)), len(first)
        else:
            starts, placed = _backfill(items, occ, cap, now, first)
        starts = starts[:placed]  # the items not placed start at inf: not now
        horizon = now + _DUE_S
        due = []  # the items placed to start now, in list order
        if min(starts, default=INFINITY) <= horizon:  # mostly none: spare the pass
            due = list(compress(range(len(starts)), map(horizon.__ge__, starts)))
        if not grows:  # a cycle with growths keeps the last plan (its successors may follow it)
            self._last = _kept(now, cap, base, occ, items, starts, due)
        return due

    def _compiled_cycle(
        self,
        kernel: compiled_placement.Kernel,
        items: Sequence[_Item],
        columns: tuple[Any, Any, Any],
        ends: list[float],
        nodes: list[int],
        now: float,
        cap: int,
        grows: list[_Item],
    ) -> list[int]:
        """:meth:`_python_cycle` in one compiled call (:class:`~.compiled_placement.ListPlan`).

        ``columns``: the items' requests (:meth:`_Queue.columns`). The queue condition of
        :meth:`KeptPlan.follows` (the items begin with the kept plan's) is checked here.
        """
        plan = self._plan
        if plan is None:
            plan = self._plan = compiled_placement.ListPlan()
        kept = plan.queue
        keep = False
        if not grows and kept is not None and len(items) >= len(kept):
            keep = same_entries(items[: len(kept)], kept, _VIEW_ID)
        due, _ = plan.cycle(kernel, ends, nodes, now, cap, columns, keep, not grows)
        if not grows:  # a cycle with growths keeps the last plan (its successors may follow it)
            plan.queue = _without(items, due)
        return due

    def _forget(self, pending: Sequence[JobView], running: Sequence[JobView]) -> None:
        """Drop cached views long gone; warn of unprofiled evolving jobs as :meth:`plan` would."""
        views = self._views
        views.forget_others(pending, running)
        if not self._warned:  # the first such job in list order, in the first cycle with one
            new = [
                j
                for j in (*pending, *running)
                if j.kind is JobKind.EVOLVING and id(j) not in views and self._profile(j) is None
            ]
            if new:
                self._warn_unprofiled(min(new, key=lambda j: (j.submit_time_s, j.job_id)))

    def _pending(self, pending: Sequence[JobView], now: float, snapshot: ClusterSnapshot) -> _Queue:
        """The pending jobs' items (:class:`_Queue`), each view's entry cached in the memo."""
        queue = self._queue
        if queue is None:
            queue = self._queue = _Queue()
        if pending is queue.views:
            return queue
        views = self._views

        def entry(job: JobView) -> tuple[Any, ...]:
            hit = views.get(id(job))
            if hit is None:
                e = self._entry(job, now, snapshot)
                item = None
                if len(e.steps) == 1:
                    (d, n), key = e.steps[0], (job.submit_time_s, job.job_id)
                    item = (*key, job, d, n, 0, "start")
                need = INFINITY if item is None else _need(item)
                hit = views.remember((job, item, need))
            return hit

        queue.follow(pending, entry)
        return queue

    def _fast_decisions(
        self,
        snapshot: ClusterSnapshot,
        actors: list[_Entry],
        items: Sequence[_Item],
        starts_now: Sequence[int],
    ) -> list[Decision]:
        """:meth:`_decisions` for :meth:`_fast_decide`: releases, then the rest in list order.

        ``starts_now``: the positions in ``items`` of those placed to start now, ascending.
        """
        due = [(e.job.submit_time_s, e.job.job_id, e.job, e.action) for e in actors]
        due += [(i[0], i[1], i[2], i[6]) for i in map(items.__getitem__, starts_now)]
        if not due:
            return []
        if actors:
            due.sort(key=lambda x: (x[0], x[1]))
        label = self.config.fit
        free = len(snapshot.idle_nodes())
        releases: list[Decision] = []
        actions: list[Decision] = []
        for _, _, job, action in due:
            if action == "release":
                give = min(-job.evolving_request, job.size - max(1, job.nodes_min))
                if give >= 1:
                    free += give
                    releases.append(
                        Shrink(job.job_id, give, f"its {label} schedule starts the next step now")
                    )
        for _, _, job, action in due:
            if action == "start":
                if job.nodes_requested <= free:
                    free -= job.nodes_requested
                    actions.append(
                        Start(job.job_id, job.nodes_requested, f"its {label} schedule starts now")
                    )
            elif action == "grow":
                want = min(job.evolving_request, job.nodes_max - job.size)
                if 1 <= want <= free:
                    free -= want
                    actions.append(
                        Expand(job.job_id, want, f"its {label} schedule starts the next step now")
                    )
        return [*releases, *actions]
