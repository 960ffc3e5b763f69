"""The controller's side of the protocol: check who speaks, then read or write the job directory.

Each handler admits the message (:meth:`Gateway.admit`), then maps it onto the job's
directory (:class:`~elastic_slurm.protocol.jobdir.JobDir`), the durable record the controller's
actuator reads: an answer to an offer, an acknowledgement, an evolving request. The actuator
never trusts the network directly, and a restarted controller finds everything in the same
files.

Admission, cheapest check first (``docs/protocol.md``, "Security"); nothing of the body is
read before the job's secret matched:

1. the job id is in Slurm's range and the message carries a well-formed secret
   (``Authorization: Bearer``), else 401 without looking anything up;
2. the job's record (user, directory, running) from a cached lookup: a known job is asked
   again after :data:`RECORD_TTL_S`, an unknown or ended one after :data:`NEGATIVE_TTL_S`,
   so a flood about unknown jobs costs at most one lookup per job per TTL (404, 409; 503 if
   Slurm did not answer);
3. the secret equals the one the job's launcher stored in its directory (401);
4. a message that changes something: the body, read only now and at most ``max_body_bytes``
   (413), and a fresh MUNGE credential made for this very message (its payload is the
   message's :func:`~elastic_slurm.protocol.identity.request_digest`) by the job's user or
   an operator (403);
5. the body is a JSON object whose every field is validated with bounds (400 naming it).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from elastic_slurm.errors import ElasticSlurmError
from elastic_slurm.model.offer import Answer, AnswerKind
from elastic_slurm.model.resize_order import AckStatus, ResizeAck
from elastic_slurm.protocol.identity import (
    Credential,
    IdentityError,
    decode_credential,
    request_digest,
    same_secret,
)
from elastic_slurm.protocol.jobdir import JobDir, JobDirs

log = logging.getLogger(__name__)

#: How long (seconds) a running job's record is reused: a job polls at every resize point,
#: and asking Slurm each time would load slurmctld; an ended job is noticed this late.
RECORD_TTL_S = 30.0
#: How long (seconds) "no such job" or "not running" is remembered: a flood of messages about
#: unknown jobs costs at most one lookup per job per this many seconds.
NEGATIVE_TTL_S = 5.0
#: How long (seconds) "not running" is remembered: a job registers as soon as it starts.
NOT_RUNNING_TTL_S = 1.0
#: How long (seconds) a failed lookup (Slurm did not answer) is remembered: 503 meanwhile.
ERROR_TTL_S = 1.0
#: How many job records are cached at most (the oldest go first).
CACHE_SIZE = 4096

#: Slurm's job ids are unsigned 32-bit numbers.
MAX_JOB_ID = 2**32 - 1
#: Offer, order and request numbers (the job directory names its files with six digits).
MAX_SEQ = 999_999
#: Node counts, deltas and host lists.
MAX_NODES = 100_000
#: MPI ranks.
MAX_RANKS = 10_000_000
#: Free-text fields (reasons, strategies), in characters (an answer's reason: 500).
MAX_TEXT = 2000
#: Phases in an acknowledgement.
MAX_PHASES = 64
#: The largest secret accepted (``secrets.token_urlsafe(32)`` makes 43 characters).
MAX_SECRET = 256
#: A bearer token (RFC 6750's ``b64token``).
_TOKEN = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
#: A node name as Slurm allows it.
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ProtocolError(Exception):
    """A refused message: ``status`` is the HTTP status, ``args[0]`` the reason.

    ``user`` is the sender's user when its credential was decoded (for the log).
    """

    def __init__(self, status: int, message: str, *, user: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.user = user


@dataclass(frozen=True)
class JobRecord:
    """What Slurm records of a job that the protocol needs: its user and working directory."""

    job_id: int
    user: str
    workdir: str
    running: bool


@dataclass(frozen=True)
class Message:
    """One request as the server received it.

    Parameters
    ----------
    job_id
        The job named in the URL.
    method, path
        The HTTP method and the URL path (without the query).
    secret
        The bearer secret, or ``None``.
    credential
        The MUNGE credential (``X-Munge-Credential``), or ``None``.
    read_body
        Reads the body (bytes); called only once the secret matched. It raises
        :class:`ProtocolError` (413) for a body larger than the server's cap.
    """

    job_id: int
    method: str
    path: str
    secret: str | None
    credential: str | None = None
    read_body: Callable[[], bytes] = bytes


@dataclass(frozen=True)
class Admitted:
    """A message that passed admission: the job's record, directory, sender and body."""

    record: JobRecord
    jobdir: JobDir
    user: str | None
    body: dict[str, Any]


class Gateway:
    """Admits protocol messages and carries them to and from job directories.

    Parameters
    ----------
    lookup
        ``job_id -> JobRecord | None`` (``None``: Slurm does not know the job); see
        :func:`~elastic_slurm.protocol.server.slurm_lookup` and
        :func:`~elastic_slurm.protocol.server.observed_lookup`. Its answers are cached.
    operators
        Users who may act on any job.
    munge_socket
        The MUNGE socket to decode credentials with (``None``: MUNGE's default).
    verify
        ``(credential, socket) -> Credential`` (default: :func:`decode_credential`).
    record_ttl_s, negative_ttl_s
        How long (seconds) a running job's record, and a "no such job" or "not running"
        answer, are reused.
    clock
        Monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        lookup: Callable[[int], JobRecord | None],
        *,
        operators: Iterable[str] = ("root",),
        munge_socket: str | None = None,
        verify: Callable[[str, str | None], Credential] = decode_credential,
        record_ttl_s: float = RECORD_TTL_S,
        negative_ttl_s: float = NEGATIVE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
        jobdirs: JobDirs | None = None,
        on_resize: Callable[[int], None] | None = None,
    ) -> None:
        self.lookup = lookup
        self.jobdirs = jobdirs or JobDirs()
        #: told the job id of each size asked by hand (:meth:`resize`): the controller's loop
        self.on_resize = on_resize
        self.operators = frozenset(operators)
        self.munge_socket = munge_socket
        self.verify = verify
        self.record_ttl_s = record_ttl_s
        self.negative_ttl_s = negative_ttl_s
        self.clock = clock
        # job -> (record, None: no such job, or str: why the lookup failed; when it expires)
        self._records: OrderedDict[int, tuple[JobRecord | str | None, float]] = OrderedDict()
        self._lookups: dict[int, threading.Lock] = {}  # jobs being looked up
        self._cache_lock = threading.Lock()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ admission
    def record(self, job_id: int) -> JobRecord:
        """The job's record, from the cache or the lookup (one lookup per job at a time).

        Raises
        ------
        ProtocolError
            404: the job is unknown; 409: it is not running; 503: the lookup failed
            (Slurm did not answer; remembered for :data:`ERROR_TTL_S`).
        """
        cached = self._cached(job_id)
        if cached is None:
            with self._cache_lock:
                gate = self._lookups.setdefault(job_id, threading.Lock())
            try:
                with gate:  # concurrent messages about one job wait for one lookup
                    cached = self._cached(job_id) or self._look_up(job_id)
            finally:
                with self._cache_lock:
                    self._lookups.pop(job_id, None)
        found = cached[0]
        if isinstance(found, str):
            raise ProtocolError(503, f"cannot look up job {job_id} now: {found}")
        if found is None:
            raise ProtocolError(404, f"Slurm has no job {job_id}")
        if not found.running:
            raise ProtocolError(409, f"job {job_id} is not running")
        return found

    def _cached(self, job_id: int) -> tuple[JobRecord | str | None, float] | None:
        """The cache's entry for the job while it holds."""
        with self._cache_lock:
            cached = self._records.get(job_id)
        return cached if cached is not None and self.clock() < cached[1] else None

    def _look_up(self, job_id: int) -> tuple[JobRecord | str | None, float]:
        """Ask the lookup; cache and return its answer (an error as its message)."""
        found: JobRecord | str | None
        try:
            found = self.lookup(job_id)
        except Exception as exc:  # Slurm down, or a broken lookup: try again a little later
            log.warning("protocol: looking up job %d failed: %s", job_id, exc)
            found, ttl = str(exc)[:300] or type(exc).__name__, ERROR_TTL_S
        else:
            if found is None:
                ttl = self.negative_ttl_s
            elif found.running:
                ttl = self.record_ttl_s
            else:  # pending a moment ago: it may be starting, so ask again soon
                ttl = min(self.negative_ttl_s, NOT_RUNNING_TTL_S)
        entry = (found, self.clock() + ttl)
        with self._cache_lock:
            self._records[job_id] = entry
            self._records.move_to_end(job_id)
            while len(self._records) > CACHE_SIZE:
                self._records.popitem(last=False)
        return entry

    def admit(self, msg: Message, *, changes: bool, adopt_secret: bool = False) -> Admitted:
        """Check a message, cheapest check first; return what the handler needs.

        Under a service controller (:attr:`jobdirs` with a spool) the job's secret is kept in
        the spool: a job's first registration (``adopt_secret``) stores the secret it presents,
        once its MUNGE credential proved it comes from the job's user (or an operator).

        Raises
        ------
        ProtocolError
            401: no secret, a malformed one, or not the job's; 404/409/503: see
            :meth:`record`; 413: the body is too large; 403 (a message that ``changes``
            something): no valid MUNGE credential, one made for another message, or its
            user is neither the job's user nor an operator; 400: the body is not a JSON
            object.
        """
        if not 1 <= msg.job_id <= MAX_JOB_ID:
            raise ProtocolError(404, f"no job {msg.job_id}: job ids are 1 to {MAX_JOB_ID}")
        if not msg.secret:
            raise ProtocolError(401, "no job secret: send 'Authorization: Bearer <secret>'")
        if len(msg.secret) > MAX_SECRET or _TOKEN.match(msg.secret) is None:
            raise ProtocolError(401, "malformed job secret")
        rec = self.record(msg.job_id)
        try:
            jobdir = self.jobdirs.of(rec.workdir, msg.job_id, user=rec.user)
            stored = jobdir.read_secret()
        except (ElasticSlurmError, OSError, ValueError) as exc:  # a FIFO, a symlink, garbage
            raise ProtocolError(401, f"job {msg.job_id} has no usable secret: {exc}") from exc
        adopt = stored is None and adopt_secret and changes and self.jobdirs.by_job
        if not adopt and not same_secret(msg.secret, stored):
            if stored is None and self.jobdirs.by_job:
                raise ProtocolError(401, f"job {msg.job_id} has not registered")
            raise ProtocolError(401, f"wrong secret for job {msg.job_id}")
        if not changes:
            return Admitted(rec, jobdir, None, {})
        raw = msg.read_body()
        user = self._sender(msg, rec, raw)
        if adopt:  # MUNGE proved the job's user: its secret authenticates its polls from now on
            jobdir.write_secret(msg.secret)
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise ProtocolError(400, f"the body is not JSON: {exc}", user=user) from exc
        if not isinstance(body, dict):
            raise ProtocolError(400, "the body must be a JSON object", user=user)
        return Admitted(rec, jobdir, user, body)

    def _sender(self, msg: Message, rec: JobRecord, raw: bytes) -> str:
        """The user whose MUNGE credential, made for this message, came with it."""
        if not msg.credential:
            raise ProtocolError(403, "no MUNGE credential: send 'X-Munge-Credential'")
        if len(msg.credential) > 4096:
            raise ProtocolError(403, "malformed MUNGE credential: too long")
        try:
            cred = self.verify(msg.credential, self.munge_socket)
        except IdentityError as exc:
            raise ProtocolError(403, str(exc)) from exc
        expected = request_digest(msg.method, msg.path, msg.job_id, raw)
        if not same_secret(cred.payload.strip(), expected):
            raise ProtocolError(
                403,
                "the MUNGE credential was made for another message (its payload is not this "
                "message's digest)",
                user=cred.user,
            )
        if cred.user != rec.user and cred.user not in self.operators:
            raise ProtocolError(
                403,
                f"user {cred.user} may not act on job {msg.job_id}: it belongs to {rec.user}",
                user=cred.user,
            )
        return cred.user

    # ------------------------------------------------------------------ handlers
    def register(self, msg: Message) -> dict[str, Any]:
        """A job announces itself; from now on its resizes are offered before being ordered."""
        a = self.admit(msg, changes=True, adopt_secret=True)
        known = {"ranks", "hosts"}
        _only(a, known)
        hosts = _hosts(a, "hosts", a.body.get("hosts", []))
        ranks = _int(a, "ranks", a.body.get("ranks", 0), 0, MAX_RANKS)
        a.jobdir.write_registration(
            {
                "job_id": msg.job_id,
                "user": a.record.user,
                "ranks": ranks,
                "hosts": list(hosts),
                "at": time.time(),
            }
        )
        log.info("protocol: job %d registered (%d rank(s) on %s)", msg.job_id, ranks, hosts)
        # own_state: this controller reads nothing in the job's directory (a service one)
        return {"job_id": msg.job_id, "registered": True, "own_state": self.jobdirs.by_job}

    def next(self, msg: Message, seq: int) -> dict[str, Any]:
        """What awaits the job: an open offer, else order ``seq`` if issued, else nothing."""
        a = self.admit(msg, changes=False)
        offer = a.jobdir.open_offer()
        if offer is not None:
            return {"offer": offer.model_dump(mode="json")}
        order = a.jobdir.read_order(seq)
        if order is not None:
            return {"order": order.to_json()}
        return {}

    def answer(self, msg: Message, number: int) -> dict[str, Any]:
        """Record the job's answer to offer ``number``.

        Raises
        ------
        ProtocolError
            400: malformed answer; 404: no such offer; 409: not the job's open offer
            (withdrawn, answered, or superseded), or a counter-offer to a final offer.
        """
        a = self.admit(msg, changes=True)
        _only(a, {"answer", "count", "reason"})
        kind = a.body.get("answer")
        if not isinstance(kind, str) or kind not in {k.value for k in AnswerKind}:
            raise _bad(a, "answer", "must be 'accept', 'reject' or 'counter'")
        count = a.body.get("count")
        if count is not None:
            count = _int(a, "count", count, 1, MAX_NODES)
        reason = _text(a, "reason", a.body.get("reason", ""), 500)
        if kind == AnswerKind.COUNTER and count is None:
            raise _bad(a, "count", "a counter-offer needs a count (the nodes the job proposes)")
        answer = Answer(
            number=number, answer=AnswerKind(kind), count=count, reason=reason, at=time.time()
        )
        jobdir = a.jobdir
        with self._lock:
            offer = jobdir.read_offer(number)
            if offer is None:
                raise ProtocolError(404, f"job {msg.job_id} has no offer {number}", user=a.user)
            if offer.withdrawn:
                raise ProtocolError(
                    409, f"offer {number} was withdrawn: {offer.withdrawn}", user=a.user
                )
            if jobdir.read_answer(number) is not None:
                raise ProtocolError(409, f"offer {number} is already answered", user=a.user)
            if number != jobdir.last_offer_number():
                raise ProtocolError(
                    409, f"offer {number} was superseded by a later offer", user=a.user
                )
            if offer.final and answer.answer is AnswerKind.COUNTER:
                raise ProtocolError(
                    409, "a final offer can only be accepted or rejected", user=a.user
                )
            jobdir.write_answer(answer)
        log.info(
            "protocol: job %d answered offer %d: %s%s",
            msg.job_id,
            number,
            answer.answer.value,
            f" {answer.count}" if answer.count else "",
        )
        return {"recorded": True}

    def ack(self, msg: Message) -> dict[str, Any]:
        """Record the job's acknowledgement of an order (``vacated`` names the released hosts).

        Raises
        ------
        ProtocolError
            400: malformed (the message names the field); 404: no such order.
        """
        a = self.admit(msg, changes=True)
        b = a.body
        _only(a, {"seq", "status", "nodes", "at", "strategy", "reason", "ranks", "phases_s"})
        seq = _int(a, "seq", b.get("seq"), 1, MAX_SEQ)
        status = b.get("status")
        if not isinstance(status, str) or status not in {s.value for s in AckStatus}:
            raise _bad(a, "status", "must be 'vacated', 'done' or 'failed'")
        ack = ResizeAck(
            seq=seq,
            status=AckStatus(status),
            nodes=_hosts(a, "nodes", b.get("nodes")),
            at=_number(a, "at", b.get("at", time.time()), 0.0, 1e11),
            strategy=_text(a, "strategy", b.get("strategy", "")),
            reason=_text(a, "reason", b.get("reason", "")),
            ranks=_int(a, "ranks", b.get("ranks", 0), 0, MAX_RANKS),
            phases_s=_phases(a, b.get("phases_s", {})),
        )
        if a.jobdir.read_order(ack.seq) is None:
            raise ProtocolError(404, f"job {msg.job_id} has no order {ack.seq}", user=a.user)
        a.jobdir.write_ack(ack)
        if ack.status is AckStatus.VACATED:
            log.info("protocol: job %d released %s (order %d)", msg.job_id, ack.nodes, ack.seq)
        return {"recorded": True}

    def request(self, msg: Message) -> dict[str, Any]:
        """Record an evolving request: ``delta`` nodes more (or ``-delta`` fewer)."""
        a = self.admit(msg, changes=True)
        _only(a, {"delta", "ranks"})
        delta = _int(a, "delta", a.body.get("delta"), -MAX_NODES, MAX_NODES)
        if delta == 0:
            raise _bad(a, "delta", "must be a non-zero integer (nodes more or fewer)")
        ranks = _int(a, "ranks", a.body.get("ranks", 0), 0, MAX_RANKS)
        with self._lock:
            number = len(a.jobdir.requests()) + 1
            if number > MAX_SEQ:
                raise ProtocolError(
                    409, f"job {msg.job_id} made {MAX_SEQ} requests already", user=a.user
                )
            a.jobdir.write_request(number, delta, ranks)
        log.info("protocol: job %d asks for %+d node(s) (request %d)", msg.job_id, delta, number)
        return {"number": number}

    def resize(self, msg: Message) -> dict[str, Any]:
        """A size asked by hand (``elastic-slurm resize``) of a service controller's job.

        By the job's user or an operator (MUNGE), with the job's secret (its user reads it in
        the job's directory). Recorded in the spool; the controller's loop carries it out as
        a root controller's ``resize`` would (past the policy, not past the legality check)
        and answers with the order's number (:meth:`resize_answer`).

        Raises
        ------
        ProtocolError
            400: malformed; 409: a root controller (``resize`` works without it).
        """
        a = self.admit(msg, changes=True)
        if not self.jobdirs.by_job:
            raise ProtocolError(
                409, "this controller runs as root: elastic-slurm resize acts directly", user=a.user
            )
        _only(a, {"nodes"})
        nodes = _int(a, "nodes", a.body.get("nodes"), 1, MAX_NODES)
        with self._lock:
            last = a.jobdir.size_request()
            number = (int(last["number"]) if last else 0) + 1
            if number > MAX_SEQ:
                raise ProtocolError(409, f"job {msg.job_id} asked {MAX_SEQ} times", user=a.user)
            a.jobdir.write_size_request(number, nodes, str(a.user))
        log.info(
            "protocol: %s asks for job %d on %d node(s) (request %d)",
            a.user,
            msg.job_id,
            nodes,
            number,
        )
        if self.on_resize is not None:
            self.on_resize(msg.job_id)
        return {"number": number}

    def resize_answer(self, msg: Message, number: int) -> dict[str, Any]:
        """The answer to size request ``number`` (empty while the controller has not acted)."""
        a = self.admit(msg, changes=False)
        answer = a.jobdir.size_answer()
        return {"answer": answer} if answer is not None and answer["number"] == number else {}

    def request_answer(self, msg: Message, number: int) -> dict[str, Any]:
        """The controller's answer to evolving request ``number`` (empty while open)."""
        a = self.admit(msg, changes=False)
        answer = a.jobdir.request_answer(number)
        return {"answer": answer} if answer is not None else {}


# ---------------------------------------------------------------------- field checks
def _bad(a: Admitted, field: str, why: str) -> ProtocolError:
    return ProtocolError(400, f"malformed message: {field} {why}", user=a.user)


def _only(a: Admitted, known: set[str]) -> None:
    """Refuse fields the message does not have (a typo is not silently ignored)."""
    extra = sorted(str(k)[:40] for k in a.body if k not in known)
    if extra:
        raise _bad(a, extra[0], f"is not a field of this message (it has {sorted(known)})")


def _int(a: Admitted, field: str, value: Any, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise _bad(a, field, f"must be an integer from {low} to {high}")
    return value


def _number(a: Admitted, field: str, value: Any, low: float, high: float) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not low <= value <= high:
        raise _bad(a, field, f"must be a number from {low:g} to {high:g}")
    return float(value)


def _text(a: Admitted, field: str, value: Any, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise _bad(a, field, f"must be a string of at most {limit} characters")
    return value


def _hosts(a: Admitted, field: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_NODES:
        raise _bad(a, field, f"must be a list of at most {MAX_NODES} node names")
    for host in value:
        if not isinstance(host, str) or _NODE.match(host) is None:
            raise _bad(a, field, f"has {str(host)[:70]!r}, which is not a node name")
    return tuple(value)


def _phases(a: Admitted, value: Any) -> dict[str, float]:
    if not isinstance(value, dict) or len(value) > MAX_PHASES:
        raise _bad(a, "phases_s", f"must be an object of at most {MAX_PHASES} phases")
    phases = {}
    for name, seconds in value.items():
        if len(name) > 64:
            raise _bad(a, "phases_s", "has a phase name longer than 64 characters")
        phases[name] = _number(a, f"phases_s.{name}", seconds, 0.0, 1e7)
    return phases
