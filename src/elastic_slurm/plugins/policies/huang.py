"""Huang et al.'s moldable policies, and the fair-share baseline they compare against.

K.-C. Huang, T.-C. Huang, M.-J. Tsai, H.-Y. Chang and Y.-H. Tung, "Moldable Job Scheduling for
HPC as a Service with Application Speedup Model and Execution Time Information" (HPCaaS: users
give no size; the scheduler picks each job's size when it starts, from its speedup model).

* :class:`HuangMoldable` (``huang_moldable``): section 3's *parallel* and *serial* allocation
  policies, section 4.2's *improved* policy (Fig. 12), which uses execution-time information,
  and the *auxiliary* approach of their reference [18] that Figs. 9, 13 and 14 compare with.
* :class:`ModifiedFairShare` (``huang_fairshare``): section 4.1's "corrected modified weight
  fraction" fair-share limit of Srinivasan et al. (their reference [9]) in a schedule-time
  moldable scheduler with aggressive (EASY) backfilling: the baseline of Figs. 15-17.

Both only start jobs (``Start`` with the chosen size) and never resize a running one. A
moldable or malleable job's size is chosen within ``[nodes_min, nodes_max]``; rigid and
evolving jobs start at their requested size. Neither policy keeps state between cycles, bar
:class:`ModifiedFairShare`'s cache of what it derives from each job view (a pure function of
the view, see there).

How they degrade: a moldable job without a speedup model may get up to ``nodes_max``, its run
time taken as the same at any size (as ``JobView.walltime_at_s`` does). Without any execution
time (live, no time limit) the improved policy counts each running job as one future release,
and the fair-share one imposes no limit on the job and cannot reserve past it.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass
from typing import ClassVar, Literal

from elastic_slurm.model.decisions import Decision, Start
from elastic_slurm.model.estimates import USER_ESTIMATES, RuntimeEstimates
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.speedup import (
    Amdahl,
    DowneyHigh,
    DowneyLow,
    Linear,
    SpeedupModel,
    best_size,
)
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.policies.fcfs import INFINITY, start_size
from elastic_slurm.plugins.policy import Policy

Variant = Literal["parallel", "serial", "improved", "auxiliary"]
ExecutionTime = Literal["runtime", "walltime"]

_VARIANTS = ("parallel", "serial", "improved", "auxiliary")
_EXECUTION_TIMES = ("runtime", "walltime")
_SIZEABLE = (JobKind.MOLDABLE, JobKind.MALLEABLE)


# ---------------------------------------------------------------------------- speedup helpers
#: Models whose speedup never decreases with the size and whose ``S(n)**2 / n`` has one peak:
#: their best size and knee are found by bisection (a job's sizes are looked up once).
_UNIMODAL = (Linear, Amdahl, DowneyLow, DowneyHigh)
_TOLERANCE = 1.0 + 1e-12


@functools.lru_cache(maxsize=65536)
def _max_useful(model: SpeedupModel, low: int, high: int) -> int:
    if type(model) not in _UNIMODAL:
        return best_size(model, low, high)
    top = model.speedup(high)
    while low < high:  # the smallest size within the tolerance of the top speedup
        mid = (low + high) // 2
        if model.speedup(mid) * _TOLERANCE >= top:
            high = mid
        else:
            low = mid + 1
    return low


def _knee_value(model: SpeedupModel, n: int) -> float:
    return model.speedup(n) ** 2 / n


@functools.lru_cache(maxsize=65536)
def _knee(model: SpeedupModel, low: int, high: int) -> int:
    if type(model) in _UNIMODAL:
        while low < high:  # the first size after which S(n)^2/n stops rising
            mid = (low + high) // 2
            if _knee_value(model, mid + 1) > _knee_value(model, mid) * _TOLERANCE:
                low = mid + 1
            else:
                high = mid
        return low
    best, best_v = low, _knee_value(model, low)
    for n in range(low + 1, high + 1):
        v = _knee_value(model, n)
        if v > best_v * _TOLERANCE:
            best, best_v = n, v
    return best


def knee(model: SpeedupModel, low: int, high: int) -> int:
    """The knee of ``model`` in ``[low, high]``: the size that maximises ``S(n)**2 / n``.

    That is efficiency over run time, ``E(n) / T(n)`` (Eager, Zahorjan and Lazowska, Huang et
    al.'s reference [12]); the smallest such size.

    >>> from elastic_slurm.model.speedup import Amdahl, DowneyLow
    >>> knee(Amdahl(0.9), 1, 128)  # p / (1 - p)
    9
    >>> knee(DowneyLow(8, 0.2), 1, 128)  # A when sigma is small
    8

    Raises
    ------
    ValueError
        Unless ``1 <= low <= high``.
    """
    if low < 1 or high < low:
        raise ValueError(f"need 1 <= low <= high, got {low}..{high}")
    return _knee(model, low, high)


def size_range(job: JobView, cap: Literal["none", "max_speedup", "knee"]) -> tuple[int, int]:
    """The sizes a moldable policy may start ``job`` at: ``(low, high)`` in nodes.

    Rigid and evolving jobs (and moldable ones without a range): their start size, twice.
    Moldable and malleable jobs: ``nodes_min`` to ``nodes_max``, with ``high`` lowered to the
    smallest size of highest speedup (``cap="max_speedup"``: more nodes would only idle) or to
    the knee (``cap="knee"``), when the job has a speedup model.

    >>> from elastic_slurm.model import JobKind, JobState, JobView
    >>> from elastic_slurm.model.speedup import DowneyLow
    >>> job = JobView(1, JobKind.MOLDABLE, JobState.PENDING, (), 8, 1, 128, 0.0,
    ...               speedup=DowneyLow(8, 0.5))
    >>> size_range(job, "none"), size_range(job, "max_speedup")  # 2A - 1
    ((1, 128), (1, 15))
    """
    if job.kind not in _SIZEABLE or job.nodes_min >= job.nodes_max:
        n = start_size(job)
        return n, n
    low, high = max(1, job.nodes_min), job.nodes_max
    if job.speedup is not None:
        if cap == "max_speedup":
            high = _max_useful(job.speedup, low, high)
        elif cap == "knee":
            high = _knee(job.speedup, low, high)
    return low, high


def estimates_for(snapshot: ClusterSnapshot, source: ExecutionTime) -> RuntimeEstimates:
    """The run-time estimates a policy uses for ``source``.

    ``"runtime"``: the snapshot's (the best the host knows: true run times in a simulation);
    ``"walltime"``: the users' time limits.
    """
    return snapshot.estimates if source == "runtime" else USER_ESTIMATES


def _time_at(job: JobView, nodes: int, estimates: RuntimeEstimates) -> float | None:
    """The job's execution time (seconds) on ``nodes``, by ``estimates``."""
    return estimates.runtime_s(job, nodes)


def _end_of(job: JobView, estimates: RuntimeEstimates, now: float) -> float | None:
    """When a running job releases its nodes, by ``estimates``."""
    return estimates.end_s(job, now)


# ---------------------------------------------------------------------------- allocation rules
def parallel_allocation(
    ranges: list[tuple[int, int]], free: int
) -> tuple[list[int], int]:  # list of sizes for a prefix, nodes left
    """Huang et al.'s parallel allocation policy (section 3) of ``free`` nodes.

    ``ranges`` are the queued jobs' ``(low, high)`` in queue order. The prefix of jobs whose
    ``low`` sizes fit together is started (first come, first served: the first job that does
    not fit stops the rest), and the free nodes are shared out among them as evenly as their
    ranges allow (water-filling from ``low``; the remainder of an uneven division goes one node
    each to the earliest jobs). With ``d`` jobs of range ``1..n`` and ``n`` free nodes, a
    multiple of ``d``, each gets ``n / d``, the paper's eq. 6 case; with ``d > n`` the first
    ``n`` get one each.

    Returns
    -------
    tuple
        The sizes of the started prefix, and the nodes left over (only when every started job
        is at its ``high``).

    >>> parallel_allocation([(1, 128)] * 3, 8)
    ([3, 3, 2], 0)
    >>> parallel_allocation([(1, 2), (1, 128), (4, 4)], 10)
    ([2, 4, 4], 0)
    >>> parallel_allocation([(1, 2), (1, 3)], 10)
    ([2, 3], 5)
    """
    sizes: list[int] = []
    left = free
    for low, _ in ranges:
        if low > left:
            break
        sizes.append(low)
        left -= low
    while left > 0:
        active = [i for i, s in enumerate(sizes) if s < ranges[i][1]]
        if not active:
            break
        share = left // len(active)
        if share == 0:
            for i in active[:left]:
                sizes[i] += 1
            left = 0
            break
        for i in active:
            add = min(share, ranges[i][1] - sizes[i])
            sizes[i] += add
            left -= add
    return sizes, left


def serial_allocation(ranges: list[tuple[int, int]], free: int) -> tuple[list[int], int]:
    """Huang et al.'s serial allocation policy (section 3) of ``free`` nodes.

    The first queued job gets as many nodes as possible (``min(high, free)``); nodes it cannot
    use go to the next job the same way, and so on, until a job's ``low`` does not fit (first
    come, first served) or no node is left.

    Returns
    -------
    tuple
        The sizes of the started prefix, and the nodes left over.

    >>> serial_allocation([(1, 128), (1, 128)], 8)
    ([8], 0)
    >>> serial_allocation([(1, 5), (1, 128)], 8)
    ([5, 3], 0)
    """
    sizes: list[int] = []
    left = free
    for low, high in ranges:
        if left == 0 or low > left:
            break
        size = min(high, left)
        sizes.append(size)
        left -= size
    return sizes, left


# ---------------------------------------------------------------------------- Huang et al.
@dataclass(frozen=True)
class HuangConfig:
    """Options of :class:`HuangMoldable`.

    Parameters
    ----------
    variant
        ``"parallel"`` or ``"serial"`` (section 3's two allocation policies; the paper's
        HPCaaS approach, evaluated in Figs. 13-14, uses parallel allocation for the Downey
        and Amdahl models), ``"improved"`` (section 4.2, Fig. 12) or ``"auxiliary"`` (their
        reference [18] as Fig. 9 describes it: serial allocation capped at each job's knee).
    execution_time
        The execution-time information the improved variant uses for running jobs' ends:
        ``"runtime"`` (exact ends, the paper's assumption; the simulator knows them, a live
        cluster does not, and then the time limit is used) or ``"walltime"`` (ends by the
        time limit).
    cap_at_max_speedup
        A job never gets more nodes than the smallest size of its highest speedup (Downey's
        models are flat beyond ``2A - 1`` or ``A + A sigma - sigma``); the nodes go to other
        jobs instead. ``False`` follows the paper's words literally ("as many processors as
        possible"), even when they idle.
    auxiliary_min
        The smallest size the auxiliary variant starts a job at: ``"one"`` (any size in the
        job's range, like the other variants: the paper's one sentence on [18]) or
        ``"request"`` (the size its user asked for, ``nodes_requested``: [18]'s name suggests
        it adds "auxiliary" nodes to that size, up to the knee).

    Raises
    ------
    ValueError
        For an unknown variant or execution-time source.
    """

    variant: Variant = "improved"
    execution_time: ExecutionTime = "runtime"
    cap_at_max_speedup: bool = True
    auxiliary_min: Literal["request", "one"] = "one"

    def __post_init__(self) -> None:
        if self.variant not in _VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(_VARIANTS)}, got {self.variant!r}")
        if self.auxiliary_min not in ("request", "one"):
            raise ValueError(
                f"auxiliary_min must be 'request' or 'one', got {self.auxiliary_min!r}"
            )
        if self.execution_time not in _EXECUTION_TIMES:
            raise ValueError(
                f"execution_time must be 'runtime' or 'walltime', got {self.execution_time!r}"
            )


class HuangMoldable(Policy):
    """Huang et al.'s moldable job scheduling for HPCaaS (sections 3 and 4.2, Fig. 12).

    Every cycle looks at the queue (first come, first served) and the free nodes, and starts
    jobs with sizes chosen by the variant (``Config.variant``); nodes are never held back for
    a later job. With ``cap_at_max_speedup`` (default) a job's size is at most its size of
    highest speedup (:func:`size_range`).

    * **parallel** (section 3, eq. 6): "allow as many jobs to run immediately as possible":
      the free nodes are shared evenly among the queued jobs (:func:`parallel_allocation`).
    * **serial** (section 3, eq. 7): "give the first job in queue as many processors as
      possible" (:func:`serial_allocation`); nodes it cannot use go to the next job.
    * **improved** (section 4.2, Fig. 12). With ``w`` waiting jobs and ``r`` future resource
      releases (the distinct end times of the running jobs, from the execution-time
      information): if ``w > r``, the first ``w - r`` jobs share the free nodes by the
      parallel policy; otherwise the serial policy gives the first job all the free nodes.
      Nodes the chosen jobs cannot use go to the next queued jobs, serially.
    * **auxiliary** (reference [18], as section 3 and Fig. 9 describe it): serial, but a job
      gets no more nodes than its knee (:func:`knee`).

    Where the paper is ambiguous, our choices:

    * Fig. 12 computes ``numRD = waitQueue.Length - runQueue.Length``; the text compares the
      waiting jobs with "the numbers of future resource releases" and subtracts "the number
      of running jobs". We use the number of distinct release times for both (it is the
      running-job count unless jobs end together), so the two rules agree; ``w == r`` takes
      the serial branch, as Fig. 12 does.
    * Fig. 12's serial branch starts only the first job "with all current free processors";
      when it cannot use them all (capped), the rest go to the next jobs, and likewise after
      the parallel branch, so that no node idles while a queued job could use it.
    * The paper's equations assume the free nodes divide evenly; the remainder goes one node
      each to the earliest jobs. With fewer free nodes than jobs, the first jobs get one each.
    * The section 3 approach picks serial allocation for linear speedups and parallel for the
      others (Figs. 5-8); every workload of section 5 is Downey or Amdahl, so "parallel" is
      that approach as evaluated. Choose the variant to match the workload's model.
    * Reference [18] is described in one sentence; ours is that sentence (serial, capped at
      the knee, Eager et al.'s maximum of efficiency over run time), from one node up, or
      from the user's size up (``auxiliary_min="request"``).

    Ignores the trigger.
    """

    name: ClassVar[str] = "huang_moldable"
    summary: ClassVar[str] = (
        "Moldable jobs sized at start from their speedup model: parallel, serial, improved "
        "or auxiliary allocation; no reservation."
    )
    paper: ClassVar[str] = (
        "K.-C. Huang et al., Moldable Job Scheduling for HPC as a Service with Application "
        "Speedup Model and Execution Time Information"
    )
    section: ClassVar[str] = "sections 3 and 4.2, Fig. 12"
    job_kinds: ClassVar[tuple[str, ...]] = ("moldable", "malleable")
    Config: ClassVar[type] = HuangConfig

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Start queued jobs at the sizes the variant chooses."""
        config: HuangConfig = self.config
        free = len(snapshot.idle_nodes())
        if free == 0:
            return []
        pending = snapshot.pending()
        if not pending:
            return []
        variant = config.variant
        cap = (
            "knee"
            if variant == "auxiliary"
            else ("max_speedup" if config.cap_at_max_speedup else "none")
        )
        # only a prefix of the queue can start: every job takes at least one node
        head = pending[:free]
        ranges = [size_range(job, cap) for job in head]
        if variant == "auxiliary" and config.auxiliary_min == "request":
            ranges = [
                (r, max(high, r))
                for job, (low, high) in zip(head, ranges, strict=True)
                for r in (max(low, min(job.nodes_requested, job.nodes_max)),)
            ]
        if variant == "parallel":
            sizes, _ = parallel_allocation(ranges, free)
            why = f"parallel allocation: {free} free node(s) shared by the queue"
        elif variant in ("serial", "auxiliary"):
            sizes, _ = serial_allocation(ranges, free)
            why = "serial allocation: as many nodes as the first job can use" + (
                " (up to its knee)" if variant == "auxiliary" else ""
            )
        else:
            releases = self._releases(snapshot)
            n = len(pending) - releases
            if n > 0:
                sizes, left = parallel_allocation(ranges[:n], free)
                why = (
                    f"improved, parallel branch: {len(pending)} waiting > {releases} future "
                    f"release(s), the first {n} share {free} free node(s)"
                )
                if left and len(sizes) == min(n, len(ranges)):
                    more, _ = serial_allocation(ranges[len(sizes) :], left)
                    sizes += more
            else:
                sizes, _ = serial_allocation(ranges, free)
                why = (
                    f"improved, serial branch: {len(pending)} waiting <= {releases} future "
                    "release(s), the first job gets the free nodes"
                )
        return [Start(job.job_id, size, why) for job, size in zip(head, sizes, strict=False)]

    def _releases(self, snapshot: ClusterSnapshot) -> int:
        """The number of distinct future times at which running jobs release nodes."""
        estimates = estimates_for(snapshot, self.config.execution_time)
        times: set[float] = set()
        unknown = 0
        for job in snapshot.running():
            end = _end_of(job, estimates, snapshot.time_s)
            if end is None:
                unknown += 1
            else:
                times.add(end)
        return len(times) + unknown


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
        info = self._job_info
        total = 0.0
        machine = idle
        for job in running:
            total += info(job).sqrt_weight
            machine += len(job.nodes)
        # the hot loop of long queues, in C: weights by the identity of the view objects (the
        # cache holds the views, so an id cannot be reused while it is cached)
        weights = self._sqrt_weights
        keys = list(map(id, pending))
        try:
            total += sum(map(weights.__getitem__, keys))
        except KeyError:
            for job in pending:
                info(job)
            total += sum(map(weights.__getitem__, keys))

        # future releases: (time, nodes); this cycle's starts are added as they are decided. A
        # job past its estimate ends just after now, never now: its nodes are not idle yet.
        soon = math.nextafter(now, INFINITY)
        profile = sorted(
            (INFINITY if (e := _end_of(job, source, now)) is None else max(e, soon), len(job.nodes))
            for job in running
        )
        decisions: list[Decision] = []
        free = idle
        shadow = -1.0
        extra = 0
        for job in pending:
            ji = info(job)
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
                run = _time_at(job, size, source)
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


__all__ = [
    "FairShareConfig",
    "HuangConfig",
    "HuangMoldable",
    "ModifiedFairShare",
    "knee",
    "parallel_allocation",
    "serial_allocation",
    "size_range",
]
