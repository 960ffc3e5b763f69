"""The modified fair-share moldable scheduler that Huang et al. compare with (Figs. 15-17).

K.-C. Huang et al., "Moldable Job Scheduling for HPC as a Service with Application Speedup
Model and Execution Time Information", section 4.1: the "corrected modified weight fraction"
fair-share limit of Srinivasan et al. (their reference [9]) in a schedule-time moldable
scheduler with aggressive (EASY) backfilling. It only starts jobs, never resizes a running one.

How it degrades: without any execution time (live, no time limit) it imposes no limit on the
job and cannot reserve past it.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from elastic_slurm.model.decisions import Decision, Start
from elastic_slurm.model.estimates import (
    USER_ESTIMATES,
    RuntimeEstimates,
    ends_ignore_now,
)
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.kit.backfill import estimates_for
from elastic_slurm.plugins.kit.queue import INFINITY
from elastic_slurm.plugins.kit.speedup import size_range
from elastic_slurm.plugins.kit.view_memo import ViewMemo
from elastic_slurm.plugins.policy import Policy

ExecutionTime = Literal["runtime", "walltime"]
_EXECUTION_TIMES = ("runtime", "walltime")
_UNSET = object()  # a release time not kept: asked each cycle


def _time_at(job: JobView, nodes: int, estimates: RuntimeEstimates) -> float | None:
    """The job's execution time (seconds) on ``nodes``, by ``estimates``."""
    return estimates.runtime_s(job, nodes)


def _end_of(job: JobView, estimates: RuntimeEstimates, now: float) -> float | None:
    """When a running job releases its nodes, by ``estimates``."""
    return estimates.end_s(job, now)


@dataclass(frozen=True)
class FairShareConfig:
    """Options of :class:`ModifiedFairShare`.

    Parameters
    ----------
    execution_time
        The execution-time information used for weights, sizes and reservations:
        ``"runtime"`` (exact, as in Huang et al.'s simulations; the time limit when the run
        time is unknown) or ``"walltime"`` (the user's time limit).
    cap_at_max_speedup
        Also limit a job to its size of highest speedup (as :class:`HuangMoldable` does).
    backfill
        Let later jobs start around the first waiting job's reservation (EASY). ``False``:
        strict first come, first served.

    Raises
    ------
    ValueError
        For an unknown execution-time source.
    """

    execution_time: ExecutionTime = "runtime"
    cap_at_max_speedup: bool = True
    backfill: bool = True

    def __post_init__(self) -> None:
        if self.execution_time not in _EXECUTION_TIMES:
            raise ValueError(
                f"execution_time must be 'runtime' or 'walltime', got {self.execution_time!r}"
            )


def _sqrt_weight(job: JobView, parallel: bool, estimates: RuntimeEstimates) -> float:
    """``sqrt(T(1))``, the root of the job's weight (seconds**0.5); 0 if sequential or unknown.

    ``T(1)`` is the effective sequential execution time: the run time on one node by the
    speedup model, or (no model: linear) the run time times the requested size.
    """
    if not parallel:
        return 0.0
    if job.speedup is None:
        t = _time_at(job, job.nodes_requested, estimates)
        weight = None if t is None else t * job.nodes_requested
    else:
        weight = _time_at(job, 1, estimates)
    return math.sqrt(weight) if weight else 0.0


class _Info:
    """What :class:`ModifiedFairShare` derives from one pending job view (a pure function of it).

    ``runs`` memoises the execution time (seconds, by the estimates) at each size asked.
    """

    __slots__ = ("high", "low", "parallel", "runs", "shortest_s", "sqrt_weight")

    def __init__(self, job: JobView, estimates: RuntimeEstimates, cap: bool) -> None:
        low, high = size_range(job, "max_speedup")
        self.parallel = high > 1
        if not cap:
            high = size_range(job, "none")[1]
        self.low = low
        self.high = high  # before the fair-share limit
        self.sqrt_weight = _sqrt_weight(job, self.parallel, estimates)
        shortest = _time_at(job, high, estimates)
        self.runs: dict[int, float | None] = {high: shortest}
        # run time at ``high``: no size runs it faster
        self.shortest_s = INFINITY if shortest is None else shortest


class _Queue:
    """The pending jobs last seen, with their infos and weights in queue order.

    Each job also has a sequence number, increasing along the queue, and sits in two sorted
    indexes (by shortest run time, by smallest size) from which backfilling picks the jobs
    that can start before a reservation or beside it without reading the whole queue.
    """

    __slots__ = (
        "by_low",
        "by_seq",
        "by_short",
        "infos",
        "jobs",
        "next_seq",
        "seqs",
        "started",
        "total",
        "weights",
    )

    def __init__(self) -> None:
        self.jobs: tuple[JobView, ...] = ()
        self.infos: list[_Info] = []
        self.weights: list[float] = []  # sqrt weights
        self.seqs: list[int] = []
        self.by_seq: dict[int, tuple[JobView, _Info]] = {}
        self.by_short: list[tuple[float, int, int]] = []  # (shortest_s, seq, low)
        self.by_low: list[tuple[int, int]] = []  # (low, seq)
        self.next_seq = 0
        self.total: float | None = None  # the weights summed, in queue order
        self.started: list[int] = []  # positions in ``jobs`` started by the last decision

    def append(self, job: JobView, ji: _Info) -> None:
        seq = self.next_seq
        self.next_seq = seq + 1
        self.infos.append(ji)
        self.weights.append(ji.sqrt_weight)
        self.seqs.append(seq)
        self.by_seq[seq] = (job, ji)
        short = ji.shortest_s
        # a NaN run time never fails the "ends by the reservation" test: sorted first
        bisect.insort(self.by_short, (-INFINITY if short != short else short, seq, ji.low))
        bisect.insort(self.by_low, (ji.low, seq))

    def remove(self, positions: list[int]) -> None:
        """Drop the jobs at ``positions`` (ascending)."""
        for pos in reversed(positions):
            seq = self.seqs.pop(pos)
            ji = self.infos.pop(pos)
            del self.weights[pos]
            del self.by_seq[seq]
            short = ji.shortest_s
            entry = (-INFINITY if short != short else short, seq, ji.low)
            del self.by_short[bisect.bisect_left(self.by_short, entry)]
            del self.by_low[bisect.bisect_left(self.by_low, (ji.low, seq))]

    def backfill_candidates(
        self, after: int, free: int, extra: int, now: float, shadow: float
    ) -> list[int]:
        """Sequence numbers, in queue order, of jobs after ``after`` that may backfill.

        Those of size ``low <= free`` that either end by the reservation (``now + shortest_s
        <= shadow``) or fit in the ``extra`` nodes it leaves spare: a superset of the jobs
        the backfilling loop accepts, which tests each again with its own nodes left.
        """
        short = self.by_short
        k = bisect.bisect_left(short, True, key=lambda e: now + e[0] > shadow)
        found = [seq for _, seq, low in itertools.islice(short, k) if seq > after and low <= free]
        if extra > 0:
            m = bisect.bisect_right(self.by_low, (min(extra, free), self.next_seq))
            found.extend(seq for _, seq in itertools.islice(self.by_low, m) if seq > after)
            return sorted(set(found))
        found.sort()
        return found


class ModifiedFairShare(Policy):
    """Schedule-time moldable scheduling with the corrected modified fair-share limit.

    Huang et al. section 4.1 (the baseline of Figs. 15-17), after Srinivasan, Krishnamoorthy
    and Sadayappan (Cluster 2003, Huang et al.'s [9]) and Srinivasan et al. (HiPC 2002, [10]).

    * **Weight** of a job: its effective sequential execution time ``T(1)``, from the
      execution-time information and its speedup model (a rigid job without a model: run time
      times size).
    * **Limit.** A job is *sequential* when it cannot run faster on more than one node (its
      size of highest speedup is 1); it gets 1 node and is left out of the sums ("corrected").
      A parallel job ``i`` may get at most
      ``max(1, floor(N * sqrt(w_i) / sum_j sqrt(w_j)))`` nodes, the sum over the parallel jobs
      in the system, running and waiting ("corrected modified weight fraction"), with ``N``
      the nodes in service (idle or allocated). The size is also kept within
      ``[nodes_min, nodes_max]`` and, with ``cap_at_max_speedup``, at most the size of highest
      speedup. A job whose execution time is unknown has no limit.
    * **Size at schedule time** (the "schedule-time" strategy of [10]): the first waiting job
      takes, among sizes up to its limit, the one that completes earliest given when the
      running jobs release their nodes (at each release time, the most nodes then free, up
      to the limit). If that is now, it starts; otherwise it gets a reservation at that time
      and size.
    * **Backfilling** (aggressive, i.e. EASY, as in [9] and [10]): later jobs start now, at
      the largest size up to their limit that fits in the idle nodes and either ends by the
      reservation or fits in the nodes the reservation leaves spare.

    Choices of ours, since Huang et al. give only the limit's formula: the rest of the
    scheduler (earliest completion, EASY, floor with a minimum of 1), reconstructed from
    [9, 10]; "the weight of parallel jobs" read as the sum over parallel jobs only, sequential
    ones excluded.

    What the policy derives from each job view (weight, size range, shortest run time, run
    times at the sizes asked) is kept from cycle to cycle, with the pending jobs' facts in
    queue order and two sorted indexes from which backfilling picks its candidates: pure
    functions of the views, updated as the queue changes (usually: the jobs started last
    cycle gone, arrivals at the end), kept only to save time on long queues. Ignores the
    trigger.
    """

    name: ClassVar[str] = "huang_fairshare"
    summary: ClassVar[str] = (
        "Moldable jobs sized within a fair-share limit, with EASY backfilling (the baseline of "
        "Huang et al.'s Figs. 15-17)."
    )
    paper: ClassVar[str] = (
        "K.-C. Huang et al., Moldable Job Scheduling for HPC as a Service with Application "
        "Speedup Model and Execution Time Information"
    )
    section: ClassVar[str] = "section 4.1 (Srinivasan et al.'s modified fair share)"
    job_kinds: ClassVar[tuple[str, ...]] = ("moldable", "malleable")
    Config: ClassVar[type] = FairShareConfig

    def __init__(self, config: FairShareConfig | None = None) -> None:
        super().__init__(config)
        self._estimates: RuntimeEstimates = USER_ESTIMATES  # what the cached facts used
        # running views: (view, sqrt weight, size, release time or _UNSET)
        self._running = ViewMemo(factor=2)
        self._queue: _Queue | None = None  # the last pending tuple and its facts

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Start the first job at its best size if that is now; backfill around its reservation."""
        idle = len(snapshot.idle_nodes())
        if idle == 0:
            return []
        pending = snapshot.pending()
        if not pending:
            return []
        config: FairShareConfig = self.config
        source = estimates_for(snapshot, config.execution_time)
        now = snapshot.time_s
        running = snapshot.running()
        if source is not self._estimates:
            self._estimates = source
            self._running.clear()
            self._queue = None
        queue = self._queue_of(pending)
        started = queue.started = []  # positions in ``pending`` started this cycle

        # the weights of the running jobs, added one by one in order, then the waiting ones';
        # N, the nodes in service; future releases: (time, nodes), this cycle's starts added
        # as they are decided. A job past its estimate ends just after now, never now: its
        # nodes are not idle yet.
        total = 0.0
        machine = idle
        soon = math.nextafter(now, INFINITY)
        profile = []
        for weight, size, end in self._running_facts(running, now, source):
            total += weight
            machine += size
            profile.append((INFINITY if end is None else max(end, soon), size))
        profile.sort()
        if queue.total is None:
            queue.total = sum(queue.weights)
        total += queue.total

        decisions: list[Decision] = []
        free = idle
        infos = queue.infos
        limit = self._limit
        # the first jobs: each at its earliest completion, until one cannot start now
        pos = 0
        while True:
            job = pending[pos]
            ji = infos[pos]
            low = ji.low
            high = max(low, min(ji.high, limit(ji, total, machine)))
            start, size, spare = self._earliest(job, low, high, free, profile, now, source)
            if start > now:
                break
            decisions.append(Start(job.job_id, size, _why(size, high, "first in line")))
            started.append(pos)
            free -= size
            if free == 0:
                return decisions
            bisect.insort(profile, (now + (_time_at(job, size, source) or INFINITY), size))
            pos += 1
            if pos == len(pending):
                return decisions
        if not config.backfill:
            return decisions
        return self._backfill(queue, pos, free, (start, spare), total, machine, now, decisions)

    def _backfill(
        self,
        queue: _Queue,
        head: int,
        free: int,
        reservation: tuple[float, int],
        total: float,
        machine: int,
        now: float,
        decisions: list[Decision],
    ) -> list[Decision]:
        """Aggressive (EASY) backfilling around the head's reservation ([9, 10] in section 4.1).

        ``head`` is the position in the queue of the first job that cannot start now;
        ``reservation`` is its ``(start time in seconds, nodes it leaves spare then)``;
        ``free`` the idle nodes left; ``total`` and ``machine`` the fair-share limit's sum of
        sqrt weights and ``N``. Later jobs start now, each at the largest size up to its limit
        that fits, if they end by the reservation or fit in the spare nodes (which they use
        up). Their starts are appended to ``decisions`` (returned) and their positions to
        ``queue.started``.
        """
        shadow, extra = reservation
        source = self._estimates
        limit = self._limit
        seqs = queue.seqs
        by_seq = queue.by_seq
        started = queue.started
        for seq in queue.backfill_candidates(seqs[head], free, extra, now, shadow):
            job, ji = by_seq[seq]
            low = ji.low
            if low > free or (extra < low and now + ji.shortest_s > shadow):
                continue
            high = max(low, min(ji.high, limit(ji, total, machine)))
            size = min(high, free)
            runs = ji.runs
            run = runs[size] if size in runs else runs.setdefault(size, _time_at(job, size, source))
            if run is not None and now + run <= shadow:
                how = f"backfilled, ends before the reservation at {shadow:g} s"
            else:
                size = min(size, extra)
                if size < low:
                    continue
                extra -= size
                how = "backfilled on nodes the reservation leaves spare"
            decisions.append(Start(job.job_id, size, _why(size, high, how)))
            started.append(bisect.bisect_left(seqs, seq))
            free -= size
            if free == 0:
                break
        return decisions

    def _queue_of(self, pending: tuple[JobView, ...]) -> _Queue:
        """The facts of the pending jobs, updated from the last queue's where it carries on.

        The usual next queue is the last one without the jobs this policy started, with new
        arrivals at its end: then only those are looked at (the rest is checked in one tuple
        comparison; equal views have equal facts). Any other queue is read afresh, the facts
        of views seen before reused.
        """
        last = self._queue
        if last is not None:
            if pending is last.jobs:
                return last
            kept = last.jobs
            if last.started:
                kept = _without(kept, last.started)
            k = len(kept)
            if type(pending) is tuple and len(pending) >= k and pending[:k] == kept:
                if last.started:
                    last.remove(last.started)
                    last.total = None
                last.started = []
                if len(pending) > k:
                    last.total = None
                    for job in pending[k:]:
                        last.append(job, self._job_info(job))
                last.jobs = pending
                return last
        known = {} if last is None else dict(zip(map(id, last.jobs), last.infos, strict=True))
        queue = self._queue = _Queue()
        for job in pending:
            ji = known.get(id(job))
            queue.append(job, self._job_info(job) if ji is None else ji)
        queue.jobs = pending
        return queue

    def _running_facts(
        self, running: Sequence[JobView], now: float, source: RuntimeEstimates
    ) -> list[tuple[float, int, float | None]]:
        """``(sqrt weight, size, release time)`` of each running job, in order."""
        cache = self._running
        ends_fixed = ends_ignore_now(source)
        facts, get = [], cache.get
        for job in running:
            hit = get(id(job))
            if hit is None:
                parallel = size_range(job, "max_speedup")[1] > 1
                end = source.end_s(job, now) if ends_fixed else _UNSET
                hit = cache.remember(
                    (job, _sqrt_weight(job, parallel, source), len(job.nodes), end)
                )
            end = hit[3]
            facts.append((hit[1], hit[2], _end_of(job, source, now) if end is _UNSET else end))
        cache.forget_others(running)  # the views of ended jobs
        return facts

    def _job_info(self, job: JobView) -> _Info:
        """The facts of a pending job's view."""
        return _Info(job, self._estimates, self.config.cap_at_max_speedup)

    @staticmethod
    def _limit(ji: _Info, total: float, machine: int) -> int:
        """The job's fair-share limit in nodes."""
        if not ji.parallel:
            return 1
        if ji.sqrt_weight <= 0.0 or total <= 0.0:
            return machine  # no execution time known: no limit
        return max(1, math.floor(machine * ji.sqrt_weight / total))

    @staticmethod
    def _earliest(
        job: JobView,
        low: int,
        high: int,
        free: int,
        profile: list[tuple[float, int]],
        now: float,
        source: RuntimeEstimates,
    ) -> tuple[float, int, int]:
        """``(start, size, spare nodes then)`` of the job's earliest completion, over releases.

        ``(inf, low, 0)`` when the releases never free ``low`` nodes by the estimates.
        """
        best: tuple[float, float, int, int] | None = None  # (completion, start, size, spare)
        avail = free
        t = now
        i = 0
        n = len(profile)
        while True:
            if avail >= low:
                size = min(high, avail)
                run = source.runtime_s(job, size)  # _time_at, inline: once per release
                done = t + (INFINITY if run is None else run)
                if best is None or done < best[0]:
                    best = (done, t, size, avail - size)
                if size == high:
                    break  # a later start at the same size cannot complete earlier
            if i >= n:
                break
            t = profile[i][0]
            if t == INFINITY:
                break
            while i < n and profile[i][0] == t:
                avail += profile[i][1]
                i += 1
        if best is None:
            return INFINITY, low, 0
        return best[1], best[2], best[3]


def _without(jobs: tuple[JobView, ...], positions: list[int]) -> tuple[JobView, ...]:
    """``jobs`` without the ones at ``positions`` (ascending)."""
    if len(positions) == 1:
        pos = positions[0]
        return jobs[1:] if pos == 0 else jobs[:pos] + jobs[pos + 1 :]
    parts = []
    last = 0
    for pos in positions:
        parts.append(jobs[last:pos])
        last = pos + 1
    parts.append(jobs[last:])
    return tuple(itertools.chain.from_iterable(parts))


def _why(size: int, limit: int, how: str) -> str:
    return f"fair share ({how}): {size} node(s), limit {limit}"


__all__ = ["FairShareConfig", "ModifiedFairShare"]
