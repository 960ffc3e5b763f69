"""The controller's side of the protocol: check who speaks, then read or write the job directory.

Each handler authenticates the message, then maps it onto the job's directory
(:class:`~elastic_slurm.jobdir.JobDir`), the durable record the controller's actuator reads:
an answer to an offer, an acknowledgement, an evolving request. The actuator never trusts the
network directly, and a restarted controller finds everything in the same files.

Authentication (``docs/protocol.md``, "Security"):

* every message names its job and carries the job's secret (``Authorization: Bearer``), which
  must equal the one its launcher stored in the job directory (mode 0600);
* every message that changes something also carries a fresh MUNGE credential
  (``X-Munge-Credential``), and its user must be the job's user as Slurm records it, or one of
  the site's operators.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from elastic_slurm.model.offer import Answer, AnswerKind
from elastic_slurm.model.resize_order import AckStatus, ResizeAck
from elastic_slurm.protocol.identity import IdentityError, credential_user, same_secret
from elastic_slurm.protocol.jobdir import JobDir

log = logging.getLogger(__name__)

#: How long (seconds) Slurm's answer about a job is reused: a job polls at every resize
#: point, and asking Slurm each time would load slurmctld; an ended job is noticed this late.
RECORD_TTL_S = 30.0


class ProtocolError(Exception):
    """A refused message: ``status`` is the HTTP status, ``args[0]`` the reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class JobRecord:
    """What Slurm records of a job that the protocol needs: its user and working directory."""

    job_id: int
    user: str
    workdir: str
    running: bool


class Gateway:
    """Authenticates protocol messages and carries them to and from job directories.

    Parameters
    ----------
    lookup
        ``job_id -> JobRecord | None`` from Slurm (``None``: Slurm does not know the job).
    operators
        Users who may act on any job.
    munge_socket
        The MUNGE socket to decode credentials with (``None``: MUNGE's default).
    verify
        ``(credential, socket) -> user name`` (default: :func:`credential_user`).
    """

    def __init__(
        self,
        lookup: Callable[[int], JobRecord | None],
        *,
        operators: Iterable[str] = ("root",),
        munge_socket: str | None = None,
        verify: Callable[[str, str | None], str] = credential_user,
    ) -> None:
        self.lookup = lookup
        self.operators = frozenset(operators)
        self.munge_socket = munge_socket
        self.verify = verify
        self._records: dict[int, tuple[JobRecord, float]] = {}  # job -> (record, when)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ authentication
    def _record(self, job_id: int) -> JobRecord:
        """Slurm's record of the job, asked again once it is :data:`RECORD_TTL_S` old."""
        now = time.monotonic()
        cached = self._records.get(job_id)
        if cached is not None and now - cached[1] < RECORD_TTL_S:
            return cached[0]
        rec = self.lookup(job_id)
        if rec is None:
            self._records.pop(job_id, None)
            raise ProtocolError(404, f"Slurm has no job {job_id}")
        if not rec.running:
            self._records.pop(job_id, None)
            raise ProtocolError(409, f"job {job_id} is not running")
        self._records[job_id] = (rec, now)
        return rec

    def authenticate(
        self, job_id: int, secret: str | None, credential: str | None, *, changes: bool
    ) -> tuple[JobRecord, JobDir]:
        """Check a message about ``job_id``; return the job and its directory.

        Raises
        ------
        ProtocolError
            401: no secret, or not the job's; 403: no valid MUNGE credential (for a message
            that ``changes`` something), or its user is neither the job's user nor an
            operator; 404/409: Slurm does not know the job, or it is not running.
        """
        if not secret:
            raise ProtocolError(401, "no job secret: send 'Authorization: Bearer <secret>'")
        rec = self._record(job_id)
        jobdir = JobDir.for_job(rec.workdir, job_id)
        if not same_secret(secret, jobdir.read_secret()):
            log.warning("protocol: refused a message for job %d: wrong secret", job_id)
            raise ProtocolError(401, f"wrong secret for job {job_id}")
        if changes:
            if not credential:
                raise ProtocolError(403, "no MUNGE credential: send 'X-Munge-Credential'")
            try:
                user = self.verify(credential, self.munge_socket)
            except IdentityError as exc:
                raise ProtocolError(403, str(exc)) from exc
            if user != rec.user and user not in self.operators:
                log.warning(
                    "protocol: refused user %s acting on job %d of user %s", user, job_id, rec.user
                )
                raise ProtocolError(
                    403, f"user {user} may not act on job {job_id}: it belongs to {rec.user}"
                )
        return rec, jobdir

    # ------------------------------------------------------------------ handlers
    def register(
        self, job_id: int, secret: str | None, credential: str | None, body: dict[str, Any]
    ) -> dict[str, Any]:
        """A job announces itself; from now on its resizes are offered before being ordered."""
        rec, jobdir = self.authenticate(job_id, secret, credential, changes=True)
        hosts = body.get("hosts", [])
        if not isinstance(hosts, list) or not all(isinstance(h, str) for h in hosts):
            raise ProtocolError(400, "hosts must be a list of host names")
        ranks = body.get("ranks", 0)
        if not isinstance(ranks, int) or ranks < 0:
            raise ProtocolError(400, "ranks must be a non-negative integer")
        jobdir.write_registration(
            {"job_id": job_id, "user": rec.user, "ranks": ranks, "hosts": hosts, "at": time.time()}
        )
        log.info("protocol: job %d registered (%d rank(s) on %s)", job_id, ranks, hosts)
        return {"job_id": job_id, "registered": True}

    def next(self, job_id: int, secret: str | None, seq: int) -> dict[str, Any]:
        """What awaits the job: an open offer, else order ``seq`` if issued, else nothing."""
        _, jobdir = self.authenticate(job_id, secret, None, changes=False)
        offer = jobdir.open_offer()
        if offer is not None:
            return {"offer": offer.model_dump(mode="json")}
        order = jobdir.read_order(seq)
        if order is not None:
            return {"order": order.to_json()}
        return {}

    def answer(
        self,
        job_id: int,
        secret: str | None,
        credential: str | None,
        number: int,
        body: dict[str, Any],
    ) -> dict[str, Any]:
        """Record the job's answer to offer ``number``.

        Raises
        ------
        ProtocolError
            400: malformed answer; 409: not the job's open offer (withdrawn, answered, or
            superseded), or a counter-offer to a final offer.
        """
        _, jobdir = self.authenticate(job_id, secret, credential, changes=True)
        try:
            answer = Answer.model_validate({**body, "number": number, "at": time.time()})
        except ValidationError as exc:
            raise ProtocolError(400, f"malformed answer: {exc.errors()[0]['msg']}") from exc
        with self._lock:
            offer = jobdir.read_offer(number)
            if offer is None:
                raise ProtocolError(404, f"job {job_id} has no offer {number}")
            if offer.withdrawn:
                raise ProtocolError(409, f"offer {number} was withdrawn: {offer.withdrawn}")
            if jobdir.read_answer(number) is not None:
                raise ProtocolError(409, f"offer {number} is already answered")
            if number != jobdir.last_offer_number():
                raise ProtocolError(409, f"offer {number} was superseded by a later offer")
            if offer.final and answer.answer is AnswerKind.COUNTER:
                raise ProtocolError(409, "a final offer can only be accepted or rejected")
            jobdir.write_answer(answer)
        log.info(
            "protocol: job %d answered offer %d: %s%s",
            job_id,
            number,
            answer.answer.value,
            f" {answer.count}" if answer.count else "",
        )
        return {"recorded": True}

    def ack(
        self, job_id: int, secret: str | None, credential: str | None, body: dict[str, Any]
    ) -> dict[str, Any]:
        """Record the job's acknowledgement of an order (``vacated`` names the released hosts).

        Raises
        ------
        ProtocolError
            400: malformed; 404: no such order.
        """
        _, jobdir = self.authenticate(job_id, secret, credential, changes=True)
        try:
            ack = ResizeAck.from_json(body)
        except (KeyError, ValueError, TypeError) as exc:
            raise ProtocolError(400, f"malformed acknowledgement: {exc}") from exc
        if jobdir.read_order(ack.seq) is None:
            raise ProtocolError(404, f"job {job_id} has no order {ack.seq}")
        jobdir.write_ack(ack)
        if ack.status is AckStatus.VACATED:
            log.info("protocol: job %d released %s (order %d)", job_id, ack.nodes, ack.seq)
        return {"recorded": True}

    def request(
        self, job_id: int, secret: str | None, credential: str | None, body: dict[str, Any]
    ) -> dict[str, Any]:
        """Record an evolving request: ``delta`` nodes more (or ``-delta`` fewer)."""
        _, jobdir = self.authenticate(job_id, secret, credential, changes=True)
        delta, ranks = body.get("delta"), body.get("ranks", 0)
        if not isinstance(delta, int) or isinstance(delta, bool) or delta == 0:
            raise ProtocolError(400, "delta must be a non-zero integer (nodes more or fewer)")
        if not isinstance(ranks, int) or ranks < 0:
            raise ProtocolError(400, "ranks must be a non-negative integer")
        with self._lock:
            number = len(jobdir.requests()) + 1
            jobdir.write_request(number, delta, ranks)
        log.info("protocol: job %d asks for %+d node(s) (request %d)", job_id, delta, number)
        return {"number": number}

    def request_answer(self, job_id: int, secret: str | None, number: int) -> dict[str, Any]:
        """The controller's answer to evolving request ``number`` (empty while open)."""
        _, jobdir = self.authenticate(job_id, secret, None, changes=False)
        answer = jobdir.request_answer(number)
        return {"answer": answer} if answer is not None else {}
