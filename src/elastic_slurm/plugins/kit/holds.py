"""Cheap pieces for planners that run every cycle: the jobs split by start, holds from now.

A planner that re-runs its algorithm at every cycle (Klein and Pérez's list scheduling,
CooRMv2's conservative backfilling of pre-allocations) starts each cycle from the same two
things: the jobs started and not started, in submission order, and the nodes the started
jobs hold from now until their estimated ends (a resource evolution profile, Klein and Pérez
2011, section 3.1). Built naively (sorting every job, one :meth:`Occupancy.add` per job),
they cost more than the planning itself on a deep queue; these build the same in one pass.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence

from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.plugins.kit.occupancy import Occupancy
from elastic_slurm.plugins.kit.queue import INFINITY, submit_order

_START = operator.attrgetter("start_time_s")


def split_by_start(snapshot: ClusterSnapshot) -> tuple[Sequence[JobView], Sequence[JobView]]:
    """The snapshot's jobs with a start time and those without, each in submission order.

    The same as splitting ``sorted(snapshot.jobs, key=submit_order)`` on ``start_time_s is
    None``, but for a snapshot made by :meth:`ClusterSnapshot.from_parts` (a simulator's,
    whose jobs are exactly its pending and running ones, each in submission order) it reads
    ``pending()`` and ``running()`` without building or sorting ``jobs``, after checking that
    the pending jobs have no start time and the running ones have one, unless the snapshot's
    maker guarantees it (:meth:`ClusterSnapshot.starts_known`: the simulator does; the check
    costs a pass over the queue whenever it changes, a fifth of a deep-queue run). A tuple
    found so is remembered, the last one of each, and not checked again.

    Returns
    -------
    tuple
        ``(started, not_started)``: two sequences of job views.
    """
    if snapshot.pending_and_running_only():
        pending, running = snapshot.pending(), snapshot.running()
        if snapshot.starts_known() or (
            _all_start(pending, "pending", False) and _all_start(running, "running", True)
        ):
            return running, pending
    order = sorted(snapshot.jobs, key=submit_order)
    return (
        [j for j in order if j.start_time_s is not None],
        [j for j in order if j.start_time_s is None],
    )


_CHECKED: dict[str, Sequence[JobView]] = {}  # split_by_start's last tuples found consistent


def _all_start(jobs: Sequence[JobView], name: str, started: bool) -> bool:
    """Whether every job in ``jobs`` has a start time (``started``) or none has one."""
    if jobs is _CHECKED.get(name):
        return True
    starts = list(map(_START, jobs))
    ok = (None not in starts) if started else (starts.count(None) == len(starts))
    if ok and type(jobs) is tuple:  # immutable, of frozen views: true for good
        _CHECKED[name] = jobs
    return ok


def holds_from(now_s: float, holds: Iterable[tuple[float, int]]) -> Occupancy:
    """An :class:`Occupancy` from ``now_s`` of holds ``[now_s, end_s)`` of ``nodes`` each.

    ``holds`` gives ``(end_s, nodes)`` per hold (``end_s`` may be ``math.inf``). The same
    step function, with the same breakpoints, as one ``Occupancy(now_s).add(now_s, end_s,
    nodes)`` per hold, built in one sort. Holds ending at or before ``now_s`` or of no nodes
    add nothing.

    >>> occ = holds_from(0.0, [(10.0, 3), (5.0, 2), (float("inf"), 1)])
    >>> occ.times, occ.vals
    ([0.0, 5.0, 10.0], [6, 4, 1])
    """
    occ = Occupancy(now_s)
    total = 0
    ends: dict[float, int] = {}
    for end, nodes in holds:
        if end > now_s and nodes:
            total += nodes
            if end < INFINITY:
                ends[end] = ends.get(end, 0) + nodes
    if not total:
        return occ
    times, vals = [now_s], [total]
    for end in sorted(ends):
        total -= ends[end]
        times.append(end)
        vals.append(total)
    occ.times, occ.vals = times, vals
    return occ


def may_start_now(occ: Occupancy, nodes: int, duration_s: float, cap: int, now_s: float) -> bool:
    """False when ``nodes`` more cannot be busy on ``[now_s, now_s + duration_s)`` in ``occ``.

    A request that cannot start now against ``occ`` cannot start now against any occupancy
    that is everywhere at least as busy: a planner that only adds requests may stop placing
    a queue once no request left in it may start now. ``duration_s`` must be positive.
    """
    return nodes <= cap and occ.max_and_last_end(now_s, now_s + duration_s)[0] + nodes <= cap


__all__ = ["holds_from", "may_start_now", "split_by_start"]
