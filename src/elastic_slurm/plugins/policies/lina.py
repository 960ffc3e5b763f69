"""Lina, Ghafoor and Hines' scheduler for rigid, malleable and evolving jobs.

D. H. Lina, S. Ghafoor and T. Hines, "Scheduling of Elastic Message Passing Applications on
HPC Systems", section 4: the main algorithm (Algorithm 1) with its steps
SatisfyEvolvingRequest (Algorithm 2), InitialAllocation (Algorithm 3) and SchedulePendingJob
(Algorithm 4); the three algorithms that select the malleable jobs to shrink, Default
(Algorithm 5), Application (Algorithm 6) and System (Algorithm 7), all built on
AllocateResource (Algorithm 8); and the six candidate (victim) priorities of section 4.
Parameters are those of section 5.2 (``t`` = 5 s, ``u`` = 80 %).

The policy keeps no state between cycles (only a cache of the last pending queue's smallest
sizes) and ignores the trigger: each cycle is computed from the snapshot alone, so the live
controller and the simulator get the same decisions from the same snapshot. It degrades without
the simulator's knowledge: live, where a job's real run time is unknown, remaining times come
from the time limits (``JobView.estimated_end_s``) and a job without one never counts as ending
soon.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import random
from collections.abc import Iterator, Sequence
from itertools import chain, compress
from typing import ClassVar

from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.estimates import USER_ESTIMATES
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.policy import Policy

INFINITY = math.inf

SHRINK_SELECTIONS = ("default", "application", "system")
PRIORITIES = ("random", "gain", "shrinkable", "expansions", "cost", "remaining")
ESTIMATES = ("runtime", "walltime")
INITIAL_ALLOCATIONS = ("easy", "first_fit")


class LinaElastic(Policy):
    """Lina et al.'s main algorithm (their Algorithm 1) and its shrink-selection variants.

    Each cycle, on a working copy of the system state (idle nodes ``p_c``; nodes that shrinks
    decided in this cycle give back count as idle):

    1. **SatisfyEvolvingRequest (Algorithm 2).** Running evolving jobs' requests come first,
       in start order. A request to give nodes back is granted at once (``Shrink``). A request
       for more is met from the idle nodes; if they are too few, the shortfall is asked of the
       shrink selection (below); if that fails too, the request is refused (it lapses; with
       ``partial_evolving`` the idle nodes are granted instead).
    2. **InitialAllocation (Algorithm 3).** Pending jobs start at their requested size ``P``
       by first come, first served with EASY backfilling (the title of Algorithm 1): in order
       while they fit; the first that does not fit gets a reservation (the shadow time at
       which running jobs' predicted ends free enough nodes); a later job that fits now starts
       if it ends by the shadow time or uses only the nodes the reservation leaves spare.
    3. **SchedulePendingJob (Algorithm 4)**, when jobs are still pending and malleable jobs
       run: each pending job in order needs ``p_r`` nodes (``P``; for malleable and moldable
       jobs their minimum); the idle nodes are used first and the shortfall is asked of the
       shrink selection. A job whose shortfall can be met starts at ``p_r``; one whose
       shortfall cannot is passed over (the next one is tried).
    4. **ExpandRunningMalleableJobs.** Idle nodes left over go to running malleable jobs, the
       longest remaining run time first ("to reduce average turnaround time"), each up to
       its maximum (and never past the size at which its speedup model peaks).

    Decisions come in the order they are to be carried out: every shrink (evolving releases
    and victims, one ``Shrink`` per job) first, then the evolving expansions, the starts and
    the malleable expansions that use the nodes they give back. The simulator (and the
    controller) apply the "agreements" of Algorithm 1, lines 9-14, with their resize cost.

    **Shrink selection** (``SelectShrinkableJob``, asked for a shortfall of ``n`` nodes):

    * ``default`` (Algorithm 5): running malleable jobs by priority; each gives as many nodes
      as it can (down to its minimum) until ``n`` are found (Algorithm 8).
    * ``application`` (Algorithm 6): nothing is shrunk while any running job will end within
      ``ending_window_s`` (``t``); otherwise as ``default``, but only jobs less than
      ``done_fraction_max`` (``x``) done give nodes.
    * ``system`` (Algorithm 7): nothing is shrunk while the utilisation (nodes allocated over
      nodes in the snapshot, as the cycle has left it so far) exceeds
      ``utilization_threshold`` (``u``); otherwise as ``default``.

    **Priorities** (which malleable job gives first; ties: earliest start, then job id):
    ``random`` (a permutation drawn per cycle from ``seed`` and the snapshot time), ``gain``
    (most nodes gained by past resizes, ``JobView.gain_nodes``), ``shrinkable`` (most nodes
    above its minimum, then the largest), ``expansions`` (most expansions), ``cost`` (lowest
    cost of the shrink it would make, ``JobView.resize_cost``), ``remaining`` (shortest
    remaining run time).

    Where the paper is ambiguous or wrong as printed, this is what we chose:

    * **Algorithm 3** tests ``job.p_r != p_c``; we read ``<=`` (a job starts when it fits).
      As printed it is a first fit without reservation, while Algorithm 1's title says "FCFS
      & easy backfilling"; we follow the title (``initial_allocation="easy"``) and offer the
      printed loop as ``"first_fit"``.
    * **Algorithms 5-7 end with "return empty list"** whatever the loop found, and Algorithm
      8's early return leaves only itself. We read them as all or nothing: the victims are
      returned when together they cover the shortfall, and nothing is shrunk otherwise (a
      pending job is never half-served, and no job is shrunk for a job that cannot start).
    * **The shortfall.** ``p_r`` in Algorithm 8 is taken as the nodes still needed beyond the
      idle ones (Algorithm 2 says "if enough idle resources not found"): idle nodes are used
      first, running jobs are shrunk only for the rest.
    * **Algorithm 4 for a job that needs no shrinking.** Printed, it starts a job only when
      ``J_sm`` is not empty. A malleable job whose minimum fits in the idle nodes (Algorithm 3
      refused it only because ``P`` did not) starts on the idle nodes, up to ``P``; a rigid or
      evolving job that fits but was held back by the EASY reservation stays held back.
    * **Algorithm 6's x** is not given in section 5.2; we use 90 % (``done_fraction_max``),
      and a job's done fraction is the elapsed share of its predicted run time since it
      started. Section 5.2 sets "``t`` in Algorithm 6 and 5" and "``u`` in Algorithm 5"; ``t``
      and ``u`` appear only in Algorithms 6 and 7, which we take to be meant.
    * **Algorithm 7, text against pseudo-code.** The text says System does not shrink when
      the utilisation is above ``u``; the pseudo-code refuses only when, in addition, a job
      ends within ``t`` seconds. We follow the text, which matches the reported results
      (System has the highest utilisation and the worst turnaround); the printed rule is
      ``system_requires_ending_job=True``. Beware: read from the text, System never shrinks
      once expansions have filled the machine above ``u``, so a queued job that does not fit
      waits for running jobs to end (the reproduction shows its slowdown can exceed the rigid
      baseline's); as printed, System behaves almost like Default.
    * **"About to end in the next t sec"** counts any running job (rigid or elastic) whose
      predicted end is after now and at most ``t`` seconds away (a job past its estimate is
      not counted, or one overrunning job would block shrinking for ever).
    * **Evolving requests** that cannot be met in full are refused (all or nothing, as for
      pending jobs); ``partial_evolving`` grants the idle nodes instead. Only malleable jobs
      are ever shrunk by the scheduler; evolving jobs change size only at their own request.
    * **ExpandRunningMalleableJobs** has no pseudo-code; the sentence above is what we built.
      A job shrunk in this cycle is not expanded in it.
    * **Run times.** Lina et al.'s simulator knows jobs' run times; with ``estimates =
      "runtime"`` we use the snapshot's estimates (``ClusterSnapshot.estimates``: the true
      run times when the simulator supplies them, the time limits live); ``"walltime"``
      always uses the time limits (then a rigid workload is scheduled exactly as by
      ``easy_backfill``).

    Parameters
    ----------
    config
        A :class:`LinaElastic.Config`; ``None`` for the defaults.
    """

    name: ClassVar[str] = "lina_elastic"
    summary: ClassVar[str] = (
        "EASY for the initial allocation, then shrinking malleable jobs for the queue "
        "(Default, Application or System selection) and expanding them into idle nodes."
    )
    paper: ClassVar[str] = "Lina, Ghafoor and Hines"
    section: ClassVar[str] = "sections 4-5, Algorithms 1-7"
    job_kinds: ClassVar[tuple[str, ...]] = ("moldable", "malleable", "evolving")
    resizes: ClassVar[bool] = True

    @dataclasses.dataclass(frozen=True)
    class Config:
        """Options of :class:`LinaElastic` (section 5.2 values by default).

        Parameters
        ----------
        shrink_selection
            ``"default"`` (Algorithm 5), ``"application"`` (6) or ``"system"`` (7).
        priority
            Victim priority: ``"random"``, ``"gain"``, ``"shrinkable"``, ``"expansions"``,
            ``"cost"`` or ``"remaining"`` (section 4).
        seed
            Seed of the ``random`` priority (each cycle draws from it and the snapshot time).
        ending_window_s
            ``t``, seconds: a job ending within it blocks shrinking (Algorithms 6 and 7).
        utilization_threshold
            ``u`` as a fraction in ``[0, 1]`` (Algorithm 7).
        done_fraction_max
            ``x`` as a fraction in ``[0, 1]``: jobs at least this far done are not shrunk
            (Algorithm 6; not given by the paper).
        system_requires_ending_job
            Algorithm 7 as printed: above ``u``, refuse only when a job ends within ``t``.
        estimates
            ``"runtime"``: the snapshot's estimates (``ClusterSnapshot.estimates``: the
            simulator supplies true run times, as the paper's simulator knows them; time
            limits live); ``"walltime"``: time limits only.
        initial_allocation
            ``"easy"`` (EASY backfilling) or ``"first_fit"`` (Algorithm 3 as printed).
        partial_evolving
            Grant an evolving job the idle nodes when its request cannot be met in full.
        expand_idle
            Give idle nodes left over to running malleable jobs (Algorithm 1, line 7).

        Raises
        ------
        ValueError
            For an unknown choice or a value out of range (the message lists the choices).
        """

        shrink_selection: str = "default"
        priority: str = "gain"
        seed: int = 0
        ending_window_s: float = 5.0
        utilization_threshold: float = 0.8
        done_fraction_max: float = 0.9
        system_requires_ending_job: bool = False
        estimates: str = "runtime"
        initial_allocation: str = "easy"
        partial_evolving: bool = False
        expand_idle: bool = True

        def __post_init__(self) -> None:
            for name, choices in (
                ("shrink_selection", SHRINK_SELECTIONS),
                ("priority", PRIORITIES),
                ("estimates", ESTIMATES),
                ("initial_allocation", INITIAL_ALLOCATIONS),
            ):
                if getattr(self, name) not in choices:
                    raise ValueError(
                        f"{name} must be one of {', '.join(choices)}; got {getattr(self, name)!r}"
                    )
            for name in ("utilization_threshold", "done_fraction_max"):
                value = getattr(self, name)
                if not 0.0 <= value <= 1.0:
                    raise ValueError(f"{name} is a fraction in [0, 1], got {value!r}")
            if not self.ending_window_s >= 0.0:
                raise ValueError(f"ending_window_s must be >= 0, got {self.ending_window_s!r}")
            if type(self.seed) is not int:
                raise ValueError(f"seed must be an integer, got {self.seed!r}")

    def __init__(self, config: LinaElastic.Config | None = None) -> None:
        super().__init__(config)
        self._minimum = _QueueMinimum()
        self._shrinkable = _Shrinkable()

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Return this cycle's shrinks, starts and expansions (see the class docstring).

        Parameters
        ----------
        snapshot
            The cluster now; node counts, job ranges and times are used, never node names.
        trigger
            Ignored: every cycle recomputes the schedule from the snapshot.

        Returns
        -------
        list of Decision
            Shrinks first (one per job), then expansions of evolving jobs, starts and
            expansions of malleable jobs; possibly empty. The nodes started and expanded never
            exceed the idle nodes plus those the shrinks give back; no job leaves its range.
        """
        if not snapshot.idle_nodes() and self._nothing_can_change(snapshot):
            return []
        return _Cycle(self.config, snapshot, self._minimum).run()

    def _nothing_can_change(self, snapshot: ClusterSnapshot) -> bool:
        """With no idle node: True when the cycle would surely decide nothing (a shortcut).

        Most cycles of a busy machine are such: without an idle node, Algorithm 1 can only
        serve an evolving request (Algorithm 2) or shrink malleable jobs for a pending one
        (Algorithm 4); Algorithms 3 and 1, line 7 need idle nodes. Neither happens when no
        running evolving job asks for a change, and either the System selection refuses
        (Algorithm 7 at full utilisation) or the nodes every running malleable job could give
        (down to its minimum, its count of nodes) are fewer than any pending job's smallest
        size: an upper bound of what Algorithms 5-8 could find. False means "maybe": the full
        cycle decides.
        """
        config = self.config
        shrinkable = self._shrinkable.of(snapshot.running())
        if shrinkable is None:
            return False  # Algorithm 2 may act on an evolving request
        if shrinkable == 0:
            return True
        if (
            config.shrink_selection == "system"
            and 1.0 > config.utilization_threshold
            and not config.system_requires_ending_job
        ):
            # Algorithm 7 refuses to shrink: every node is in use (some are, as shrinkable
            # nodes are), a utilisation of 1
            return True
        pending = snapshot.pending()
        minimum = self._minimum
        return shrinkable < min(minimum.of(pending)) or shrinkable < minimum.low(pending)


class _Cycle:
    """The working system state of one cycle (internal)."""

    def __init__(
        self, config: LinaElastic.Config, snapshot: ClusterSnapshot, minimum: _QueueMinimum
    ) -> None:
        self.config = config
        self.snapshot = snapshot
        self.minimum = minimum
        self.now = snapshot.time_s
        self.estimates = snapshot.estimates if config.estimates == "runtime" else USER_ESTIMATES
        self.free = len(snapshot.idle_nodes())
        running = snapshot.running()
        self.running = running
        self._total: int | None = None
        self.delta: dict[int, int] = {}  # nodes added (+) or taken (-) this cycle, by job
        self.shrinks: dict[int, tuple[int, list[str]]] = {}  # job -> (count, reasons)
        self.expanded: set[int] = set()
        self.evolving_expands: list[Decision] = []
        self.starts: list[Decision] = []
        self.expands: list[Decision] = []
        # this cycle's starts, (job, nodes): their predicted ends are read only by shadow()
        self.started: list[tuple[JobView, int]] = []
        self.victims = [j for j in running if j.kind is _MALLEABLE and not j.resizing]
        self._random: dict[int, float] | None = None
        self._ending: bool | None = None
        self._capacity: int | None = None  # nodes the victims could give, while unchanged

    # ------------------------------------------------------------------ the main algorithm
    def run(self) -> list[Decision]:
        config = self.config
        self.satisfy_evolving_requests()
        pending = self.snapshot.pending()
        if config.initial_allocation == "easy":
            left = self.easy(pending)
        else:
            left = self.first_fit(pending)
        if left and self.victims:
            self.schedule_pending(left)
        if config.expand_idle and self.free > 0 and self.victims:
            self.expand_malleable()
        shrinks: list[Decision] = [
            Shrink(job_id, count, "; ".join(reasons))
            for job_id, (count, reasons) in self.shrinks.items()
        ]
        return [*shrinks, *self.evolving_expands, *self.starts, *self.expands]

    @property
    def total(self) -> int:
        """Nodes in use or idle: the denominator of Algorithm 7's utilisation.

        Down nodes are left out; reading ``snapshot.nodes`` would also build a tuple of
        every node each cycle.
        """
        if self._total is None:
            self._total = len(self.snapshot.idle_nodes()) + sum(len(j.nodes) for j in self.running)
        return self._total

    def can_ever_start(self, job: JobView) -> bool:
        """False for a job wider than every node of the snapshot: it is passed over."""
        low = _start_range(job)[0]
        return low <= self.free or low <= self.total or low <= self.snapshot.node_count

    # ------------------------------------------------------------------ Algorithm 2
    def satisfy_evolving_requests(self) -> None:
        asking = [j for j in self.running if j.evolving_request and j.kind is _EVOLVING]
        for job in sorted(asking, key=_start_order):
            request = job.evolving_request
            if job.resizing:
                continue
            size = self.size(job)
            if request < 0:
                give = min(-request, size - max(1, job.nodes_min))
                if give >= 1:
                    self.shrink(job, give, f"the application gives back {give} node(s) (Alg. 2)")
                    self.free += give
                continue
            want = min(request, job.nodes_max - size)
            if want < 1:
                continue
            if want <= self.free:
                self.grow_evolving(job, want, "from idle nodes")
                continue
            shortfall = want - self.free
            chosen = self.select_shrinkable(shortfall)
            if chosen is not None:
                self.take(chosen, f"for evolving job {job.job_id} (Alg. 2)")
                self.free += shortfall
                self.grow_evolving(job, want, f"{shortfall} from shrinking malleable jobs")
            elif self.config.partial_evolving and self.free > 0:
                self.grow_evolving(job, self.free, f"partly, {request} asked")

    def grow_evolving(self, job: JobView, count: int, how: str) -> None:
        self.free -= count
        self.delta[job.job_id] = self.delta.get(job.job_id, 0) + count
        self.evolving_expands.append(
            Expand(job.job_id, count, f"evolving request served first (Alg. 2): {how}")
        )

    # ------------------------------------------------------------------ Algorithm 3
    def easy(self, pending: Sequence[JobView]) -> list[JobView]:
        """FCFS with EASY backfilling at requested sizes; return the jobs left pending.

        Only a job whose minimum fits in the idle nodes can start, and the idle nodes only
        decrease: those jobs are found first (a scan without a Python loop); every other one
        is passed on to Algorithm 4 in queue order, and the first of them that can ever
        start, if before any job that fits and does not start, is the head.
        """
        free = self.free
        if free == 0:
            # only Algorithm 4 reads the jobs left, and only when malleable jobs run
            return list(pending) if self.victims else []
        if free < self.minimum.of(pending)[0]:
            return list(pending)  # no job's minimum fits: all are passed on, as below
        left: list[JobView] = []
        done = self.in_order(pending, left)
        if self.free > 0 or self.victims:  # only Algorithm 4 reads the jobs left
            left.extend(pending[done:])
        return left

    def in_order(self, pending: Sequence[JobView], left: list[JobView]) -> int:
        """Algorithm 3's first come, first served: start jobs in order while they fit.

        Walks the jobs of ``pending`` whose minimum fits in the idle nodes (indexes, in
        queue order) and starts each at its request ``P`` while it fits; the first job that
        can ever start and does not fit now is the head, and :meth:`backfill` goes on from
        there. Jobs passed over are appended to ``left``. Returns how many jobs of
        ``pending`` were dealt with (``pending[:done]``): the rest all have a minimum above
        the idle nodes.
        """
        free = self.free  # a local copy (the queue can be long), read again after each start
        done = 0  # pending[:done] is dealt with
        fitting = compress(range(len(pending)), map(free.__ge__, map(_NODES_MIN, pending)))
        for i in fitting:
            for job in pending[done:i]:  # minimum too large: passed on, maybe the head
                if self.can_ever_start(job):
                    return self.backfill(pending, chain((i,), fitting), job, left, done)
            left.extend(pending[done:i])
            done = i + 1
            job = pending[i]
            if job.nodes_min > free:  # it fitted before this cycle's starts
                left.append(job)
                if self.can_ever_start(job):
                    return self.backfill(pending, fitting, job, left, done)
                continue
            size = _request(job)
            if size <= free:
                self.start(job, size, "first come, first served (Alg. 3)")
                free = self.free
                if free == 0:
                    break
            elif self.can_ever_start(job):
                left.append(job)
                return self.backfill(pending, fitting, job, left, done)
        return done

    def backfill(
        self,
        pending: Sequence[JobView],
        fitting: Iterator[int],
        head: JobView,
        left: list[JobView],
        done: int,
    ) -> int:
        """EASY backfilling behind ``head``'s reservation (Algorithm 1's title; Algorithm 3).

        ``fitting`` yields the indexes in ``pending`` still to try, in queue order, past
        ``pending[:done]``, which is dealt with. The reservation (shadow time in seconds,
        extra nodes) is computed at the first job that fits; a job then starts at ``P`` if
        it ends by the shadow time or fits in the extra nodes (which it uses up). Jobs passed
        over are appended to ``left``; returns ``done`` as :meth:`in_order` does.
        """
        free = self.free
        reservation: tuple[float, int] | None = None  # (shadow time, extra nodes)
        for i in fitting:
            left.extend(pending[done:i])
            done = i + 1
            job = pending[i]
            if job.nodes_min > free:  # it fitted before this cycle's starts
                left.append(job)
                continue
            size = _request(job)
            if size > free:
                left.append(job)
                continue
            if reservation is None:
                reservation = self.shadow(_request(head))
            shadow_s, extra = reservation
            if self.now + self.pending_runtime_s(job, size) <= shadow_s:
                why = f"backfilled (Alg. 3): ends before job {head.job_id}'s reservation"
            elif size <= extra:
                reservation = (shadow_s, extra - size)
                why = f"backfilled (Alg. 3): uses nodes job {head.job_id}'s reservation leaves"
            else:
                left.append(job)
                continue
            self.start(job, size, why)
            free = self.free
            if free == 0:
                break
        return done

    def first_fit(self, pending: Sequence[JobView]) -> list[JobView]:
        """Algorithm 3 as printed (with ``<=``): every job that fits, in order."""
        left = []
        for job in pending:
            size = _request(job)
            if self.free > 0 and size <= self.free:
                self.start(job, size, "fits in the idle nodes (Alg. 3, first fit)")
            elif self.can_ever_start(job):
                left.append(job)
        return left

    def shadow(self, need: int) -> tuple[float, int]:
        """The head job's reservation: ``(shadow time, extra nodes)``; ``(inf, 0)`` if never."""
        ends = [(self.now + self.pending_runtime_s(job, size), size) for job, size in self.started]
        for job in self.running:
            ends.append((self.running_end_s(job), self.size(job)))
        ends.sort()
        available = self.free
        for end, size in ends:
            available += size
            if available >= need:
                return end, available - need
        return INFINITY, 0

    # ------------------------------------------------------------------ Algorithm 4
    def schedule_pending(self, pending: Sequence[JobView]) -> None:
        sizeable = _SIZEABLE
        refused: bool | None = None  # blocked() with no idle node: the same all cycle long
        # self.free and self._capacity as locals (the queue can be long), read again after
        # every call that may change them
        free = self.free
        # The reach (idle plus shrinkable nodes) never grows within a cycle: a job whose p_r
        # is above it now never starts in this cycle (and leaves the state unchanged), nor
        # does any once it is below every pending job's p_r
        reach = free if self.blocked() else free + self.capacity()
        if reach < min(self.minimum.of(self.snapshot.pending())):
            return
        capacity = self._capacity
        checked = -1  # the last reach compared with the queue's minimum
        for job in pending:
            if free == 0:
                if refused is None:
                    refused = self.blocked()
                if capacity == 0 or refused:
                    break  # no idle node and nothing can be shrunk: no later job can start
            # p_r of _start_range, inline
            elastic = job.kind in sizeable
            low = job.nodes_min if elastic else job.nodes_requested
            if low < 1:
                low = 1
            shortfall = low - free
            if shortfall <= 0:
                if elastic:
                    size = min(_request(job), free)
                    self.start(job, size, "its minimum fits in the idle nodes (Alg. 4)")
                    free = self.free
                    capacity = self._capacity
                continue
            if capacity is not None and capacity < shortfall:
                # what select_shrinkable would say: the victims cannot cover it. The reach
                # (idle plus shrinkable nodes) never grows within a cycle: once it is below
                # every pending job's minimum, no later job can start
                reach = free + capacity
                if reach != checked:
                    checked = reach
                    if reach < self.minimum.low(self.snapshot.pending()):
                        break
                continue
            self.start_by_shrinking(job, low, shortfall)
            free = self.free
            capacity = self._capacity

    def start_by_shrinking(self, job: JobView, low: int, shortfall: int) -> None:
        """Start ``job`` at ``low`` (``p_r``) nodes if shrinks can give the ``shortfall``.

        Algorithm 4's step for a job whose ``p_r`` is above the idle nodes: the shortfall
        (nodes beyond the idle ones) is asked of the shrink selection (Algorithms 5-8); when
        the victims cover it they are shrunk and the job starts, otherwise nothing changes.
        """
        chosen = self.select_shrinkable(shortfall)
        if chosen is None:
            return
        self.take(chosen, f"for pending job {job.job_id} (Alg. 4)")
        self.free += shortfall
        self.start(job, low, f"by shrinking malleable jobs for {shortfall} node(s) (Alg. 4)")

    # ------------------------------------------------------------------ Algorithm 1, line 7
    def expand_malleable(self) -> None:
        order = sorted(
            (j for j in self.victims if j.job_id not in self.shrinks),
            key=lambda j: (-self.remaining_s(j), *_start_order(j)),
        )
        for job in order:
            size = self.size(job)
            give = min(self.free, job.nodes_max - size)
            if give < 1:
                continue
            if job.speedup is not None and job.speedup.speedup(size + give) <= job.speedup.speedup(
                size
            ):
                continue  # more nodes would not make it faster
            self.free -= give
            self.delta[job.job_id] = self.delta.get(job.job_id, 0) + give
            self.expanded.add(job.job_id)
            self.expands.append(
                Expand(
                    job.job_id,
                    give,
                    f"{give} idle node(s) left: longest remaining run time first (Alg. 1)",
                )
            )
            if self.free == 0:
                break

    # ------------------------------------------------------------------ Algorithms 5-8
    def select_shrinkable(self, need: int) -> list[tuple[JobView, int]] | None:
        """Victims and counts covering ``need`` nodes, or ``None`` (all or nothing)."""
        if self.blocked():
            return None
        if self._capacity is not None and self._capacity < need:
            return None  # nothing changed since the victims could not cover as much
        candidates = self.candidates()
        self._capacity = sum([can for _, can in candidates])
        if self._capacity < need:
            return None
        candidates.sort(key=lambda c: self.priority_key(c[0], c[1], need))
        chosen = []
        for job, can in candidates:
            take = min(can, need)
            chosen.append((job, take))
            need -= take
            if need == 0:
                break
        return chosen

    def capacity(self) -> int:
        """Nodes the victims could give now (Algorithm 8's candidates, all of them)."""
        if self._capacity is None:
            self._capacity = sum([can for _, can in self.candidates()])
        return self._capacity

    def blocked(self) -> bool:
        """Whether Algorithm 6 or 7 refuses to shrink anything now."""
        config = self.config
        if config.shrink_selection == "application":
            return self.job_ending()
        if config.shrink_selection == "system" and self.total:
            used = self.total - self.free
            if used / self.total > config.utilization_threshold:
                return not config.system_requires_ending_job or self.job_ending()
        return False

    def candidates(self) -> list[tuple[JobView, int]]:
        """Running malleable jobs that can give nodes now, with how many (Algorithm 8)."""
        application = self.config.shrink_selection == "application"
        limit = self.config.done_fraction_max
        out = []
        for job in self.victims:
            if job.job_id in self.expanded:
                continue
            can = self.size(job) - max(1, job.nodes_min)
            if can < 1 or (application and self.done_fraction(job) >= limit):
                continue
            out.append((job, can))
        return out

    def priority_key(self, job: JobView, can: int, need: int) -> tuple[float, ...]:
        """Sort key: smaller is shrunk first (section 4's candidate priorities)."""
        priority = self.config.priority
        tie = _start_order(job)
        if priority == "random":
            return (self.random_key(job.job_id), *tie)
        if priority == "gain":
            return (-(job.gain_nodes), *tie)
        if priority == "shrinkable":
            return (-can, -self.size(job), *tie)
        if priority == "expansions":
            return (-job.expansions, *tie)
        if priority == "cost":
            size = self.size(job)
            cost = job.resize_cost.cost_s(size, size - min(can, need)) if job.resize_cost else 0.0
            return (cost, *tie)
        return (self.remaining_s(job), *tie)  # "remaining"

    def random_key(self, job_id: int) -> float:
        if self._random is None:
            rng = random.Random(f"{self.config.seed}/{self.now!r}")
            ids = sorted(j.job_id for j in self.victims)
            self._random = {i: rng.random() for i in ids}
        return self._random[job_id]

    def job_ending(self) -> bool:
        """Whether a running job ends within ``ending_window_s`` (Algorithms 6 and 7)."""
        if self._ending is None:
            window = self.config.ending_window_s
            self._ending = any(
                0.0 < self.running_end_s(j) - self.now <= window for j in self.running
            )
        return self._ending

    def take(self, chosen: list[tuple[JobView, int]], why: str) -> None:
        for job, count in chosen:
            self.shrink(job, count, f"release {count} node(s) {why}, {self.config.priority} first")

    def shrink(self, job: JobView, count: int, reason: str) -> None:
        self._capacity = None
        self.delta[job.job_id] = self.delta.get(job.job_id, 0) - count
        before, reasons = self.shrinks.get(job.job_id, (0, []))
        self.shrinks[job.job_id] = (before + count, [*reasons, reason])

    def start(self, job: JobView, size: int, reason: str) -> None:
        self.free -= size
        self.starts.append(Start(job.job_id, size, reason))
        self.started.append((job, size))

    # ------------------------------------------------------------------ job facts
    def size(self, job: JobView) -> int:
        return len(job.nodes) + self.delta.get(job.job_id, 0)

    def running_end_s(self, job: JobView) -> float:
        """When a running job is predicted to end (seconds); ``inf`` when unknown."""
        end = self.estimates.end_s(job, self.now)
        return INFINITY if end is None else max(end, self.now)

    def remaining_s(self, job: JobView) -> float:
        return self.running_end_s(job) - self.now

    def done_fraction(self, job: JobView) -> float:
        end = self.running_end_s(job)
        start = job.start_time_s
        if start is None or end == INFINITY or end <= start:
            return 0.0 if end == INFINITY else 1.0
        return (self.now - start) / (end - start)

    def pending_runtime_s(self, job: JobView, size: int) -> float:
        run = self.estimates.runtime_s(job, size)
        return INFINITY if run is None else run


_SIZEABLE = (JobKind.MALLEABLE, JobKind.MOLDABLE)
_MALLEABLE = JobKind.MALLEABLE  # module constants: an enum's class attribute costs 40 ns
_EVOLVING = JobKind.EVOLVING
_NODES_MIN = operator.attrgetter("nodes_min")
_NODES_REQUESTED = operator.attrgetter("nodes_requested")


class _QueueMinimum:
    """The smallest sizes of a pending queue (internal).

    Kept for the last queue seen, and read again only when the snapshot's pending tuple is
    another object: a cache of a function of the snapshot, not state of the policy (the queue
    is unchanged in about half the cycles of a simulation).
    """

    __slots__ = ("_queue", "_minimum", "_low")

    def __init__(self) -> None:
        self._queue: Sequence[JobView] | None = None
        self._minimum = (INFINITY, INFINITY)
        self._low: float | None = None

    def of(self, queue: Sequence[JobView]) -> tuple[float, float]:
        """``(smallest nodes_min, smallest nodes_requested)`` of ``queue``; ``inf`` if empty.

        The smaller of the two bounds every job's ``p_r`` (``_start_range`` low end) from
        below, at less cost than :meth:`low`. A queue that is the last one with jobs added at
        its end (arrivals come in submission order) is read from the last one's minima and
        its new jobs only.
        """
        last = self._queue
        if queue is not last:
            self._queue = queue  # held, so that its identity cannot be reused
            n = len(last) if last else 0
            if n and len(queue) > n and queue[:n] == last:
                added = queue[n:]
                low_min, low_requested = self._minimum
                self._minimum = (
                    min(low_min, min(map(_NODES_MIN, added))),
                    min(low_requested, min(map(_NODES_REQUESTED, added))),
                )
                if self._low is not None:
                    self._low = min(self._low, _smallest_start(added))
            elif queue:
                self._low = None
                self._minimum = (min(map(_NODES_MIN, queue)), min(map(_NODES_REQUESTED, queue)))
            else:
                self._low = None
                self._minimum = (INFINITY, INFINITY)
        return self._minimum

    def low(self, queue: Sequence[JobView]) -> float:
        """The smallest ``p_r`` (``_start_range`` low end) of ``queue``; ``inf`` if empty."""
        self.of(queue)
        if self._low is None:
            self._low = _smallest_start(queue) if queue else INFINITY
        return self._low


class _Shrinkable:
    """The nodes running malleable jobs hold above their minimum (internal).

    Kept for the last tuple of running jobs seen, as :class:`_QueueMinimum` is for the queue
    (a third of the cycles that take the shortcut see the same running jobs).
    """

    __slots__ = ("_running", "_nodes")

    def __init__(self) -> None:
        self._running: Sequence[JobView] | None = None
        self._nodes: int | None = 0

    def of(self, running: Sequence[JobView]) -> int | None:
        """Nodes, summed over the malleable jobs not resizing, of ``running``.

        ``None`` when a running evolving job (not resizing) asks for a change.
        """
        if running is self._running:
            return self._nodes
        self._running = running  # held, so that its identity cannot be reused
        shrinkable: int | None = 0
        for job in running:
            kind = job.kind
            if kind is _MALLEABLE:
                if not job.resizing:
                    size = len(job.nodes)
                    low = job.nodes_min if job.nodes_min > 1 else 1
                    if size > low:
                        shrinkable += size - low  # type: ignore[operator]
            elif kind is _EVOLVING and job.evolving_request and not job.resizing:
                shrinkable = None
                break
        self._nodes = shrinkable
        return shrinkable


def _smallest_start(queue: Sequence[JobView]) -> int:
    """The smallest ``p_r`` (``_start_range`` low end) of a non-empty ``queue``."""
    sizeable = _SIZEABLE
    low = min([j.nodes_min if j.kind in sizeable else j.nodes_requested for j in queue])
    return low if low > 1 else 1


def _start_order(job: JobView) -> tuple[float, float, int]:
    """Running jobs: earliest start first (unknown last), then submission, then id."""
    start = job.start_time_s if job.start_time_s is not None else INFINITY
    return (start, job.submit_time_s, job.job_id)


def _request(job: JobView) -> int:
    """``P``: the size a pending job asks for, kept within its range."""
    low, high = _start_range(job)
    return min(max(job.nodes_requested, low), high)


def _start_range(job: JobView) -> tuple[int, int]:
    """Sizes a pending job may start at: ``(p_r, high)``; ``p_r`` is its minimum if elastic."""
    if job.kind in (JobKind.MOLDABLE, JobKind.MALLEABLE):
        low = max(1, job.nodes_min)
        return low, max(low, job.nodes_max)
    size = max(1, job.nodes_requested)
    return size, size
