"""Backfilling's pieces: estimates, EASY's shadow time, conservative backfilling's profile.

Estimates as reservations read them, the shadow time of EASY's head job, and the free-node
profile in which conservative backfilling reserves.

A. W. Mu'alem and D. G. Feitelson, "Utilization, Predictability, Workloads, and User Runtime
Estimates in Scheduling the IBM SP2 with Backfilling", IEEE TPDS 12(6), 2001, section 2.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable
from typing import Literal

from elastic_slurm.model.estimates import USER_ESTIMATES, RuntimeEstimates
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.plugins.kit.queue import INFINITY


@dataclasses.dataclass(frozen=True)
class BackfillOptions:
    """Options of the backfilling baselines (EASY and conservative).

    Parameters
    ----------
    estimates
        ``"walltime"``: run times are the users' time limits (the paper's setting, and what a
        live site has); ``"runtime"``: the snapshot's estimates (the simulator's true run
        times), so that an elastic policy run with perfect knowledge can be compared with this
        baseline given the same knowledge.

    Raises
    ------
    ValueError
        For another value.
    """

    estimates: str = "walltime"

    def __post_init__(self) -> None:
        if self.estimates not in ("walltime", "runtime"):
            raise ValueError(f"estimates must be 'walltime' or 'runtime', got {self.estimates!r}")


def estimates_for(
    snapshot: ClusterSnapshot, source: Literal["runtime", "walltime"]
) -> RuntimeEstimates:
    """The run-time estimates a policy uses for ``source``.

    ``"runtime"``: the snapshot's (the best the host knows: true run times in a simulation);
    ``"walltime"``: the users' time limits.
    """
    return snapshot.estimates if source == "runtime" else USER_ESTIMATES


def estimate_s(job: JobView, nodes: int, estimates: RuntimeEstimates = USER_ESTIMATES) -> float:
    """The estimated run time (seconds) of a pending job on ``nodes`` nodes.

    By default its time limit, scaled by its speedup model; infinite when unknown (such a job
    cannot be fitted before a reservation).
    """
    est = estimates.runtime_s(job, nodes)
    return INFINITY if est is None else est


def estimated_end_s(
    job: JobView, now_s: float, estimates: RuntimeEstimates = USER_ESTIMATES
) -> float:
    """When a running job is expected to end (seconds): its estimated end, not before now.

    A job that has overrun its estimate is expected to end now (it holds its nodes until it
    really ends); one without an estimate never ends, as far as reservations go.
    """
    end = estimates.end_s(job, now_s)
    if end is None:
        return INFINITY
    return end if end > now_s else now_s


def shadow(ends: Iterable[tuple[float, int]], free: int, need: int) -> tuple[float, int]:
    """EASY's reservation for the blocked head job: ``(shadow time in seconds, extra nodes)``.

    ``ends`` are ``(estimated end, nodes)`` of the running jobs (and those started this cycle).
    They are taken by end until the nodes they free plus the ``free`` idle ones reach
    ``need``; the *extra* nodes are those left over then. ``(inf, 0)`` when they never do.

    >>> shadow([(30.0, 2), (10.0, 1)], 1, 3)
    (30.0, 1)
    """
    available = free
    for end, size in sorted(ends):
        available += size
        if available >= need:
            return end, available - need
    return INFINITY, 0


class FreeProfile:
    """Free nodes over time, a step function: ``free[i]`` nodes on ``[times[i], times[i+1])``.

    Conservative backfilling's reservation table.

    Parameters
    ----------
    now_s
        The first instant (seconds).
    idle
        Nodes free now.
    releases
        ``(when_s, nodes)`` each running job gives back.

    >>> p = FreeProfile(0.0, 1, [(10.0, 3)])
    >>> p.earliest(2, 5.0), p.times
    (1, [0.0, 10.0])
    """

    def __init__(self, now_s: float, idle: int, releases: list[tuple[float, int]]) -> None:
        self.times = [now_s]
        self.free = [idle]
        for when, count in sorted(releases):
            if when == self.times[-1]:
                self.free[-1] += count
            else:
                self.times.append(when)
                self.free.append(self.free[-1] + count)
        # need -> the first time at which that many nodes were free, when last looked: free
        # nodes only ever go down (reservations), so no start before it can work
        self._fits: dict[int, float] = {}
        # need -> (duration, the earliest start found for it): no start before it can work
        # for as long a run either
        self._found: dict[int, tuple[float, float]] = {}

    def earliest(self, need: int, duration_s: float) -> int:
        """Index of the first breakpoint from which ``need`` nodes stay free for ``duration_s``.

        Returns ``len(times)`` when there is none (only possible for a job wider than the
        nodes that will ever be free).
        """
        times, free = self.times, self.free
        n = len(times)
        hint = self._fits.get(need)
        i = 0 if hint is None else bisect.bisect_left(times, hint)
        while i < n and free[i] < need:  # the breakpoints where it can never start
            i += 1
        self._fits[need] = times[i] if i < n else INFINITY
        found = self._found.get(need)
        if found is not None and duration_s >= found[0]:
            i = max(i, bisect.bisect_left(times, found[1]))
        i = self._search(i, need, duration_s)
        self._found[need] = (duration_s, times[i] if i < n else INFINITY)
        return i

    def _search(self, i: int, need: int, duration_s: float) -> int:
        """:meth:`earliest` from breakpoint ``i`` on (no earlier one can work)."""
        times, free = self.times, self.free
        n = len(times)
        while i < n:
            if free[i] < need:
                i += 1
                continue
            end = times[i] + duration_s
            j = i + 1
            while j < n and times[j] < end and free[j] >= need:
                j += 1
            if j >= n or times[j] >= end:
                return i
            i = j + 1  # free[j] < need: no start before j + 1 can work
        return n

    def after(self, now_s: float) -> FreeProfile:
        """A copy that starts at ``now_s`` (at or after ``times[0]``): what is past is cut off.

        >>> FreeProfile(0.0, 1, [(10.0, 3)]).after(5.0).times
        [5.0, 10.0]
        """
        i = bisect.bisect_right(self.times, now_s) - 1
        out = object.__new__(FreeProfile)
        out.times = [now_s, *self.times[i + 1 :]]
        out.free = self.free[i:]
        out._fits = {}
        out._found = {}
        return out

    def same(self, other: FreeProfile) -> bool:
        """True when both have the same breakpoints and free nodes (the same profile)."""
        return self.times == other.times and self.free == other.free

    def reserve(self, i: int, need: int, duration_s: float) -> None:
        """Take ``need`` nodes from breakpoint ``i`` for ``duration_s`` seconds."""
        times, free = self.times, self.free
        end = times[i] + duration_s
        if end < INFINITY:
            k = bisect.bisect_left(times, end)
            if k == len(times) or times[k] != end:
                times.insert(k, end)
                free.insert(k, free[k - 1])
        else:
            k = len(times)
        for j in range(i, k):
            free[j] -= need


__all__ = [
    "BackfillOptions",
    "FreeProfile",
    "estimate_s",
    "estimated_end_s",
    "estimates_for",
    "shadow",
]
