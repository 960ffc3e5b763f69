"""Busy nodes over time: a resource *evolution profile* (Klein and Pérez 2011, section 3.1).

A step function of absolute time that planners add requests to and query for the most nodes
busy over an interval (the paper's ``max`` and ``loc``). Used by :mod:`klein_perez`'s ``fit``
and by CooRMv2's conservative backfilling of pre-allocations.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from elastic_slurm.plugins.kit.queue import INFINITY


class Occupancy:
    """A resource EP: nodes busy over absolute time, a step function.

    ``vals[i]`` nodes are busy on ``[times[i], times[i + 1])`` and ``vals[-1]`` from
    ``times[-1]`` on; none before ``times[0]``.

    :meth:`earliest` remembers what its searches ruled out, by limit (the most nodes that
    may be busy): ``_fits[limit]`` is ``(t0, durations, ends)``, two lists ascending both,
    and no request of ``durations[k]`` seconds or more fits under ``limit`` at any start in
    ``[t0, ends[k])`` (``ends[k]``: the start a search found then, or ``math.inf``). A later
    search from ``t0`` or after, for as long a request or longer, may resume at ``ends[k]``
    instead of walking the segments again (on a deep queue, most of a conservative
    backfilling's searches cover the same ground). Adding nodes keeps this true (the step
    function only rises); removing nodes clears it. It never changes a result: the earliest
    start is the same with or without it.

    Parameters
    ----------
    origin_s
        The first time of interest (seconds); queries start there or later.

    >>> occ = Occupancy(0.0)
    >>> occ.add(0.0, 10.0, 3)
    >>> occ.add(5.0, 20.0, 2)
    >>> occ.max_and_last_end(0.0, 8.0), occ.max_and_first_start(6.0, 30.0)
    ((5, 10.0), (5, 5.0))
    """

    __slots__ = ("_fits", "times", "vals")

    def __init__(self, origin_s: float = 0.0) -> None:
        self.times = [origin_s]
        self.vals = [0]
        # what earliest ruled out (see above)
        self._fits: dict[int, tuple[float, list[float], list[float]]] = {}

    def add(self, start_s: float, end_s: float, nodes: int) -> None:
        """Add ``nodes`` (negative to remove) on ``[start_s, end_s)``."""
        if not end_s > start_s or nodes == 0:
            return
        if nodes < 0:
            self._fits.clear()
        times, vals = self.times, self.vals
        i = bisect_left(times, start_s)  # split the segment start_s falls in
        if i == len(times) or times[i] != start_s:
            times.insert(i, start_s)
            vals.insert(i, vals[i - 1] if i else 0)
        if end_s < INFINITY:
            k = bisect_left(times, end_s, i)  # and the one end_s falls in
            if k == len(times) or times[k] != end_s:
                times.insert(k, end_s)
                vals.insert(k, vals[k - 1])
        else:
            k = len(times)
        for j in range(i, k):
            vals[j] += nodes

    def reset(self, times: list[float], vals: list[int]) -> None:
        """Make the step function ``times``, ``vals`` (as the attributes); forget the searches.

        For a planner that changed the profile elsewhere (a compiled scan,
        :mod:`~elastic_slurm.plugins.kit.compiled_placement`).
        """
        self.times, self.vals = times, vals
        self._fits.clear()

    def max_and_last_end(self, t0: float, t1: float) -> tuple[int, float]:
        """The paper's ``max(ep, t0, t1)`` and ``loc(ep, t0, t1)``.

        Returns the most nodes busy on ``[t0, t1)`` (0 when ``t0 >= t1``) and the end of the
        last segment where that many are busy. The paper restricts ``loc`` to ``[t0, t1]``;
        the segment's true end is an equally safe place to jump to (every start before it
        overlaps the segment) and saves iterations.
        """
        if not t1 > t0:
            return 0, t0
        times, vals = self.times, self.vals
        j = bisect_right(times, t0) - 1
        n = len(times)
        best = 0 if j < 0 else vals[j]
        last = times[0] if j < 0 else (times[j + 1] if j + 1 < n else INFINITY)
        e = bisect_left(times, t1, j + 1)  # segments j + 1 .. e - 1 start in (t0, t1)
        if e > j + 1:
            later = vals[j + 1 : e]
            top = max(later)
            if top >= best:  # the last segment with that many
                best = top
                j = e - later[::-1].index(top)
                last = times[j] if j < n else INFINITY
        return best, last

    def max_and_first_start(self, t0: float, t1: float) -> tuple[int, float]:
        """The most nodes busy on ``[t0, t1)`` and the start of the first segment with that many.

        The mirror image of :meth:`max_and_last_end`, for compacting (right to left).
        """
        if not t1 > t0:
            return 0, t1
        times, vals = self.times, self.vals
        j = bisect_right(times, t0) - 1
        best = 0 if j < 0 else vals[j]
        first = -INFINITY if j < 0 else times[j]
        e = bisect_left(times, t1, j + 1)  # segments j + 1 .. e - 1 start in (t0, t1)
        if e > j + 1:
            later = vals[j + 1 : e]
            top = max(later)
            if top > best:  # the first segment with that many
                best = top
                first = times[j + 1 + later.index(top)]
        return best, first

    def earliest(self, need: int, duration_s: float, cap: int, t0_s: float) -> float:
        """The earliest start at or after ``t0_s`` where ``need`` more nodes fit (seconds).

        For ``duration_s`` seconds on a machine of ``cap`` nodes; ``math.inf`` when never.

        What Klein and Pérez's ``fit`` (Algorithm 2) gives for a one-step request, found in
        one pass: a feasible start is ``t0_s`` or the start of a segment, and a segment with
        too many nodes busy rules out every start before its end. From a start, the search
        looks at the segments the request would cover from the last one back, and jumps past
        the last one too busy; it resumes where earlier searches left off (``_fits``).

        >>> occ = Occupancy(0.0)
        >>> occ.add(0.0, 10.0, 3)
        >>> occ.earliest(2, 5.0, 4, 0.0), occ.earliest(1, 5.0, 4, 0.0)
        (10.0, 0.0)
        """
        if need > cap:
            return INFINITY
        if not duration_s > 0.0:
            return t0_s  # an empty interval fits anywhere
        limit = cap - need  # most nodes that may be busy
        times, vals = self.times, self.vals
        n = len(times)
        query_s = t0_s  # nothing this long fits on [query_s, t0_s)
        known = self._fits.get(limit)
        if known is not None:
            if known[0] <= t0_s:
                k = bisect_right(known[1], duration_s) - 1
                if k >= 0 and known[2][k] > t0_s:
                    # nothing this long fits on [t0_s, known end): every start there is
                    # ruled out, and the search from t0_s would reach that end (or never)
                    if known[2][k] == INFINITY:
                        return INFINITY
                    query_s, t0_s = known[0], known[2][k]
            if query_s != known[0]:
                known = None  # learnt from another t0: start again from this one
        i = bisect_right(times, t0_s) - 1
        start = t0_s
        if i < 0:  # t0_s before the origin: nothing busy until times[0]
            if start + duration_s <= times[0]:
                return start
            i = 0
            start = times[0] if vals[0] > limit else start
        while i < n and vals[i] > limit:  # the segments where the request can never fit
            i += 1
            if i < n:
                start = times[i]
        if known is None:
            known = self._fits[limit] = (query_s, [], [])
        found = INFINITY
        while i < n:  # segment i (where start is) has at most ``limit`` busy
            # of the segments after i that start before the request would end, the last one
            # over the limit: no start up to its start can work
            j = bisect_left(times, start + duration_s, i + 1) - 1
            while j > i and vals[j] <= limit:
                j -= 1
            if j == i:
                found = start
                break
            i = j + 1
            while i < n and vals[i] > limit:
                i += 1
            if i < n:
                start = times[i]  # the first start after j that may work
        if found != query_s:
            _learn(known, duration_s, found)
        return found

    def after(self, t: float) -> Occupancy:
        """A copy that starts at ``t`` (at or after ``times[0]``): what is past is cut off.

        >>> occ = Occupancy(0.0)
        >>> occ.add(0.0, 10.0, 3)
        >>> later = occ.after(4.0)
        >>> later.times, later.vals
        ([4.0, 10.0], [3, 0])
        """
        j = bisect_right(self.times, t) - 1
        out = Occupancy(t)
        out.times = [t, *self.times[j + 1 :]]
        out.vals = self.vals[j:]
        return out

    def same(self, other: Occupancy) -> bool:
        """True when both have the same breakpoints and values (the same step function)."""
        return self.times == other.times and self.vals == other.vals

    def value_at(self, t: float) -> int:
        """Nodes busy at time ``t``."""
        j = bisect_right(self.times, t) - 1
        return 0 if j < 0 else self.vals[j]


def _learn(known: tuple[float, list[float], list[float]], duration_s: float, end_s: float) -> None:
    """Note in ``known`` (``Occupancy._fits``): nothing ``duration_s`` long fits before ``end_s``.

    Keeps only what no other entry implies: the durations and the ends both ascending.
    """
    _, durations, ends = known
    p = bisect_right(durations, duration_s)
    if p and ends[p - 1] >= end_s:
        return  # as long or shorter, and ruled out as far: already known
    lo = bisect_left(durations, duration_s, 0, p)
    hi = bisect_right(ends, end_s, lo)  # as long or longer, ruled out less far
    durations[lo:hi] = [duration_s]
    ends[lo:hi] = [end_s]


__all__ = ["Occupancy"]
