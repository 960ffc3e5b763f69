"""A minimal textbook scheduler: FCFS and EASY backfilling of rigid jobs, plain Python, one heap.

The baseline that ``bench/simulate.py`` measures the simulator against, and that
``tests/sim/test_simcore_textbook.py`` checks the simulator's schedules against: the same
definitions written the shortest way, with nothing but a heap of job ends and a list of
waiting jobs (no snapshots, no decisions, no legality checks, no elastic jobs).

The definitions (the simulator's, :mod:`elastic_slurm.plugins.policies.fcfs` and
``easy_backfill``):

* Time advances from one instant to the next at which a job arrives or ends. At an instant,
  the ends are taken first, then the arrivals, then one scheduling pass. A job that runs for
  0 s ends at the same instant, and a second pass follows.
* **FCFS.** Start waiting jobs in arrival order (submit time, then job id) while they fit in
  the idle nodes; stop at the first that does not.
* **EASY** (Mu'alem and Feitelson, IEEE TPDS 12(6), 2001, section 2). After FCFS, for the first
  blocked job (the head), running jobs are taken by estimated end, ``(end, nodes)`` ascending,
  an end in the past counting as now, until the nodes they free plus the idle ones cover the
  head: that end is the *shadow time*, the nodes left over the *extra* nodes. Then every later
  waiting job that fits in the idle nodes starts if it ends (by its time limit) by the shadow
  time, or if it needs no more than the extra nodes (which it uses up). A job without a time
  limit never ends as far as reservations go.

A job's estimated end is its start plus its time limit (``walltime_s``); it really ends at its
start plus its run time (``runtime_s``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Literal

INF = float("inf")

Job = tuple[int, float, float, int, float]
"""``(job_id, submit_s, runtime_s, nodes, walltime_s)``; ``walltime_s`` is ``inf`` if unknown."""


def schedule(
    jobs: Iterable[Job], nodes: int, policy: Literal["fcfs", "easy"] = "fcfs"
) -> dict[int, float]:
    """Start times of ``jobs`` on ``nodes`` nodes under FCFS or EASY.

    Parameters
    ----------
    jobs
        ``(job_id, submit_s, runtime_s, nodes, walltime_s)`` per job (seconds, nodes).
    nodes
        Machine size, nodes; every job must fit.
    policy
        ``"fcfs"`` or ``"easy"``.

    Returns
    -------
    dict[int, float]
        ``{job_id: start_s}``.

    Raises
    ------
    ValueError
        For an unknown policy or a job wider than the machine.
    """
    if policy not in ("fcfs", "easy"):
        raise ValueError(f"policy must be 'fcfs' or 'easy', got {policy!r}")
    easy = policy == "easy"
    arrivals = sorted(jobs, key=lambda j: (j[1], j[0]))
    for j in arrivals:
        if j[3] > nodes:
            raise ValueError(f"job {j[0]} needs {j[3]} nodes, the machine has {nodes}")
    ends: list[tuple[float, int, int]] = []  # (end_s, job_id, nodes) of running jobs: the heap
    running: dict[int, tuple[float, int]] = {}  # job id -> (estimated end, nodes), for EASY
    queue: list[Job] = []
    start: dict[int, float] = {}
    free = nodes
    i, n = 0, len(arrivals)
    while i < n or ends:
        now = ends[0][0] if ends else INF
        if i < n and arrivals[i][1] < now:
            now = arrivals[i][1]
        while i < n and arrivals[i][1] == now:
            queue.append(arrivals[i])
            i += 1
        while ends and ends[0][0] == now:  # a pass after each batch of ends at this instant
            while ends and ends[0][0] == now:
                _, job_id, held = heapq.heappop(ends)
                free += held
                if easy:
                    del running[job_id]
            free = _pass(queue, running, free, now, start, ends, easy)
        else:
            free = _pass(queue, running, free, now, start, ends, easy)
    return start


def _pass(
    queue: list[Job],
    running: dict[int, tuple[float, int]],
    free: int,
    now: float,
    start: dict[int, float],
    ends: list[tuple[float, int, int]],
    easy: bool,
) -> int:
    """One scheduling pass at ``now``: FCFS, then EASY's backfilling; returns the idle nodes."""
    k = 0
    while k < len(queue) and queue[k][3] <= free:  # FCFS: the fitting prefix
        free = _start(queue[k], now, free, start, ends, running, easy)
        k += 1
    del queue[:k]
    if not easy or len(queue) < 2 or free == 0:
        return free
    need = queue[0][3]  # the blocked head
    shadow, extra = -1.0, 0
    keep = [queue[0]]
    for job in queue[1:]:
        size = job[3]
        if size > free:
            keep.append(job)
            continue
        if shadow < 0.0:  # the head's reservation, once per pass
            shadow, extra = INF, 0
            available = free
            for end, held in sorted((max(e, now), s) for e, s in running.values()):
                available += held
                if available >= need:
                    shadow, extra = end, available - need
                    break
        if now + job[4] > shadow:
            if size > extra:
                keep.append(job)
                continue
            extra -= size
        free = _start(job, now, free, start, ends, running, easy)
    queue[:] = keep
    return free


def _start(
    job: Job,
    now: float,
    free: int,
    start: dict[int, float],
    ends: list[tuple[float, int, int]],
    running: dict[int, tuple[float, int]],
    easy: bool,
) -> int:
    start[job[0]] = now
    heapq.heappush(ends, (now + job[2], job[0], job[3]))
    if easy:
        running[job[0]] = (now + job[4], job[3])
    return free - job[3]


def from_simjobs(jobs: Sequence[object]) -> list[Job]:
    """``Job`` tuples from the simulator's rigid :class:`~elastic_slurm.simulator.SimJob` list."""
    return [
        (
            j.job_id,  # type: ignore[attr-defined]
            j.submit_s,  # type: ignore[attr-defined]
            j.runtime_s,  # type: ignore[attr-defined]
            j.nodes_requested,  # type: ignore[attr-defined]
            INF if j.walltime_s is None else j.walltime_s,  # type: ignore[attr-defined]
        )
        for j in jobs
    ]


__all__ = ["INF", "Job", "from_simjobs", "schedule"]
