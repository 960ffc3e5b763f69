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
import operator
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

    The schedule depends on the snapshot alone. What an instance keeps from one cycle to the
    next (what each running job's view offers, worked out once per view since views are
    immutable; the first pending job's minimum) only saves recomputing it: a simulator's
    cycles mostly differ by one job.

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
        # The last running-jobs tuple seen and what its jobs offer a cycle; the entries of
        # the views seen lately by id(view) (see _entry), the views kept alive in _kept so
        # that no key can be another object's id. (Not a kit ViewMemo, whose entries hold
        # their views: _see filters the entries themselves in C, once per running tuple.)
        self._seen: tuple[JobView, ...] | None = None
        self._jobs = _Running([], [])
        self._entries: dict[int, _Entry] = {}
        self._kept: list[JobView] = []
        # the first pending job seen last and its minimum size (start_range), kept while
        # it is first in the queue: usually it does not fit, and no other job is looked at
        self._first: tuple[JobView | None, int] = (None, 0)

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
        if running is not self._seen:  # views and tuples are immutable: else the same jobs
            self._see(running)
        jobs = self._jobs
        idle = len(snapshot.idle_nodes()) + jobs.released  # nodes free this cycle
        capacity = idle + jobs.preemptible if config.shrink_for_pending else idle
        if capacity < 1:
            return []  # nothing can start, grow or be released (a release would be idle)
        # 1. maximum fit, FCFS, at minimum sizes
        pending = snapshot.pending()
        machine = snapshot.node_count
        first = self._first
        if pending and pending[0] is not first[0]:
            first = self._first = (pending[0], start_range(pending[0])[0])
        if pending and capacity < first[1] <= machine:
            # it could start on this cluster but does not fit now: _admit would stop at it
            admitted, demand, blocked = (), 0, first[0]
        else:
            admitted, demand, blocked = _admit(pending, capacity, machine)
        if not admitted and not jobs.growers:
            if idle < 1 or not config.expand_idle or not jobs.room:
                return list(jobs.releases)  # steps 2 to 4 would decide nothing
        cycle = _Cycle(jobs, idle, config.shrink_for_pending)
        if demand > idle:
            cycle.shrink_for_pending(admitted, demand)  # 2. release the shortfall
        cycle.start_admitted(admitted, demand)  # 3. leftover idle nodes to the jobs started
        for job in jobs.growers:  # 3b. evolving jobs asking to grow (thesis 3.1.1.4)
            cycle.grow_evolving(job)
        if config.expand_idle and cycle.leftover > 0:  # 4. idle nodes no pending job can use
            cycle.expand_idle(blocked)
        return [*jobs.releases, *cycle.decisions]

    def _see(self, running: tuple[JobView, ...]) -> None:
        """Take in a new running-jobs tuple: its views' entries, and what its jobs offer.

        What a job contributes depends on its view alone, and views are immutable: it is
        worked out once per view (:func:`_entry`) and looked up by the view's identity in
        the next cycles. From one tuple to the next usually one view is new (a job started,
        ended or was resized); when the entries that matter are the same objects as last
        time, :class:`_Running` stays as it was.
        """
        known = self._entries
        entries = list(map(known.get, map(id, running)))
        if None in entries:
            serve_evolving = self.config.serve_evolving
            for i in range(entries.index(None), len(entries)):  # new views come last, mostly
                if entries[i] is None:
                    view = running[i]
                    entries[i] = known[id(view)] = _entry(view, serve_evolving)
                    self._kept.append(view)
            if len(known) > 4 * len(running) + 64:  # forget the views no longer running
                self._entries = dict(zip(map(id, running), entries, strict=True))
                self._kept = list(running)
        self._seen = running
        mattering = list(filter(None, entries))  # in submission order
        if mattering != self._jobs.mattering:  # else the same entries, in the same order
            self._jobs = _Running(sorted(mattering), mattering)


class _Running:
    """What a cycle needs of the running jobs that matter, from their entries (:func:`_entry`).

    Only two kinds of running job matter to :class:`PendingFirst`: malleable jobs not
    ``resizing`` (shrunk for pending and evolving jobs, expanded on idle nodes) and, with
    ``serve_evolving``, evolving jobs not ``resizing`` with a request. Both are taken
    earliest-started first (:func:`~elastic_slurm.plugins.kit.queue.start_order`); the other
    running jobs are left out before sorting, which keeps the order of those that matter.
    ``by_start`` are their entries in that order, ``mattering`` the same in any order (kept
    to tell whether the next tuple's are the same).
    """

    __slots__ = (
        "growers",
        "mattering",
        "preemptible",
        "releases",
        "released",
        "resizable",
        "room",
    )

    def __init__(self, by_start: list[_Entry], mattering: list[_Entry]) -> None:
        self.mattering = mattering
        # malleable jobs: (job, nodes it can give back, nodes it can take), earliest first
        self.resizable: list[tuple[JobView, int, int]] = []
        self.releases: list[Shrink] = []  # evolving jobs giving nodes back (3.1.1.3)
        self.growers: list[JobView] = []  # evolving jobs asking for more nodes (3.1.1.4)
        lists = {_RESIZE: self.resizable, _RELEASE: self.releases, _GROW: self.growers}
        for _, _, role, what in by_start:
            lists[role].append(what)
        self.preemptible = sum(map(_GIVE, self.resizable))  # nodes shrinks can free
        self.room = any(map(_ROOM, self.resizable))  # can idle nodes expand a job?
        self.released = sum(d.count for d in self.releases) if self.releases else 0  # free now


_RESIZE = "resize"  # a malleable job: shrunk for pending and evolving jobs, expanded on idle
_RELEASE = "release"  # an evolving job giving nodes back
_GROW = "grow"  # an evolving job asking for more nodes
_GIVE = operator.itemgetter(1)
_ROOM = operator.itemgetter(2)

_Entry = (
    tuple[()]
    | tuple[tuple[float, float, int], int, str, tuple[JobView, int, int] | Shrink | JobView]
)
"""What one running job's view contributes to a cycle: ``()`` nothing, otherwise
``(start_order(job), id(job), role, what)`` by role: :data:`_RESIZE`, a malleable job:
``(job, nodes it can give back, nodes it can take)``; :data:`_RELEASE`, an evolving job
giving nodes back: its :class:`Shrink`; :data:`_GROW`, an evolving job asking for more: the
job. Entries sort by start order (unique: it ends with the job id); two entries of the same
job compare by ``id(job)``, never by the views' fields."""

_MALLEABLE = JobKind.MALLEABLE
_EVOLVING = JobKind.EVOLVING


def _entry(job: JobView, serve_evolving: bool) -> _Entry:
    """What ``job`` (running) contributes to a cycle (see :data:`_Entry`)."""
    kind = job.kind
    if job.resizing or (kind is not _MALLEABLE and kind is not _EVOLVING):
        return ()
    if kind is _MALLEABLE:
        return (start_order(job), id(job), _RESIZE, (job, releasable(job), growable(job)))
    request = job.evolving_request
    if not serve_evolving or not request:
        return ()
    if request < 0:
        give = min(-request, job.size - max(1, job.nodes_min))
        if give < 1:
            return ()
        why = f"the application gives back {give} node(s) (Ghafoor 3.1.1.3)"
        return (start_order(job), id(job), _RELEASE, Shrink(job.job_id, give, why))
    if job.size < job.nodes_max:
        return (start_order(job), id(job), _GROW, job)
    return ()


def _admit(
    pending: Sequence[JobView], capacity: int, machine: int
) -> tuple[Sequence[tuple[JobView, int, int]], int, JobView | None]:
    """Step 1: admit pending jobs in order at their minimum; the first that does not fit.

    ``capacity`` is the idle nodes plus those shrinks could free, ``machine`` every node of
    the snapshot. Returns the admitted jobs as ``(job, minimum, maximum)``, the sum of their
    minimums, and the job that blocked the queue (``None`` when none did).
    """
    admitted = []
    demand = 0
    for job in pending:  # already first come, first served
        low, high = start_range(job)
        if low > machine:
            continue  # wider than the whole cluster: it can never start, do not wait for it
        if low > capacity - demand:
            return admitted, demand, job
        admitted.append((job, low, high))
        demand += low
    return admitted, demand, None


class _Cycle:
    """Steps 2 to 4 of one cycle of :class:`PendingFirst`: its nodes and decisions."""

    def __init__(self, jobs: _Running, idle: int, shrink: bool) -> None:
        self.idle = idle
        self.shrink = shrink
        self.resizable = jobs.resizable
        self.leftover = 0
        self.decisions: list[Decision] = []
        self.taken: dict[int, int] = {}  # nodes each malleable job gives back this cycle

    def shrink_for_pending(self, admitted: Sequence[tuple[JobView, int, int]], demand: int) -> None:
        """Step 2: the shortfall from the earliest-started malleable job first, maximum first.

        ``admitted`` are the jobs admitted in step 1, ``demand`` the sum of their minimums.
        """
        shortfall = demand - self.idle
        if shortfall <= 0:
            return
        served = _served_by_shrinking(admitted, self.idle)
        for job, give, _ in self.resizable:
            take = min(give, shortfall)
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

    def start_admitted(self, admitted: Sequence[tuple[JobView, int, int]], demand: int) -> None:
        """Step 3: start the admitted jobs, leftover idle nodes to them FCFS up to their max."""
        idle = self.idle
        leftover = max(0, idle - demand)
        used = 0
        decisions = self.decisions
        for job, low, high in admitted:
            extra = min(high - low, leftover)
            leftover -= extra
            used += low
            if extra > 0:
                reason = f"first come, first served: minimum {low} + {extra} leftover idle node(s)"
            elif high > low:
                reason = f"first come, first served: at its minimum of {low} node(s)"
            else:
                reason = f"first come, first served: {low} node(s)"
            if used > idle:
                reason += ", using nodes released by shrinking malleable jobs"
            decisions.append(Start(job.job_id, low + extra, reason))
        self.leftover = leftover

    def grow_evolving(self, job: JobView) -> None:
        """Step 3b: from the idle nodes left, then from malleable jobs; partly if need be."""
        want = min(job.evolving_request, job.nodes_max - job.size)
        from_idle = min(want, self.leftover)
        self.leftover -= from_idle
        need = want - from_idle
        for victim, give, _ in self.resizable if self.shrink else []:
            take = min(give - self.taken.get(victim.job_id, 0), need)
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
        for job, _, room in self.resizable:
            if self.taken.get(job.job_id):
                continue  # being shrunk for an evolving job this very cycle
            give = min(room, self.leftover)
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
