"""Conservative backfilling over a busy-nodes step function in NumPy arrays, plain Python.

The kernel that :mod:`~elastic_slurm.plugins.kit.compiled_placement` compiles with Numba
(``numba.njit``): run as it is, it gives the same results, slowly. It is the scan of
conservative backfilling (Mu'alem and Feitelson, IEEE TPDS 12(6), 2001, section 2): requests
``(nodes, duration_s)`` are placed in queue order, each at the earliest start where it fits,
against a resource evolution profile (Klein and Pérez 2011, section 3.1) of nodes busy over
time, until no request left could start now. It is written a second time, for speed, from
the readable definition: :class:`~elastic_slurm.plugins.kit.occupancy.Occupancy` and the
scans of ``coorm.py`` (``_Cycle._scan``) and ``klein_perez_fast.py`` (``_backfill``), whose
results it reproduces exactly (``tests/unit/test_kit_compiled_placement.py``).

A profile is three things: ``times`` (float64, seconds, ascending) and ``vals`` (int64,
nodes), arrays with room to grow, and ``n``, how many of their entries are in use:
``vals[i]`` nodes are busy on ``[times[i], times[i + 1])``, ``vals[n - 1]`` from
``times[n - 1]`` on, none before ``times[0]``. Every function that adds to a profile returns
its new ``n``; the caller leaves room for two breakpoints per request added.

Nothing here imports Numba; only NumPy.
"""

from __future__ import annotations

import numpy as np

INFINITY = np.inf
DUE_S = 1e-6  # klein_perez_fast's horizon: a start planned this close after now is due now


# ------------------------------------------------------------------------------- searching
def bisect_left(a: np.ndarray, x: float, lo: int, hi: int) -> int:
    """The first index in ``[lo, hi)`` whose entry of ``a`` (ascending) is not below ``x``."""
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def bisect_right(a: np.ndarray, x: float, lo: int, hi: int) -> int:
    """The first index in ``[lo, hi)`` whose entry of ``a`` (ascending) is above ``x``."""
    while lo < hi:
        mid = (lo + hi) // 2
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


# --------------------------------------------------------------------------------- profile
def value_at(times: np.ndarray, vals: np.ndarray, n: int, t: float) -> int:
    """Nodes busy at time ``t`` (seconds): :meth:`Occupancy.value_at`."""
    j = bisect_right(times, t, 0, n) - 1
    return 0 if j < 0 else vals[j]


def busiest(times: np.ndarray, vals: np.ndarray, n: int, t0: float, t1: float) -> int:
    """The most nodes busy on ``[t0, t1)`` (0 when ``t0 >= t1``).

    The first value of :meth:`Occupancy.max_and_last_end`.
    """
    if not t1 > t0:
        return 0
    if n > 1 and times[0] <= t0 < times[1]:
        j = 0  # (from the profile's origin: no bisection)
    else:
        j = bisect_right(times, t0, 0, n) - 1
    best = 0 if j < 0 else vals[j]
    m = j + 1  # segments j + 1 .. start in (t0, t1): walked to, not bisected for
    while m < n and times[m] < t1:
        if vals[m] > best:
            best = vals[m]
        m += 1
    return best


def _insert(times: np.ndarray, vals: np.ndarray, n: int, i: int, t: float, v: int) -> None:
    """Make room at ``i`` and put a breakpoint ``(t, v)`` there; the caller counts it.

    The entries move up one array at a time, with unsigned indices: compiled, each loop is
    then a plain block move (a signed index is checked for wrapping around at each step,
    which keeps the compiler from it), about three times faster on long profiles.
    """
    one = np.uint64(1)
    stop = np.uint64(i)
    m = np.uint64(n)
    while m > stop:
        times[m] = times[m - one]
        m -= one
    m = np.uint64(n)
    while m > stop:
        vals[m] = vals[m - one]
        m -= one
    times[i] = t
    vals[i] = v


def add(
    times: np.ndarray, vals: np.ndarray, n: int, start_s: float, end_s: float, nodes: int
) -> int:
    """Add ``nodes`` (negative to remove) on ``[start_s, end_s)``; return the new ``n``.

    :meth:`Occupancy.add`, with the same breakpoints (at most two new ones).
    """
    if not end_s > start_s or nodes == 0:
        return n
    i = bisect_left(times, start_s, 0, n)  # split the segment start_s falls in
    if i == n or times[i] != start_s:
        _insert(times, vals, n, i, start_s, vals[i - 1] if i else 0)
        n += 1
    if end_s < INFINITY:
        k = bisect_left(times, end_s, i, n)  # and the one end_s falls in
        if k == n or times[k] != end_s:
            _insert(times, vals, n, k, end_s, vals[k - 1])
            n += 1
    else:
        k = n
    for j in range(i, k):
        vals[j] += nodes
    return n


def add_at(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    i: int,
    j: int,
    start_s: float,
    end_s: float,
    nodes: int,
) -> int:
    """:func:`add` where :func:`earliest_at` found ``start_s``: without its two bisections.

    ``i`` and ``j`` are :func:`earliest_at`'s for a request of ``end_s - start_s`` seconds
    found at ``start_s`` in this profile (``i`` negative: no hint, :func:`add` itself).
    The same breakpoints and values as :func:`add`.
    """
    if i < 0:
        return add(times, vals, n, start_s, end_s, nodes)
    if not end_s > start_s or nodes == 0:
        return n
    if times[i] != start_s:  # bisect_left(times, start_s): i + 1, where start_s goes
        i += 1
        _insert(times, vals, n, i, start_s, vals[i - 1])
        n += 1
        j += 1  # (after the new breakpoint)
    if end_s < INFINITY:
        if j == n or times[j] != end_s:  # j: bisect_left(times, end_s, i, n)
            _insert(times, vals, n, j, end_s, vals[j - 1])
            n += 1
    else:
        j = n
    for m in range(i, j):
        vals[m] += nodes
    return n


def earliest(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    need: int,
    duration_s: float,
    cap: int,
    t0_s: float,
) -> float:
    """The earliest start at or after ``t0_s`` where ``need`` more nodes fit (seconds).

    :meth:`Occupancy.earliest` (Klein and Pérez's ``fit`` for a one-step request, in one
    pass), without the memory of earlier searches, which never changes a result: for
    ``duration_s`` seconds on a machine of ``cap`` nodes; ``inf`` when never.

    Where :meth:`Occupancy.earliest` looks at a candidate's segments from the last one back
    (and may look at a segment again for the next candidate), this walks them forward and
    stops at the first one too busy: each segment is looked at once. Exact: a start before
    the end of a segment too busy that the request would cover overlaps it, so the next
    candidate is the first segment after it with few enough busy, which both walks reach;
    the earliest start that fits is unique.
    """
    return earliest_at(times, vals, n, need, duration_s, cap, t0_s)[0]


def earliest_at(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    need: int,
    duration_s: float,
    cap: int,
    t0_s: float,
) -> tuple[float, int, int]:
    """:func:`earliest`, and where its start lies: ``(start_s, i, j)``.

    When a start is found (finite, for a positive duration) ``i`` is the segment it falls
    in (``times[i] <= start_s``, and ``start_s < times[i + 1]`` when ``i + 1 < n``) and ``j``
    the first breakpoint after ``i`` at or after ``start_s + duration_s`` (``n`` when none):
    where :func:`add` would put the request (see :func:`add_at`). Otherwise, and when the
    start lies before ``times[0]``, ``i`` and ``j`` are ``-1``.
    """
    if need > cap:
        return INFINITY, -1, -1
    if not duration_s > 0.0:
        return t0_s, -1, -1  # an empty interval fits anywhere
    limit = cap - need  # most nodes that may be busy
    if n > 1 and times[0] <= t0_s < times[1]:
        i = 0  # (a search from the profile's origin: no bisection)
    else:
        i = bisect_right(times, t0_s, 0, n) - 1
    start = t0_s
    if i < 0:  # t0_s before the origin: nothing busy until times[0]
        if start + duration_s <= times[0]:
            return start, -1, -1
        i = 0
        start = times[0] if vals[0] > limit else start
    while i < n and vals[i] > limit:  # the segments where the request can never fit
        i += 1
        if i < n:
            start = times[i]
    while i < n:  # segment i (where start is) has at most ``limit`` busy
        # the first segment after i that starts before the request would end and is over
        # the limit: no start up to its start can work (each segment is looked at once)
        end = start + duration_s
        j = i + 1
        while j < n and times[j] < end and vals[j] <= limit:
            j += 1
        if j == n or not times[j] < end:
            return start, (i if times[i] <= start else -1), j
        i = j + 1
        while i < n and vals[i] > limit:
            i += 1
        if i < n:
            start = times[i]  # the first start after j that may work
    return INFINITY, -1, -1


# ------------------------------------------------------------------ remembered searches
def new_memory(cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What :func:`remembered_earliest` rules out, by limit: none yet.

    ``(durations, ends, sizes)``, shapes ``(cap + 1, MEMORY)`` twice and ``(cap + 1,)``:
    for the limit ``L`` (the most nodes that may be busy), ``durations[L, :sizes[L]]`` and
    ``ends[L, :sizes[L]]`` ascending both, and no request of ``durations[L, k]`` seconds or
    more fits under ``L`` at any start in ``[now, ends[L, k])``: ``Occupancy._fits``, for
    searches all from one time ``now``, at most ``MEMORY`` entries a limit.
    """
    return np.empty((cap + 1, MEMORY)), np.empty((cap + 1, MEMORY)), np.zeros(cap + 1, np.int64)


MEMORY = 16  # entries a limit: what is not remembered is searched again


def remembered_earliest(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    need: int,
    duration_s: float,
    cap: int,
    now_s: float,
    durations: np.ndarray,
    ends: np.ndarray,
    sizes: np.ndarray,
) -> float:
    """:func:`earliest` from ``now_s``, resumed where earlier searches left off.

    :meth:`Occupancy.earliest` with its memory (:func:`new_memory`), valid while the profile
    only rises (the caller empties ``sizes`` when it removes nodes). Never changes a result.
    """
    return remembered_earliest_at(
        times, vals, n, need, duration_s, cap, now_s, durations, ends, sizes
    )[0]


def remembered_earliest_at(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    need: int,
    duration_s: float,
    cap: int,
    now_s: float,
    durations: np.ndarray,
    ends: np.ndarray,
    sizes: np.ndarray,
) -> tuple[float, int, int]:
    """:func:`remembered_earliest`, and where its start lies (:func:`earliest_at`)."""
    if need > cap:
        return INFINITY, -1, -1
    if not duration_s > 0.0:
        return now_s, -1, -1
    limit = cap - need
    m = sizes[limit]
    t0 = now_s
    k = bisect_right(durations[limit], duration_s, 0, m) - 1
    if k >= 0 and ends[limit, k] > now_s:
        # nothing this long fits on [now_s, that end): the search would reach it (or never)
        if ends[limit, k] == INFINITY:
            return INFINITY, -1, -1
        t0 = ends[limit, k]
    found, i, j = earliest_at(times, vals, n, need, duration_s, cap, t0)
    if found != now_s:
        _learn(durations[limit], ends[limit], sizes, limit, duration_s, found)
    return found, i, j


def _learn(
    durations: np.ndarray,
    ends: np.ndarray,
    sizes: np.ndarray,
    limit: int,
    duration_s: float,
    end_s: float,
) -> None:
    """Note for ``limit``: nothing ``duration_s`` long fits before ``end_s`` (``occupancy._learn``).

    Keeps only what no other entry implies; learns nothing when ``MEMORY`` entries are full.
    """
    m = sizes[limit]
    p = bisect_right(durations, duration_s, 0, m)
    if p and ends[p - 1] >= end_s:
        return  # as long or shorter, and ruled out as far: already known
    lo = bisect_left(durations, duration_s, 0, p)
    hi = bisect_right(ends, end_s, lo, m)  # as long or longer, ruled out less far
    size = m - (hi - lo) + 1
    if size > durations.shape[0]:
        return
    if hi == lo:  # one more entry: move the rest right
        for j in range(m, lo, -1):
            durations[j] = durations[j - 1]
            ends[j] = ends[j - 1]
    else:  # hi - lo entries become one: move the rest left
        for j in range(hi, m):
            durations[j - (hi - lo) + 1] = durations[j]
            ends[j - (hi - lo) + 1] = ends[j]
    durations[lo] = duration_s
    ends[lo] = end_s
    sizes[limit] = size


# ----------------------------------------------------------------------------------- scans
def queue_scan(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    need: np.ndarray,
    duration_s: np.ndarray,
    first: int,
    cap: int,
    now_s: float,
    free: int,
    places: np.ndarray,
    started: np.ndarray,
) -> tuple[int, int, int]:
    """Place ``need[first:]`` in order (conservative backfilling) while any may start now.

    ``coorm.py``'s ``_Cycle._scan``: each request ``(need[k]`` nodes, ``duration_s[k]``
    seconds) is placed at its :func:`earliest` start from ``now_s`` and added to the profile;
    one of more than ``cap`` nodes is placed at ``inf`` and adds nothing. The scan stops
    before the first request from which none left (of positive duration) has at most
    ``free`` nodes and fits on ``[now_s, now_s + duration)``, and after a request that
    starts now and leaves no node free now. ``free``: nodes free now (at least one).

    Parameters
    ----------
    times, vals, n
        The profile (see the module), from ``now_s`` on; added to.
    need, duration_s
        The whole queue's requests (nodes, int64; seconds, float64, ``inf`` for none),
        shapes ``(q,)``; ``need[:first]`` are placed already.
    places, started
        Outputs, shapes ``(q,)`` at least: ``places[m]`` is the start of request ``first +
        m`` (seconds); ``started[:s]`` the positions in the queue of those starting at
        ``now_s``.

    Returns
    -------
    tuple
        ``(n, stop, s)``: the profile's new size, the position where the scan stopped
        (``places[:stop - first]`` are set), and how many started now.
    """
    durations, ends, sizes = new_memory(cap)
    return queue_scan_with(
        times, vals, n, need, duration_s, first, cap, now_s, free, places, started,
        durations, ends, sizes,
    )  # fmt: skip


def queue_scan_with(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    need: np.ndarray,
    duration_s: np.ndarray,
    first: int,
    cap: int,
    now_s: float,
    free: int,
    places: np.ndarray,
    started: np.ndarray,
    durations: np.ndarray,
    ends: np.ndarray,
    sizes: np.ndarray,
) -> tuple[int, int, int]:
    """:func:`queue_scan` with the memory of its searches given (:func:`new_memory`, reused).

    The memory's arrays are the caller's to keep between scans (rows for ``cap + 1``
    limits at least); ``sizes`` is emptied first.
    """
    q = need.shape[0]
    sizes[:] = 0  # nothing ruled out yet
    s = 0
    last = q - 1  # the last request with a duration that may still start now
    last_ok = False  # known: request ``last`` may start now against the profile
    for k in range(first, q):
        nodes = need[k]
        d = duration_s[k]
        if nodes > cap:
            places[k - first] = INFINITY
            continue  # can never start here: reserves nothing
        if d > 0.0:
            while last >= k:
                if need[last] <= free and (
                    last_ok
                    or _may_start_now(times, vals, n, need[last], duration_s[last], cap, now_s)
                ):
                    break
                last -= 1
                last_ok = False
            if last < k:
                return n, k, s  # nobody from here on can start now but at zero duration
            last_ok = True
        begin, i, j = remembered_earliest_at(
            times, vals, n, nodes, d, cap, now_s, durations, ends, sizes
        )
        places[k - first] = begin
        if begin == INFINITY:
            continue
        n = add_at(times, vals, n, i, j, begin, begin + d, nodes)
        if last_ok:
            last_ok = begin >= now_s + duration_s[last]
        if begin <= now_s:
            started[s] = k
            s += 1
            free = cap - value_at(times, vals, n, now_s)
            if free <= 0:
                return n, k + 1, s
    return n, q, s


def _may_start_now(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    nodes: int,
    d: float,
    cap: int,
    now_s: float,
) -> bool:
    """Whether ``nodes`` more may be busy on ``[now_s, now_s + d)``; false when ``d`` is 0.

    ``coorm._may_start`` (:func:`~elastic_slurm.plugins.kit.holds.may_start_now`).
    """
    return d > 0.0 and nodes <= cap and busiest(times, vals, n, now_s, now_s + d) + nodes <= cap


def least_busy(times: np.ndarray, vals: np.ndarray, n: int, now_s: float) -> int:
    """The fewest nodes busy at any time in ``[now_s, now_s + DUE_S]``.

    ``klein_perez_fast._least_busy``.
    """
    j = max(0, bisect_right(times, now_s, 0, n) - 1)
    least = vals[j] if times[j] <= now_s else 0
    horizon = now_s + DUE_S
    j += 1
    while j < n and times[j] <= horizon:
        least = min(least, vals[j])
        j += 1
    return least


def list_scan(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    duration_s: np.ndarray,
    need: np.ndarray,
    own: np.ndarray,
    first: int,
    cap: int,
    now_s: float,
    starts: np.ndarray,
) -> tuple[int, int]:
    """Place ``need[first:]`` in list order, each at its earliest start, while any may start.

    ``klein_perez_fast._backfill`` (Klein and Pérez's Algorithm 1 with a one-step ``fit``):
    item ``k`` asks for ``need[k]`` nodes for ``duration_s[k]`` seconds and reserves
    ``own[k]`` of them from ``now_s`` already (a running job waiting to grow); its
    reservation is lifted while it is placed and kept until its start. The scan stops before
    item ``k`` when fewer nodes are free through ``[now_s, now_s + DUE_S]`` than any item
    from ``k`` on (of positive duration) needs beyond its reservation, or when none of them
    may start by ``now_s + DUE_S``.

    Parameters
    ----------
    times, vals, n
        The profile (see the module), from ``now_s`` on, with the items' reservations and
        the first ``first`` items' places; added to.
    duration_s, need, own
        Per item: seconds (float64), nodes and reserved nodes (int64); shapes ``(q,)``.
    starts
        Output, shape ``(q,)``: ``starts[k]`` for ``first <= k < stop`` (seconds; may be
        ``inf``); the others are left as they are.

    Returns
    -------
    tuple
        ``(n, stop)``: the profile's new size and the position where the scan stopped.
    """
    durations, ends, sizes = new_memory(cap)
    return list_scan_with(
        times, vals, n, duration_s, need, own, first, cap, now_s, starts, durations, ends, sizes
    )


def list_scan_with(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    duration_s: np.ndarray,
    need: np.ndarray,
    own: np.ndarray,
    first: int,
    cap: int,
    now_s: float,
    starts: np.ndarray,
    durations: np.ndarray,
    ends: np.ndarray,
    sizes: np.ndarray,
) -> tuple[int, int]:
    """:func:`list_scan` with the memory of its searches given (:func:`new_memory`, reused).

    The memory's arrays are the caller's to keep between scans (rows for ``cap + 1``
    limits at least); ``sizes`` is emptied first.
    """
    q = need.shape[0]
    gap = np.empty(q)  # nodes wanted beyond the reservation; -inf for a zero duration
    for k in range(first, q):  # (the items before first are not read)
        gap[k] = need[k] - own[k] if duration_s[k] > 0.0 else -INFINITY
    slack = np.empty(q)  # the least of gap[k:]
    low = INFINITY
    for k in range(q - 1, first - 1, -1):
        low = min(low, gap[k])
        slack[k] = low
    sizes[:] = 0  # nothing ruled out yet
    last = q - 1  # the last item that may still be given nodes now
    fits = False  # known: item ``last`` may start now against the profile
    for k in range(first, q):
        free = cap - least_busy(times, vals, n, now_s)
        if free < slack[k]:
            return n, k
        while last >= k and (
            gap[last] > free
            or not (
                fits
                or _may_fit_now(times, vals, n, duration_s[last], need[last], own[last], cap, now_s)
            )
        ):
            last -= 1
            fits = False
        if last < k:
            return n, k  # nobody from here on can be given nodes now
        d, nodes, mine = duration_s[k], need[k], own[k]
        if mine:
            n = add(times, vals, n, now_s, now_s + d, -mine)
            sizes[:] = 0  # the profile fell: what was ruled out may fit now
        s = remembered_earliest(times, vals, n, nodes, d, cap, now_s, durations, ends, sizes)
        if mine and s > now_s:
            n = add(times, vals, n, now_s, s, mine)
        n = add(times, vals, n, s, s + d, nodes)
        starts[k] = s
        fits = s >= now_s + duration_s[last] and not mine
    return n, q


def _may_fit_now(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    d: float,
    nodes: int,
    mine: int,
    cap: int,
    now_s: float,
) -> bool:
    """``klein_perez_fast._may_fit_now`` for an item of ``d`` s, ``nodes``, ``mine`` reserved."""
    if nodes > cap:
        return False
    if not d > 2 * DUE_S:
        return True
    return busiest(times, vals, n, now_s + DUE_S, now_s + d) - mine + nodes <= cap


# ------------------------------------------------------------------------ one list cycle
def holds_profile(
    hold_end: np.ndarray,
    hold_nodes: np.ndarray,
    r: int,
    now_s: float,
    times: np.ndarray,
    vals: np.ndarray,
) -> int:
    """Holds ``[now_s, hold_end[i])`` of ``hold_nodes[i]`` nodes, ``i < r``, as a profile.

    :func:`~elastic_slurm.plugins.kit.holds.holds_from`: the same breakpoints (``now_s``,
    then every distinct finite end after it, ascending) and values, written to ``times``
    and ``vals`` (room for ``r + 1`` entries); returns their count. Holds ending at or before
    ``now_s`` or of no nodes add nothing; an end of ``inf`` adds to every segment.
    """
    total = 0
    m = 0  # distinct ends so far, in times[1 .. m], the nodes ending there in vals
    for i in range(r):
        end, nodes = hold_end[i], hold_nodes[i]
        if end > now_s and nodes != 0:
            total += nodes
            if end < INFINITY:
                j = bisect_left(times, end, 1, m + 1)
                if j <= m and times[j] == end:
                    vals[j] += nodes
                else:
                    _insert(times, vals, m + 1, j, end, nodes)
                    m += 1
    times[0] = now_s
    if total == 0:
        vals[0] = 0
        return 1
    vals[0] = total
    for j in range(1, m + 1):  # what is still held after each end
        vals[j] = vals[j - 1] - vals[j]
    return m + 1


def same_after(
    times: np.ndarray,
    vals: np.ndarray,
    n: int,
    t: float,
    other_t: np.ndarray,
    other_v: np.ndarray,
    m: int,
) -> bool:
    """Whether profile ``times, vals, n`` from ``t`` on (``times[0] <= t``) is ``other``'s.

    ``Occupancy.after(t).same(other)``: the same breakpoints and values, ``other`` starting
    at ``t``.
    """
    j = max(bisect_right(times, t, 0, n) - 1, 0)
    if n - j != m or other_t[0] != t:
        return False
    for i in range(1, m):
        if times[j + i] != other_t[i]:
            return False
    for i in range(m):
        if vals[j + i] != other_v[i]:
            return False
    return True


def copy_after(
    times: np.ndarray, vals: np.ndarray, n: int, t: float, out_t: np.ndarray, out_v: np.ndarray
) -> int:
    """Profile ``times, vals, n`` from ``t`` on, written to ``out_t, out_v``; its size.

    ``ArrayProfile.after``: the segment ``t`` falls in starts at ``t``, those before go.
    """
    j = max(bisect_right(times, t, 0, n) - 1, 0)
    m = n - j
    for i in range(m):
        out_t[i] = times[j + i]
        out_v[i] = vals[j + i]
    out_t[0] = t
    return m


def list_cycle(
    hold_end: np.ndarray,
    hold_nodes: np.ndarray,
    r: int,
    now_s: float,
    cap: int,
    duration_s: np.ndarray,
    need: np.ndarray,
    own: np.ndarray,
    keep: bool,
    kept_now: float,
    kept_cap: int,
    kept_base_t: np.ndarray,
    kept_base_v: np.ndarray,
    kept_base_n: int,
    kept_t: np.ndarray,
    kept_v: np.ndarray,
    kept_n: int,
    kept_places: np.ndarray,
    p: int,
    base_t: np.ndarray,
    base_v: np.ndarray,
    final_t: np.ndarray,
    final_v: np.ndarray,
    starts: np.ndarray,
    due: np.ndarray,
    places: np.ndarray,
    durations: np.ndarray,
    ends: np.ndarray,
    sizes: np.ndarray,
) -> tuple[int, int, int, int, bool]:
    """One cycle of ``klein_perez_fast`` in one call: holds, kept plan, scan, starts due now.

    What ``FastPath._fast_decide`` does from the holds on, with the kept plan
    (:mod:`~elastic_slurm.plugins.kit.kept_plan`) in arrays:

    1. the holds from now (:func:`holds_profile`: ``holds_from``) into ``base``;
    2. whether last cycle's plan may be kept (``KeptPlan.follows``; ``keep`` says that the
       queue's first ``p`` items are the plan's, which only the caller can check): then the
       scan continues from the plan's final profile (from now on) after its ``p`` places,
       else from ``base`` with none placed;
    3. :func:`list_scan` into ``final``, ``starts``;
    4. the items placed to start by ``now_s + DUE_S`` (due, ``due[:d]``, ascending) join
       ``base`` (``_kept``), the other places go to ``places`` in order.

    The kept plan (read only): ``kept_now``, ``kept_cap``, its base, final profile and
    places (``kept_places[:p]``, seconds). Outputs: ``base``, ``final`` (room for ``r + 1 +
    2 q`` and ``max(kept_n, r + 1) + 6 q`` entries, ``q`` items), ``starts``, ``due``,
    ``places`` (shapes ``(q,)`` at least): together the next kept plan. ``durations``,
    ``ends``, ``sizes``: memory for the scan's searches (:func:`list_scan_with`).

    Returns
    -------
    tuple
        ``(base_n, final_n, kept, d, followed)``: the sizes of ``base`` and ``final``, how
        many places are in ``places``, how many items are due, and whether the plan was kept.
    """
    base_n = holds_profile(hold_end, hold_nodes, r, now_s, base_t, base_v)
    followed = keep and now_s >= kept_now and cap == kept_cap
    if followed:
        for k in range(p):
            if kept_places[k] < now_s:
                followed = False
                break
    if followed:
        followed = same_after(kept_base_t, kept_base_v, kept_base_n, now_s, base_t, base_v, base_n)
    first = 0
    if followed:
        final_n = copy_after(kept_t, kept_v, kept_n, now_s, final_t, final_v)
        for k in range(p):
            starts[k] = kept_places[k]
        first = p
    else:
        for i in range(base_n):
            final_t[i] = base_t[i]
            final_v[i] = base_v[i]
        final_n = base_n
    final_n, stop = list_scan_with(
        final_t, final_v, final_n, duration_s, need, own, first, cap, now_s, starts,
        durations, ends, sizes,
    )  # fmt: skip
    horizon = now_s + DUE_S
    d = 0
    m = 0
    for k in range(stop):
        s = starts[k]
        if s <= horizon:
            due[d] = k
            d += 1
            base_n = add(base_t, base_v, base_n, s, s + duration_s[k], need[k])
        else:
            places[m] = s
            m += 1
    return base_n, final_n, m, d, followed


def list_cycle_rows(
    floats: np.ndarray,
    ints: np.ndarray,
    side: int,
    r: int,
    now_s: float,
    cap: int,
    duration_s: np.ndarray,
    need: np.ndarray,
    own: np.ndarray,
    keep: bool,
    kept_now: float,
    kept_cap: int,
    kept_base_n: int,
    kept_n: int,
    p: int,
    memory: np.ndarray,
    sizes: np.ndarray,
) -> tuple[int, int, int, int, bool]:
    """:func:`list_cycle` on the rows of two arrays: the same, with fewer arguments to pass.

    As :func:`queue_cycle_rows` does for :func:`queue_cycle`. ``floats`` (float64, ``(8,
    room)``): the holds' ends, then the two sides' base times, final times and places, then
    the items' starts; ``ints`` (int64, ``(6, room)``): the holds' nodes, then the two sides'
    base values and final values, then ``due``. Side ``side`` (0 or 1: rows ``1 + side``,
    ``3 + side``, ``5 + side`` of ``floats`` and ``1 + side``, ``3 + side`` of ``ints``) is
    the kept plan, read only; the other side is written. ``memory`` (float64, ``(2, cap + 1,
    MEMORY)``): the durations and ends of :func:`new_memory`; ``sizes`` its sizes. Returns
    what :func:`list_cycle` returns.
    """
    k = 1 + side  # the kept plan's rows
    w = 2 - side  # the next plan's
    return list_cycle(
        floats[0], ints[0], r, now_s, cap, duration_s, need, own, keep, kept_now, kept_cap,
        floats[k], ints[k], kept_base_n, floats[2 + k], ints[2 + k], kept_n, floats[4 + k], p,
        floats[w], ints[w], floats[2 + w], ints[2 + w], floats[7], ints[5], floats[4 + w],
        memory[0], memory[1], sizes,
    )  # fmt: skip


# ----------------------------------------------------------------------- one queue cycle
def queue_cycle(
    hold_end: np.ndarray,
    hold_nodes: np.ndarray,
    r: int,
    now_s: float,
    cap: int,
    need: np.ndarray,
    duration_s: np.ndarray,
    keep: bool,
    kept_now: float,
    kept_cap: int,
    kept_base_t: np.ndarray,
    kept_base_v: np.ndarray,
    kept_base_n: int,
    kept_t: np.ndarray,
    kept_v: np.ndarray,
    kept_n: int,
    kept_places: np.ndarray,
    p: int,
    base_t: np.ndarray,
    base_v: np.ndarray,
    final_t: np.ndarray,
    final_v: np.ndarray,
    places: np.ndarray,
    started: np.ndarray,
    durations: np.ndarray,
    ends: np.ndarray,
    sizes: np.ndarray,
) -> tuple[int, int, int, int, bool]:
    """Step 1 of one ``coorm`` cycle in one call: holds, kept plan, scan, starts now.

    What ``coorm._Cycle.nonpreemptible_view`` does from the holds on (conservative
    backfilling, Mu'alem and Feitelson 2001, section 2, of the non-preemptible requests,
    Klein's thesis, Algorithm A.4), with the kept plan
    (:mod:`~elastic_slurm.plugins.kit.kept_plan`) in arrays:

    1. the holds from now (:func:`holds_profile`: ``holds_from``) into ``base``;
    2. whether last cycle's plan may be kept (``KeptPlan.follows``; ``keep`` says that the
       queue's first ``p`` requests are the plan's, which only the caller can check): then
       the scan continues from the plan's final profile (from now on) after its ``p``
       places, those placed at ``now_s`` starting, else from ``base`` with none placed;
    3. :func:`queue_scan` into ``final`` when a node is free now;
    4. the requests of zero duration after where it stopped start too (those of at most
       ``cap`` nodes); the starts, ``started[:s]`` ascending, join ``base``, and the other
       places go to ``places`` in order (``without_started``).

    The kept plan (read only): ``kept_now``, ``kept_cap``, its base, final profile and
    places (``kept_places[:p]``, seconds). ``need``, ``duration_s``: the queue's requests
    (nodes, int64; seconds, float64, ``inf`` for none), shapes ``(q,)``. Outputs: ``base``,
    ``final`` (room for ``r + 1 + 2 q`` and ``max(kept_n, r + 1) + 2 q`` entries),
    ``places``, ``started`` (shapes ``(q,)`` at least): together the next kept plan.
    ``durations``, ``ends``, ``sizes``: memory for the scan's searches
    (:func:`queue_scan_with`).

    Returns
    -------
    tuple
        ``(base_n, final_n, kept, s, followed)``: the sizes of ``base`` and ``final``, how
        many places are in ``places``, how many requests start now, and whether the plan
        was kept.
    """
    q = need.shape[0]
    base_n = holds_profile(hold_end, hold_nodes, r, now_s, base_t, base_v)
    followed = keep and now_s >= kept_now and cap == kept_cap
    if followed:
        for k in range(p):
            if kept_places[k] < now_s:
                followed = False
                break
    if followed:
        followed = same_after(kept_base_t, kept_base_v, kept_base_n, now_s, base_t, base_v, base_n)
    s = 0
    if followed:
        final_n = copy_after(kept_t, kept_v, kept_n, now_s, final_t, final_v)
        for k in range(p):
            places[k] = kept_places[k]
            if kept_places[k] == now_s:  # reservations that are now start
                started[s] = k
                s += 1
        stop = p
    else:
        for i in range(base_n):
            final_t[i] = base_t[i]
            final_v[i] = base_v[i]
        final_n = base_n
        stop = 0
    free = cap - value_at(final_t, final_v, final_n, now_s)  # nodes free now
    if free > 0 and stop < q:
        final_n, stop, more = queue_scan_with(
            final_t, final_v, final_n, need, duration_s, stop, cap, now_s, free,
            places[stop:], started[s:], durations, ends, sizes,
        )  # fmt: skip
        s += more
    for j in range(stop, q):  # zero durations fit anywhere, now included
        if duration_s[j] == 0.0 and need[j] <= cap:
            started[s] = j
            s += 1
    m = 0  # the places kept, the starts' taken out
    i = 0
    for k in range(stop):
        if i < s and started[i] == k:
            i += 1
        else:
            places[m] = places[k]
            m += 1
    for i in range(s):  # what the next cycle's holds should be, if all goes as planned
        k = started[i]
        base_n = add(base_t, base_v, base_n, now_s, now_s + duration_s[k], need[k])
    return base_n, final_n, m, s, followed


def queue_cycle_rows(
    floats: np.ndarray,
    ints: np.ndarray,
    side: int,
    r: int,
    now_s: float,
    cap: int,
    need: np.ndarray,
    duration_s: np.ndarray,
    keep: bool,
    kept_now: float,
    kept_cap: int,
    kept_base_n: int,
    kept_n: int,
    p: int,
    memory: np.ndarray,
    sizes: np.ndarray,
) -> tuple[int, int, int, int, bool]:
    """:func:`queue_cycle` on the rows of two arrays: the same, with fewer arguments to pass.

    A compiled function's call unboxes each array it is passed (about 0.15 us each); the
    kept plan and the buffers of the next are passed here as rows of two 2-D arrays
    instead, and the memory as one 3-D array. ``floats`` (float64, ``(7, room)``): the
    holds' ends, then the two sides' base times, final times and places; ``ints`` (int64,
    ``(6, room)``): the holds' nodes, then the two sides' base values and final values,
    then ``started``. Side ``side`` (0 or 1: rows ``1 + side``, ``3 + side``, ``5 + side``
    of ``floats`` and ``1 + side``, ``3 + side`` of ``ints``) is the kept plan, read only;
    the other side is written. ``memory`` (float64, ``(2, cap + 1, MEMORY)``): the
    durations and ends of :func:`new_memory`; ``sizes`` its sizes. Returns what
    :func:`queue_cycle` returns.
    """
    k = 1 + side  # the kept plan's rows
    w = 2 - side  # the next plan's
    return queue_cycle(
        floats[0], ints[0], r, now_s, cap, need, duration_s, keep, kept_now, kept_cap,
        floats[k], ints[k], kept_base_n, floats[2 + k], ints[2 + k], kept_n, floats[4 + k], p,
        floats[w], ints[w], floats[2 + w], ints[2 + w], floats[4 + w], ints[5],
        memory[0], memory[1], sizes,
    )  # fmt: skip
