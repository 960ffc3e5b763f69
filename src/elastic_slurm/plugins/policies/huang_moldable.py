"""Huang et al.'s moldable policies: parallel, serial, improved and auxiliary allocation.

K.-C. Huang, T.-C. Huang, M.-J. Tsai, H.-Y. Chang and Y.-H. Tung, "Moldable Job Scheduling for
HPC as a Service with Application Speedup Model and Execution Time Information" (HPCaaS: users
give no size; the scheduler picks each job's size when it starts, from its speedup model):
section 3's *parallel* and *serial* allocation policies (:func:`parallel_allocation`,
:func:`serial_allocation`, pure functions), section 4.2's *improved* policy (Fig. 12), which
uses execution-time information, and the *auxiliary* approach of their reference [18] that
Figs. 9, 13 and 14 compare with. The policy only starts jobs and never resizes a running one.

How it degrades: a moldable job without a speedup model may get up to ``nodes_max``, its run
time taken as the same at any size. Without any execution time (live, no time limit) the
improved policy counts each running job as one future release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from elastic_slurm.model.decisions import Decision, Start
from elastic_slurm.model.estimates import RuntimeEstimates, ends_ignore_now
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.kit.backfill import estimates_for
from elastic_slurm.plugins.kit.speedup import size_range
from elastic_slurm.plugins.kit.view_memo import ViewMemo
from elastic_slurm.plugins.policy import Policy

ExecutionTime = Literal["runtime", "walltime"]
_EXECUTION_TIMES = ("runtime", "walltime")

SizeCap = Literal["none", "max_speedup", "knee"]
Variant = Literal["parallel", "serial", "improved", "auxiliary"]
_VARIANTS = ("parallel", "serial", "improved", "auxiliary")


def _end_of(job: JobView, estimates: RuntimeEstimates, now: float) -> float | None:
    """When a running job releases its nodes, by ``estimates``."""
    return estimates.end_s(job, now)


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
        it adds "auxiliary" nodes to that size, up to the knee), or ``"request_knee"`` (the
        user's size, but never more than the knee: Fig. 9's "provided that the amount of
        processors allocated does not exceed its knee value" applied to that size too, so a
        job whose user asked for more than its knee starts at its knee).

    Raises
    ------
    ValueError
        For an unknown variant or execution-time source.
    """

    variant: Variant = "improved"
    execution_time: ExecutionTime = "runtime"
    cap_at_max_speedup: bool = True
    auxiliary_min: Literal["request", "one", "request_knee"] = "one"

    def __post_init__(self) -> None:
        if self.variant not in _VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(_VARIANTS)}, got {self.variant!r}")
        if self.auxiliary_min not in ("request", "one", "request_knee"):
            raise ValueError(
                "auxiliary_min must be 'request', 'one' or 'request_knee', got "
                f"{self.auxiliary_min!r}"
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
      from the user's size up (``auxiliary_min="request"``), or from the user's size capped
      at the knee (``auxiliary_min="request_knee"``).

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

    def __init__(self, config: HuangConfig | None = None) -> None:
        super().__init__(config)
        # size_range of the first jobs of the last pending tuple, in order, and how many of
        # them the last decision started (a pure function of the views, kept only to save
        # time on long queues)
        self._queue: tuple[JobView, ...] | None = None
        self._queue_cap: SizeCap | None = None
        self._ranges: list[tuple[int, int]] = []
        self._started = 0
        # running views with their release times (for the estimate providers whose end_s
        # does not depend on now)
        self._ends = ViewMemo(factor=2)
        self._ends_source: RuntimeEstimates | None = None
        self._last_releases: tuple[tuple[JobView, ...], int] | None = None  # running, count

    def _size_ranges(
        self, pending: tuple[JobView, ...], count: int, cap: SizeCap
    ) -> list[tuple[int, int]]:
        """``size_range(job, cap)`` of the first ``count`` pending jobs.

        Kept from the last queue when this one carries on from it: the last one without the
        jobs last started (a prefix), the jobs whose ranges are kept still first (checked in
        one tuple comparison; equal views have equal ranges). Otherwise computed afresh. Only
        the ranges of the queue's head are ever computed: the queue may be long.
        """
        ranges = self._ranges
        last = self._queue
        if pending is not last:
            started = self._started
            covered = len(ranges)
            if (
                last is not None
                and cap == self._queue_cap
                and type(pending) is tuple
                and pending[: covered - started] == last[started:covered]
            ):
                del ranges[:started]
            else:
                ranges.clear()
            self._queue = pending
            self._queue_cap = cap
        self._started = 0
        if len(ranges) < count:
            ranges.extend(size_range(job, cap) for job in pending[len(ranges) : count])
        return ranges[:count]

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
        cap: SizeCap = (
            "knee"
            if variant == "auxiliary"
            else ("max_speedup" if config.cap_at_max_speedup else "none")
        )
        # only a prefix of the queue can start: every job takes at least one node
        head = pending[:free]
        ranges = self._size_ranges(pending, len(head), cap)
        if variant == "auxiliary" and config.auxiliary_min == "request_knee":
            ranges = [
                (min(r, high), high)
                for job, (low, high) in zip(head, ranges, strict=True)
                for r in (max(low, min(job.nodes_requested, job.nodes_max)),)
            ]
        elif variant == "auxiliary" and config.auxiliary_min == "request":
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
        self._started = len(sizes)
        return [Start(job.job_id, size, why) for job, size in zip(head, sizes, strict=False)]

    def _releases(self, snapshot: ClusterSnapshot) -> int:
        """The number of distinct future times at which running jobs release nodes.

        Each running job without a known release time counts as one.
        """
        estimates = estimates_for(snapshot, self.config.execution_time)
        running = snapshot.running()
        now = snapshot.time_s
        if ends_ignore_now(estimates):  # each view's release time kept with it
            if estimates is not self._ends_source:
                self._ends.clear()
                self._ends_source = estimates
                self._last_releases = None
            last = self._last_releases
            if last is not None and last[0] is running:  # the same running jobs: same count
                return last[1]
            cache = self._ends
            ends, get = [], cache.get
            for job in running:
                hit = get(id(job))
                if hit is None:
                    hit = cache.remember((job, _end_of(job, estimates, now)))
                ends.append(hit[1])
            cache.forget_others(running)  # the views of ended jobs
            count = _distinct(ends)
            self._last_releases = (running, count)
            return count
        return _distinct([_end_of(job, estimates, now) for job in running])


def _distinct(ends: list[float | None]) -> int:
    """The number of distinct release times, each unknown one (``None``) counted apart."""
    unknown = ends.count(None)
    return len(set(ends)) - (unknown > 0) + unknown


__all__ = ["HuangConfig", "HuangMoldable", "parallel_allocation", "serial_allocation"]
