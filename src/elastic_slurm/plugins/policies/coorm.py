"""CooRMv2's scheduling: non-preemptible requests first, then equi-partitioned preemptible nodes.

Pre-allocations and non-preemptible requests are served first; the preemptible nodes left are
equi-partitioned among malleable applications.

C. Klein, "Cooperative Resource Management for Parallel and Distributed Systems", PhD thesis,
ENS Lyon, 2012: chapter 6 (CooRMv2), sections 6.3.1 (request types: non-preemptible,
preemptible, pre-allocation), 6.4 (how rigid, moldable, malleable and evolving applications use
them), 6.5 (the example RMS: "pre-allocation requests are scheduled using Conservative
Back-Filling. Next, inside these pre-allocations, non-preemptible requests are scheduled. The
remaining resources are used to schedule preemptible requests", with "smart" equi-partitioning)
and appendix A.1 (Algorithm A.3 ``eqSchedule``, Algorithm A.4 the main algorithm).

CooRMv2 sends *views* and lets each application choose its requests; here the applications'
choices are the thesis' own (section 6.4), made for them, and only their node counts matter:

* a rigid job asks for its size, non-preemptibly; a moldable one for its requested size;
* a malleable job asks for ``nodes_min`` non-preemptibly and for up to
  ``nodes_max - nodes_min`` more preemptibly, and takes all its preemptive view offers;
* an evolving job asks for a pre-allocation of ``nodes_max`` (the "sure execution" of section
  6.4) and, inside it, for its current size non-preemptibly; its requests are served at once
  (a release at once, a growth inside the pre-allocation, taking nodes back from malleable
  jobs when needed: "CooRMv2 mandates that preemptible resources be freed immediately").

Nodes pre-allocated but not used are part of the preemptible pool: that is the point of
pre-allocations ("resources which are pre-allocated but unused can be filled by malleable
applications"). The policy needs no evolution profile and degrades to plain conservative
backfilling when no job is malleable or evolving.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.kit import compiled_placement
from elastic_slurm.plugins.kit.holds import holds_from, may_start_now, split_by_start
from elastic_slurm.plugins.kit.kept_plan import KeptPlan
from elastic_slurm.plugins.kit.nodes import within_free
from elastic_slurm.plugins.kit.occupancy import Occupancy
from elastic_slurm.plugins.kit.queue import without_started
from elastic_slurm.plugins.kit.view_memo import ViewMemo
from elastic_slurm.plugins.policy import Policy

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

INFINITY = math.inf
_Profile = Occupancy | compiled_placement.ArrayProfile  # in arrays for the compiled cycle
_Plan = KeptPlan[Occupancy] | compiled_placement.QueuePlan  # the Python path's, the compiled one's


def equipartition(requests: Sequence[int], pool: int, *, smart: bool = True) -> list[int]:
    """Share ``pool`` nodes among applications asking for ``requests`` nodes each.

    Algorithm A.3 of the thesis, for one time interval. ``smart``: each application gets at
    most an equal share; what an application leaves of its share is shared again among the
    others, until the pool or the requests run out. A remainder that does not divide goes
    one node each to the applications first in the list. Not ``smart`` ("strict",
    section 6.6.4): each gets at most ``pool // k`` (``k`` applications asking), and what one
    leaves stays idle.

    Returns
    -------
    list of int
        Nodes granted, in the order of ``requests``; never more than asked, and in total never
        more than ``pool``.

    >>> equipartition([10, 2, 10], 12)
    [5, 2, 5]
    >>> equipartition([10, 2, 10], 12, smart=False)
    [4, 2, 4]
    >>> equipartition([3, 3], 7)
    [3, 3]
    >>> equipartition([5, 5, 5], 4)
    [2, 1, 1]
    """
    grant = [0] * len(requests)
    active = [i for i, r in enumerate(requests) if r > 0]
    pool = max(0, pool)
    if not active:
        return grant
    if not smart:
        share = pool // len(active)
        for i in active:
            grant[i] = min(requests[i], share)
        return grant
    while pool > 0 and active:
        share, extra = divmod(pool, len(active))
        if share == 0:  # fewer nodes than applications: one each, first in the list first
            for i in active[:extra]:
                grant[i] += 1
            break
        given = 0
        still = []
        for i in active:
            take = min(requests[i] - grant[i], share)
            grant[i] += take
            given += take
            if grant[i] < requests[i]:
                still.append(i)
        if given == share * len(active) and extra:
            # everybody took a full share: the remainder goes one node each, in list order
            for i in still[:extra]:
                grant[i] += 1
                given += 1
            pool -= given
            break
        pool -= given
        active = still
    return grant


@functools.lru_cache(maxsize=1024)
def _grants(asks: tuple[int, ...], pool: int, smart: bool) -> tuple[int, ...]:
    """:func:`equipartition` of ``pool`` among ``asks``, remembered.

    A pure function, asked about the same few malleable jobs and pool cycle after cycle.
    """
    return tuple(equipartition(asks, pool, smart=smart))


class EquiPartition(Policy):
    """CooRMv2's RMS with "smart" equi-partitioning (Klein's thesis, sections 6.4-6.5, A.1).

    Each cycle, in submission order (the thesis sorts applications by when they subscribe):

    1. **Non-preemptible view** (Algorithm A.4, lines 1-11). The nodes running jobs hold
       non-preemptibly (rigid and moldable: their size; malleable: ``nodes_min``; evolving:
       their pre-allocation ``nodes_max``), each until its estimated end, are taken from the
       machine. Pending jobs' pre-allocations and non-preemptible requests are then placed by
       conservative backfilling, in order, with their time limits; those placed now start.
    2. **Evolving requests** are served at once: releases, and growth inside the
       pre-allocation (which guarantees the nodes).
    3. **Preemptible nodes** (Algorithm A.3): the machine minus what is used non-preemptibly
       now (pre-allocated but unused nodes count as preemptible) is equi-partitioned among
       the malleable jobs, running or starting now, each asking for ``nodes_max -
       nodes_min``; every malleable job is shrunk or expanded to ``nodes_min`` plus its part.

    Decisions come in the order to carry them out: shrinks (releases, then malleable jobs
    giving back preemptible nodes), then starts, evolving growth and malleable growth.

    Choices, where the thesis leaves room:

    * Algorithm A.3 as printed loops ``while ... r(i) >= 0`` (never ends once every request is
      met) and sets ``v(i) <- max(v_in, v_eq)`` in the uncongested case (every application
      would see the whole pool); we read ``r(i) > 0`` and ``max(v(i), v_eq)``. Views are
      moot here: each malleable job takes what it is offered, so only the grants matter,
      computed by :func:`equipartition` for the present instant (the thesis also partitions
      the future, for views).
    * A job that is resizing is left as it is and its nodes count as non-preemptible for the
      cycle (the snapshot does not say how many it will end with).
    * Step 1 is recomputed every cycle; the policy keeps the last cycle's reservations only to
      skip those that the recomputation provably gives again
      (:mod:`~elastic_slurm.plugins.kit.kept_plan`), and stops placing
      the queue once no job left in it could start now (later reservations change nothing
      now): the decisions are the recomputation's.
    * With ``preallocate=False`` evolving jobs pre-allocate only their current size (the
      thesis' "probable execution"): a growth is then served only when nodes are free
      non-preemptibly (idle or used preemptibly by malleable jobs), and otherwise lapses or
      waits.

    Parameters
    ----------
    config
        An :class:`EquiPartition.Config`; ``None`` for the defaults.
    """

    name: ClassVar[str] = "coorm_equipartition"
    summary: ClassVar[str] = (
        "CooRMv2: pre-allocations and non-preemptible requests by conservative backfilling, "
        "preemptible nodes equi-partitioned among malleable jobs."
    )
    paper: ClassVar[str] = "C. Klein, PhD thesis, ENS Lyon, 2012"
    section: ClassVar[str] = "chapter 6 (6.3-6.5), appendix A.1"
    job_kinds: ClassVar[tuple[str, ...]] = ("moldable", "malleable", "evolving")
    resizes: ClassVar[bool] = True

    @dataclasses.dataclass(frozen=True)
    class Config:
        """Options of :class:`EquiPartition`.

        Parameters
        ----------
        smart
            "Smart" equi-partitioning (what one malleable job leaves of its share goes to
            the others; section 6.5) or "strict" (section 6.6.4's comparison: it stays idle).
        preallocate
            Evolving jobs pre-allocate ``nodes_max`` (sure execution) or only their current
            size (probable execution).

        Raises
        ------
        TypeError
            When an option is not a boolean.
        """

        smart: bool = True
        preallocate: bool = True

        def __post_init__(self) -> None:
            for field in dataclasses.fields(self):
                value = getattr(self, field.name)
                if not isinstance(value, bool):
                    raise TypeError(f"{field.name} must be true or false, got {value!r}")

    def __init__(self, config: EquiPartition.Config | None = None) -> None:
        super().__init__(config)
        self._warned = False  # wide pre-allocations are reported once
        self._plan: _Plan | None = None  # the last cycle's reservations, to build on
        self._requests = _Requests()  # each pending view's request
        self._running: _Running | None = None  # the last cycle's running jobs, worked out

    def prepare(self) -> None:
        """Load the compiled placement kernel (:func:`~.compiled_placement.kernel`) now."""
        compiled_placement.kernel()

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Return this cycle's shrinks, starts and expansions (see the class docstring).

        Ignores the trigger. Every count is at least one; no job goes below ``nodes_min`` or
        above ``nodes_max``; the nodes started and expanded never exceed the idle nodes plus
        the nodes the shrinks give back (:func:`~elastic_slurm.plugins.kit.nodes.within_free`
        enforces it when the snapshot contradicts itself, for example a malleable job that is
        resizing on nodes an evolving job has pre-allocated).
        """
        cycle = _Cycle(self.config, snapshot, self._running)
        self._running = cycle.run
        self._requests.forget(cycle.pending)
        self._plan = cycle.nonpreemptible_view(self._plan, self._requests)
        if not self._warned:
            cycle.find_wide()
        if cycle.wide is not None and not self._warned:
            self._warned = True
            job = cycle.wide
            log.warning(
                "coorm_equipartition: evolving job %d pre-allocates its maximum, %d nodes, "
                "%.0fx the %d it asks for (sure execution, thesis 6.4): such pre-allocations "
                "keep nodes from other jobs for whole runs; option preallocate=false plans "
                "evolving jobs at their current size (probable execution); said once per run",
                job.job_id,
                job.nodes_max,
                job.nodes_max / max(1, job.nodes_requested),
                job.nodes_requested,
            )
        releases, growth = cycle.evolving_requests()
        shrinks, starts, grows = cycle.equipartition(releases)
        batch = [*releases, *shrinks, *starts, *growth, *grows]
        return within_free(batch, len(snapshot.idle_nodes()))


class _Cycle:
    """One cycle's state: the jobs, the non-preemptible occupancy, this cycle's sizes.

    ``last``: the last cycle's :class:`_Running` (see :meth:`_Running.of`: used again for
    the same tuple of running views, its memo of their facts otherwise).
    """

    def __init__(
        self,
        config: EquiPartition.Config,
        snapshot: ClusterSnapshot,
        last: _Running | None = None,
    ) -> None:
        self.config = config
        self.snapshot = snapshot
        self.now = snapshot.time_s
        self.running, self.pending = split_by_start(snapshot)
        self.run = _Running.of(self.running, config, last)
        self.cap = len(snapshot.idle_nodes()) + self.run.held  # as machine_nodes counts them
        self.occ: _Profile = Occupancy(self.now)
        self.starts: list[JobView] = []
        self.grown = 0  # nodes step 2 gives evolving jobs, less those they release
        self.wide: JobView | None = None  # a pending pre-allocation over twice its request

    def nonpreemptible_view(
        self,
        plan: _Plan | None = None,
        requests: _Requests | None = None,
    ) -> _Plan:
        """Step 1: running jobs' non-preemptible holds, then CBF of the queue's requests.

        Once no job left in the queue could start now (no node left non-preemptibly now, or
        :func:`~elastic_slurm.plugins.kit.holds.may_start_now` false for each), only a job
        of zero duration could still start now, and later reservations do not change what is
        used now: the scan stops placing the others (the schedule now is the same, and long
        queues cost little). ``plan`` (the last cycle's) lets the reservations it still holds
        be kept instead of recomputed (see :mod:`~elastic_slurm.plugins.kit.kept_plan`): a
        :class:`KeptPlan` here, or with the compiled kernel a
        :class:`~elastic_slurm.plugins.kit.compiled_placement.QueuePlan`, which does all this
        from the holds on in one call (:meth:`_compiled_view`). ``requests`` caches each
        pending view's request (by ``id``; see :func:`_np_request`). Returns this cycle's plan.
        """
        now, cap, config = self.now, self.cap, self.config
        just_after = math.nextafter(now, INFINITY)  # a job past its estimate ends "soon"
        ends, nodes = self.run.ends, self.run.holds
        if self.run.soonest < just_after:
            ends = [max(end, just_after) for end in ends]
        pending = self.pending
        requests = _Requests() if requests is None else requests
        kernel = compiled_placement.kernel()
        if kernel is not None:  # the same, in one compiled call
            return self._compiled_view(kernel, plan, requests, ends, nodes)
        if not isinstance(plan, KeptPlan):
            plan = None
        held = holds_from(now, zip(ends, nodes, strict=True))

        def ask(k: int) -> tuple[JobView, int, float]:
            return requests.of(pending[k], config)

        # last cycle's plan, when this cycle follows it (the queue compared once, here, with
        # views equal field by field as good as the same: follows is asked about plan.keep)
        if (
            plan is not None
            and _begins_with(pending, plan.keep)
            and plan.follows(now, cap, held, plan.keep)
        ):
            occ, places = plan.final.after(now), plan.places
            due = min(places, default=INFINITY) == now  # reservations that are now start
            started = [k for k, t in enumerate(places) if t == now] if due else []
        else:
            occ, places, started = held.after(now), [], []
        free = cap - occ.value_at(now)  # nodes free non-preemptibly now
        k = len(places)
        if free > 0 and k < len(pending):
            k = self._scan(pending, requests, occ, places, started, k, free)
        for j in requests.zero_durations(pending, k, config, False):
            if ask(j)[1] <= cap:  # zero durations fit anywhere, now included
                started.append(j)
        self.occ = occ
        self.starts = [pending[k] for k in started]
        for k in started:  # what the next cycle's holds should be, if all goes as planned
            _, need, duration = ask(k)
            held.add(now, now + duration, need)
        queue = tuple(without_started(pending, places, started))
        requests.started(pending, queue, started)
        return KeptPlan.of(now, cap, held, occ, queue, places)

    def _compiled_view(
        self,
        kernel: compiled_placement.Kernel,
        plan: _Plan | None,
        requests: _Requests,
        ends: list[float],
        nodes: list[int],
    ) -> compiled_placement.QueuePlan:
        """:meth:`nonpreemptible_view` from the holds on, in one compiled call.

        :class:`~elastic_slurm.plugins.kit.compiled_placement.QueuePlan` (the kept plan in
        arrays) on the queue's request columns (:meth:`_Requests.columns`): the same starts
        and plans as the Python path. ``ends``, ``nodes``: the running jobs' holds.
        """
        pending = self.pending
        if not isinstance(plan, compiled_placement.QueuePlan):
            plan = compiled_placement.QueuePlan()
        keep = plan.queue is not None and _begins_with(pending, plan.queue)
        need, duration = requests.columns(pending, self.config)
        now, cap = self.now, self.cap
        started, self.occ, _ = plan.cycle(kernel, ends, nodes, now, cap, need, duration, keep)
        self.starts = [pending[k] for k in started]
        plan.queue = queue = tuple(without_started(pending, [], started))
        requests.started(pending, queue, started)
        return plan

    def _scan(
        self,
        pending: Sequence[JobView],
        requests: _Requests,
        occ: Occupancy,
        places: list[float],
        started: list[int],
        first: int,
        free: int,
    ) -> int:
        """Place ``pending[first:]`` in order (conservative backfilling) while any may start now.

        Appends to ``places`` and ``started``; adds to ``occ``. ``free``: nodes free
        non-preemptibly now. Returns the position where the scan stopped.
        """
        now, cap, config = self.now, self.cap, self.config
        asks: list[tuple[JobView, int, float] | None] = [None] * len(pending)  # from the cache
        last = len(pending) - 1  # the last job with a duration that may still start now
        last_ok = False  # known: pending[last] may start now against occ
        for k in range(first, len(pending)):
            _, need, duration = asks[k] or requests.of(pending[k], config)
            if need > cap:
                places.append(INFINITY)
                continue  # can never start here: reserves nothing
            if duration > 0.0:
                while last >= k:
                    ask = asks[last]
                    if ask is None:
                        ask = asks[last] = requests.of(pending[last], config)
                    if ask[1] <= free and (last_ok or _may_start(occ, ask, cap, now)):
                        break
                    last -= 1
                    last_ok = False
                if last < k:
                    return k  # nobody from here on can start now but at zero duration
                last_ok = True
            begin = occ.earliest(need, duration, cap, now)
            places.append(begin)
            if begin == INFINITY:
                continue
            occ.add(begin, begin + duration, need)
            if last_ok:
                last_ok = begin >= now + asks[last][2]  # type: ignore[index]
            if begin <= now:
                started.append(k)
                free = cap - occ.value_at(now)
                if free <= 0:
                    return k + 1
        return len(pending)

    def find_wide(self) -> None:
        """The first pending evolving job whose pre-allocation is over twice its request."""
        for job in self.pending:
            if job.kind is JobKind.EVOLVING:
                if _np_need(job, self.config) > 2 * max(1, job.nodes_requested):
                    self.wide = job
                    return

    def evolving_requests(self) -> tuple[list[Shrink], list[Decision]]:
        """Step 2: releases at once; growth inside the pre-allocation (or on free nodes)."""
        config = self.config
        evolving = self.run.evolving
        releases: list[Shrink] = []
        growth: list[Decision] = []
        if not evolving:
            return releases, growth
        np_free = self.cap - self.occ.value_at(self.now)  # for growth without a pre-allocation
        for job in evolving:
            if job.evolving_request < 0:
                give = min(-job.evolving_request, job.size - max(1, job.nodes_min))
                if give >= 1:
                    releases.append(Shrink(job.job_id, give, "the application releases nodes"))
                    self.grown -= give
                    np_free += give if not config.preallocate else 0
        why = "inside its pre-allocation" if config.preallocate else "nodes are free"
        for job in evolving:
            if job.evolving_request > 0:
                want = min(job.evolving_request, job.nodes_max - job.size)
                if not config.preallocate:
                    want = min(want, np_free)
                if want >= 1:
                    np_free -= want
                    growth.append(Expand(job.job_id, want, f"the application grows ({why})"))
                    self.grown += want
        return releases, growth

    def equipartition(
        self, releases: list[Shrink]
    ) -> tuple[list[Decision], list[Decision], list[Decision]]:
        """Step 3: share the preemptible nodes; the shrinks, starts and expansions it takes."""
        malleable = list(self.run.malleable)  # the jobs sized by equi-partitioning
        used = self.run.used + self.grown  # nodes used non-preemptibly now
        for job in self.starts:
            if job.kind is JobKind.MALLEABLE:
                malleable.append(job)
                used += max(1, job.nodes_min)
            else:
                used += _np_start(job)
        asks = tuple([max(0, j.nodes_max - max(1, j.nodes_min)) for j in malleable])
        grants = _grants(asks, self.cap - used, self.config.smart)
        target = {j.job_id: max(1, j.nodes_min) + g for j, g in zip(malleable, grants, strict=True)}
        kind = "smart" if self.config.smart else "strict"
        # the nodes this cycle can hand out: idle ones and those the shrinks give back
        avail = len(self.snapshot.idle_nodes()) + sum(d.count for d in releases)
        shrinks: list[Decision] = []
        grows: list[Decision] = []
        for job in malleable:
            if job.start_time_s is None:
                continue
            goal, size = target[job.job_id], job.size
            if size > goal:
                avail += size - goal
                shrinks.append(
                    Shrink(job.job_id, size - goal, f"{kind} equi-partition: {goal} node(s)")
                )
            elif size < goal:
                grows.append(
                    Expand(job.job_id, goal - size, f"{kind} equi-partition: {goal} node(s)")
                )
        starts: list[Decision] = []
        for job in self.starts:
            if job.kind is JobKind.MALLEABLE:
                size, low = target[job.job_id], max(1, job.nodes_min)
                why = f"minimum {low} + {size - low} preemptible ({kind})"
            else:
                size = _np_start(job)
                why = "its non-preemptible request fits now (conservative backfilling)"
            if size > avail:  # only when the snapshot contradicts itself: wait
                continue
            avail -= size
            starts.append(Start(job.job_id, size, why))
        return shrinks, starts, grows


class _Running:
    """What step 1 and step 3 read of the running jobs, worked out once per view.

    The simulator hands the policy the same tuple of running views until one of them
    changes, and the same view for a job until the job changes; views are immutable. So
    :meth:`of` gives the last cycle's again for the same tuple (the same object), and
    otherwise reads each view's facts from a :class:`ViewMemo` shared from cycle to cycle
    (:func:`_running_facts`), working out only those of views not seen yet.

    Attributes
    ----------
    jobs
        The running views, in submission order.
    ends, holds
        Per job, its estimated end (seconds, ``inf`` when unknown; not yet moved past now,
        see :meth:`_Cycle.nonpreemptible_view`) and the nodes it holds non-preemptibly
        (:func:`_np_hold`).
    soonest
        The least of ``ends`` (``inf`` for none).
    held
        Nodes the jobs hold (:func:`~elastic_slurm.plugins.kit.nodes.machine_nodes` counts them).
    malleable, evolving
        The malleable jobs and the evolving jobs not resizing, in order.
    used
        Nodes used non-preemptibly: each malleable job not resizing its ``nodes_min`` (at
        least one), the others their size.
    memo
        Each view's :func:`_running_facts`, by ``id``.
    """

    __slots__ = (
        "ends",
        "evolving",
        "held",
        "holds",
        "jobs",
        "malleable",
        "memo",
        "soonest",
        "used",
    )

    def __init__(
        self, jobs: Sequence[JobView], config: EquiPartition.Config, memo: ViewMemo
    ) -> None:
        self.jobs, self.memo = jobs, memo
        memo.forget_others(jobs)
        get = memo.get
        remember = memo.remember
        self.ends: list[float] = []
        self.holds: list[int] = []
        self.malleable: list[JobView] = []
        self.evolving: list[JobView] = []
        held = used = 0
        for job in jobs:
            _, end, hold, nodes, np_used, role = get(id(job)) or remember(
                _running_facts(job, config)
            )
            self.ends.append(end)
            self.holds.append(hold)
            held += nodes
            used += np_used
            if role is _MALLEABLE:
                self.malleable.append(job)
            elif role is _EVOLVING:
                self.evolving.append(job)
        self.held, self.used = held, used
        self.soonest = min(self.ends, default=INFINITY)

    @classmethod
    def of(
        cls, jobs: Sequence[JobView], config: EquiPartition.Config, last: _Running | None
    ) -> _Running:
        """``last`` when it was worked out for ``jobs`` itself (a tuple), else a new one."""
        if last is None:
            return cls(jobs, config, ViewMemo(factor=4, slack=256))
        if last.jobs is jobs and type(jobs) is tuple:
            return last
        return cls(jobs, config, last.memo)


_MALLEABLE, _EVOLVING, _OTHER = "malleable", "evolving", "other"  # roles in steps 2 and 3


def _running_facts(
    job: JobView, config: EquiPartition.Config
) -> tuple[JobView, float, int, int, int, str]:
    """``(job, end_s, hold, nodes, used, role)`` for a running job's view.

    Its estimated end (seconds, ``inf`` when unknown), its :func:`_np_hold`, the nodes it
    holds, those it uses non-preemptibly (a malleable job not resizing: its ``nodes_min``,
    at least one; another job: its size) and its role: ``_MALLEABLE`` (sized by step 3),
    ``_EVOLVING`` (its requests served by step 2: an evolving job not resizing) or
    ``_OTHER``.
    """
    end = INFINITY if job.estimated_end_s is None else job.estimated_end_s
    nodes = len(job.nodes)
    if job.resizing:
        return job, end, _np_hold(job, config), nodes, job.size, _OTHER
    if job.kind is JobKind.MALLEABLE:
        return job, end, _np_hold(job, config), nodes, max(1, job.nodes_min), _MALLEABLE
    role = _EVOLVING if job.kind is JobKind.EVOLVING else _OTHER
    return job, end, _np_hold(job, config), nodes, job.size, role


# ---------------------------------------------------------------------------- requests
def _np_hold(job: JobView, config: EquiPartition.Config) -> int:
    """Nodes a running job holds non-preemptibly (its pre-allocation, for evolving jobs)."""
    if job.resizing:
        return job.size
    if job.kind is JobKind.MALLEABLE:
        return max(1, job.nodes_min)
    if job.kind is JobKind.EVOLVING and config.preallocate:
        return max(job.size, job.nodes_max)
    return job.size


def _np_need(job: JobView, config: EquiPartition.Config) -> int:
    """Nodes a pending job's pre-allocation or non-preemptible request asks for."""
    if job.kind is JobKind.MALLEABLE:
        return max(1, job.nodes_min)
    if job.kind is JobKind.EVOLVING and config.preallocate:
        return max(job.nodes_requested, job.nodes_max)
    return _np_start(job)


@dataclasses.dataclass
class _Requests:
    """Each pending view's :func:`_np_request`, cached per view (:class:`ViewMemo`).

    ``zero`` tells whether a request of zero duration was ever seen (such a request starts
    whenever it fits now): a view equal to one seen (:func:`_begins_with`) may be in the
    queue without going through :meth:`of`, so the hint never goes back to false.
    ``queue`` is the last queue :meth:`columns` was asked for and ``need`` and ``duration``
    (buffers, its rows first) its columns, kept across cycles: the next cycle's queue is
    mostly this one without its starts and with arrivals at the end (:meth:`started`), whose
    columns are this one's with the starts' rows taken out and the arrivals' rows added.
    """

    by_id: ViewMemo = dataclasses.field(default_factory=lambda: ViewMemo(factor=4, slack=1024))
    zero: bool = False
    queue: Sequence[JobView] = ()
    need: np.ndarray | None = None
    duration: np.ndarray | None = None

    def of(self, job: JobView, config: EquiPartition.Config) -> tuple[JobView, int, float]:
        """``(job, nodes, duration_s)``: the job's request, from the cache or computed."""
        hit = self.by_id.get(id(job))
        if hit is None:
            hit = self.by_id.remember((job, *_np_request(job, config)))
            if hit[2] == 0.0:
                self.zero = True
        return hit

    def columns(
        self, pending: Sequence[JobView], config: EquiPartition.Config
    ) -> tuple[np.ndarray, np.ndarray]:
        """The requests of ``pending``: nodes (int64) and ``duration_s`` (float64), ``(q,)``.

        Views of the first ``len(pending)`` rows of :attr:`need` and :attr:`duration`,
        buffers with room for arrivals (do not write to them; valid until the next call).
        """
        n = len(self.queue)
        if pending is self.queue and self.need is not None and self.duration is not None:
            return self.need[:n], self.duration[:n]
        import numpy as np

        if (
            self.need is not None
            and self.duration is not None
            and _begins_with(pending, self.queue)
        ):
            rows = [self.of(job, config) for job in pending[n:]]  # the arrivals only
        else:
            n, rows = 0, [self.of(job, config) for job in pending]
        m = n + len(rows)
        if self.need is None or self.duration is None or m > len(self.need):
            need, duration = np.empty(2 * m + 256, np.int64), np.empty(2 * m + 256)
            if n and self.need is not None and self.duration is not None:
                need[:n], duration[:n] = self.need[:n], self.duration[:n]
            self.need, self.duration = need, duration
        if rows:
            self.need[n:m] = [r[1] for r in rows]
            self.duration[n:m] = [r[2] for r in rows]
        self.queue = pending
        return self.need[:m], self.duration[:m]

    def started(
        self, pending: Sequence[JobView], queue: Sequence[JobView], started: Sequence[int]
    ) -> None:
        """The cycle's ``pending`` leaves ``queue``, its positions ``started`` removed.

        The rows after each start move up, in place (``started`` ascending).
        """
        if self.queue is not pending or self.need is None or self.duration is None:
            return
        need, duration, m = self.need, self.duration, len(pending)
        for i, k in enumerate(started):  # rows k + 1 .. next start - 1 move up i + 1
            stop = started[i + 1] if i + 1 < len(started) else m
            need[k - i : stop - i - 1] = need[k + 1 : stop]
            duration[k - i : stop - i - 1] = duration[k + 1 : stop]
        self.queue = queue

    def zero_durations(
        self,
        pending: Sequence[JobView],
        first: int,
        config: EquiPartition.Config,
        compiled: bool,
    ) -> list[int]:
        """The positions from ``first`` on of the requests of zero duration in ``pending``.

        From the :meth:`columns` when ``compiled``, else from the cache (the requests of
        ``pending[first:]`` computed first where missing).
        """
        if compiled:
            duration = self.columns(pending, config)[1][first:]  # (notes zero durations)
            if not self.zero:
                return []
            return [first + j for j in (duration == 0.0).nonzero()[0].tolist()]
        if first < len(pending) and not self.by_id.keys() >= set(map(id, pending[first:])):
            for j in range(first, len(pending)):
                self.of(pending[j], config)
        if not self.zero:
            return []
        by_id = self.by_id
        return [j for j in range(first, len(pending)) if by_id[id(pending[j])][2] == 0.0]

    def forget(self, pending: Sequence[JobView]) -> None:
        """Drop the views no longer pending, once there are many of them."""
        self.by_id.forget_others(pending)


def _np_request(job: JobView, config: EquiPartition.Config) -> tuple[int, float]:
    """A pending job's request for conservative backfilling: ``(nodes, duration_s)``.

    Its :func:`_np_need`, for its time limit at its :func:`_np_start` size (``inf`` when it
    has none; never negative).
    """
    duration = job.walltime_at_s(_np_start(job))
    return _np_need(job, config), (INFINITY if duration is None else max(duration, 0.0))


def _begins_with(queue: Sequence[JobView], head: Sequence[JobView]) -> bool:
    """Whether ``queue``'s first ``len(head)`` views are ``head``'s, in order.

    Compared as tuples, in C: a view is equal to itself at once, and views equal field by
    field (a view made again, unchanged) ask for the same request (:func:`_np_request`
    reads only fields), so that the places and request columns kept for ``head`` hold for
    ``queue``'s first views just as for the same objects. One pass, about a nanosecond a
    view (``all(map(operator.is_, ...))`` costs about thirty).

    >>> a, b = object(), object()
    >>> _begins_with((a, b, a), (a, b)), _begins_with((a,), (a, b)), _begins_with([b, a], (a,))
    (True, False, False)
    """
    n = len(head)
    return len(queue) >= n and tuple(queue[:n]) == tuple(head)


def _may_start(occ: Occupancy, ask: tuple[JobView, int, float], cap: int, now: float) -> bool:
    """Whether a request ``(view, nodes, duration_s)`` of some duration may start now.

    False for a zero duration: such a request fits anywhere, and the scan starts it without
    placing anything.
    """
    _, need, duration = ask
    return duration > 0.0 and may_start_now(occ, need, duration, cap, now)


def _np_start(job: JobView) -> int:
    """The size a non-malleable pending job starts at (malleable: its minimum)."""
    if job.kind is JobKind.MALLEABLE:
        return max(1, job.nodes_min)
    if job.kind is JobKind.MOLDABLE:
        return min(max(job.nodes_requested, job.nodes_min, 1), max(job.nodes_max, 1))
    return job.nodes_requested
