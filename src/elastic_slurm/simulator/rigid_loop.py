"""The loop of the compiled engine (:mod:`~elastic_slurm.simulator.kernel`), plain Python.

Numba compiles :func:`schedule` (``kernel._compiled``); run as it is, it gives the same
result, slowly. It mirrors the general loop and the two policies; the semantics are listed in
:mod:`~elastic_slurm.simulator.kernel`.
"""

from __future__ import annotations

import heapq

import numpy as np


def schedule(
    submit: np.ndarray,
    runtime: np.ndarray,
    size: np.ndarray,
    estimate: np.ndarray,
    machine: int,
    easy: bool,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Start times of rigid jobs under FCFS or EASY (the loop that Numba compiles).

    Parameters
    ----------
    submit, runtime, size, estimate
        Per job, in arrival order (by submission time, then job id): submission time and run
        time (seconds), nodes, and the run-time estimate EASY reserves with (seconds; ``inf``
        when there is none). Shapes ``(n,)``.
    machine
        Nodes in the machine; every job fits in it.
    easy
        EASY backfilling; else FCFS.

    Returns
    -------
    tuple
        ``(start, events, cycles)``: start times ``(n,)``; the allocation changes in the
        order the general loop makes them, ``(2n,)``, each a job's index (it starts) or its
        index plus ``n`` (it ends); and the number of scheduling passes.
    """
    n = submit.shape[0]
    start = np.zeros(n)
    events = np.empty(2 * n, np.int64)
    done = 0  # events written
    heap = [(0.0, 0, 0)]  # (end, order started, job) of running jobs; typed by this item
    heap.pop()
    queue = np.empty(n, np.int64)  # waiting jobs in arrival order: queue[head:tail]
    head = 0
    tail = 0
    running = np.empty(n, np.int64)  # running jobs (any order), for EASY's shadow time
    where = np.zeros(n, np.int64)  # a running job's place in ``running``
    count = 0
    free = machine
    arrived = 0
    started = 0
    cycles = 0
    while arrived < n or len(heap) > 0:  # one batch of events and one pass per turn
        # (jobs of 0 s started in a pass end at the same instant: the next turn's batch)
        now = heap[0][0] if len(heap) > 0 else np.inf
        if arrived < n and submit[arrived] < now:
            now = submit[arrived]
        while len(heap) > 0 and heap[0][0] == now:
            job = heapq.heappop(heap)[2]
            free += size[job]
            last = running[count - 1]
            running[where[job]] = last
            where[last] = where[job]
            count -= 1
            events[done] = job + n
            done += 1
        while arrived < n and submit[arrived] == now:
            queue[tail] = arrived
            tail += 1
            arrived += 1
        cycles += 1
        # one pass: FCFS starts the fitting prefix of the queue; the first job that does not
        # fit (the head) is kept, and EASY then backfills behind it, keeping what it passes
        k = head
        blocked = False  # the head was reached
        shadow = -1.0  # the head's reservation: computed once per pass, when needed
        extra = 0
        kept = head
        while k < tail:
            job = queue[k]
            k += 1
            if not blocked:
                if size[job] > free:
                    blocked = True
                    head = k - 1
                    kept = k
                    if not easy or tail - head < 2 or free == 0:
                        break
                    need = size[job]
                    continue
                head = k
            else:
                if free == 0 or size[job] > free:
                    queue[kept] = job
                    kept += 1
                    continue
                if shadow < 0.0:
                    ends = np.empty(count)
                    nodes = np.empty(count, np.int64)
                    for r in range(count):
                        other = running[r]
                        end = start[other] + estimate[other]
                        ends[r] = end if end > now else now
                        nodes[r] = size[other]
                    by_nodes = np.argsort(nodes, kind="mergesort")
                    order = by_nodes[np.argsort(ends[by_nodes], kind="mergesort")]
                    shadow = np.inf
                    extra = 0
                    available = free
                    for r in order:
                        available += nodes[r]
                        if available >= need:
                            shadow = ends[r]
                            extra = available - need
                            break
                if now + estimate[job] > shadow:
                    if size[job] > extra:
                        queue[kept] = job
                        kept += 1
                        continue
                    extra -= size[job]
            start[job] = now
            free -= size[job]
            started += 1
            heapq.heappush(heap, (now + runtime[job], started, job))
            running[count] = job
            where[job] = count
            count += 1
            events[done] = job
            done += 1
        if blocked and k == tail:  # the backfill pass ran to the end: the queue is compacted
            tail = kept
    return start, events, cycles


__all__ = ["schedule"]
