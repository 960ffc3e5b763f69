"""Ghafoor's scheduler for malleable jobs: first come, first served, and pending jobs first.

The policy of S. K. Ghafoor, "Modeling of an Adaptive Parallel System with Malleable
Applications in a Distributed Computing Environment", PhD dissertation, Mississippi State
University, December 2007: section 4.2.4 "Scheduler", as refined for his prototype resource
manager in section 4.3.1. It ignores the trigger: every cycle recomputes the whole
schedule from the snapshot. It does not serve evolving requests (the application's own resize
requests); those are left to another policy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.kit.queue import growable, releasable, start_order, start_range
from elastic_slurm.plugins.policy import Policy


class PendingFirst(Policy):
    """Start pending jobs first come, first served, shrinking malleable jobs to make room.

    After Ghafoor (2007, dissertation; see the module docstring), section 4.2.4
    ("First Come First Serve", "Maximum fit", "Pending Job Priority", "Shrinkage and
    Expansion", the two-step jobs-to-start list) and section 4.3.1 (the prototype's cycle).
    Processors in the thesis are nodes here. Each cycle:

    1. **Maximum fit, FCFS.** Pending jobs are taken in submission order, each at its minimum
       size, while they fit in the idle nodes plus (with ``shrink_for_pending``) the nodes
       that running malleable jobs could release. The scan stops at the first job that does
       not fit.
    2. **Shrinkage.** If the admitted jobs need more than the idle nodes, the shortfall is
       taken from running malleable jobs, the earliest-started first and as much as it can
       give (down to its ``nodes_min``), then the next, and so on: fewer jobs to negotiate with.
    3. **Second step of the start list.** Idle nodes left over go to the admitted jobs, first
       come first served, each up to its maximum.
    4. **Expansion.** Idle nodes still left over (so no pending job can be served, even by
       shrinking) go to running malleable jobs, earliest-started first, each up to its
       ``nodes_max`` (with ``expand_idle``).

    The decisions come in the order they should be carried out: nodes are freed (releases,
    shrinks) before the starts and expansions that use them.

    Which jobs count as what:

    * Pending moldable and malleable jobs start anywhere in ``[nodes_min, nodes_max]``. Rigid
      and evolving pending jobs start at exactly ``nodes_requested`` (evolving jobs choose
      their own size later; they are never shrunk or expanded by this policy).
    * Only running jobs of kind malleable are shrunk or expanded, never one whose
      ``resizing`` is true (its nodes are neither released nor given more).
    * Running jobs are ordered by ``start_time_s`` (then submission time, then id); pending
      jobs by ``submit_time_s``, then id.

    Where the thesis is ambiguous, this is what we chose:

    * **Stop at the first pending job that does not fit.** "Schedule as many jobs as
      possible" is read as giving each job its minimum, not as skipping a job that does not
      fit to start later ones: the thesis orders pending jobs by arrival and, in 4.3.1, gives
      idle nodes away when they "are not enough to fulfill the minimum processor requirement
      of the next pending job in the queue". Skipping would be backfilling with no
      reservation, which can starve wide jobs indefinitely. The one exception: a job whose
      minimum exceeds the number of nodes in the snapshot (idle, allocated or down) can
      never start here, so it is passed over instead of blocking the queue for ever.
    * **Shrinking is decided before the leftover idle nodes are handed out.** Section 4.2.4
      refines the start list with leftover idle nodes first and only then considers
      preemption, which could grow a job that just started above its minimum while the next
      pending job waits for nodes taken from running jobs. We follow 4.3.1 and "Pending Job
      Priority": admit pending jobs at their minimum against idle plus preemptible nodes
      first; leftover idle nodes exist only when no shrink was needed. Without running
      malleable jobs both readings give the same schedule (the thesis' example: ten idle
      nodes, three pending malleable jobs of 4-12 nodes: the first starts on 6, the second
      on 4).
    * **No shrink for a job that still would not fit.** Nodes are released only for the jobs
      admitted in step 1, and only as many as they need beyond the idle nodes.
    * **Evolving jobs** (sections 3.1.1.3 and 3.1.1.4): a release is served at once and its
      nodes count as free in the same cycle; a request for more nodes is served after the
      pending jobs (pending-job priority) and before idle nodes expand malleable jobs, from
      the idle nodes left and then from malleable jobs (earliest-started first), partly if
      not all can be found (the thesis lets the RMS offer what it has).
    * The thesis negotiates every shrink and expansion with the application and may get less;
      here each decision is the proposal, and the controller or simulator reports the outcome
      in the next snapshot, which the next cycle starts from. A shrink under way shows only
      as ``resizing``; the snapshot does not say how many nodes it will free, so a cycle run
      before it completes can shrink another job for the same pending job.

    Parameters
    ----------
    config
        A :class:`PendingFirst.Config`; ``None`` for the defaults.
    """

    name: ClassVar[str] = "pending_first"
    summary: ClassVar[str] = (
        "FCFS that shrinks malleable jobs to start pending ones, gives leftover idle nodes to"
        " them, and serves evolving requests."
    )
    paper: ClassVar[str] = "S. K. Ghafoor, PhD dissertation, Mississippi State University, 2007"
    section: ClassVar[str] = "sections 4.2.4 and 4.3.1"
    job_kinds: ClassVar[tuple[str, ...]] = ("moldable", "malleable", "evolving")
    resizes: ClassVar[bool] = True

    @dataclasses.dataclass(frozen=True)
    class Config:
        """Options of :class:`PendingFirst`.

        Parameters
        ----------
        expand_idle
            Give idle nodes that no pending job can use to running malleable jobs (step 4).
        shrink_for_pending
            Shrink running malleable jobs to start pending jobs that do not fit in the idle
            nodes (steps 1 and 2). When false, pending jobs wait for idle nodes.
        serve_evolving
            Serve running evolving jobs' requests (section 3.1.1.3 and 3.1.1.4: releases at
            once, growth after pending jobs, from idle nodes and then nodes preempted from
            malleable jobs, partly when not all can be found).

        Raises
        ------
        TypeError
            When an option is not a boolean (for example the string ``"yes"``).
        """

        expand_idle: bool = True
        shrink_for_pending: bool = True
        serve_evolving: bool = True

        def __post_init__(self) -> None:
            for field in dataclasses.fields(self):
                value = getattr(self, field.name)
                if not isinstance(value, bool):
                    raise TypeError(f"{field.name} must be true or false, got {value!r}")

    def __init__(self, config: PendingFirst.Config | None = None) -> None:
        super().__init__(config)
        # the last running-jobs tuple seen, and its jobs earliest-started first
        self._by_start: tuple[tuple[JobView, ...], list[JobView]] | None = None

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Return this cycle's shrinks, starts and expansions (see the class docstring).

        Parameters
        ----------
        snapshot
            The cluster now; only node and job counts are used, never node names.
        trigger
            Ignored: every cycle recomputes the schedule from the snapshot.

        Returns
        -------
        list of Decision
            Releases of evolving jobs, shrinks for pending jobs, starts, then shrinks and
            expansions for evolving jobs' growth, then expansions; possibly empty (one shrink
            per job). Every count is at least
            one; the nodes started and expanded never exceed the idle nodes plus the nodes
            released by the shrinks; no job is taken below ``nodes_min`` or above
            ``nodes_max``.
        """
        config: PendingFirst.Config = self.config
        running = snapshot.running()
        last = self._by_start
        if last is not None and last[0] is running:
            by_start = last[1]  # the same (immutable) tuple as last cycle: the same order
        else:
            by_start = sorted(running, key=start_order)
            self._by_start = (running, by_start)
        releases, growers = self._evolving(by_start) if config.serve_evolving else ([], [])
        released = sum(d.count for d in releases)
        decisions = self._schedule(snapshot, by_start, released, growers)
        return [*releases, *decisions]

    @staticmethod
    def _evolving(by_start: Sequence[JobView]) -> tuple[list[Decision], list[JobView]]:
        """Releases of running evolving jobs (served at once), and the jobs asking to grow."""
        releases: list[Decision] = []
        growers = []
        for job in by_start:
            if job.kind is not JobKind.EVOLVING or job.resizing or not job.evolving_request:
                continue
            if job.evolving_request < 0:
                give = min(-job.evolving_request, job.size - max(1, job.nodes_min))
                if give >= 1:
                    releases.append(
                        Shrink(
                            job.job_id,
                            give,
                            f"the application gives back {give} node(s) (Ghafoor 3.1.1.3)",
                        )
                    )
            elif job.size < job.nodes_max:
                growers.append(job)
        return releases, growers

    def _schedule(
        self,
        snapshot: ClusterSnapshot,
        by_start: Sequence[JobView],
        released: int,
        growers: list[JobView],
    ) -> list[Decision]:
        """Steps 1-4 of the class docstring (and 3b for ``growers``).

        ``by_start`` are the running jobs, earliest-started first; ``released`` nodes are
        about to be free (evolving jobs giving nodes back); evolving jobs asking to grow are
        served after the pending jobs, before expansions.
        """
        config: PendingFirst.Config = self.config
        cycle = _Cycle(snapshot, by_start, released, config.shrink_for_pending)
        blocked = cycle.admit(snapshot.pending())  # 1. maximum fit, FCFS, at minimum sizes
        cycle.shrink_for_pending()  # 2. release the shortfall
        cycle.start_admitted()  # 3. leftover idle nodes to the jobs being started
        for job in growers:  # 3b. evolving jobs asking to grow (thesis 3.1.1.4)
            cycle.grow_evolving(job)
        if config.expand_idle:  # 4. idle nodes no pending job can use
            cycle.expand_idle(blocked)
        return cycle.decisions


class _Cycle:
    """One cycle of :meth:`PendingFirst._schedule`: its admitted jobs, nodes and decisions."""

    def __init__(
        self, snapshot: ClusterSnapshot, by_start: Sequence[JobView], released: int, shrink: bool
    ) -> None:
        self.idle = len(snapshot.idle_nodes()) + released
        self.machine = snapshot.node_count
        self.shrink = shrink
        self.resizable = [j for j in by_start if j.kind is JobKind.MALLEABLE and not j.resizing]
        self.admitted: list[tuple[JobView, int, int]] = []
        self.demand = 0
        self.leftover = 0
        self.decisions: list[Decision] = []
        self.taken: dict[int, int] = {}  # nodes each malleable job gives back this cycle

    def admit(self, pending: Sequence[JobView]) -> JobView | None:
        """Step 1: admit pending jobs in order at their minimum; the first that does not fit."""
        preemptible = sum(releasable(j) for j in self.resizable) if self.shrink else 0
        capacity = self.idle + preemptible
        for job in pending:  # already first come, first served
            low, high = start_range(job)
            if low > self.machine:
                continue  # wider than the whole cluster: it can never start, do not wait for it
            if low > capacity:
                return job
            self.admitted.append((job, low, high))
            capacity -= low
            self.demand += low
        return None

    def shrink_for_pending(self) -> None:
        """Step 2: the shortfall from the earliest-started malleable job first, maximum first."""
        shortfall = self.demand - self.idle
        if shortfall <= 0:
            return
        served = _served_by_shrinking(self.admitted, self.idle)
        for job in self.resizable:
            take = min(releasable(job), shortfall)
            if take < 1:
                continue
            self.decisions.append(
                Shrink(
                    job.job_id,
                    take,
                    f"release {take} node(s) for pending job(s) {served}: the "
                    "earliest-started malleable job gives as much as it can first",
                )
            )
            self.taken[job.job_id] = take
            shortfall -= take
            if shortfall == 0:
                break

    def start_admitted(self) -> None:
        """Step 3: start the admitted jobs, leftover idle nodes to them FCFS up to their max."""
        self.leftover = max(0, self.idle - self.demand)
        used = 0
        for job, low, high in self.admitted:
            extra = min(high - low, self.leftover)
            self.leftover -= extra
            used += low
            if extra > 0:
                reason = f"first come, first served: minimum {low} + {extra} leftover idle node(s)"
            elif high > low:
                reason = f"first come, first served: at its minimum of {low} node(s)"
            else:
                reason = f"first come, first served: {low} node(s)"
            if used > self.idle:
                reason += ", using nodes released by shrinking malleable jobs"
            self.decisions.append(Start(job.job_id, low + extra, reason))

    def grow_evolving(self, job: JobView) -> None:
        """Step 3b: from the idle nodes left, then from malleable jobs; partly if need be."""
        want = min(job.evolving_request, job.nodes_max - job.size)
        from_idle = min(want, self.leftover)
        self.leftover -= from_idle
        need = want - from_idle
        for victim in self.resizable if self.shrink else []:
            take = min(releasable(victim) - self.taken.get(victim.job_id, 0), need)
            if take < 1:
                continue
            self._take(
                victim, take, f"release {take} node(s) for evolving job {job.job_id} (3.1.1.4)"
            )
            need -= take
            if need == 0:
                break
        got = want - need
        if got >= 1:
            part = "" if got == job.evolving_request else f" of the {job.evolving_request} asked"
            self.decisions.append(
                Expand(
                    job.job_id,
                    got,
                    f"the application asks for more nodes: {got}{part} (Ghafoor 3.1.1.4)",
                )
            )

    def _take(self, victim: JobView, take: int, why: str) -> None:
        """Shrink ``victim`` by ``take`` more: one shrink per job and cycle, reasons joined."""
        self.taken[victim.job_id] = self.taken.get(victim.job_id, 0) + take
        for i, d in enumerate(self.decisions):
            if isinstance(d, Shrink) and d.job_id == victim.job_id:
                self.decisions[i] = Shrink(victim.job_id, d.count + take, f"{d.reason}; {why}")
                return
        self.decisions.append(Shrink(victim.job_id, take, why))

    def expand_idle(self, blocked: JobView | None) -> None:
        """Step 4: idle nodes left go to running malleable jobs, earliest-started first."""
        if self.leftover <= 0:
            return
        why = (
            f"pending job {blocked.job_id} does not fit"
            if blocked is not None
            else "no other pending job can start"
        )
        for job in self.resizable:
            if self.taken.get(job.job_id):
                continue  # being shrunk for an evolving job this very cycle
            give = min(growable(job), self.leftover)
            if give < 1:
                continue
            self.decisions.append(
                Expand(
                    job.job_id,
                    give,
                    f"{give} idle node(s) unused ({why}): earliest-started malleable "
                    "job first, up to its maximum",
                )
            )
            self.leftover -= give
            if self.leftover == 0:
                break


def _served_by_shrinking(admitted: Sequence[tuple[JobView, int, int]], idle: int) -> str:
    """Name the admitted jobs whose minimum does not fit in the idle nodes (``"7, 8"``)."""
    ids = []
    used = 0
    for job, low, _ in admitted:
        used += low
        if used > idle:
            ids.append(str(job.job_id))
    return ", ".join(ids)
