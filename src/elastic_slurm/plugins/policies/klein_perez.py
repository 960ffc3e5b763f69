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

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.kit.kept_plan import KeptPlan
from elastic_slurm.plugins.kit.nodes import machine_nodes
from elastic_slurm.plugins.kit.occupancy import Occupancy
from elastic_slurm.plugins.kit.view_memo import ViewMemo
from elastic_slurm.plugins.policies.klein_perez_fast import (
    _DUE_S,
    FastPath,
    _least_busy,
    _snap,
)
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


class KleinPerez(FastPath, Policy):
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
      same (:mod:`~elastic_slurm.plugins.kit.kept_plan`), and stops once no job left could
      start now; otherwise it
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
        # per job view: a running view's (view, snapped estimated end or None when not a
        # plain hold, size, nodes held); a pending view's (view, its one step or None, the
        # nodes it needs now)
        self._views = ViewMemo(factor=4, slack=1024)
        self._last: KeptPlan[Any] | None = None  # last fast cycle's placements

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
                "pre-allocation of nodes_max); this is said once per run",
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
