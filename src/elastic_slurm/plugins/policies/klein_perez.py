"""Klein and Pérez's list scheduling of evolving applications, with the ``fit`` variants.

C. Klein and C. Pérez, "Towards Scheduling Evolving Applications", CoreGRID/ERCIM Workshop on
Grids, Clouds and P2P Computing, 2011 (HAL inria-00609353), also chapter 5 of Klein's thesis
("Cooperative Resource Management for Parallel and Distributed Systems", ENS Lyon, 2012).

An application's needs are an *evolution profile* (EP, section 3.1): a sequence of steps
``(duration, nodes)``. Algorithm 1 takes the applications in a fixed order and, for each, calls
``fit`` to *delay* its requested EP and *expand* some of its steps (an expanded step holds its
nodes, idle, while it waits for the nodes of the next step) so that the sum of the scheduled
EPs never exceeds the machine; the result is added to the resource EP. Algorithm 2 is the base
``fit`` with an *expand limit* ``l`` (a step may last at most ``l`` times its duration), and
*compacting* (section 4.2) re-places the steps right to left against the completion time the
base ``fit`` found, which removes needless expansion. The five variants of section 5.1 are
``noX`` (``l = 1``), ``2X`` and ``2X+c`` (``l = 2``, without and with compacting), ``infX`` and
``infX+c`` (no limit). The ``+c`` in these names means compacting; it is not a parameter.

The pure functions of :mod:`~elastic_slurm.plugins.policies.klein_perez_fit` (``fit``,
``compact``, ``schedule``) are the paper's offline algorithm, re-exported here;
:class:`KleinPerez` is the online policy that re-runs it at every cycle
(thesis section 5.1: "each time an application submits a change to the RMS, the scheduling
algorithm for fully-predictable applications could be re-run with updated information") and
carries out what the schedule says is due now.

How it degrades: an evolving job declares its evolution profile in
``JobView.evolution_profile`` (live and simulated alike); profiles given to the constructor
(``profiles``: job id to steps) take precedence, for offline reproductions. An evolving job
with no profile at all is planned at its current size for its time limit and a request for
more nodes is placed like a profile's next step (it waits, holding its nodes, until the grown
size fits); a policy meeting such jobs says so once (a warning in the log). Planning them as
a pre-allocation of ``nodes_max`` instead (CooRMv2's "sure execution") reserved up to eight
times their size for their whole run on converted traces. An evolving job whose snapshot is
off its declared profile keeps that pre-allocation: the profile says it will grow. A job
without a time limit is planned to run for ever. Nothing here reads node names.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import ClassVar

from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.kit.holds import holds_from, split_by_start
from elastic_slurm.plugins.kit.nodes import machine_nodes
from elastic_slurm.plugins.kit.occupancy import Occupancy
from elastic_slurm.plugins.policies.klein_perez_fit import (
    FITS,
    ScheduledEP,
    Step,
    compact,
    fit,
    holds,
    merge_steps,
    schedule,
    variant,
)
from elastic_slurm.plugins.policy import Policy

log = logging.getLogger(__name__)

INFINITY = math.inf
_TIME_DIGITS = 6  # times taken from a snapshot are snapped to the microsecond
_DUE_S = 1e-6  # a start planned this close after now is due now


def _snap(t: float) -> float:
    """Round a time to the microsecond, so that ends and starts computed apart coincide."""
    return t if t in (INFINITY, -INFINITY) else round(t, _TIME_DIGITS)


# ---------------------------------------------------------------------------------- online


@dataclass
class _Entry:
    """One job in a cycle's list: what of it is fixed, and what is left to place."""

    job: JobView
    fixed: list[tuple[float, float, int]]  # its holds that cannot move (the step under way)
    steps: tuple[Step, ...]  # steps still to place
    lo: float  # earliest start of steps[0]
    before: tuple[int, float | None, float] | None  # the step under way: nodes, start, duration
    compactable: bool  # compacting applies to the steps left
    action: str  # "start", "grow", "release" or "" (nothing to decide)
    due_now: bool = False  # "grow" served whenever idle nodes allow (a pre-allocation)
    reserve: list[tuple[float, float, int]] = dataclasses.field(default_factory=list)
    starts: tuple[float, ...] = ()


@dataclass(frozen=True)
class Plan:
    """A cycle's schedule: every job's future, and the decisions due now.

    Parameters
    ----------
    time_s
        The snapshot's time.
    jobs
        Per job id, the segments ``(start_s, end_s, nodes)`` it is planned to hold from now.
    next_starts
        Per job id with something to do (start, or the next step of a waiting application),
        when it is planned (seconds; ``math.inf`` for never).
    decisions
        What is due now, in the order to carry it out.
    """

    time_s: float
    jobs: Mapping[int, tuple[tuple[float, float, int], ...]]
    next_starts: Mapping[int, float]
    decisions: tuple[Decision, ...]

    @property
    def next_action_s(self) -> float:
        """The earliest planned start after now (``math.inf`` when none).

        That is when a controller with timers should run the next cycle if no event comes
        first.
        """
        later = [t for t in self.next_starts.values() if t > self.time_s + _DUE_S]
        return min(later, default=INFINITY)


class KleinPerez(Policy):
    """List scheduling of evolving applications with ``fit`` (Klein and Pérez 2011, sec. 4).

    Each cycle re-runs Algorithm 1 on what is left to do, in submission order (then job id),
    running and pending jobs alike, and carries out what it schedules for now:

    1. The resource EP starts with what cannot move: each running job's hold until the end of
       the step it computes. An application waiting at a step border (for more nodes, or to
       give some back) holds at least the next step's nodes, or its own if fewer, for that
       step's duration; that much is reserved too, so that no job listed before it is
       planned onto nodes it keeps.
    2. Each job in turn is fitted against it and added to it: a pending job's whole EP with
       :func:`fit` from now (and :func:`compact` with ``+c``); for a running job, the steps
       after the one under way, which keeps its nodes (is expanded) until the next starts.
       The step under way cannot move, so its expand limit is not checked by ``fit``;
       compacting checks it for a job still computing (whose step start is known).
    3. Decisions, for what the schedule starts now: evolving jobs whose next step needs
       fewer nodes are shrunk (first, so that their nodes can be used at once); then, in list
       order, pending jobs are started and waiting applications expanded, as long as the
       idle nodes allow (they do when the snapshot follows the schedule). A release is not
       always at once: Algorithm 2 may expand the step before a smaller one (when the steps
       after it could not otherwise keep within the limit), and then the application waits,
       holding its nodes, as scheduled.

    Choices, where the paper leaves room:

    * **Online.** The paper's algorithm is offline (all applications known at time 0). Run
      again at every cycle on the updated state, it gives the same schedule as long as the
      applications follow it, because ``fit`` returns the earliest feasible placement (every
      jump in Algorithm 2 only skips placements that cannot work) and a later cycle only
      removes what is past. Starts planned between two events need a cycle then: the
      simulator calls policies only on events (see :attr:`Plan.next_action_s`).
    * **Pseudo-code.** Line 17 of Algorithm 2 reads ``i > 0``, which makes the first step's
      delay (lines 18-20) dead code; we use ``i > 1``. ``max`` and ``loc`` are taken over
      half-open intervals ``[t0, t1)`` (a step ending at ``t`` does not clash with one
      starting at ``t``), and ``loc`` jumps to the end of the maximum's segment even when it
      lies past ``t1``, which skips only placements that fail anyway.
    * **Compacting** has no pseudo-code in the paper; see :func:`compact`.
    * **Profiles** come from the job views (``evolution_profile``) or the constructor; a job
      without one is planned as the module docstring says (one step at its size; a request
      for more nodes placed as the next step). Profiles assume blocking requests (Klein and
      Pérez's model: the application waits); a job's step is found from its estimated end
      (``estimated_end_s``, else the snapshot's ``estimates``), exact when its time limit is
      its run time.
    * Running jobs that are neither evolving with a profile nor evolving at all hold their
      current size until their estimated end; malleable jobs are never resized.
    * **Speed.** When every job left to place has one step (no profile, or a profile of
      one step), :meth:`decide` places only those jobs, in list order, against the other
      jobs' holds, keeps the last cycle's placements when placing again would give the
      same (:class:`_LastPlan`), and stops once no job left could start now; otherwise it
      runs :meth:`plan`. Its decisions are :meth:`plan`'s (``tests/sim``
      ``test_planner_fast_paths.py`` checks it at every cycle of trace slices).

    Parameters
    ----------
    config
        A :class:`KleinPerez.Config`; ``None`` for ``noX``.
    profiles
        Requested EPs by job id: ``(duration_s, nodes)`` per step, at the job's own speed (the
        first step's nodes must be the job's requested size). Consecutive steps with the same
        node count are merged.
    """

    name: ClassVar[str] = "klein_perez"
    summary: ClassVar[str] = (
        "List scheduling of evolving applications by their evolution profiles with fit (noX, "
        "2X, infX, +c)."
    )
    paper: ClassVar[str] = (
        "C. Klein and C. Pérez, Towards Scheduling Evolving Applications, CoreGRID 2011"
    )
    section: ClassVar[str] = "sections 4-5, Algorithms 1-2"
    job_kinds: ClassVar[tuple[str, ...]] = ("evolving",)
    resizes: ClassVar[bool] = True

    @dataclasses.dataclass(frozen=True)
    class Config:
        """Options of :class:`KleinPerez`.

        Parameters
        ----------
        fit
            The variant of section 5.1: ``"noX"`` (no expansion), ``"2X"`` (a step may last
            up to twice its duration), ``"2X+c"`` (the same, compacted), ``"infX"`` (no limit)
            or ``"infX+c"``.
        expand_limit
            Another expand limit ``l >= 1`` instead of the variant's (``inf`` for none).
        compacting
            Compact or not, instead of what the variant's name says.

        Raises
        ------
        ValueError
            For an unknown variant or a limit below 1.
        TypeError
            For a compacting option that is not a boolean, or a limit that is not a number.
        """

        fit: str = "noX"
        expand_limit: float | None = None
        compacting: bool | None = None

        def __post_init__(self) -> None:
            if self.compacting is not None and not isinstance(self.compacting, bool):
                raise TypeError(f"compacting must be true or false, got {self.compacting!r}")
            if self.expand_limit is not None and not isinstance(self.expand_limit, int | float):
                raise TypeError(f"expand_limit must be a number, got {self.expand_limit!r}")
            variant(self.fit, self.expand_limit, self.compacting)

    def __init__(
        self,
        config: KleinPerez.Config | None = None,
        profiles: Mapping[int, Sequence[Step]] | None = None,
    ) -> None:
        super().__init__(config)
        cfg: KleinPerez.Config = self.config
        self.limit, self.compacting = variant(cfg.fit, cfg.expand_limit, cfg.compacting)
        self.profiles = {
            int(job_id): merge_steps(steps) for job_id, steps in (profiles or {}).items()
        }
        self._suffixes = {job_id: _suffix_sums(steps) for job_id, steps in self.profiles.items()}
        self._published: dict[int, tuple[tuple[Step, ...], tuple[Step, ...]]] = {}
        self._warned = False
        # per job view, by id(view) (the view is kept, so the id is not reused): a running
        # view's (view, snapped estimated end or None when not a plain hold, size); a pending
        # view's (view, its one step or None, 0)
        self._views: dict[int, tuple[JobView, object, int]] = {}
        self._last: _LastPlan | None = None  # the last fast cycle's placements, to build on

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Re-run Algorithm 1 and return what it schedules now (see the class docstring).

        Ignores the trigger. Returns shrinks first, then starts and expansions in list order;
        no decision for a job that is resizing.
        """
        fast = self._fast_decide(snapshot)
        if fast is not None:
            return fast
        return list(self.plan(snapshot, complete=False).decisions)

    def plan(self, snapshot: ClusterSnapshot, *, complete: bool = True) -> Plan:
        """Compute the cycle's schedule (a pure function of the snapshot and the profiles).

        With ``complete=False`` (what :meth:`decide` uses) the list is placed only as far as
        something can still be due now: once no job left in it could get its nodes now,
        whatever is placed after cannot change this cycle's decisions (placing a job never
        frees nodes now), so the rest is left out of ``jobs`` and ``next_starts``. The
        decisions are the same; a deep queue costs little.
        """
        now = _snap(snapshot.time_s)
        cap = machine_nodes(snapshot)
        jobs = sorted(snapshot.jobs, key=lambda j: (j.submit_time_s, j.job_id))
        entries = [self._entry(j, now, snapshot) for j in jobs]
        # a waiting application holds at least the nodes of the step it waits for, for as long
        # as that step lasts (it keeps its nodes until the step starts): reserve that much
        # before anybody is fitted, so that no job listed earlier is planned onto them
        occ = Occupancy(now)
        for e in entries:
            if e.action in ("grow", "release") and e.steps:
                d, n = e.steps[0]
                e.reserve = [(now, now + d, min(n, e.job.size))]
            for s, t, n in (*e.fixed, *e.reserve):
                occ.add(s, t, n)
        planned: dict[int, tuple[tuple[float, float, int], ...]] = {}
        slack = None if complete else _slack(entries, now)
        for k, e in enumerate(entries):
            if slack is not None and cap - _least_busy(occ, now) < slack[k]:
                break  # nobody from here on can be given nodes now
            for s, t, n in (*e.fixed, *e.reserve):
                occ.add(s, t, -n)
            segments = self._place(e, occ, cap, now)
            for s, t, n in segments:
                occ.add(s, t, n)
            planned[e.job.job_id] = tuple(segments)
        return Plan(now, planned, *self._decisions(entries, snapshot, now))

    # ------------------------------------------------------------------ fast path
    def _fast_decide(self, snapshot: ClusterSnapshot) -> list[Decision] | None:
        """:meth:`plan`'s decisions (``complete=False``) for jobs of one step; else ``None``.

        When every job left to place has one step (pending jobs, and running jobs without a
        profile waiting to grow), Algorithm 1 is conservative backfilling in list order
        against the holds of the running jobs: only the jobs to place are visited (a hold's
        entry places nothing), pending ones from a per-view cache, with :meth:`plan`'s cut
        and a finer one (:func:`_backfill`). ``None`` (use :meth:`plan`) for a job with
        several steps left.
        """
        now = _snap(snapshot.time_s)
        cap = machine_nodes(snapshot)
        running, pending = split_by_start(snapshot)
        self._forget(pending, running)
        holds_at: list[tuple[float, int]] = []  # (end, nodes) of holds from now
        actors: list[_Entry] = []  # running entries due now (release, or grow by nodes_max)
        grows: list[_Item] = []
        views, floor = self._views, now + 2 * _DUE_S
        for job in running:
            hit = views.get(id(job))
            if hit is None or hit[0] is not job:
                hit = views[id(job)] = (job, _simple_end(job, self._profile(job)), job.size)
            end = hit[1]
            if end is not None:  # a hold until its estimated end (soon, when past it)
                assert isinstance(end, float)
                holds_at.append((end if end > floor else floor, hit[2]))
                continue
            e = self._entry(job, now, snapshot)
            if e.steps:  # waiting to grow without a profile: placed like a pending job
                if len(e.steps) > 1 or e.compactable or e.fixed or e.action != "grow":
                    return None
                (d, n), own = e.steps[0], min(e.steps[0][1], job.size)
                grows.append((job.submit_time_s, job.job_id, job, d, n, own, "grow"))
                holds_at.append((now + d, own))
                continue
            if e.action and not e.due_now:
                return None
            for s, t, n in e.fixed:
                if s != now:
                    return None
                holds_at.append((t, n))
            if e.action:
                actors.append(e)
        if not pending and not grows and not actors:
            return []
        if not any(e.action == "release" for e in actors):
            # a start needs its nodes_requested idle, a growth its 1 <= want idle
            least = min(map(_REQUESTED, pending), default=INFINITY)
            for job in [g[2] for g in grows] + [e.job for e in actors]:
                want = min(job.evolving_request, job.nodes_max - job.size)
                least = min(least, want if want >= 1 else INFINITY)
            if least > len(snapshot.idle_nodes()):
                return []  # nothing can start or grow, whatever the schedule
        items = self._pending_items(pending, now, snapshot)
        if items is None:
            return None
        if grows:
            items = sorted(items + grows, key=lambda x: (x[0], x[1]))
        base = holds_from(now, holds_at)
        last = self._last
        if not grows and last is not None and last.follows(now, cap, base, items):
            occ, first = last.final.after(now), list(last.places)
        else:
            occ, first = base.after(now), []
        starts, placed = _backfill(items, occ, cap, now, first)
        self._last = None if grows else _LastPlan.build(now, cap, base, occ, items, starts[:placed])
        return self._fast_decisions(snapshot, now, actors, items, starts)

    def _forget(self, pending: Sequence[JobView], running: Sequence[JobView]) -> None:
        """Drop cached views long gone; warn of unprofiled evolving jobs as :meth:`plan` would."""
        views = self._views
        if len(views) > 4 * (len(pending) + len(running)) + 1024:
            keep = {id(j) for j in (*pending, *running)}
            self._views = {k: v for k, v in views.items() if k in keep}
        if not self._warned:  # the first such job in list order, in the first cycle with one
            new = [
                j
                for j in (*pending, *running)
                if j.kind is JobKind.EVOLVING and id(j) not in views and self._profile(j) is None
            ]
            if new:
                self._warn_unprofiled(min(new, key=lambda j: (j.submit_time_s, j.job_id)))

    def _pending_items(
        self, pending: Sequence[JobView], now: float, snapshot: ClusterSnapshot
    ) -> list[_Item] | None:
        """The pending jobs to place, cached per view; ``None`` if one has several steps.

        A cached view is kept with its item, so its ``id`` is not reused while cached.
        """
        views = self._views
        hits = list(map(views.get, map(id, pending)))
        if None in hits:
            for k, job in enumerate(pending):
                if hits[k] is None:
                    e = self._entry(job, now, snapshot)
                    item = None
                    if len(e.steps) == 1:
                        (d, n), key = e.steps[0], (job.submit_time_s, job.job_id)
                        item = (*key, job, d, n, 0, "start")
                    hits[k] = views[id(job)] = (job, item, 0)
        items = [hit[1] for hit in hits]  # type: ignore[index]
        return None if None in items else items  # type: ignore[return-value]

    def _fast_decisions(
        self,
        snapshot: ClusterSnapshot,
        now: float,
        actors: list[_Entry],
        items: list[_Item],
        starts: list[float],
    ) -> list[Decision]:
        """:meth:`_decisions` for :meth:`_fast_decide`: releases, then the rest in list order."""
        horizon = now + _DUE_S
        due = [(e.job.submit_time_s, e.job.job_id, e.job, e.action) for e in actors]
        placed = zip(items, starts, strict=True)
        due += [(i[0], i[1], i[2], i[6]) for i, s in placed if s <= horizon]
        if not due:
            return []
        if actors:
            due.sort(key=lambda x: (x[0], x[1]))
        label = self.config.fit
        free = len(snapshot.idle_nodes())
        releases: list[Decision] = []
        actions: list[Decision] = []
        for _, _, job, action in due:
            if action == "release":
                give = min(-job.evolving_request, job.size - max(1, job.nodes_min))
                if give >= 1:
                    free += give
                    releases.append(
                        Shrink(job.job_id, give, f"its {label} schedule starts the next step now")
                    )
        for _, _, job, action in due:
            if action == "start":
                if job.nodes_requested <= free:
                    free -= job.nodes_requested
                    actions.append(
                        Start(job.job_id, job.nodes_requested, f"its {label} schedule starts now")
                    )
            elif action == "grow":
                want = min(job.evolving_request, job.nodes_max - job.size)
                if 1 <= want <= free:
                    free -= want
                    actions.append(
                        Expand(job.job_id, want, f"its {label} schedule starts the next step now")
                    )
        return [*releases, *actions]

    # ------------------------------------------------------------------ planning
    def _profile(self, job: JobView) -> tuple[Step, ...] | None:
        """The job's evolution profile: given to the constructor, else published in its view."""
        profile = self.profiles.get(job.job_id)
        if profile is not None or job.evolution_profile is None:
            return profile
        raw = job.evolution_profile
        known = self._published.get(job.job_id)
        if known is None or known[0] != raw:
            known = (raw, merge_steps(raw))
            self._published[job.job_id] = known
            self._suffixes[job.job_id] = _suffix_sums(known[1])
        return known[1]

    def _warn_unprofiled(self, job: JobView) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "klein_perez: evolving job %d has no evolution profile; such jobs are planned "
                "at their current size and their requests served when the plan has room (no "
                "pre-allocation of nodes_max); this is said once per policy",
                job.job_id,
            )

    def _entry(self, job: JobView, now: float, snapshot: ClusterSnapshot) -> _Entry:
        """What of ``job`` is fixed and what is left to place (see the class docstring)."""
        profile = self._profile(job)
        if job.kind is JobKind.EVOLVING and profile is None:
            self._warn_unprofiled(job)
        if job.start_time_s is None:  # pending
            if profile is not None and profile[0][1] == job.nodes_requested:
                return _Entry(job, [], profile, now, None, self.compacting, "start")
            size = job.nodes_requested
            if job.kind is JobKind.EVOLVING and profile is not None:
                size = max(size, job.nodes_max)  # off its profile: a pre-allocation
            else:
                size = min(max(size, job.nodes_min, 1), max(job.nodes_max, 1))
            duration = job.walltime_at_s(job.nodes_requested)
            step = (INFINITY if duration is None else max(duration, 0.0), size)
            return _Entry(job, [], (step,), now, None, False, "start")
        end = job.estimated_end_s  # the time limit's, else what the host's estimates say
        end = snapshot.estimates.end_s(job, now) if end is None else end
        end = INFINITY if end is None else max(_snap(end), now)
        request = 0 if job.resizing else job.evolving_request
        if job.kind is JobKind.EVOLVING and profile is None:
            return _unprofiled(job, now, end, request)
        if job.kind is JobKind.EVOLVING and end < INFINITY:
            entry = self._profiled(job, profile, end - now, now, request)
            if entry is not None:
                return entry
        if job.kind is JobKind.EVOLVING:  # off its profile: a pre-allocation of nodes_max
            held = [(now, end, max(job.size, job.nodes_max))]
            action = "release" if request < 0 else ("grow" if request > 0 else "")
            return _Entry(job, held, (), end, None, False, action, due_now=bool(action))
        end = max(end, now + 2 * _DUE_S)  # past its estimate: it ends soon, not now
        return _Entry(job, [(now, end, job.size)], (), end, None, False, "")

    def _profiled(
        self, job: JobView, profile: tuple[Step, ...], left: float, now: float, request: int
    ) -> _Entry | None:
        """A running evolving job with a profile; ``None`` when the snapshot does not match it.

        ``left`` seconds of work remain. At a border between steps ``k - 1`` and ``k`` the job
        may still hold the nodes of step ``k - 1``: asking for the change (served now, or
        waiting), or about to ask (an event of the same instant not handled yet).
        """
        suffix = self._suffixes[job.job_id]
        tol = 1e-6 * (1.0 + suffix[0])
        k = _step_at(suffix, left, tol)  # the step under way (the next one, at a border)
        size = job.size
        if k > 0 and abs(suffix[k] - left) <= tol and size == profile[k - 1][1]:
            if request == 0:  # step k - 1 ends now: the request comes next
                k -= 1
            elif size + request != profile[k][1] or not job.evolving_blocking:
                return None
            else:  # waiting for step k, which is placed like the steps after it
                action = "grow" if request > 0 else "release"
                return _Entry(job, [], profile[k:], now, (size, None, 0.0), True, action)
        elif request != 0 or size != profile[k][1]:
            return None
        d, n = profile[k]
        step_end = _snap(now + left - suffix[k + 1])
        start = _snap(step_end - d)
        fixed = [(now, step_end, n)]
        return _Entry(job, fixed, profile[k + 1 :], step_end, (n, start, d), True, "")

    def _place(
        self, e: _Entry, occ: Occupancy, cap: int, now: float
    ) -> list[tuple[float, float, int]]:
        """Fit the entry's steps (and compact them) against ``occ``; its segments from now."""
        if not e.steps:
            e.starts = ()
            return list(e.fixed)
        running = e.before is not None
        starts = fit(e.steps, occ, cap, self.limit, e.lo, first_fixed=running)
        if self.compacting and e.compactable:
            starts = compact(e.steps, starts, occ, cap, self.limit, e.lo, before=e.before)
        e.starts = tuple(starts)
        segments = list(e.fixed)
        if running:
            assert e.before is not None
            wait_from = e.fixed[-1][1] if e.fixed else now
            if starts[0] > wait_from:  # the step under way holds its nodes until the next
                segments.append((wait_from, starts[0], e.before[0]))
        segments += holds(e.steps, starts)
        return segments

    # ------------------------------------------------------------------ decisions
    def _decisions(
        self, entries: list[_Entry], snapshot: ClusterSnapshot, now: float
    ) -> tuple[dict[int, float], tuple[Decision, ...]]:
        label = self.config.fit
        next_starts: dict[int, float] = {}
        releases: list[Decision] = []
        actions: list[Decision] = []
        free = len(snapshot.idle_nodes())
        due = []
        for e in entries:
            if not e.action:
                continue
            when = now if e.due_now else (e.starts[0] if e.starts else INFINITY)
            next_starts[e.job.job_id] = when
            if when <= now + _DUE_S:
                due.append(e)
        for e in due:
            job = e.job
            if e.action == "release":
                give = min(-job.evolving_request, job.size - max(1, job.nodes_min))
                if give >= 1:
                    free += give
                    releases.append(
                        Shrink(job.job_id, give, f"its {label} schedule starts the next step now")
                    )
        for e in due:
            job = e.job
            if e.action == "start":
                if job.nodes_requested <= free:
                    free -= job.nodes_requested
                    actions.append(
                        Start(job.job_id, job.nodes_requested, f"its {label} schedule starts now")
                    )
            elif e.action == "grow":
                want = min(job.evolving_request, job.nodes_max - job.size)
                if 1 <= want <= free:
                    free -= want
                    actions.append(
                        Expand(job.job_id, want, f"its {label} schedule starts the next step now")
                    )
        return next_starts, (*releases, *actions)


def _slack(entries: Sequence[_Entry], now: float) -> list[float]:
    """``out[k]``: the fewest free nodes (now) that any entry from ``k`` on needs to be due.

    An entry can be due now only if its first step's nodes fit now (within ``_DUE_S``) once
    its own holds are lifted; entries with nothing to place need ``inf``, a step of zero
    duration (which fits anywhere) ``-inf``.
    """
    horizon = now + _DUE_S
    out = [INFINITY] * (len(entries) + 1)
    for k in range(len(entries) - 1, -1, -1):
        e = entries[k]
        need = INFINITY
        if e.steps and e.action in ("start", "grow", "release"):
            if any(not d > 0.0 for d, _ in e.steps):
                need = -INFINITY
            else:
                own = sum(n for s, t, n in (*e.fixed, *e.reserve) if s <= horizon and t > now)
                need = e.steps[0][1] - own
        out[k] = min(out[k + 1], need)
    return out


_REQUESTED = operator.attrgetter("nodes_requested")

_Item = tuple[float, int, JobView, float, int, int, str]
"""A job to place in :meth:`KleinPerez._fast_decide`: submit time, id, view, its one step's
duration and nodes, the nodes it reserves from now for that long (a running job waiting to
grow keeps its size), and its action (``"start"`` or ``"grow"``)."""


def _backfill(
    items: Sequence[_Item], occ: Occupancy, cap: int, now: float, first: list[float]
) -> tuple[list[float], int]:
    """Place each item in turn at its earliest start (Algorithm 2 for one step).

    Returns every item's start and how many were placed: ``first`` (the starts of the first
    items, already in ``occ``: see :class:`_LastPlan`), then those placed here.

    ``occ`` holds the running jobs' holds and the items' reservations. An item's
    reservation is lifted while it is placed; a running job that does not grow now keeps its
    nodes until it does. The list is cut as :meth:`KleinPerez.plan` cuts it (:func:`_slack`)
    and, finer, once no item left could start now (:func:`_may_fit_now`: each placement
    busies at least the nodes its item reserved, so what cannot start now never will in
    this cycle). Items not placed get ``inf``.
    """
    needs = [(i[4] - i[5] if i[3] > 0.0 else -INFINITY) for i in items]
    slack = list(accumulate(reversed(needs), min))[::-1]
    starts = first + [INFINITY] * (len(items) - len(first))
    last = len(items) - 1  # the last item that may still be given nodes now
    k = len(first)
    fits = False  # known: items[last] may start now against occ
    for k in range(len(first), len(items)):
        _, _, _, d, n, own, _ = items[k]
        free = cap - _least_busy(occ, now)
        if free < slack[k]:
            break
        while last >= k and (
            needs[last] > free or not (fits or _may_fit_now(occ, items[last], cap, now))
        ):
            last -= 1
            fits = False
        if last < k:
            break  # nobody from here on can be given nodes now
        fits = True  # items[last] may start now, until a placement busies its time
        if own:
            occ.add(now, now + d, -own)
        s = occ.earliest(n, d, cap, now)
        if own and s > now:
            occ.add(now, s, own)
        occ.add(s, s + d, n)
        starts[k] = s
        fits = s >= now + items[last][3] and not own
    else:
        k = len(items)
    return starts, k


@dataclass
class _LastPlan:
    """A cycle's placements, kept so that the next cycle need not redo them all.

    Placed from scratch, the items placed last cycle get the same starts again if (1) the
    holds from now on are last cycle's with the items it started added, (2) the items are
    last cycle's minus those started, plus arrivals at the end, on the same machine, and
    (3) no start is before now: each start is the earliest that fits (Algorithm 2 for one
    step), the new occupancy before an item is never lower (only items later in the list
    were started, and added), and the old start still fits. Checked exactly by
    :meth:`follows`; otherwise everything is placed again. Running jobs waiting to grow are
    never kept (their steps change with the time).

    Parameters
    ----------
    now, cap
        The cycle's time (seconds) and machine size.
    base
        The holds with the items started added (what the next cycle's holds should be).
    final
        The occupancy after every placement.
    ids, places
        The ``id()`` of the items' views still to start, in order, and the starts of the
        first ``len(places)`` of them.
    """

    now: float
    cap: int
    base: Occupancy
    final: Occupancy
    ids: list[int]
    places: list[float]

    @classmethod
    def build(
        cls,
        now: float,
        cap: int,
        base: Occupancy,
        final: Occupancy,
        items: Sequence[_Item],
        places: list[float],
    ) -> _LastPlan:
        horizon = now + _DUE_S
        due = {k for k, s in enumerate(places) if s <= horizon}
        for k in due:
            s, d, n = places[k], items[k][3], items[k][4]
            base.add(s, s + d, n)
        ids = [id(i[2]) for k, i in enumerate(items) if k not in due]
        return cls(now, cap, base, final, ids, [s for k, s in enumerate(places) if k not in due])

    def follows(self, now: float, cap: int, base: Occupancy, items: Sequence[_Item]) -> bool:
        """Whether a cycle may keep these placements (conditions (1)-(3) above)."""
        n = len(self.ids)
        return (
            now >= self.now
            and cap == self.cap
            and len(items) >= n
            and [id(i[2]) for i in items[:n]] == self.ids
            and min(self.places, default=INFINITY) >= now
            and self.base.after(now).same(base)
        )


def _may_fit_now(occ: Occupancy, item: _Item, cap: int, now: float) -> bool:
    """False when ``item`` cannot start in ``[now, now + _DUE_S]`` against ``occ`` (or more).

    A start there covers ``[now + _DUE_S, now + d)``: too busy there (less the item's own
    reservation, which covers ``[now, now + d)``), it can only start later.
    """
    d, n, own = item[3], item[4], item[5]
    if n > cap:
        return False
    if not d > 2 * _DUE_S:
        return True
    return occ.max_and_last_end(now + _DUE_S, now + d)[0] - own + n <= cap


def _least_busy(occ: Occupancy, now: float) -> int:
    """The fewest nodes busy at any time in ``[now, now + _DUE_S]``."""
    times, vals = occ.times, occ.vals
    j = max(0, bisect.bisect_right(times, now) - 1)
    least = vals[j] if times[j] <= now else 0
    horizon = now + _DUE_S
    j += 1
    while j < len(times) and times[j] <= horizon:
        least = min(least, vals[j])
        j += 1
    return least


def _unprofiled(job: JobView, now: float, end: float, request: int) -> _Entry:
    """A running evolving job that declared no profile: it holds its size until ``end``.

    A request for more nodes is placed like a profile's next step (the job keeps its nodes
    until the grown size fits, for the rest of its run); a release is served at once.
    """
    if request > 0 and job.nodes_max > job.size:
        grown = min(job.size + request, job.nodes_max)
        return _Entry(job, [], ((end - now, grown),), now, (job.size, None, 0.0), False, "grow")
    if request < 0:
        kept = job.size - min(-request, job.size - max(1, job.nodes_min))
        return _Entry(job, [(now, end, kept)], (), end, None, False, "release", due_now=True)
    end = max(end, now + 2 * _DUE_S)  # past its estimate: it ends soon, not now
    return _Entry(job, [(now, end, job.size)], (), end, None, False, "")


def _simple_end(job: JobView, profile: tuple[Step, ...] | None) -> float | None:
    """A running job that only holds its size until its estimated end: that end, snapped.

    ``None`` for the others (evolving jobs with a profile or a request, resizing jobs, no
    estimated end in the view): their entries are built each cycle.
    """
    if job.estimated_end_s is None:
        return None
    if job.kind is JobKind.EVOLVING:
        request = 0 if job.resizing else job.evolving_request
        if profile is not None or request != 0:
            return None
    return _snap(job.estimated_end_s)


def _suffix_sums(steps: Sequence[Step]) -> tuple[float, ...]:
    """``out[i]`` = total duration of steps ``i..``; ``out[len(steps)] = 0``."""
    out = [0.0]
    for d, _ in reversed(steps):
        out.append(out[-1] + d)
    return tuple(reversed(out))


def _step_at(suffix: Sequence[float], left: float, tol: float) -> int:
    """The step under way when ``left`` seconds of work remain (the next one, at a border)."""
    n = len(suffix) - 1
    for k in range(n):
        if left > suffix[k + 1] + tol:
            return k
    return n - 1


__all__ = [
    "FITS",
    "KleinPerez",
    "Occupancy",
    "Plan",
    "ScheduledEP",
    "Step",
    "compact",
    "fit",
    "holds",
    "machine_nodes",
    "merge_steps",
    "schedule",
]
