"""Carry out a policy's decisions on live Slurm and follow each resize to its end.

Decisions are judged first (:func:`elastic_slurm.plugins.legality.check`, the function the
simulator calls too): an illegal one (a rigid job resized, a size outside the job's range, a
second resize of a job, more nodes than are free...) is refused: journaled (a ``refused``
record: job, decision, reason), logged as a warning, counted
(:func:`elastic_slurm.controller.metrics.decision`), and never sent to Slurm.

One resize per job at a time, as a state machine driven by the job's acknowledgements (its
phases and the one table of their transitions: :mod:`elastic_slurm.controller.resize_state`):

* **expand**: grow the allocation (expander merge), then order the job onto the new node list,
  then wait for its ``done`` acknowledgement;
* **shrink**: order the job onto the nodes it keeps, wait until it reports the others
  ``vacated``, only then give them back to Slurm, then wait for ``done``.

A job that does not follow an order within its grace period (its ``--grace-period``, else the
controller's ``resize_timeout_s``) is reported overdue in the journal and the log, and then
handled as the site's ``controller.on_overdue`` says (:data:`OVERDUE_ACTIONS`):

* ``keep`` (default): the job keeps its nodes and its work; the order stays open;
* ``force``: a shrink is carried out in Slurm anyway, and the resize closed as failed: Slurm
  ends whatever the job still runs on the nodes it gives back (the job may fail);
* ``requeue``: the job is put back in the queue (``scontrol requeue``); it starts again from
  its batch script, and from its last checkpoint if it wrote one.

Otherwise nodes are never taken from a job that has not vacated them.

A shrink slows a malleable job down, and Slurm ends a job at its time limit whatever its
size: once Slurm has taken the nodes back, the job's time limit is stretched by
:func:`elastic_slurm.controller.stretch.stretched_limit_s` (journaled as a note; a refusal is a
warning and leaves the shrink in place). A site turns this off with
``controller.stretch_time_limit: false``.

A job that registered with the controller's server (:mod:`elastic_slurm.protocol`) is
*offered* each resize before it is ordered (phase ``offered``; Ghafoor's negotiation): an
expansion's hosts are granted first and offered, a shrink is offered as "give back k nodes".
The job accepts (the order follows), rejects (nothing changes; granted hosts go back to
Slurm), or counters with another count, which the controller answers with a *final* offer
(:func:`~elastic_slurm.model.offer.final_count`). An offer left unanswered past the grace
period is handled by ``on_overdue`` too: ``keep`` withdraws it, ``force`` orders and carries
out a shrink anyway, ``requeue`` requeues the job. A job that declined (rejected or let an
offer lapse) is not offered anything for ``offer_cooldown_s`` (the daemon's business).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from elastic_slurm.adapter.backend import GrowPath, SlurmBackend, helper_parent
from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.adapter.tags import decode
from elastic_slurm.controller import metrics
from elastic_slurm.controller.journal import Journal, ResizeRow
from elastic_slurm.controller.observe import snapshot
from elastic_slurm.controller.resize_state import ResizeEvent, ResizePhase, transition
from elastic_slurm.controller.starts import Starts
from elastic_slurm.controller.stretch import stretched_limit_s
from elastic_slurm.errors import (
    JobInputError,
    ResizeError,
    SlurmCommandError,
    SlurmUnavailableError,
)
from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.offer import AnswerKind, Offer, final_count
from elastic_slurm.model.resize_order import AckStatus, ResizeAction, ResizeOrder
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState
from elastic_slurm.plugins import legality
from elastic_slurm.protocol.jobdir import JobDir, JobDirs

log = logging.getLogger(__name__)

#: What may happen to a job that misses the grace period of an order (see the module docstring).
OVERDUE_ACTIONS = ("keep", "force", "requeue")


def choose_keep(nodes: Sequence[str], batch_host: str | None, count: int) -> tuple[str, ...]:
    """The nodes a job keeps when it gives back ``count`` of ``nodes``.

    The batch host is always kept (the job's batch script runs there); the nodes given back are
    the last ones of the list (in Slurm's order, usually the most recently added).

    Raises
    ------
    ResizeError
        ``count`` is not between 1 and ``len(nodes) - 1``.

    >>> choose_keep(["n1", "n2", "n3", "n4"], "n1", 2)
    ('n1', 'n2')
    >>> choose_keep(["n1", "n2", "n3"], "n3", 1)
    ('n1', 'n3')
    """
    if not 1 <= count < len(nodes):
        raise ResizeError(f"cannot give back {count} of {len(nodes)} node(s)")
    keep_n = len(nodes) - count
    ordered = [n for n in nodes if n == batch_host] + [n for n in nodes if n != batch_host]
    kept = set(ordered[:keep_n])
    return tuple(n for n in nodes if n in kept)


@dataclass
class Resize:
    """A resize under way (mutable: it moves through its phases)."""

    job_id: int
    seq: int
    action: ResizeAction
    before: tuple[str, ...]
    target: tuple[str, ...]
    jobdir: JobDir
    decided_at: float
    phase: ResizePhase
    reason: str = ""
    phases_s: dict[str, float] = field(default_factory=dict)
    overdue: bool = False
    grace_s: float | None = None
    offer: Offer | None = None  # the offer standing (phase ``offered``)
    since: float = 0.0  # when the current wait (answer, vacate, done) began
    count: int = (
        0  # an expansion the job asks Slurm for itself: how many nodes (a service controller)
    )

    def __post_init__(self) -> None:
        if not self.since:
            self.since = self.decided_at


@dataclass(frozen=True)
class ResizeOutcome:
    """A finished resize: sizes before and after (as the job reported), time, strategy."""

    job_id: int
    seq: int
    action: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    ok: bool
    seconds: float
    strategy: str
    phases_s: dict[str, float]
    message: str = ""
    finished_at: float = 0.0
    declined: bool = False  # the job rejected the offer or let it lapse
    outcome: str = ""  # the journal's word for it when not ``done``/``failed`` (``rolled_back``)


class Actuator:
    """Turns decisions into Slurm operations and resize orders, and tracks them.

    Parameters
    ----------
    slurm
        The Slurm backend.
    journal
        Where decisions and outcomes are recorded.
    grant_timeout_s
        How long (seconds) an expansion may wait for Slurm to grant nodes.
    grow_path
        ``merge`` or ``sibling`` (what ``elastic-slurm doctor`` chose for the site).
    resize_timeout_s
        After how long (seconds) an unanswered order is overdue, for a job that did not give
        its own grace period at submission.
    on_overdue
        One of :data:`OVERDUE_ACTIONS`: what happens to a job once an order is overdue.
    stretch_time_limit
        Stretch a job's time limit after a shrink (see the module docstring).

    Raises
    ------
    ValueError
        ``on_overdue`` is not one of :data:`OVERDUE_ACTIONS`.
    """

    def __init__(
        self,
        slurm: SlurmBackend,
        journal: Journal,
        *,
        grant_timeout_s: int = 30,
        grow_path: GrowPath = "merge",
        resize_timeout_s: float = 120.0,
        on_overdue: str = "keep",
        stretch_time_limit: bool = True,
        jobdirs: JobDirs | None = None,
    ) -> None:
        if on_overdue not in OVERDUE_ACTIONS:
            raise ValueError(f"on_overdue must be one of {OVERDUE_ACTIONS}, got {on_overdue!r}")
        self.on_overdue = on_overdue
        self.stretch_time_limit = stretch_time_limit
        self.slurm = slurm
        self.journal = journal
        self.grant_timeout_s = grant_timeout_s
        self.grow_path: GrowPath = grow_path
        #: Where each job's protocol files are. With a spool (a service controller) the job
        #: does the Slurm side of its resizes itself: expansions are ordered by count and the
        #: job asks Slurm for the nodes; a shrink's nodes are given back by the job's launcher.
        self.jobdirs = jobdirs or JobDirs()
        self.resize_timeout_s = resize_timeout_s
        self.in_flight: dict[int, Resize] = {}
        #: The resizes closed lately, oldest first (:meth:`forget` drops the old ones).
        self.outcomes: list[ResizeOutcome] = []
        #: When each job's last expansion was not granted (epoch seconds): the daemon leaves
        #: the job alone for a while instead of asking Slurm again every cycle.
        self.failed_grants: dict[int, float] = {}
        #: Why each job's last expansion closed at once, before any order (its last words).
        self.not_ordered: dict[int, str] = {}
        self.starts = Starts(slurm, journal)

    def forget(self, live: Collection[int], before_s: float) -> None:
        """Drop what is kept per job once it can no longer matter.

        A controller runs for weeks: without this, its outcomes and per-job notes would grow
        with every job and resize it ever saw, and so would the cost of each cycle that reads
        them. Outcomes closed and failed grants noted before ``before_s`` (seconds since the
        epoch) go; so do the notes on jobs not in ``live`` (the ids Slurm lists now) that
        are not resizing, here and in :class:`Starts`.
        """
        self.outcomes = [o for o in self.outcomes if o.finished_at >= before_s]
        if self.failed_grants:
            self.failed_grants = {j: t for j, t in self.failed_grants.items() if t >= before_s}
        keep = set(live) | set(self.in_flight)
        if self.not_ordered:
            self.not_ordered = {j: m for j, m in self.not_ordered.items() if j in keep}
        self.starts.forget(keep)

    # ------------------------------------------------------------------ decisions
    def apply(
        self,
        decisions: Sequence[Decision],
        jobs: Mapping[int, SlurmJob],
        held: Mapping[int, tuple[str, ...]] | None = None,
        progress: Mapping[int, Any] | None = None,
        *,
        snapshot: ClusterSnapshot | None = None,
    ) -> list[legality.Verdict]:
        """Judge ``decisions``, refuse the illegal ones, and start carrying out the others.

        ``jobs`` is this cycle's Slurm view by id; ``held`` each running job's nodes, its
        sibling allocations' included (default: the job's own); ``progress`` the jobs' open
        evolving requests (:class:`~elastic_slurm.controller.observe.Progress`): a request that
        a decision serves is answered with the order's number. ``snapshot`` is what the policy
        decided on; without it, one is made from ``jobs`` and Slurm's nodes (one more call to
        Slurm), with the resizes under way as resizing.

        Returns
        -------
        list[legality.Verdict]
            Each decision with its verdict, in order.

        Raises
        ------
        SlurmCommandError
            Only without ``snapshot``: Slurm's nodes could not be read (nothing was done).
        """
        verdicts = self.judge(decisions, jobs, progress, snapshot=snapshot)
        for verdict in verdicts:
            if verdict.legal:
                self.carry_out(verdict.decision, jobs, held, progress)
        return verdicts

    def judge(
        self,
        decisions: Sequence[Decision],
        jobs: Mapping[int, SlurmJob],
        progress: Mapping[int, Any] | None = None,
        *,
        snapshot: ClusterSnapshot | None = None,
    ) -> list[legality.Verdict]:
        """Judge a batch of decisions together; refuse (journal, log, count) the illegal ones.

        The batch is judged as a whole (:func:`elastic_slurm.plugins.legality.check`): a Start
        may count on the nodes an earlier Shrink of the same batch frees. Nothing is carried
        out; :meth:`carry_out` does that for each legal verdict.

        Returns
        -------
        list[legality.Verdict]
            Each decision with its verdict, in order.

        Raises
        ------
        SlurmCommandError
            Only without ``snapshot``: Slurm's nodes could not be read (nothing was done).
        """
        decisions = list(decisions)
        if not decisions:
            return []
        snap = snapshot if snapshot is not None else self._snapshot(jobs, progress or {})
        verdicts = legality.check(snap, decisions)
        for verdict in verdicts:
            if not verdict.legal:
                self._refuse(verdict.decision, verdict.reason)
        return verdicts

    def carry_out(
        self,
        d: Decision,
        jobs: Mapping[int, SlurmJob],
        held: Mapping[int, tuple[str, ...]] | None = None,
        progress: Mapping[int, Any] | None = None,
    ) -> None:
        """Start carrying out one decision that :meth:`judge` found legal.

        Raises
        ------
        ElasticSlurmError, OSError
            Whatever handling this one job raised; the caller leaves that job out of the cycle.
        """
        held = held or {}
        progress = progress or {}
        if isinstance(d, Start):
            self.starts.apply(d, jobs.get(d.job_id))
            return
        self.journal.write(
            "decision",
            decision=type(d).__name__,
            job_id=d.job_id,
            count=d.count,
            reason=d.reason,
        )
        job = jobs.get(d.job_id)
        if job is None or job.model_state is not JobState.RUNNING:
            log.warning("job %d is not running any more; %s dropped", d.job_id, d)
            return
        if d.job_id in self.in_flight:
            log.warning("job %d is already resizing; %s dropped", d.job_id, d)
            return
        nodes = held.get(job.job_id, job.nodes)
        if isinstance(d, Expand):
            self._expand(job, nodes, d)
        elif isinstance(d, Shrink):
            self._shrink(job, nodes, d)
        request = progress.get(job.job_id)
        under_way = self.in_flight.get(job.job_id)
        if (
            request is not None
            and request.evolving_request
            and under_way is not None
            and under_way.phase is not ResizePhase.GRANTING  # Slurm failed: rolled back
        ):
            wanted = request.evolving_request
            got = d.count if isinstance(d, Expand) else -d.count
            if (wanted > 0) == (got > 0):
                self._jobdir(job).answer_request(
                    request.request_number,
                    True,
                    under_way.seq,
                    f"served by {type(d).__name__} of {d.count} ({d.reason})",
                )

    def _snapshot(
        self, jobs: Mapping[int, SlurmJob], progress: Mapping[int, Any]
    ) -> ClusterSnapshot:
        return snapshot(
            list(jobs.values()), self.slurm.nodes(), resizing=set(self.in_flight), progress=progress
        )

    def _refuse(self, d: Any, reason: str) -> None:
        """An illegal decision: journaled, logged and counted; nothing is sent to Slurm."""
        kind = type(d).__name__
        job_id = getattr(d, "job_id", None)
        count = getattr(d, "count", getattr(d, "nodes", None))
        self.journal.write(
            "refused",
            job_id=job_id if isinstance(job_id, int) else None,
            decision=kind,
            count=count if isinstance(count, int) else None,
            reason=reason,
            policy_reason=str(getattr(d, "reason", "")),
        )
        log.warning("refused %r: %s", d, reason)
        metrics.decision(kind, False)

    def _move(self, r: Resize, event: ResizeEvent, **changes: Any) -> None:
        """Move ``r`` to its next phase (by the one table) and journal it with ``changes``."""
        r.phase = transition(r.phase, event)
        if r.phase is not ResizePhase.CLOSED:
            self.journal.update_resize(r.job_id, r.seq, phase=r.phase.value, **changes)
        elif changes:
            self.journal.update_resize(r.job_id, r.seq, **changes)

    def _close_row(
        self, job_id: int, seq: int, action: str, outcome: str, phases_s: Mapping[str, float]
    ) -> None:
        """Close a journaled resize with ``outcome`` and count it (the one place for both)."""
        self.journal.close_resize(job_id, seq, outcome)
        metrics.resize(action, outcome, dict(phases_s))

    def _jobdir(self, job: SlurmJob) -> JobDir:
        return self.jobdirs.of(job.workdir, job.job_id, user=job.user)

    def _expand(self, job: SlurmJob, nodes: tuple[str, ...], d: Expand) -> None:
        decided = time.time()
        jobdir = self._jobdir(job)
        seq = jobdir.last_order_seq() + 1
        if self.jobdirs.by_job:
            self._expand_by_job(job, nodes, d, jobdir, seq, decided)
            return
        # journaled before Slurm is asked, so a restarted controller knows to look for a grant
        self.journal.open_resize(
            ResizeRow(
                job.job_id, seq, "expand", ResizePhase.GRANTING.value, nodes, (), decided, d.reason
            )
        )
        count = d.count
        try:
            if self.grow_path == "merge":
                # with no room at all, the grow says why (it refuses those nodes)
                count = self._merge_count(job, count, seq) or count
            grown = self.slurm.grow(
                job.job_id, count, path=self.grow_path, grant_timeout_s=self.grant_timeout_s
            )
        except ResizeError as exc:
            log.warning("job %d: expansion by %d failed: %s", job.job_id, count, exc)
            self.failed_grants[job.job_id] = time.time()
            self.not_ordered[job.job_id] = str(exc)
            transition(ResizePhase.GRANTING, ResizeEvent.ABORTED)
            self._close_row(job.job_id, seq, "expand", "failed", {})
            self.journal.write(
                "outcome", job_id=job.job_id, action="expand", ok=False, message=str(exc)
            )
            return
        except SlurmCommandError as exc:
            # Slurm stopped answering (or answered nonsense) during the grant: whether nodes
            # were granted is unknown. The resize stays open, in phase granting, and is rolled
            # back once Slurm answers again (poll).
            log.warning(
                "job %d: Slurm failed during the expansion by %d (%s); rolled back once it answers",
                job.job_id,
                d.count,
                exc,
            )
            self.journal.write("note", job_id=job.job_id, seq=seq, message=str(exc))
            self.in_flight[job.job_id] = Resize(
                job.job_id,
                seq,
                ResizeAction.EXPAND,
                nodes,
                (),
                jobdir,
                decided,
                phase=ResizePhase.GRANTING,
                reason=d.reason,
            )
            return
        phase = transition(ResizePhase.GRANTING, ResizeEvent.GRANTED)
        self.journal.update_resize(
            job.job_id,
            seq,
            phase=phase.value,
            target=grown.nodes,
            helper=grown.helper_id,
            phases_s={"grant": grown.elapsed_s},
        )
        log.info(
            "job %d: granted %s (%s %d, %.2f s)",
            job.job_id,
            ",".join(grown.added),
            grown.path,
            grown.helper_id,
            grown.elapsed_s,
        )
        r = Resize(
            job.job_id,
            seq,
            ResizeAction.EXPAND,
            nodes,
            grown.nodes,
            jobdir,
            decided,
            phase=phase,
            reason=d.reason,
            phases_s={"grant": grown.elapsed_s},
            grace_s=_grace(job),
        )
        self.in_flight[job.job_id] = r
        if self._negotiates(jobdir):
            self._offer(r, len(grown.added), tuple(grown.added), final=False)
        else:
            self._send_order(r)

    def _merge_count(self, job: SlurmJob, count: int, seq: int) -> int:
        """How many of ``count`` nodes a merge can add to ``job`` now (0: none).

        A merge cannot bring in idle nodes that come before the job's batch host: the job grows
        by those after it rather than not at all (the policy saw them all free); a cut is
        journaled as a note.
        """
        room = self.slurm.merge_room(job.job_id)
        if room <= 0:
            return 0
        if room < count:
            msg = (
                f"growing by {room} of the {count} decided: the other idle nodes come "
                f"before its batch host {job.batch_host}, which a merge cannot bring in"
            )
            log.info("job %d: %s", job.job_id, msg)
            self.journal.write("note", job_id=job.job_id, seq=seq, message=msg)
            return room
        return count

    def _expand_by_job(
        self,
        job: SlurmJob,
        nodes: tuple[str, ...],
        d: Expand,
        jobdir: JobDir,
        seq: int,
        decided: float,
    ) -> None:
        """A service controller's expansion: offered or ordered by count; the job asks Slurm.

        The controller cannot allocate for another user, so nothing is granted here: the order
        (:attr:`~ResizeOrder.by_job`) names how many nodes, and the job's rank 0 asks Slurm for
        them as the job's user (:mod:`elastic_slurm.mpi_runtime.grant`); its final
        acknowledgement names the nodes it got.
        """
        self.journal.open_resize(
            ResizeRow(
                job.job_id, seq, "expand", ResizePhase.ORDERING.value, nodes, (), decided, d.reason
            )
        )
        count = d.count
        if self.grow_path == "merge":  # asked of Slurm here (read-only): the job is not bothered
            count = self._merge_count(job, count, seq)
            if count == 0:
                msg = (
                    f"no idle node comes after its batch host {job.batch_host}, which a merge needs"
                )
                log.info("job %d: expansion by %d not ordered: %s", job.job_id, d.count, msg)
                self.failed_grants[job.job_id] = time.time()
                self.not_ordered[job.job_id] = msg
                transition(ResizePhase.ORDERING, ResizeEvent.ABORTED)
                self._close_row(job.job_id, seq, "expand", "failed", {})
                self.journal.write(
                    "outcome", job_id=job.job_id, action="expand", ok=False, message=msg
                )
                return
        r = Resize(
            job.job_id,
            seq,
            ResizeAction.EXPAND,
            nodes,
            nodes,
            jobdir,
            decided,
            phase=ResizePhase.ORDERING,
            reason=d.reason,
            grace_s=_grace(job),
            count=count,
        )
        self.in_flight[job.job_id] = r
        if self._negotiates(jobdir):
            self._offer(r, count, (), final=False)
        else:
            self._send_order(r)

    def _shrink(self, job: SlurmJob, nodes: tuple[str, ...], d: Shrink) -> None:
        jobdir = self._jobdir(job)
        keep = choose_keep(nodes, job.batch_host, d.count)
        seq = jobdir.last_order_seq() + 1
        negotiate = self._negotiates(jobdir)
        self.journal.open_resize(
            ResizeRow(
                job.job_id,
                seq,
                "shrink",
                ResizePhase.ORDERING.value,
                nodes,
                keep,
                time.time(),
                d.reason,
            )
        )
        r = Resize(
            job.job_id,
            seq,
            ResizeAction.SHRINK,
            nodes,
            keep,
            jobdir,
            time.time(),
            phase=ResizePhase.ORDERING,
            reason=d.reason,
            grace_s=_grace(job),
        )
        self.in_flight[job.job_id] = r
        if negotiate:
            self._offer(r, d.count, tuple(n for n in nodes if n not in keep), final=False)
        else:
            self._send_order(r)

    # ------------------------------------------------------------------ negotiation
    @staticmethod
    def _negotiates(jobdir: JobDir) -> bool:
        """Whether the job registered with the controller's server (it answers offers)."""
        return jobdir.registration() is not None

    def _grace_of(self, r: Resize) -> float:
        return r.grace_s if r.grace_s is not None else self.resize_timeout_s

    def _offer(self, r: Resize, count: int, hosts: tuple[str, ...], *, final: bool) -> None:
        """Offer resize ``r`` to its job: ``count`` nodes (``hosts``), awaiting an answer."""
        now = time.time()
        offer = Offer(
            number=r.jobdir.last_offer_number() + 1,
            seq=r.seq,
            action=r.action.value,
            count=count,
            hosts=hosts,
            final=final,
            issued_at=now,
            deadline_at=now + self._grace_of(r),
            reason=r.reason,
        )
        r.jobdir.write_offer(offer)
        self.journal.write(
            "offer",
            job_id=r.job_id,
            seq=r.seq,
            number=offer.number,
            action=offer.action,
            count=count,
            hosts=list(hosts),
            final=final,
        )
        r.offer, r.since = offer, now
        self._move(r, ResizeEvent.OFFERED, target=r.target)
        log.info(
            "job %d: %soffer %d: %s %d node(s) (%s)",
            r.job_id,
            "final " if final else "",
            offer.number,
            offer.action,
            count,
            ",".join(hosts),
        )

    def _withdraw(self, r: Resize, why: str) -> None:
        """Withdraw the standing offer (a late answer is then refused)."""
        if r.offer is not None and not r.offer.withdrawn:
            r.jobdir.write_offer(r.offer.model_copy(update={"withdrawn": why}))

    def _send_order(self, r: Resize) -> None:
        """Order the job onto ``r.target`` (after an accepted offer, or without negotiation)."""
        now = time.time()
        by_job = self.jobdirs.by_job
        if r.action is ResizeAction.SHRINK:
            r.jobdir.write_order(
                ResizeOrder(r.seq, ResizeAction.SHRINK, r.target, now, by_job=by_job)
            )
            event = ResizeEvent.SHRINK_ORDERED
            log.info("job %d: order %d: shrink to %s", r.job_id, r.seq, ",".join(r.target))
        elif by_job:
            r.jobdir.write_order(
                ResizeOrder(
                    r.seq,
                    ResizeAction.EXPAND,
                    r.before,
                    now,
                    by_job=True,
                    count=r.count,
                    grow_path=self.grow_path,
                    grant_timeout_s=float(self.grant_timeout_s),
                )
            )
            event = ResizeEvent.EXPAND_ORDERED
            log.info(
                "job %d: order %d: expand by %d (the job asks Slurm)", r.job_id, r.seq, r.count
            )
        else:
            r.jobdir.write_order(
                ResizeOrder(r.seq, ResizeAction.EXPAND, r.target, now, phases_s=dict(r.phases_s))
            )
            event = ResizeEvent.EXPAND_ORDERED
            log.info("job %d: order %d: expand to %s", r.job_id, r.seq, ",".join(r.target))
        r.since = now
        self._move(r, event, target=r.target)
        self.journal.write(
            "order", job_id=r.job_id, seq=r.seq, action=r.action.value, nodes=list(r.target)
        )

    def _follow_offer(self, r: Resize) -> ResizeOutcome | None:
        """Act on the job's answer to the standing offer, if it answered."""
        offer = r.offer
        assert offer is not None
        answer = r.jobdir.read_answer(offer.number)
        if answer is None:
            return self._check_overdue(r)
        self.journal.write(
            "answer",
            job_id=r.job_id,
            seq=r.seq,
            number=offer.number,
            answer=answer.answer.value,
            count=answer.count,
            reason=answer.reason,
        )
        log.info(
            "job %d: answered offer %d: %s%s%s",
            r.job_id,
            offer.number,
            answer.answer.value,
            f" {answer.count}" if answer.count else "",
            f" ({answer.reason})" if answer.reason else "",
        )
        if answer.answer is AnswerKind.ACCEPT:
            self._send_order(r)
            return None
        if answer.answer is AnswerKind.COUNTER and not offer.final:
            count = final_count(offer, int(answer.count or 0))
            hosts = offer.hosts[:count]
            if count < offer.count:
                if r.action is ResizeAction.EXPAND and self.jobdirs.by_job:
                    r.count = count  # nothing granted yet: the job will ask for fewer
                elif r.action is ResizeAction.EXPAND:
                    keep = tuple(n for n in r.target if n in r.before or n in hosts)
                    try:
                        self.slurm.shrink(r.job_id, keep)
                    except ResizeError as exc:
                        return self._decline(r, f"could not give back the hosts not wanted: {exc}")
                    r.target = keep
                else:
                    r.target = tuple(n for n in r.before if n not in hosts)
            self._offer(r, count, hosts, final=True)
            return None
        why = answer.reason or "no reason given"
        return self._decline(r, f"job {r.job_id} rejected offer {offer.number} ({why})")

    def _decline(self, r: Resize, message: str) -> ResizeOutcome:
        """Close a resize the job did not take: the offer withdrawn, granted hosts given back."""
        self._withdraw(r, message)
        if r.action is ResizeAction.EXPAND:
            self._give_back(r, r.before)
        log.info("job %d: %s; it keeps its size", r.job_id, message)
        return self._close(
            r, ResizeEvent.DECLINED, ok=False, after=r.before, message=message, declined=True
        )

    # ------------------------------------------------------------------ recovery
    def recover(self, listed: Sequence[SlurmJob]) -> list[str]:
        """Reconcile what a previous controller left under way with Slurm and the jobs.

        Called once, before the first cycle, with one observation of Slurm (``listed``, every
        job Slurm knows). For each resize the journal still has open:

        * its job is no longer running: closed as ``job_ended`` (helper allocations of ended
          jobs are cancelled by the daemon's orphan sweep);
        * it was offered and the offer still stands: the answer is awaited (and acted on) as if
          the controller had never stopped;
        * its order reached the job's directory: followed on from where it is, as if the
          controller had never stopped (a shrink's nodes are given back to Slurm once the job
          has vacated them; giving back the same nodes twice changes nothing);
        * an expansion whose order never reached the job: rolled back, so the job stays at the
          size it runs at: an expander or sibling allocation made for it is cancelled and, if
          Slurm had already merged the nodes into the job, the job is shrunk back to the nodes
          it had; closed as ``rolled_back``;
        * a shrink whose order never reached the job: nothing was done; closed as ``not_sent``.

        Then an order found in a running job's directory with no final acknowledgement and no
        open resize (a journal lost or replaced) is adopted and followed. A job whose directory
        cannot be read (a symlink, a FIFO, garbage: :class:`JobInputError`) is handled as if no
        order had reached it, so one hostile directory never stops recovery for the others.
        No order is sent twice: orders are numbered per job, and the job follows each number
        once.

        Returns
        -------
        list[str]
            One line per resize handled (also logged, and journaled as ``recovery``).
        """
        by_id = {j.job_id: j for j in listed}
        lines: list[str] = []

        def say(job_id: int, seq: int, message: str) -> None:
            line = f"job {job_id} resize {seq}: {message}"
            log.warning("recovery: %s", line)
            self.journal.write("recovery", job_id=job_id, seq=seq, message=message)
            lines.append(line)

        for row in self.journal.resizes(open_only=True):
            job = by_id.get(row.job_id)
            if job is None or job.model_state is not JobState.RUNNING:
                transition(row.phase, ResizeEvent.ABORTED)
                self._close_row(row.job_id, row.seq, row.action, "job_ended", row.phases_s)
                say(row.job_id, row.seq, "closed: the job is no longer running")
                continue
            jobdir = self._jobdir(job)
            try:
                order = jobdir.read_order(row.seq)
                offer = _standing_offer(jobdir, row.seq)
            except JobInputError as exc:  # its own directory is unusable: its problem alone
                say(row.job_id, row.seq, f"job directory unusable, taken as never ordered: {exc}")
                order = offer = None
            if order is not None:
                self._resume(row, order, jobdir)
                say(row.job_id, row.seq, f"{row.action} order found in the job; following it")
            elif offer is not None:  # offered (or killed just after writing the offer)
                phase = ResizePhase(row.phase)
                if phase is ResizePhase.OFFERED:
                    phase = transition(phase, ResizeEvent.RESUMED)
                else:
                    phase = transition(phase, ResizeEvent.OFFERED)
                    self.journal.update_resize(row.job_id, row.seq, phase=phase.value)
                self.in_flight[row.job_id] = Resize(
                    row.job_id,
                    row.seq,
                    ResizeAction(row.action),
                    row.before,
                    row.target,
                    jobdir,
                    row.decided_at,
                    phase=phase,
                    reason=row.reason,
                    phases_s=dict(row.phases_s),
                    overdue=row.overdue,
                    grace_s=_grace(job),
                    offer=offer,
                    since=offer.issued_at,
                )
                say(row.job_id, row.seq, f"offer {offer.number} stands; awaiting the answer")
            elif row.action == "expand":
                transition(row.phase, ResizeEvent.ABORTED)
                say(row.job_id, row.seq, self._roll_back_expand(row, listed))
                self._close_row(row.job_id, row.seq, row.action, "rolled_back", row.phases_s)
            else:
                transition(row.phase, ResizeEvent.ABORTED)
                self._close_row(row.job_id, row.seq, row.action, "not_sent", row.phases_s)
                say(row.job_id, row.seq, "shrink order was never sent; nothing to undo")
        known = {(r.job_id, r.seq) for r in self.journal.resizes()}
        for job in listed:
            if job.model_state is not JobState.RUNNING or job.job_id in self.in_flight:
                continue
            if not job.workdir or helper_parent(job.name) is not None:
                continue
            jobdir = self._jobdir(job)
            try:
                order = jobdir.open_order()
            except JobInputError as exc:
                log.warning("recovery: job %d: its orders cannot be read: %s", job.job_id, exc)
                continue
            if order is None or (job.job_id, order.seq) in known:
                continue
            seq = order.seq
            held = tuple(self.slurm.elastic_nodes(job.job_id)) or job.nodes
            row = ResizeRow(
                job.job_id,
                seq,
                order.action.value,
                ResizePhase.ORDERING.value,
                held,
                order.nodes,
                order.issued_at,
            )
            self.journal.open_resize(row)
            self._resume(row, order, jobdir)
            say(job.job_id, seq, f"unjournaled {order.action.value} order adopted")
        return lines

    def _resume(self, row: ResizeRow, order: ResizeOrder, jobdir: JobDir) -> None:
        """Put a journaled resize whose order the job has back under way.

        The order reached the job, so a grant and an offer are behind it: the phase moves on as
        if the order had just been written (``awaiting_vacate`` for a shrink, ``awaiting_done``
        for an expansion), and a resize already waiting for the job stays where it is.
        """
        phase = ResizePhase(row.phase)
        if phase is ResizePhase.GRANTING:
            phase = transition(phase, ResizeEvent.GRANTED)
        if phase in (ResizePhase.ORDERING, ResizePhase.OFFERED):
            ordered = (
                ResizeEvent.EXPAND_ORDERED if row.action == "expand" else ResizeEvent.SHRINK_ORDERED
            )
            phase = transition(phase, ordered)
        else:
            phase = transition(phase, ResizeEvent.RESUMED)
        self.journal.update_resize(row.job_id, row.seq, phase=phase.value, target=order.nodes)
        self.in_flight[row.job_id] = Resize(
            row.job_id,
            row.seq,
            ResizeAction(row.action),
            row.before,
            order.nodes,
            jobdir,
            row.decided_at,
            phase=phase,
            reason=row.reason,
            phases_s=dict(row.phases_s),
            overdue=row.overdue,
        )

    def _roll_back_expand(self, row: ResizeRow, listed: Sequence[SlurmJob]) -> str:
        """Undo an expansion the job never heard of; say what was done."""
        if self.jobdirs.by_job:
            return "expansion order was never sent; the job asks Slurm itself, so nothing to undo"
        before = set(row.before)
        helpers = [
            j
            for j in listed
            if helper_parent(j.name) == row.job_id
            and j.model_state in (JobState.PENDING, JobState.RUNNING)
            and not before & set(j.nodes)
        ]
        done = []
        if helpers:
            ids = sorted(j.job_id for j in helpers)
            self.slurm.cancel(*ids)
            done.append(f"cancelled its unused allocation(s) {ids}")
        held = tuple(self.slurm.elastic_nodes(row.job_id))
        extra = [n for n in held if n not in before]
        if extra:
            keep = [n for n in held if n in before]
            try:
                self.slurm.shrink(row.job_id, keep)
                done.append(f"gave back {','.join(extra)} merged into it")
            except ResizeError as exc:
                done.append(f"could not give back {','.join(extra)}: {exc}")
        what = "; ".join(done) or "Slurm had granted nothing"
        return f"expansion stopped before its order was sent: rolled back ({what})"

    # ------------------------------------------------------------------ progress
    def poll(self, jobs: Mapping[int, SlurmJob]) -> list[ResizeOutcome]:
        """Advance every resize under way; return those that finished in this call."""
        finished = []
        for job_id, r in list(self.in_flight.items()):
            try:
                outcome = self._advance(r, jobs.get(job_id))
            except SlurmUnavailableError as exc:
                # nothing moved: the resize waits in its phase until Slurm answers again
                log.warning(
                    "job %d: resize %d waits in phase %s: %s", job_id, r.seq, r.phase.value, exc
                )
                continue
            if outcome is not None:
                del self.in_flight[job_id]
                self._close_row(
                    job_id,
                    r.seq,
                    r.action.value,
                    outcome.outcome or ("done" if outcome.ok else "failed"),
                    outcome.phases_s,
                )
                self.outcomes.append(outcome)
                finished.append(outcome)
                self.journal.write(
                    "outcome",
                    job_id=job_id,
                    seq=r.seq,
                    action=r.action.value,
                    ok=outcome.ok,
                    seconds=outcome.seconds,
                    nodes=list(outcome.after),
                    strategy=outcome.strategy,
                    phases_s=outcome.phases_s,
                    message=outcome.message,
                    declined=outcome.declined,
                )
        return finished

    def _advance(self, r: Resize, job: SlurmJob | None) -> ResizeOutcome | None:
        if job is None or job.model_state is not JobState.RUNNING:
            self._withdraw(r, "the job ended")
            return self._close(
                r,
                ResizeEvent.ABORTED,
                ok=False,
                after=(),
                message="the job ended during the resize",
            )
        if r.phase is ResizePhase.GRANTING:  # Slurm failed during the grant: undo it
            row = ResizeRow(
                r.job_id, r.seq, "expand", r.phase.value, r.before, (), r.decided_at, r.reason
            )
            message = self._roll_back_expand(row, self.slurm.jobs())
            log.warning("job %d: %s", r.job_id, message)
            return self._close(
                r,
                ResizeEvent.ABORTED,
                ok=False,
                after=r.before,
                message=message,
                outcome="rolled_back",
            )
        if r.phase is ResizePhase.OFFERED:
            return self._follow_offer(r)
        if r.phase is ResizePhase.AWAITING_VACATE:
            failed = r.jobdir.read_ack(r.seq, AckStatus.FAILED)
            if failed is not None:
                return self._close(
                    r,
                    ResizeEvent.ACKNOWLEDGED,
                    ok=False,
                    after=failed.nodes,
                    message=failed.reason,
                )
            vacated = r.jobdir.read_ack(r.seq, AckStatus.VACATED)
            if (
                vacated is None
                and self.jobdirs.by_job
                and set(job.nodes) <= set(r.target)
                and r.jobdir.final_ack(r.seq) is not None
            ):
                # Slurm shows the nodes given back and the job is done: its "vacated" was lost
                # (sent while this controller was down), or is not written yet (the launcher
                # writes it just after giving the nodes back). A "done" alone is not enough:
                # the next generation says it before the launcher gives the old nodes back.
                # The job runs on fewer nodes all the same: its time limit stretches.
                self._stretch(r, job)
                self._move(r, ResizeEvent.VACATED)
                return self._advance(r, job)
            if vacated is None:
                return self._check_overdue(r)
            if self.jobdirs.by_job:  # the job's launcher gave them back before saying so
                log.info("job %d: gave back %s itself", r.job_id, ",".join(vacated.nodes))
                self._stretch(r, job)
                self._move(r, ResizeEvent.VACATED)
                return None
            t0 = time.monotonic()
            try:
                self.slurm.shrink(r.job_id, r.target)
            except ResizeError as exc:
                log.error("job %d: Slurm did not shrink to %s: %s", r.job_id, r.target, exc)
                self.journal.write("note", job_id=r.job_id, seq=r.seq, message=str(exc))
                # the job restarts on what it still has, and says it failed
                self._move(r, ResizeEvent.VACATED)
                return None
            r.phases_s["release"] = time.monotonic() - t0
            log.info("job %d: gave back %s", r.job_id, ",".join(vacated.nodes))
            self._stretch(r, job)
            self._move(r, ResizeEvent.VACATED, phases_s=r.phases_s)
            return None
        ack = r.jobdir.final_ack(r.seq)
        if ack is None:
            return self._check_overdue(r)
        if ack.status is AckStatus.FAILED and r.action is ResizeAction.EXPAND:
            self._give_back(r, ack.nodes)
        elif self.jobdirs.by_job and r.action is ResizeAction.EXPAND:
            r.target = ack.nodes  # the nodes the job got from Slurm
            self.journal.update_resize(r.job_id, r.seq, target=ack.nodes)
        return self._close(
            r,
            ResizeEvent.ACKNOWLEDGED,
            ok=ack.status is AckStatus.DONE,
            after=ack.nodes,
            strategy=ack.strategy,
            phases=ack.phases_s,
            at=ack.at,
            message=ack.reason,
        )

    def _stretch(self, r: Resize, job: SlurmJob | None) -> None:
        """After Slurm took ``r``'s nodes back, stretch the job's time limit to match."""
        if not self.stretch_time_limit:
            return
        try:
            if job is None:
                job = self.slurm.job(r.job_id)
            if job is None or job.start_time_s is None:
                return
            limit = stretched_limit_s(
                start_s=job.start_time_s,
                now_s=time.time(),
                limit_s=job.time_limit_s,
                before=len(r.before),
                after=len(r.target),
            )
            if limit is None:
                return
            self.slurm.set_time_limit(r.job_id, round(limit / 60.0))
        except (SlurmCommandError, SlurmUnavailableError, ValueError) as exc:
            msg = f"time limit not stretched after the shrink: {exc}"
            if self.jobdirs.by_job and any(w in str(exc) for w in ("denied", "ermission")):
                msg += (
                    " (a service controller needs Slurm operator rights for it, or set "
                    "controller.stretch_time_limit: false)"
                )
            log.warning("job %d: %s", r.job_id, msg)
            self.journal.write("note", job_id=r.job_id, seq=r.seq, message=msg)
            return
        old = job.time_limit_s or 0.0
        msg = (
            f"time limit stretched from {old / 60:g} to {limit / 60:g} min "
            f"(shrunk from {len(r.before)} to {len(r.target)} nodes)"
        )
        log.info("job %d: %s", r.job_id, msg)
        self.journal.write("note", job_id=r.job_id, seq=r.seq, message=msg)
        metrics.time_limit_stretched()

    def _give_back(self, r: Resize, running_on: tuple[str, ...]) -> None:
        """After a failed expansion, return the granted nodes the job does not use.

        Nodes the job says it still runs on stay with it (a job ending with a spawn under
        way keeps MPI daemons on the added nodes until it ends: giving them back would have
        Slurm kill those, and Open MPI then fails the job).
        """
        if self.jobdirs.by_job:
            if set(running_on) - set(r.before):
                msg = (
                    "expansion failed; nodes the job took itself stay with it until it gives "
                    "them back or ends (a service controller cannot shrink another user's job)"
                )
                log.info("job %d: %s", r.job_id, msg)
                self.journal.write("note", job_id=r.job_id, seq=r.seq, message=msg)
            return
        granted = r.target or r.before
        keep = [n for n in granted if n in running_on] or list(r.before)
        still = sorted(set(keep) - set(r.before))
        if still:
            msg = f"expansion failed; the job still runs on {still}, which stay with it"
            log.info("job %d: %s", r.job_id, msg)
            self.journal.write("note", job_id=r.job_id, seq=r.seq, message=msg)
        if set(keep) == set(granted):
            return
        try:
            self.slurm.shrink(r.job_id, keep)
            log.warning("job %d could not use its new nodes; gave them back", r.job_id)
            self.journal.write(
                "note",
                job_id=r.job_id,
                seq=r.seq,
                message=f"expansion failed; shrunk back to {keep}",
            )
        except ResizeError as exc:
            log.error("job %d: could not give back the unused nodes: %s", r.job_id, exc)
            self.journal.write("note", job_id=r.job_id, seq=r.seq, message=str(exc))

    def _check_overdue(self, r: Resize) -> ResizeOutcome | None:
        grace = self._grace_of(r)
        if r.overdue or time.time() - r.since <= grace:
            return None
        r.overdue = True
        offered = r.phase is ResizePhase.OFFERED
        if offered:
            assert r.offer is not None
            late = (
                f"job {r.job_id} has not answered offer {r.offer.number} ({r.action.value} "
                f"{r.offer.count}) after {grace:g} s"
            )
        else:
            what = "vacated its nodes" if r.phase is ResizePhase.AWAITING_VACATE else "acknowledged"
            late = (
                f"job {r.job_id} has not {what} order {r.seq} ({r.action.value}) after {grace:g} s"
            )
        action = self.on_overdue
        forceable = r.action is ResizeAction.SHRINK and (
            offered or r.phase is ResizePhase.AWAITING_VACATE
        )
        if action == "force" and not forceable:
            action = "keep"  # nothing to force: the nodes already moved; the job may yet answer
        if action == "keep" and offered:
            msg = f"{late}; offer withdrawn, it keeps its size (on_overdue: keep)"
        elif action == "keep":
            msg = f"{late}; it keeps its nodes, and the order stays open (on_overdue: keep)"
        elif action == "force":
            msg = f"{late}; shrinking it in Slurm anyway (on_overdue: force)"
        else:
            msg = f"{late}; requeueing it (on_overdue: requeue)"
        log.warning("%s", msg)
        self.journal.write("overdue", job_id=r.job_id, seq=r.seq, action=action, message=msg)
        self.journal.update_resize(r.job_id, r.seq, overdue=True)
        if offered and action == "keep":
            self._withdraw(r, msg)
            if r.action is ResizeAction.EXPAND:
                self._give_back(r, r.before)
            return self._close(
                r, ResizeEvent.DECLINED, ok=False, after=r.before, message=msg, declined=True
            )
        if offered and action == "force":
            self._withdraw(r, msg)
            self._send_order(r)  # the job, if it wakes up, finds where it runs now
        if offered and action == "requeue":
            self._withdraw(r, msg)
            if r.action is ResizeAction.EXPAND:
                self._give_back(r, r.before)
        if action == "force":
            try:
                after = self.slurm.shrink(r.job_id, r.target)
                self._stretch(r, None)
                return self._close(r, ResizeEvent.ABORTED, ok=False, after=after, message=msg)
            except ResizeError as exc:
                msg = f"forced shrink failed: {exc}"
                log.error("job %d: %s", r.job_id, msg)
                self.journal.write("note", job_id=r.job_id, seq=r.seq, message=msg)
                return None
        if action == "requeue":
            try:
                self.slurm.requeue(r.job_id)
            except SlurmCommandError as exc:
                log.error("job %d: requeue failed: %s", r.job_id, exc)
                self.journal.write("note", job_id=r.job_id, seq=r.seq, message=str(exc))
                return None
            return self._close(r, ResizeEvent.ABORTED, ok=False, after=(), message=msg)
        return None

    def _close(
        self,
        r: Resize,
        event: ResizeEvent,
        *,
        ok: bool,
        after: tuple[str, ...],
        strategy: str = "",
        phases: Mapping[str, float] | None = None,
        at: float | None = None,
        message: str = "",
        declined: bool = False,
        outcome: str = "",
    ) -> ResizeOutcome:
        r.phase = transition(r.phase, event)  # the journal's row is closed by the caller
        end = at if at is not None else time.time()
        return ResizeOutcome(
            job_id=r.job_id,
            seq=r.seq,
            action=r.action.value,
            before=r.before,
            after=after,
            ok=ok,
            seconds=max(0.0, end - r.decided_at),
            strategy=strategy,
            phases_s={**r.phases_s, **dict(phases or {})},
            message=message,
            finished_at=time.time(),
            declined=declined,
            outcome=outcome,
        )


def _standing_offer(jobdir: JobDir, seq: int) -> Offer | None:
    """The job's last offer if it is for order ``seq`` and not withdrawn (answered or not)."""
    number = jobdir.last_offer_number()
    offer = jobdir.read_offer(number) if number else None
    if offer is None or offer.seq != seq or offer.withdrawn:
        return None
    return offer


def _grace(job: SlurmJob) -> float | None:
    """The grace period (seconds) the job gave at submission, if any."""
    tag = decode(job.comment)
    return tag.grace_s if tag is not None else None
