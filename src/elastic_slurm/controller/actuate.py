"""Carry out a policy's decisions on live Slurm and follow each resize to its end.

One resize per job at a time, as a small state machine driven by the job's acknowledgements:

* **expand**: grow the allocation (expander merge), then order the job onto the new node list,
  then wait for its ``done`` acknowledgement;
* **shrink**: order the job onto the nodes it keeps, wait until it reports the others
  ``vacated``, only then give them back to Slurm, then wait for ``done``.

Nodes are never taken from a job that has not vacated them, so a job that ignores an order
keeps its nodes and its work; such a resize is reported overdue in the journal and the log
(what happens next is a site decision; see the controller's configuration).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from elastic_slurm.adapter.backend import GrowPath, SlurmBackend
from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.controller.journal import Journal
from elastic_slurm.errors import ResizeError
from elastic_slurm.jobdir import JobDir
from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.resize_order import AckStatus, ResizeAction, ResizeOrder
from elastic_slurm.model.snapshot import JobState

log = logging.getLogger(__name__)


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
    phase: str
    reason: str = ""
    phases_s: dict[str, float] = field(default_factory=dict)
    overdue: bool = False


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
        After how long (seconds) an unanswered order is reported overdue.
    """

    def __init__(
        self,
        slurm: SlurmBackend,
        journal: Journal,
        *,
        grant_timeout_s: int = 30,
        grow_path: GrowPath = "merge",
        resize_timeout_s: float = 120.0,
    ) -> None:
        self.slurm = slurm
        self.journal = journal
        self.grant_timeout_s = grant_timeout_s
        self.grow_path: GrowPath = grow_path
        self.resize_timeout_s = resize_timeout_s
        self.in_flight: dict[int, Resize] = {}
        self.outcomes: list[ResizeOutcome] = []
        self._expected_starts: dict[int, int] = {}  # pending job -> size, already journaled

    # ------------------------------------------------------------------ decisions
    def apply(
        self,
        decisions: Sequence[Decision],
        jobs: Mapping[int, SlurmJob],
        held: Mapping[int, tuple[str, ...]] | None = None,
        progress: Mapping[int, Any] | None = None,
    ) -> None:
        """Start carrying out ``decisions``.

        ``jobs`` is this cycle's Slurm view by id; ``held`` each running job's nodes, its
        sibling allocations' included (default: the job's own); ``progress`` the jobs' open
        evolving requests (:class:`~elastic_slurm.controller.observe.Progress`): a request that
        a decision serves is answered with the order's number.
        """
        held = held or {}
        progress = progress or {}
        for d in decisions:
            if isinstance(d, Start):
                # Slurm starts queued jobs itself; the policy repeats this every cycle while
                # the job waits, so only a new expectation is recorded
                if self._expected_starts.get(d.job_id) != d.nodes:
                    self._expected_starts[d.job_id] = d.nodes
                    self.journal.write(
                        "decision",
                        decision="Start",
                        job_id=d.job_id,
                        count=d.nodes,
                        reason=d.reason,
                    )
                    log.info(
                        "job %d: start on %d node(s) is Slurm's to do (%s)",
                        d.job_id,
                        d.nodes,
                        d.reason,
                    )
                continue
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
                continue
            if d.job_id in self.in_flight:
                log.warning("job %d is already resizing; %s dropped", d.job_id, d)
                continue
            nodes = held.get(job.job_id, job.nodes)
            if isinstance(d, Expand):
                self._expand(job, nodes, d)
            elif isinstance(d, Shrink):
                self._shrink(job, nodes, d)
            request = progress.get(job.job_id)
            if request is not None and request.evolving_request and job.job_id in self.in_flight:
                wanted = request.evolving_request
                got = d.count if isinstance(d, Expand) else -d.count
                if (wanted > 0) == (got > 0):
                    self._jobdir(job).answer_request(
                        request.request_number,
                        True,
                        self.in_flight[job.job_id].seq,
                        f"served by {type(d).__name__} of {d.count} ({d.reason})",
                    )

    def _jobdir(self, job: SlurmJob) -> JobDir:
        return JobDir.for_job(job.workdir, job.job_id)

    def _expand(self, job: SlurmJob, nodes: tuple[str, ...], d: Expand) -> None:
        decided = time.time()
        jobdir = self._jobdir(job)
        try:
            grown = self.slurm.grow(
                job.job_id, d.count, path=self.grow_path, grant_timeout_s=self.grant_timeout_s
            )
        except ResizeError as exc:
            log.warning("job %d: expansion by %d failed: %s", job.job_id, d.count, exc)
            self.journal.write(
                "outcome", job_id=job.job_id, action="expand", ok=False, message=str(exc)
            )
            return
        seq = jobdir.last_order_seq() + 1
        order = ResizeOrder(
            seq, ResizeAction.EXPAND, grown.nodes, time.time(), phases_s={"grant": grown.elapsed_s}
        )
        jobdir.write_order(order)
        self.journal.write(
            "order",
            job_id=job.job_id,
            seq=seq,
            action="expand",
            nodes=list(grown.nodes),
            path=grown.path,
            helper=grown.helper_id,
        )
        log.info(
            "job %d: grew by %s (%s %d, %.2f s); order %d sent",
            job.job_id,
            ",".join(grown.added),
            grown.path,
            grown.helper_id,
            grown.elapsed_s,
            seq,
        )
        self.in_flight[job.job_id] = Resize(
            job.job_id,
            seq,
            ResizeAction.EXPAND,
            nodes,
            grown.nodes,
            jobdir,
            decided,
            phase="awaiting_done",
            reason=d.reason,
            phases_s={"grant": grown.elapsed_s},
        )

    def _shrink(self, job: SlurmJob, nodes: tuple[str, ...], d: Shrink) -> None:
        jobdir = self._jobdir(job)
        keep = choose_keep(nodes, job.batch_host, d.count)
        seq = jobdir.last_order_seq() + 1
        jobdir.write_order(ResizeOrder(seq, ResizeAction.SHRINK, keep, time.time()))
        self.journal.write("order", job_id=job.job_id, seq=seq, action="shrink", nodes=list(keep))
        log.info("job %d: order %d: shrink to %s", job.job_id, seq, ",".join(keep))
        self.in_flight[job.job_id] = Resize(
            job.job_id,
            seq,
            ResizeAction.SHRINK,
            nodes,
            keep,
            jobdir,
            time.time(),
            phase="awaiting_vacate",
            reason=d.reason,
        )

    # ------------------------------------------------------------------ progress
    def poll(self, jobs: Mapping[int, SlurmJob]) -> list[ResizeOutcome]:
        """Advance every resize under way; return those that finished in this call."""
        finished = []
        for job_id, r in list(self.in_flight.items()):
            outcome = self._advance(r, jobs.get(job_id))
            if outcome is not None:
                del self.in_flight[job_id]
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
                )
        return finished

    def _advance(self, r: Resize, job: SlurmJob | None) -> ResizeOutcome | None:
        if job is None or job.model_state is not JobState.RUNNING:
            return self._close(r, ok=False, after=(), message="the job ended during the resize")
        if r.phase == "awaiting_vacate":
            failed = r.jobdir.read_ack(r.seq, AckStatus.FAILED)
            if failed is not None:
                return self._close(r, ok=False, after=failed.nodes, message=failed.reason)
            vacated = r.jobdir.read_ack(r.seq, AckStatus.VACATED)
            if vacated is None:
                return self._check_overdue(r)
            t0 = time.monotonic()
            try:
                self.slurm.shrink(r.job_id, r.target)
            except ResizeError as exc:
                log.error("job %d: Slurm did not shrink to %s: %s", r.job_id, r.target, exc)
                self.journal.write("note", job_id=r.job_id, seq=r.seq, message=str(exc))
                r.phase = "awaiting_done"  # the job restarts on what it still has, says failed
                return None
            r.phases_s["release"] = time.monotonic() - t0
            log.info("job %d: gave back %s", r.job_id, ",".join(vacated.nodes))
            r.phase = "awaiting_done"
            return None
        ack = r.jobdir.final_ack(r.seq)
        if ack is None:
            return self._check_overdue(r)
        if ack.status is AckStatus.FAILED and r.action is ResizeAction.EXPAND:
            self._give_back(r, ack.nodes)
        return self._close(
            r,
            ok=ack.status is AckStatus.DONE,
            after=ack.nodes,
            strategy=ack.strategy,
            phases=ack.phases_s,
            at=ack.at,
            message=ack.reason,
        )

    def _give_back(self, r: Resize, running_on: tuple[str, ...]) -> None:
        """After a failed expansion, return the granted nodes the job does not use."""
        keep = [n for n in r.before if n in running_on] or list(r.before)
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

    def _check_overdue(self, r: Resize) -> None:
        if not r.overdue and time.time() - r.decided_at > self.resize_timeout_s:
            r.overdue = True
            what = "vacated its nodes" if r.phase == "awaiting_vacate" else "acknowledged"
            msg = (
                f"job {r.job_id} has not {what} order {r.seq} ({r.action.value}) after "
                f"{self.resize_timeout_s:g} s; it keeps its nodes, and the order stays open"
            )
            log.warning("%s", msg)
            self.journal.write("overdue", job_id=r.job_id, seq=r.seq, message=msg)
        return None

    def _close(
        self,
        r: Resize,
        *,
        ok: bool,
        after: tuple[str, ...],
        strategy: str = "",
        phases: Mapping[str, float] | None = None,
        at: float | None = None,
        message: str = "",
    ) -> ResizeOutcome:
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
        )
