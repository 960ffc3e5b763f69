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
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from elastic_slurm.model.decisions import Decision, Start
from elastic_slurm.model.estimates import USER_ESTIMATES, RuntimeEstimates
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.kit.backfill import estimates_for
from elastic_slurm.plugins.kit.queue import INFINITY
from elastic_slurm.plugins.kit.speedup import size_range
from elastic_slurm.plugins.policy import Policy

ExecutionTime = Literal["runtime", "walltime"]
_EXECUTION_TIMES = ("runtime", "walltime")


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


@dataclass(frozen=True)
class _Info:
    """What :class:`ModifiedFairShare` derives from one job view (a pure function of it)."""

    view: JobView
    sqrt_weight: float  # sqrt(T(1)); 0 for a sequential job or an unknown time
    parallel: bool
    low: int
    high: int  # before the fair-share limit
    shortest_s: float  # run time at ``high``: no size runs it faster


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

    What the policy derives from each job view (weight, size range, shortest run time) is
    cached for as long as snapshots hand it the same view object (the simulator keeps a
    job's view until the job changes): a pure function of the view, kept only to save time
    on long queues. Ignores the trigger.
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
        self._info: dict[int, _Info] = {}  # by id(view); each _Info holds its view
        self._sqrt_weights: dict[int, float] = {}  # the same keys
        self._estimates: RuntimeEstimates = USER_ESTIMATES  # what the cached infos used
        # the last pending tuple, with the sum of its jobs' weights and their infos (a
        # snapshot's tuple is immutable; the simulator hands the same one until the queue
        # changes)
        self._queue: tuple[tuple[JobView, ...], float, list[_Info]] | None = None

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
        if (
            source is not self._estimates
            or len(self._info) > 2 * (len(pending) + len(running)) + 1024
        ):
            self._estimates = source
            self._info.clear()
            self._sqrt_weights.clear()
            self._queue = None
        info = self._job_info
        # weights by the identity of the view objects (the cache holds the views, so an id
        # cannot be reused while it is cached); added one by one, in order
        weights = self._sqrt_weights
        total = 0.0
        machine = idle
        for job in running:
            weight = weights.get(id(job))
            total += info(job).sqrt_weight if weight is None else weight
            machine += len(job.nodes)
        queue = self._queue
        if queue is None or queue[0] is not pending or type(pending) is not tuple:
            queue = self._queue = (pending, *self._queue_facts(pending))
        total += queue[1]

        # future releases: (time, nodes); this cycle's starts are added as they are decided. A
        # job past its estimate ends just after now, never now: its nodes are not idle yet.
        soon = math.nextafter(now, INFINITY)
        end_of = source.end_s  # _end_of, without a call more per running job
        profile = sorted(
            (INFINITY if (e := end_of(job, now)) is None else max(e, soon), len(job.nodes))
            for job in running
        )
        decisions: list[Decision] = []
        free = idle
        shadow = -1.0
        extra = 0
        for job, ji in zip(pending, queue[2], strict=True):
            low = ji.low
            if shadow >= 0.0:  # backfilling: cheap tests first, the queue can be long
                if low > free or (extra < low and now + ji.shortest_s > shadow):
                    continue
            high = max(low, min(ji.high, self._limit(ji, total, machine)))
            if shadow < 0.0:  # the first job not started: its earliest completion
                start, size, spare = self._earliest(job, low, high, free, profile, now, source)
                if start <= now:
                    decisions.append(Start(job.job_id, size, _why(size, high, "first in line")))
                    free -= size
                    bisect.insort(profile, (now + (_time_at(job, size, source) or INFINITY), size))
                elif not config.backfill:
                    break
                else:
                    shadow, extra = start, spare
                if free == 0:
                    break
                continue
            size = min(high, free)
            run = _time_at(job, size, source)
            if run is not None and now + run <= shadow:
                how = f"backfilled, ends before the reservation at {shadow:g} s"
            else:
                size = min(size, extra)
                if size < low:
                    continue
                extra -= size
                how = "backfilled on nodes the reservation leaves spare"
            decisions.append(Start(job.job_id, size, _why(size, high, how)))
            free -= size
            if free == 0:
                break
        return decisions

    def _queue_facts(self, pending: Sequence[JobView]) -> tuple[float, list[_Info]]:
        """The pending jobs' weights summed, and their infos in order (computed if missing)."""
        weights = self._sqrt_weights
        # the hot loop of long queues, in C
        keys = list(map(id, pending))
        try:
            total = sum(map(weights.__getitem__, keys))
        except KeyError:  # new arrivals (the queue's end, usually): cache what is missing
            for job in pending:
                if id(job) not in weights:
                    self._job_info(job)
            total = sum(map(weights.__getitem__, keys))
        return total, list(map(self._info.__getitem__, keys))

    def _job_info(self, job: JobView) -> _Info:
        hit = self._info.get(id(job))
        if hit is not None:
            return hit
        source = self._estimates
        low, high = size_range(job, "max_speedup")
        parallel = high > 1
        if not self.config.cap_at_max_speedup:
            high = size_range(job, "none")[1]
        weight = None
        if parallel:
            if job.speedup is None:  # no model: linear, T(1) = run time x size
                t = _time_at(job, job.nodes_requested, source)
                weight = None if t is None else t * job.nodes_requested
            else:
                weight = _time_at(job, 1, source)
        shortest = _time_at(job, high, source)
        hit = _Info(
            view=job,
            sqrt_weight=math.sqrt(weight) if weight else 0.0,
            parallel=parallel,
            low=low,
            high=high,
            shortest_s=INFINITY if shortest is None else shortest,
        )
        self._info[id(job)] = hit
        self._sqrt_weights[id(job)] = hit.sqrt_weight
        return hit

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


def _why(size: int, limit: int, how: str) -> str:
    return f"fair share ({how}): {size} node(s), limit {limit}"


__all__ = ["FairShareConfig", "ModifiedFairShare"]
