"""The controller loop: observe, follow resizes under way, decide, act, repeat.

Each cycle makes one batched observation of Slurm, advances the resizes under way (by reading
the jobs' acknowledgements), and, when no resize is under way, asks the policy for decisions
on an immutable snapshot and carries them out. The first cycle first settles what a previous
controller left under way (:meth:`~elastic_slurm.controller.actuate.Actuator.recover`, from the
journal). Running the policy only between resizes keeps
it from deciding twice on nodes that are still moving (for example shrinking a second job for
a pending job whose nodes are already being freed). Events seen since the last cycle (jobs
submitted or ended, resizes done) are coalesced into the cycle's trigger.

The loop runs for weeks beside slurmctld, for every user, so it trusts nothing a job wrote:

* **One bad job never stops the others.** Whatever goes wrong while reading one job (its tag,
  its directory, its acknowledgements) or acting on it leaves that job out of the cycle (the
  policy sees it as resizing, and its decisions are dropped): a ``skipped`` record (job,
  reason) goes to the journal and a warning to the log once per job and reason, and
  :func:`~elastic_slurm.controller.metrics.job_skipped` counts it every cycle. An unexpected
  error in a whole cycle is logged with its traceback and the next cycle runs;
  ``max_failed_cycles`` failed cycles in a row stop the loop (:meth:`Controller.run` returns 1,
  for the service manager to restart it with back-off).
* **Durations are bounded.** A job's grace period is made finite and capped
  (:func:`~elastic_slurm.controller.observe.bounded_grace`); and however long a job's grace,
  the policy waits for resizes under way at most ``resize_timeout_s`` (the site's), not for
  every grace period to run out.
* **An outage is not an empty cluster.** When Slurm does not answer
  (:class:`~elastic_slurm.errors.SlurmUnavailableError`, or a transient
  :class:`~elastic_slurm.errors.SlurmCommandError` after the backend's own retries), the cycle
  decides and changes nothing, every resize under way stays open, and the loop checks again
  every ``slurm_outage_poll_s`` seconds for as long as it takes. Both ``jobs()`` and
  ``nodes()`` must answer: nothing is done on half a view. The outage is logged and journaled
  once when it starts and once when it ends, with its length.
* **A size the controller did not set is a resize too.** A running job whose nodes changed
  while the controller had no resize of it under way (``elastic-slurm resize``, ``scontrol``)
  is journaled as a resize ``by`` ``user`` (closed, outcome ``observed``) with an ``outcome``
  record, and the policy leaves the job alone for ``manual_hold_s``; a job following an order
  the controller did not write is left alone until it is done.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from elastic_slurm.adapter.backend import GrowPath, SlurmBackend, helper_parent
from elastic_slurm.adapter.parse import SlurmJob, SlurmNode
from elastic_slurm.adapter.tags import decode
from elastic_slurm.controller import metrics
from elastic_slurm.controller.actuate import Actuator, ResizeOutcome
from elastic_slurm.controller.journal import Journal, ResizeRow
from elastic_slurm.controller.observe import (
    Progress,
    Sweep,
    bounded_grace,
    held_nodes,
    job_progress,
    job_view,
    orphan_helpers,
    size_changes,
    snapshot,
    stale_helpers,
    sweeps,
    torn_nodes,
)
from elastic_slurm.errors import ElasticSlurmError, SlurmCommandError, SlurmUnavailableError
from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState
from elastic_slurm.model.triggers import Trigger, TriggerKind
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.protocol.jobdir import JobDir, JobDirs

log = logging.getLogger(__name__)

ORPHAN_RETRY_S = 60.0
"""Seconds before a refused cancel of an ended job's helper allocation is tried again."""

SPOOL_SWEEP_EVERY_S = 600.0
"""Seconds between two looks of a service controller for spool directories of ended jobs."""


@dataclass(frozen=True)
class Cycle:
    """What one cycle saw and did (``skipped``: jobs left out because of their input)."""

    snapshot: ClusterSnapshot
    trigger: Trigger
    decisions: tuple[Decision, ...]
    finished: tuple[ResizeOutcome, ...]
    skipped: tuple[int, ...] = ()
    observed: tuple[int, ...] = ()


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says Slurm did not answer (as opposed to refusing or a bug)."""
    if isinstance(exc, SlurmUnavailableError):
        return True
    if not isinstance(exc, SlurmCommandError):
        return False
    # a login node that refuses or cannot be found is an outage of Slurm for the controller:
    # it waits for the site to come back instead of counting failed cycles
    return exc.transient or bool(exc.argv and exc.argv[0] == "ssh")


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Skips:
    """The jobs left out of the current cycle, and what was said about each (said once)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.now: set[int] = set()
        self._said: dict[int, set[str]] = {}

    def begin(self) -> None:
        self.now = set()

    def skip(self, job_id: int, exc: Exception) -> None:
        """Leave ``job_id`` out of this cycle because of ``exc``."""
        reason = _one_line(exc)
        if job_id not in self.now:
            metrics.job_skipped()
        self.now.add(job_id)
        said = self._said.setdefault(job_id, set())
        if reason in said:
            return
        said.add(reason)
        self.journal.write("skipped", job_id=job_id, reason=reason)
        log.warning(
            "job %d left out of this cycle: %s",
            job_id,
            reason,
            extra={"job_id": job_id},
            exc_info=None if isinstance(exc, ElasticSlurmError) else exc,
        )

    def end(self) -> None:
        """Forget jobs not skipped this cycle (a later problem of theirs is said again)."""
        for job_id in [j for j in self._said if j not in self.now]:
            del self._said[job_id]


class _TimedSlurm:
    """The backend, with the latency of every call recorded (``metrics.slurm_call``)."""

    def __init__(self, slurm: SlurmBackend) -> None:
        self._slurm = slurm

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._slurm, name)
        if name.startswith("_") or not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.monotonic()
            try:
                return attr(*args, **kwargs)
            finally:
                metrics.slurm_call(name, time.monotonic() - t0)

        return timed


class Controller:
    """Runs ``policy`` against live Slurm.

    Parameters
    ----------
    slurm
        The Slurm backend.
    policy
        The scheduling policy (the same object the simulator can run).
    journal
        Where decisions and outcomes go.
    poll_interval_s
        Seconds between cycles.
    grant_timeout_s, resize_timeout_s, on_overdue, stretch_time_limit
        See :class:`~elastic_slurm.controller.actuate.Actuator`. ``resize_timeout_s`` is also
        the longest the policy waits (seconds) for resizes under way before deciding again.
    min_resize_interval_s
        A job that started or finished a resize less than this long ago (seconds) is left
        alone by the policy for now (shown to it as resizing).
    grow_path
        ``merge`` or ``sibling`` (see :mod:`elastic_slurm.adapter.capabilities`).
    offer_cooldown_s
        A job that rejected an offer, or let one lapse, is left alone this long (seconds).
    dry_run
        Decide and log, but change nothing in Slurm or in any job.
    max_grace_period_s
        The longest grace period (seconds) a job may give itself; longer ones are cut to it.
    slurm_outage_poll_s
        While Slurm does not answer, seconds between two checks.
    manual_hold_s
        A job whose size was changed by someone else than the controller is left alone by the
        policy this long (seconds).
    max_failed_cycles
        :meth:`run` stops (returns 1) after this many cycles in a row failed unexpectedly.
    spool_retention_s
        With a spool (a service controller), a job's directory there is removed once Slurm
        no longer lists the job and nothing was written there for this long (seconds); looked
        for every :data:`SPOOL_SWEEP_EVERY_S` seconds (:meth:`JobDirs.sweep`).
    """

    def __init__(
        self,
        slurm: SlurmBackend,
        policy: Policy,
        journal: Journal | None = None,
        *,
        poll_interval_s: float = 0.5,
        grant_timeout_s: int = 30,
        resize_timeout_s: float = 120.0,
        min_resize_interval_s: float = 2.0,
        grow_path: GrowPath = "merge",
        on_overdue: str = "keep",
        offer_cooldown_s: float = 30.0,
        dry_run: bool = False,
        max_grace_period_s: float = 3600.0,
        slurm_outage_poll_s: float = 5.0,
        manual_hold_s: float = 600.0,
        max_failed_cycles: int = 20,
        stretch_time_limit: bool = True,
        jobdirs: JobDirs | None = None,
        spool_retention_s: float = 86400.0,
    ) -> None:
        self.slurm = slurm
        self.spool_retention_s = spool_retention_s
        self._swept_at: float | None = None  # when the spool was last swept (monotonic)
        #: Where each job's protocol files are; with a spool, jobs do the Slurm side themselves.
        self.jobdirs = jobdirs or JobDirs()
        self._slurm: Any = _TimedSlurm(slurm)
        self.policy = policy
        self.journal = journal or Journal()
        self.poll_interval_s = poll_interval_s
        self.dry_run = dry_run
        self.min_resize_interval_s = min_resize_interval_s
        self.offer_cooldown_s = offer_cooldown_s
        self.resize_timeout_s = resize_timeout_s
        self.max_grace_period_s = max_grace_period_s
        self.slurm_outage_poll_s = slurm_outage_poll_s
        self.manual_hold_s = manual_hold_s
        self.max_failed_cycles = max_failed_cycles
        self.actuator = Actuator(
            self._slurm,
            self.journal,
            grant_timeout_s=grant_timeout_s,
            resize_timeout_s=resize_timeout_s,
            grow_path=grow_path,
            on_overdue=on_overdue,
            stretch_time_limit=stretch_time_limit,
            jobdirs=self.jobdirs,
        )
        self._known: set[int] = set()
        self._requests: dict[int, int] = {}  # evolving requests open last cycle (job: number)
        self.last: Cycle | None = None
        self._recovered = False
        self._last_sizes: list[tuple[int, str, tuple[str, ...]]] | None = None
        #: What the first cycle did about resizes a previous controller left open.
        self.recovery: list[str] = []
        #: Slurm's jobs by id as the last cycle saw them (``None`` before the first).
        self.observed_jobs: dict[int, SlurmJob] | None = None
        self._skips = _Skips(self.journal)
        self._graces: dict[int, str] = {}  # job -> what was said about its grace period
        self._cancel_refused: dict[int, float] = {}  # orphan helper -> refused when
        self._held_before: dict[int, tuple[str, ...]] | None = None
        self._ours_before: set[int] = set()  # jobs the controller resized in the last cycle
        #: jobs whose size someone else changed: job -> when it was seen (seconds since epoch)
        self.manual: dict[int, float] = {}
        self._foreign: set[int] = set()  # jobs following an order the controller did not write
        self._decided_before: set[Decision] = set()  # the policy's last decisions (logged)
        #: jobs whose user asked for a size through the server (a service controller; ``None``:
        #: look at every running job once, after a restart)
        self._sizes_asked: set[int] | None = None
        self._sizes_lock = threading.Lock()
        #: since when (seconds since the epoch) Slurm has not answered; ``None``: it answers
        self.outage_since: float | None = None
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ the cycle
    def step(self) -> Cycle:
        """Run one cycle and return what it saw and did.

        Raises
        ------
        SlurmUnavailableError, SlurmCommandError
            Slurm did not answer (see :func:`is_outage`): nothing was decided or changed on
            the strength of a partial view.
        """
        listed, nodes = self._observe()
        self._skips.begin()
        seen = {j.job_id for j in listed}  # every id Slurm lists, screened out or not
        listed = self._screen(listed)
        ours = set(self.actuator.in_flight)
        # a service controller leaves the helpers of running jobs to their launchers (it
        # cannot tell a grant under way from a stale one), but still cancels those whose job
        # has ended (a launcher killed before it could): that needs operator rights
        sweep = not self.dry_run and not self.jobdirs.by_job
        orphans = self._orphans(listed) if not self.dry_run else []
        if orphans:
            # a helper allocation must never outlive its job (the launcher also cancels them)
            log.warning("cancelling helper allocations %s: their jobs have ended", orphans)
            self.journal.write("note", message=f"cancelled orphan helpers {orphans}")
            self._cancel(orphans, orphans=True)
        stale = (
            stale_helpers(
                listed,
                self.actuator.in_flight,
                time.time(),
                self.actuator.grant_timeout_s + 10.0,
                on_error=self._skips.skip,
                jobdirs=self.jobdirs,
            )
            if sweep
            else []
        )
        if stale:
            log.warning("cancelling helper allocations %s: no resize uses them", stale)
            self.journal.write("note", message=f"cancelled stale helpers {stale}")
            self._cancel(stale)
            by_id = {j.job_id: j for j in listed}
            ours |= {p for h in stale if (p := helper_parent(by_id[h].name)) is not None}
        if not self._recovered and not self.dry_run:
            # what a previous controller left under way is settled before anything new
            self.recovery = self.actuator.recover(listed)
            self._recovered = True
            if self.recovery:
                listed = self._screen(self._slurm.jobs())
        jobs = {j.job_id: j for j in listed}
        self.observed_jobs = jobs  # the protocol server's view of who owns which job
        held = held_nodes(listed)
        ours |= set(self.actuator.in_flight)
        finished = self._poll(jobs)  # the actuator counts the resizes it closes (metrics)
        progress = self._progress(listed)
        observed = self._observe_manual(jobs, held, ours | {o.job_id for o in finished})
        self._serve_sizes(jobs, held, progress)
        busy = self._busy(jobs) | self._skips.now
        snap = snapshot(list(jobs.values()), nodes, resizing=busy, progress=progress)
        trigger = self._trigger(snap, finished, progress)
        self._journal_sizes(snap)
        decisions: tuple[Decision, ...] = ()
        if self._may_decide():
            decisions = tuple(
                d for d in self.policy.decide(snap, trigger) if d.job_id not in self._skips.now
            )
            # a policy decides again, every cycle, what Slurm has not done yet (a job that
            # pends): only what it did not decide in the previous cycle is logged (and, in a
            # dry run, journaled), or a controller running for weeks fills the site's disk
            told = [d for d in decisions if d not in self._decided_before]
            self._decided_before = set(decisions)
            if told:
                log.info(
                    "policy %s decided: %s",
                    self.policy.name,
                    "; ".join(f"{type(d).__name__} job {d.job_id} ({d.reason})" for d in told),
                )
            if self.dry_run:
                for d in told:
                    self.journal.write(
                        "decision",
                        decision=type(d).__name__,
                        job_id=d.job_id,
                        count=d.nodes if isinstance(d, Start) else d.count,
                        dry_run=True,
                        reason=d.reason,
                    )
            else:
                arrays = sweeps(listed)
                self._apply_to_sweeps([d for d in decisions if d.job_id in arrays], arrays)
                rest = [d for d in decisions if d.job_id not in arrays]
                self._apply(rest, jobs, held, progress, snap)
        self._held_before = held
        self._ours_before = ours | set(self.actuator.in_flight)
        # what no later cycle reads: the outcomes and failed grants past every cool-down,
        # the notes on jobs Slurm no longer lists (bounded memory over weeks)
        window_s = max(self.min_resize_interval_s, self.offer_cooldown_s)
        self.actuator.forget(jobs.keys(), time.time() - window_s)
        self._sweep_spool(seen | set(self.actuator.in_flight))
        skipped = tuple(sorted(self._skips.now))
        self._skips.end()
        self.last = Cycle(snap, trigger, decisions, finished, skipped, observed)
        return self.last

    def _sweep_spool(self, live: set[int]) -> None:
        """Remove the spool's directories of jobs long gone (never raises; a service controller)."""
        if not self.jobdirs.by_job or self.dry_run:
            return
        now = time.monotonic()
        if self._swept_at is not None and now - self._swept_at < SPOOL_SWEEP_EVERY_S:
            return
        self._swept_at = now
        try:
            removed = self.jobdirs.sweep(live, self.spool_retention_s)
        except OSError as exc:
            log.warning("could not sweep the spool %s: %s", self.jobdirs.spool, exc)
            return
        if removed:
            log.info("removed the spool directories of %d ended job(s)", len(removed))

    def _orphans(self, listed: list[SlurmJob]) -> list[int]:
        """Helpers of ended jobs to cancel this cycle.

        Those whose cancel Slurm refused less than :data:`ORPHAN_RETRY_S` seconds ago wait (a
        service user without operator rights is refused every time).
        """
        now = time.monotonic()
        found = orphan_helpers(listed)
        refused = self._cancel_refused
        for helper in [h for h in refused if h not in found]:
            del refused[helper]  # ended, or its job is back
        return [h for h in found if now - refused.get(h, -math.inf) >= ORPHAN_RETRY_S]

    def _cancel(self, helpers: list[int], *, orphans: bool = False) -> None:
        """Cancel helper allocations; a refusal is logged (the next cycle tries again).

        ``orphans``: the helpers of ended jobs. A refusal is remembered per helper, said once,
        and tried again after :data:`ORPHAN_RETRY_S` seconds.
        """
        try:
            self._slurm.cancel(*helpers)
        except SlurmCommandError as exc:
            if is_outage(exc):
                raise
            if not orphans:
                log.warning("could not cancel helper allocations %s: %s", helpers, _one_line(exc))
                return
            new = [h for h in helpers if h not in self._cancel_refused]
            now = time.monotonic()
            self._cancel_refused.update((h, now) for h in helpers)
            if new:
                hint = (
                    " (a service controller needs Slurm operator rights for this: see "
                    "docs/install-site.md)"
                    if self.jobdirs.by_job
                    else ""
                )
                log.warning(
                    "could not cancel helper allocations %s of ended jobs: %s%s; trying again "
                    "every %g s",
                    new,
                    _one_line(exc),
                    hint,
                    ORPHAN_RETRY_S,
                )
            return
        for helper in helpers:
            self._cancel_refused.pop(helper, None)

    def _observe(self) -> tuple[list[SlurmJob], list[SlurmNode]]:
        """Slurm's jobs and nodes, both or neither (an outage raises), read to agree.

        They are two queries: a job that ends between them is listed running on nodes
        already idle (:func:`~elastic_slurm.controller.observe.torn_nodes`). Then the jobs
        are read again, and if the view is still torn (a job started between the reads), the
        nodes; a node a listed running job still holds after that is never shown idle.
        """
        slurm = self._slurm
        listed, nodes = slurm.jobs(), slurm.nodes()
        torn = torn_nodes(listed, nodes)
        if torn:  # a job ended between the reads: its end is in the jobs read now
            log.debug("nodes %s idle but held by a running job: reading the jobs again", torn)
            listed = slurm.jobs()
            torn = torn_nodes(listed, nodes)
        if torn:  # a job started between the reads: its nodes are in the nodes read now
            log.debug("nodes %s idle but held by a running job: reading the nodes again", torn)
            nodes = slurm.nodes()
            torn = torn_nodes(listed, nodes)
        if torn:  # still torn: never show a node a listed running job holds as idle
            held = set(torn)
            nodes = [replace(n, state="allocated") if n.name in held else n for n in nodes]
        return listed, nodes

    def _screen(self, listed: list[SlurmJob]) -> list[SlurmJob]:
        """The jobs with their tags checked and grace periods bounded, one job at a time.

        A job whose tag cannot be read is skipped and shown as untagged (rigid, at its size).
        """
        out = []
        for job in listed:
            try:
                job_view(job)  # everything the snapshot reads from the tag
                job, why = bounded_grace(job, self.max_grace_period_s)
            except Exception as exc:
                self._skips.skip(job.job_id, exc)
                job = replace(job, comment="")
                why = ""
            if why and self._graces.get(job.job_id) != why:
                self._graces[job.job_id] = why
                log.warning("job %d: %s", job.job_id, why, extra={"job_id": job.job_id})
                self.journal.write("note", job_id=job.job_id, message=why)
            out.append(job)
        if len(self._graces) > 4 * len(listed) + 100:
            ids = {j.job_id for j in listed}
            self._graces = {k: v for k, v in self._graces.items() if k in ids}
        return out

    def _progress(self, listed: Sequence[SlurmJob]) -> dict[int, Progress]:
        """Running elastic jobs' progress, and which follow an order that is not ours."""
        progress = {}
        foreign = set()
        for j in listed:
            if j.model_state is not JobState.RUNNING or j.job_id in self._skips.now:
                continue
            tag = decode(j.comment)
            if tag is None or not tag.kind.resizable:
                continue
            try:
                progress[j.job_id] = job_progress(j, self.jobdirs)
                if j.workdir and j.job_id not in self.actuator.in_flight:
                    order = self.jobdirs.of(j.workdir, j.job_id, user=j.user).open_order()
                    if order is not None and not self.journal.has_resize(j.job_id, order.seq):
                        foreign.add(j.job_id)
            except Exception as exc:
                self._skips.skip(j.job_id, exc)
        for job_id in foreign - self._foreign:
            log.info(
                "job %d follows an order the controller did not write (elastic-slurm resize); "
                "left alone until it is done",
                job_id,
                extra={"job_id": job_id},
            )
        self._foreign = foreign
        return progress

    def _poll(self, jobs: dict[int, SlurmJob]) -> tuple[ResizeOutcome, ...]:
        """Advance the resizes under way; one that fails leaves only its job out."""
        first = len(self.actuator.outcomes)
        try:
            self.actuator.poll(jobs)
        except Exception as exc:
            if is_outage(exc):
                raise
            # find the culprit(s): advance each remaining resize on its own
            for job_id, r in list(self.actuator.in_flight.items()):
                others = {k: v for k, v in self.actuator.in_flight.items() if k != job_id}
                self.actuator.in_flight.clear()
                self.actuator.in_flight[job_id] = r
                try:
                    self.actuator.poll(jobs)
                except Exception as one:
                    if is_outage(one):
                        raise
                    self._skips.skip(job_id, one)
                finally:
                    self.actuator.in_flight.update(others)
        return tuple(self.actuator.outcomes[first:])

    def _apply(
        self,
        decisions: Sequence[Decision],
        jobs: dict[int, SlurmJob],
        held: dict[int, tuple[str, ...]],
        progress: dict[int, Progress],
        snap: ClusterSnapshot,
    ) -> None:
        """Judge the decisions together, then carry out the legal ones one at a time.

        The shared legality check (:func:`elastic_slurm.plugins.legality.check`) sees the whole
        batch on the snapshot the policy decided on; an illegal decision is refused, journaled
        and counted, and never reaches Slurm. A legal one that fails leaves only its job out.
        """
        verdicts = self.actuator.judge(decisions, jobs, progress, snapshot=snap)
        for verdict in verdicts:
            if not verdict.legal:
                continue
            d = verdict.decision
            metrics.decision(type(d).__name__, legal=True)
            try:
                self.actuator.carry_out(d, jobs, held, progress)
            except Exception as exc:
                if is_outage(exc):
                    raise
                self._skips.skip(d.job_id, exc)

    def _may_decide(self) -> bool:
        """Whether the policy may decide: every resize under way is overdue or old enough.

        Old enough: older than ``resize_timeout_s`` (the site's), whatever grace period its
        job gave itself, so no job can hold everyone's decisions for longer.
        """
        now = time.time()
        return all(
            r.overdue or now - r.decided_at >= self.resize_timeout_s
            for r in self.actuator.in_flight.values()
        )

    def _observe_manual(
        self, jobs: dict[int, SlurmJob], held: dict[int, tuple[str, ...]], ours: set[int]
    ) -> tuple[int, ...]:
        """Journal the size changes the controller did not make; hold those jobs."""
        before = self._held_before
        if before is None:
            return ()
        now = time.time()
        seen = []
        for job_id, old, new in size_changes(before, held, ours | self._ours_before):
            job = jobs[job_id]
            seq, how = 0, "resized outside the controller (elastic-slurm resize or scontrol)"
            try:
                if job.workdir:
                    last = self.jobdirs.of(job.workdir, job_id, user=job.user).last_order_seq()
                    if last and not self.journal.has_resize(job_id, last):
                        seq, how = last, f"elastic-slurm resize (order {last})"
            except Exception as exc:
                self._skips.skip(job_id, exc)
            action = "expand" if len(new) > len(old) else "shrink"
            self.journal.record_observed(
                ResizeRow(job_id, seq, action, "observed", old, new, now, how, by="user")
            )
            self.journal.write(
                "outcome",
                job_id=job_id,
                seq=seq,
                action=action,
                ok=True,
                nodes=list(new),
                before=list(old),
                by="user",
                message=how,
            )
            metrics.resize(action, "observed")
            log.info(
                "job %d: %s from %d to %d node(s) by its user (%s); the policy leaves it "
                "alone for %g s",
                job_id,
                action,
                len(old),
                len(new),
                how,
                self.manual_hold_s,
                extra={"job_id": job_id},
            )
            self.manual[job_id] = now
            seen.append(job_id)
        self.manual = {j: t for j, t in self.manual.items() if now - t < self.manual_hold_s}
        return tuple(seen)

    def size_asked(self, job_id: int) -> None:
        """The protocol server's thread: job ``job_id``'s user asked for a size (by hand)."""
        with self._sizes_lock:
            if self._sizes_asked is not None:
                self._sizes_asked.add(job_id)

    def _serve_sizes(
        self,
        jobs: dict[int, SlurmJob],
        held: dict[int, tuple[str, ...]],
        progress: dict[int, Any],
    ) -> None:
        """Carry out the sizes users asked for through a service controller's server.

        What ``elastic-slurm resize`` does itself under a root controller: the size goes past
        the policy, not past the legality check, the resize is journaled as the user's, and
        the policy leaves the job alone for ``manual_hold_s``. The answer in the spool names
        the order, or why there is none.
        """
        if not self.jobdirs.by_job or self.dry_run:
            return
        with self._sizes_lock:
            asked = set(jobs) if self._sizes_asked is None else self._sizes_asked
            self._sizes_asked = set()
        for job_id in sorted(asked):
            job = jobs.get(job_id)
            if job is None or job.model_state is not JobState.RUNNING:
                continue
            try:
                jobdir = self.jobdirs.of(job.workdir, job_id, user=job.user)
                request = jobdir.size_request()
                answer = jobdir.size_answer()
                if request is None or (
                    answer is not None and answer["number"] >= request["number"]
                ):
                    continue
                self._serve_size(job, request, jobdir, jobs, held, progress)
            except Exception as exc:
                self._skips.skip(job_id, exc)

    def _serve_size(
        self,
        job: SlurmJob,
        request: dict[str, Any],
        jobdir: JobDir,
        jobs: dict[int, SlurmJob],
        held: dict[int, tuple[str, ...]],
        progress: dict[int, Any],
    ) -> None:
        """Carry out one size asked by hand (``request``: ``number``, ``nodes``, ``user``)."""
        job_id, number, nodes = job.job_id, int(request["number"]), int(request["nodes"])
        now_on = held.get(job_id, job.nodes)
        delta = nodes - len(now_on)
        why = f"asked by {request['user']}"
        if delta == 0:
            jobdir.write_size_answer(
                number, refused=f"job {job_id} already runs on {nodes} node(s)"
            )
            return
        decision: Decision = (
            Expand(job_id, delta, why) if delta > 0 else Shrink(job_id, -delta, why)
        )
        (verdict,) = self.actuator.apply([decision], jobs, held, progress)
        r = self.actuator.in_flight.get(job_id)
        if verdict.legal and r is not None and r.reason == why:
            self.journal.set_requested_by(job_id, r.seq, "user")
            self.manual[job_id] = time.time()  # the policy leaves it alone for a while
            jobdir.write_size_answer(number, seq=r.seq)
            log.info("job %d: size %d asked by %s: order %d", job_id, nodes, request["user"], r.seq)
            return
        refused = verdict.reason or self.actuator.not_ordered.pop(
            job_id, "the order could not be issued"
        )
        jobdir.write_size_answer(number, refused=refused)
        log.info("job %d: size %d asked by %s refused: %s", job_id, nodes, request["user"], refused)

    def _journal_sizes(self, snap: ClusterSnapshot) -> None:
        """Journal a ``sizes`` record whenever a job's state or node list changed.

        The record: ``nodes_total`` (the cluster's nodes) and ``jobs``, one dict per pending or
        running job (``job_id``, ``name``, ``kind``, ``state``, ``nodes``: the node names it
        holds, empty while pending). ``elastic-slurm report`` draws jobs and utilisation from
        these records.
        """
        jobs = [
            {
                "job_id": j.job_id,
                "name": j.name,
                "kind": j.kind.value,
                "state": j.state.value,
                "nodes": list(j.nodes) if j.state is JobState.RUNNING else [],
            }
            for j in snap.jobs
        ]
        key = [(j["job_id"], j["state"], tuple(j["nodes"])) for j in jobs]
        if key != self._last_sizes:
            self._last_sizes = key
            self.journal.write("sizes", nodes_total=snap.node_count, jobs=jobs)

    def _apply_to_sweeps(self, decisions: list[Decision], arrays: dict[int, Sweep]) -> None:
        """Grow or shrink elastic sweeps by their throttle (immediate; running tasks go on)."""
        for d in decisions:
            if not isinstance(d, Expand | Shrink):
                continue
            sweep = arrays[d.job_id]
            size = len(sweep.nodes)
            target = size + d.count if isinstance(d, Expand) else size - d.count
            throttle = sweep.throttle_for(target)
            t0 = time.time()
            try:
                self._slurm.set_array_throttle(sweep.array_id, throttle)
                ok, message = True, ""
            except SlurmCommandError as exc:
                ok, message = False, str(exc)
            metrics.resize(type(d).__name__.lower(), "done" if ok else "failed")
            self.journal.write(
                "outcome",
                job_id=sweep.array_id,
                action=type(d).__name__.lower(),
                ok=ok,
                throttle=throttle,
                message=message,
                reason=d.reason,
            )
            log.info(
                "sweep %d: %s to %d task(s) at once (%s)",
                sweep.array_id,
                type(d).__name__.lower(),
                throttle,
                d.reason,
            )
            self.actuator.outcomes.append(
                ResizeOutcome(
                    job_id=sweep.array_id,
                    seq=0,
                    action=type(d).__name__.lower(),
                    before=sweep.nodes,
                    after=(),
                    ok=ok,
                    seconds=time.time() - t0,
                    strategy="throttle",
                    phases_s={},
                    message=message,
                    finished_at=time.time(),
                )
            )

    def _busy(self, jobs: dict[int, SlurmJob]) -> set[int]:
        """Jobs the policy must leave alone now.

        Those resizing, resized or started too recently, that declined an offer lately, whose
        last expansion Slurm did not grant lately (``offer_cooldown_s``), or that someone else
        resized (lately, or under way).
        """
        now = time.time()
        recent = {o.job_id: o.finished_at for o in self.actuator.outcomes}
        busy = set(self.actuator.in_flight)
        busy |= {j for j, t in recent.items() if now - t < self.min_resize_interval_s}
        busy |= {
            o.job_id
            for o in self.actuator.outcomes
            if o.declined and now - o.finished_at < self.offer_cooldown_s
        }
        busy |= {
            j for j, t in self.actuator.failed_grants.items() if now - t < self.offer_cooldown_s
        }
        busy |= {j for j, t in self.manual.items() if now - t < self.manual_hold_s}
        busy |= self._foreign
        for job_id, job in jobs.items():
            last = max(job.start_time_s or 0.0, recent.get(job_id, 0.0))
            if now - last < self.min_resize_interval_s:
                busy.add(job_id)
        return busy

    def _trigger(
        self,
        snap: ClusterSnapshot,
        finished: tuple[ResizeOutcome, ...],
        progress: Mapping[int, Progress],
    ) -> Trigger:
        """What happened since the last cycle, as the simulator reports the same events.

        A job seen for the first time was submitted, one no longer listed ended, a closed
        resize is done, and an evolving job's request that was not open last cycle is an
        evolving request (by its number: a new request for the same count is new too).
        """
        ids = {j.job_id for j in snap.jobs}
        kinds = set()
        if ids - self._known:
            kinds.add(TriggerKind.JOB_SUBMITTED)
        if self._known - ids:
            kinds.add(TriggerKind.JOB_ENDED)
        if finished:
            kinds.add(TriggerKind.RESIZE_DONE)
        requests = {  # the views carry an evolving job's request only
            j.job_id: progress[j.job_id].request_number
            for j in snap.jobs
            if j.evolving_request and j.job_id in progress
        }
        asking = {j for j, n in requests.items() if self._requests.get(j) != n}
        if asking:
            kinds.add(TriggerKind.EVOLVING_REQUEST)
        changed = tuple(sorted((ids ^ self._known) | {o.job_id for o in finished} | asking))
        self._known = ids
        self._requests = requests
        return Trigger(frozenset(kinds or {TriggerKind.PERIODIC}), changed)

    # ------------------------------------------------------------------ the loop
    def stop(self) -> None:
        """Ask :meth:`run` to return after the cycle under way (safe from a signal handler)."""
        self._stopping.set()

    def run(self, stop: Callable[[Cycle], bool] | None = None) -> int:
        """Run cycles every ``poll_interval_s`` seconds until stopped.

        Stops when ``stop(cycle)`` returns True or :meth:`stop` is called (the cycle under way
        is finished first), and returns 0; or after ``max_failed_cycles`` cycles in a row
        failed unexpectedly, and returns 1. A cycle that fails is logged with its traceback
        and journaled (``note``), and the next one runs; while Slurm does not answer the loop
        waits ``slurm_outage_poll_s`` between checks, for as long as it takes.

        Returns
        -------
        int
            The exit status for a service manager: 0 stopped, 1 gave up.
        """
        self.policy.prepare()  # a one-off load, before the first cycle's time is taken
        failed = 0
        while not self._stopping.is_set():
            t0 = time.monotonic()
            try:
                cycle = self.step()
            except Exception as exc:
                seconds = time.monotonic() - t0
                if is_outage(exc):
                    metrics.cycle(seconds, "outage")
                    self._slurm_down(exc)
                    self._stopping.wait(self.slurm_outage_poll_s)
                    continue
                failed += 1
                metrics.cycle(seconds, "error")
                log.error(
                    "cycle failed (%d in a row, at most %d): %s",
                    failed,
                    self.max_failed_cycles,
                    _one_line(exc),
                    exc_info=exc,
                )
                self.journal.write("note", message=f"cycle failed: {_one_line(exc)}")
                if failed >= self.max_failed_cycles:
                    log.critical(
                        "stopping: %d cycles in a row failed; the resizes under way stay in "
                        "the journal for the next controller",
                        failed,
                    )
                    return 1
                self._stopping.wait(self.poll_interval_s)
                continue
            failed = 0
            seconds = time.monotonic() - t0
            metrics.cycle(seconds, "ok")
            self._slurm_up()
            if stop is not None and stop(cycle):
                return 0
            self._stopping.wait(max(0.0, self.poll_interval_s - seconds))
        return 0

    def _slurm_down(self, exc: BaseException) -> None:
        """Say once that Slurm does not answer."""
        if self.outage_since is not None:
            return
        self.outage_since = time.time()
        metrics.slurm_reachable(False)
        message = _one_line(exc)
        log.warning(
            "Slurm unreachable: deciding and changing nothing until it answers (checking every "
            "%g s); %d resize(s) under way stay open: %s",
            self.slurm_outage_poll_s,
            len(self.actuator.in_flight),
            message,
        )
        self.journal.write("outage", state="down", message=message)

    def _slurm_up(self) -> None:
        """Say once that Slurm answers again, and after how long."""
        metrics.slurm_reachable(True)
        if self.outage_since is None:
            return
        seconds = time.time() - self.outage_since
        self.outage_since = None
        log.warning("Slurm reachable again after %.0f s; deciding again", seconds)
        self.journal.write("outage", state="up", seconds=round(seconds, 3))
