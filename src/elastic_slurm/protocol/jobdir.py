"""A job's directory on the shared filesystem: the channel between controller and job.

Layout of ``<workdir>/.elastic-slurm/job-<id>/``::

    orders/000001.json            written by the controller (ResizeOrder)
    offers/000001.json            written by the controller (Offer), before an order
    offers/000001.answer.json     the job's answer (Answer), through the controller's server
    secret                        the job's secret (mode 0600), written by its launcher
    registered.json               the job registered with the controller (it negotiates)
    requests/000001.json          an evolving application asks for nodes (or gives some back)
    acks/000001.vacated.json      written by the job's launcher (shrink: nodes left)
    acks/000001.done.json         written by the job (or ``.failed.json``)
    restart.json                  the application asks its launcher for a restart
    checkpoint/                   distributed arrays and state across a restart
    events.jsonl                  the job's own log of what it did, one JSON object a line

Every read, write, listing and new directory goes through :mod:`elastic_slurm.protocol.files`:
no symlink is followed, only regular files of the job's user are read (bounded in size, never
blocking), every file is written to an unpredictable temporary name and renamed (a reader never
sees half a file), and a root writer hands what it creates to the job's user. Every message read
is validated with bounds (numbers up to :data:`~elastic_slurm.protocol.files.MAX_SEQ`, node
lists up to :data:`MAX_NODES`, strings up to :data:`MAX_TEXT` characters); anything unusable
raises :class:`~elastic_slurm.errors.JobInputError`. The job's side (its runtime, writing its
own directory as its own user) uses the same code.

The directory lives with the job (its working directory), so it works wherever the job's files
are shared between nodes. A job submitted with a controller URL talks to the controller's
server (:mod:`elastic_slurm.protocol`), which reads and writes these same files on its behalf;
one without talks through the files directly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pwd
import re
import shutil
import stat
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from elastic_slurm.errors import JobInputError
from elastic_slurm.model.offer import Answer, Offer
from elastic_slurm.model.resize_order import AckStatus, ResizeAck, ResizeOrder
from elastic_slurm.protocol.files import MAX_SEQ, JobFiles, Owner, decode_json, finite

SUBDIR = ".elastic-slurm"

MAX_NODES = 16_384
"""The most nodes a message may name (node lists, counts, deltas)."""

MAX_TEXT = 4096
"""Characters: the longest string a message may hold (node names, reasons)."""

MAX_RANKS = 1 << 24
"""The most MPI ranks a message may claim."""

MAX_GAP = 64
"""Numbers are issued one after another: the highest may exceed the count found by this much."""

SECRET_CAP = 4096
"""Bytes: the largest ``secret`` file read."""

EVENTS_CAP = 32 * 1024 * 1024
"""Bytes: the largest ``events.jsonl`` read."""

_JOB = re.compile(r"^job-(\d{1,12})$")
log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class JobDirs:
    """Where the controller keeps each job's protocol files (orders, offers, acks...).

    Parameters
    ----------
    spool
        ``None`` (``controller.privilege: root``): in the job's own directory
        (``<workdir>/.elastic-slurm/job-<id>``), files handed to the job's user. A path
        (``privilege: service``): ``<spool>/job-<id>``, the controller's own files; the job's
        directory is then the job's alone, and the job reaches these only through the
        controller's server, as its MUNGE-authenticated user (``docs/protocol.md``).
    """

    spool: Path | None = None

    @property
    def by_job(self) -> bool:
        """Whether jobs do the Slurm side of their resizes themselves (a service controller)."""
        return self.spool is not None

    def of(self, workdir: str | Path, job_id: int, *, user: str | None = None) -> JobDir:
        """Job ``job_id``'s protocol directory (``workdir`` and ``user`` as Slurm reports them).

        Raises
        ------
        JobInputError
            ``user`` is not a user of this host (root mode).
        """
        if self.spool is None:
            return JobDir.for_job(workdir, job_id, user=user)
        return JobDir(Path(self.spool) / f"job-{int(job_id)}")

    def sweep(self, live: Collection[int], older_than_s: float, *, limit: int = 1000) -> list[int]:
        """Remove the spool's directories of jobs gone for ``older_than_s`` seconds.

        A service controller keeps one ``job-<id>/`` per job in its spool; once Slurm no
        longer lists the job (its id not in ``live``) and nothing was written there for
        ``older_than_s`` seconds, nothing reads it again (the journal keeps the resizes).
        At most ``limit`` directories go per call, so that a large backlog is cleared over
        several cycles. Only real directories named ``job-<id>`` are touched; a symbolic
        link or any other entry is left alone, and removal never follows a link
        (:func:`shutil.rmtree` on Linux). Without a spool (a root controller) nothing is done.

        Returns
        -------
        list[int]
            The ids of the directories removed.

        Raises
        ------
        OSError
            The spool cannot be listed. One directory that cannot be removed is logged and
            passed over.
        """
        if self.spool is None:
            return []
        cutoff = time.time() - older_than_s
        removed: list[int] = []
        with os.scandir(self.spool) as entries:
            for entry in entries:
                match = _JOB.match(entry.name)
                if match is None or int(match.group(1)) in live:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                    if not stat.S_ISDIR(st.st_mode) or st.st_mtime >= cutoff:
                        continue
                    shutil.rmtree(entry.path)
                except OSError as exc:
                    log.warning("spool: could not remove %s: %s", entry.path, exc)
                    continue
                removed.append(int(match.group(1)))
                if len(removed) >= limit:
                    break
        return removed


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through an exclusive temporary file and a rename.

    For the job's own files (its checkpoint manifest, its PMIx memo): the parent directory is
    created as needed, as the calling process's own user; ``path`` itself is never followed.

    Raises
    ------
    JobInputError
        ``path`` cannot be written (a directory in its place, a foreign parent...).
    """
    path = Path(path)
    JobFiles(path.parent.parent, (path.parent.name,)).write_json((), path.name, data)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as :func:`write_json_atomic` writes JSON.

    Raises
    ------
    JobInputError
        ``path`` cannot be written (a directory in its place, a foreign parent...).
    """
    path = Path(path)
    JobFiles(path.parent.parent, (path.parent.name,)).write_bytes((), path.name, data)


def _strings(value: Any, where: str, most: int = MAX_NODES) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or len(value) > most:
        raise ValueError(f"{where} must be a list of at most {most} names")
    if not all(isinstance(v, str) and 0 < len(v) <= MAX_TEXT for v in value):
        raise ValueError(f"{where} must hold non-empty strings of at most {MAX_TEXT} characters")
    return tuple(value)


def _bounded(value: Any, where: str, depth: int = 0) -> None:
    """Generic bounds on any JSON value: sizes of strings, lists, objects; finite numbers."""
    if depth > 16:
        raise ValueError(f"{where} is nested more than 16 levels")
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise ValueError(f"{where} is longer than {MAX_TEXT} characters")
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        if not finite(value) or abs(value) > 2**53:
            raise ValueError(f"{where} is out of range")
    elif isinstance(value, list):
        if len(value) > MAX_NODES:
            raise ValueError(f"{where} has more than {MAX_NODES} items")
        for item in value:
            _bounded(item, where, depth + 1)
    elif isinstance(value, dict):
        if len(value) > 256:
            raise ValueError(f"{where} has more than 256 keys")
        for key, item in value.items():
            _bounded(key, where, depth + 1)
            _bounded(item, f"{where}.{key}", depth + 1)


def _int(data: dict[str, Any], key: str, low: int, high: int) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{key} must be an integer from {low} to {high}, got {value!r}")
    return value


def _phases(data: dict[str, Any]) -> None:
    phases = data.get("phases_s") or {}
    if not isinstance(phases, dict) or len(phases) > 64:
        raise ValueError("phases_s must be an object of at most 64 phases")
    if not all(finite(v) and 0 <= v for v in phases.values()):
        raise ValueError("phases_s must hold finite, non-negative seconds")


def _order(data: Any) -> ResizeOrder:
    _bounded(data, "order")
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    _int(data, "seq", 1, MAX_SEQ)
    _strings(data.get("nodes"), "nodes")
    if not finite(data.get("issued_at")):
        raise ValueError("issued_at must be a finite number")
    _phases(data)
    if data.get("by_job"):
        _int(data, "count", 0, MAX_NODES)
        if data.get("grow_path", "") not in ("", "merge", "sibling"):
            raise ValueError("grow_path must be 'merge' or 'sibling'")
        timeout = data.get("grant_timeout_s", 0.0)
        if not finite(timeout) or not 0 <= timeout <= 86400:
            raise ValueError("grant_timeout_s must be from 0 to 86400 seconds")
    return ResizeOrder.from_json(data)


def _ack(data: Any) -> ResizeAck:
    _bounded(data, "ack")
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    _int(data, "seq", 1, MAX_SEQ)
    _strings(data.get("nodes"), "nodes")
    if not finite(data.get("at")):
        raise ValueError("at must be a finite number")
    if "ranks" in data:
        _int(data, "ranks", 0, MAX_RANKS)
    _phases(data)
    return ResizeAck.from_json(data)


def _offer(data: Any) -> Offer:
    _bounded(data, "offer")
    offer = Offer.model_validate(data)
    if offer.number > MAX_SEQ or offer.seq > MAX_SEQ or offer.count > MAX_NODES:
        raise ValueError("number, seq or count out of range")
    _strings(list(offer.hosts), "hosts")
    if not (finite(offer.issued_at) and finite(offer.deadline_at)):
        raise ValueError("issued_at and deadline_at must be finite")
    return offer


def _answer(data: Any) -> Answer:
    _bounded(data, "answer")
    answer = Answer.model_validate(data)
    if answer.number > MAX_SEQ or (answer.count or 0) > MAX_NODES or not finite(answer.at):
        raise ValueError("number, count or at out of range")
    return answer


def _request(data: Any) -> dict[str, Any]:
    _bounded(data, "request")
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    _int(data, "number", 1, MAX_SEQ)
    if _int(data, "delta", -MAX_NODES, MAX_NODES) == 0:
        raise ValueError("delta must not be 0")
    _int(data, "ranks", 0, MAX_RANKS)
    if "at" in data and not finite(data["at"]):
        raise ValueError("at must be a finite number")
    return data


def _request_answer(data: Any) -> dict[str, Any]:
    _bounded(data, "answer")
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    _int(data, "number", 1, MAX_SEQ)
    if not isinstance(data.get("granted"), bool):
        raise ValueError("granted must be true or false")
    if data.get("order") is not None:
        _int(data, "order", 1, MAX_SEQ)
    if not isinstance(data.get("why", ""), str):
        raise ValueError("why must be a string")
    return data


def _object(data: Any) -> dict[str, Any]:
    _bounded(data, "value")
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def restart_request(data: Any) -> dict[str, Any]:
    """Check a restart request the application leaves for the launcher; return it.

    ``seq`` (the order, 1 to ``MAX_SEQ``), ``action`` (``expand`` or ``shrink``), ``nodes`` (the
    next generation's, at least one), ``launch`` (the generation that asks, from 0); optional
    ``handover`` and ``by_job`` (booleans), ``memory_dir`` and ``token`` (texts).

    Raises
    ------
    ValueError
        Naming the first field that is missing or malformed.
    """
    data = _object(data)
    _int(data, "seq", 1, MAX_SEQ)
    if data.get("action") not in ("expand", "shrink"):
        raise ValueError(f"action must be expand or shrink, got {data.get('action')!r}")
    if not _strings(data.get("nodes"), "nodes"):
        raise ValueError("nodes must name at least one node")
    _int(data, "launch", 0, MAX_SEQ)
    for key in ("handover", "by_job"):
        if not isinstance(data.get(key, False), bool):
            raise ValueError(f"{key} must be true or false")
    for key in ("memory_dir", "token"):
        if not isinstance(data.get(key, ""), str):
            raise ValueError(f"{key} must be a text")
    return data


def _size_request(data: Any) -> dict[str, Any]:
    data = _object(data)
    _int(data, "number", 1, MAX_SEQ)
    _int(data, "nodes", 1, MAX_NODES)
    if not isinstance(data.get("user"), str) or not finite(data.get("at")):
        raise ValueError("user must be a name and at a finite time")
    return data


def _size_answer(data: Any) -> dict[str, Any]:
    data = _object(data)
    _int(data, "number", 1, MAX_SEQ)
    if data.get("seq") is not None:
        _int(data, "seq", 1, MAX_SEQ)
    if not isinstance(data.get("refused", ""), str):
        raise ValueError("refused must be a text")
    return data


def _lookup_user(user: str, job_id: int) -> tuple[int, int | None]:
    """``(uid, gid)`` of ``user`` (a name, or a number Slurm printed for an unnamed user)."""
    try:
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except (KeyError, OverflowError):
        if user.isdigit() and int(user) < 2**32:
            return int(user), None  # a uid without a name: files must still be its
        raise JobInputError(job_id, f"user {user!r} is not known on this host") from None
    return entry.pw_uid, entry.pw_gid


class JobDir:
    """The channel directory of one job.

    Parameters
    ----------
    path
        The directory (created on first write). Below ``<workdir>/.elastic-slurm/`` (see
        :meth:`for_job`) both components are opened without following symlinks; elsewhere
        the directory itself is.
    uid, gid
        The job's user and group: every directory and file must belong to ``uid``, and a root
        writer hands what it creates to ``uid:gid``. The controller passes the job's; without
        them, the process's own user (or, for root, the owner of ``.elastic-slurm``).
    """

    def __init__(self, path: Path, *, uid: int | None = None, gid: int | None = None) -> None:
        self.path = Path(path)
        self.uid, self.gid = uid, gid
        match = _JOB.match(self.path.name)
        self.job_id = int(match.group(1)) if match else None
        if self.path.parent.name == SUBDIR:
            anchor, parts = self.path.parent.parent, (SUBDIR, self.path.name)
        else:
            anchor, parts = self.path.parent, (self.path.name,)
        self.files = JobFiles(anchor, parts, job_id=self.job_id, owner=Owner(uid, gid))

    @classmethod
    def for_job(
        cls,
        workdir: str | Path,
        job_id: int,
        *,
        uid: int | None = None,
        gid: int | None = None,
        user: str | None = None,
    ) -> JobDir:
        """The directory of job ``job_id`` submitted from ``workdir``.

        Parameters
        ----------
        workdir
            The job's working directory (Slurm's ``WorkDir``).
        job_id
            The job.
        uid, gid
            Its owner, if known as numbers.
        user
            Its owner's name (or number) as Slurm reports it, looked up when ``uid`` is not
            given: what the controller passes (``JobDir.for_job(w, id, user=job.user)``).

        Raises
        ------
        JobInputError
            ``user`` is not a user of this host.
        """
        if uid is None and user:
            uid, gid = _lookup_user(user, job_id)
        return cls(Path(workdir) / SUBDIR / f"job-{job_id}", uid=uid, gid=gid)

    def __repr__(self) -> str:
        return f"JobDir({str(self.path)!r})"

    @property
    def checkpoint(self) -> Path:
        """Where distributed data and state are kept across a restart."""
        return self.path / "checkpoint"

    def create(self) -> None:
        """Make the directory if missing: mode 0755, the job's user's, nothing followed.

        Raises
        ------
        JobInputError
            A symlink, a foreign owner or a loose mode on the way.
        """
        self.files.makedirs()

    def retire(self) -> Path | None:
        """Move this directory aside, to ``job-<id>.earlier-<k>`` beside it (first free ``k``).

        For a directory an earlier job with the same id left: Slurm numbers jobs from 1
        again once its state is reset, and a new job must not follow the earlier one's
        orders nor resume its checkpoint. Nothing is deleted. Returns the new path, or None
        if there was no directory.

        Raises
        ------
        JobInputError
            A symlink, a foreign owner or a loose mode on the way; or 1000 earlier ones.
        """
        new = self.files.move_aside(f"{self.path.name}.earlier-")
        return None if new is None else self.path.parent / new

    # ------------------------------------------------------------------ plumbing
    def _read(
        self, sub: tuple[str, ...], name: str, parse: Callable[[Any], T], cap: int = 256 * 1024
    ) -> T | None:
        data = self.files.read_json(sub, name, cap)
        if data is None:
            return None
        try:
            return parse(data)
        except (ValidationError, KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            where = "/".join([*sub, name])
            raise JobInputError(self.job_id, f"{where}: {detail}") from None

    def _number(self, number: int, what: str) -> int:
        if not isinstance(number, int) or not 1 <= number <= MAX_SEQ:
            raise JobInputError(self.job_id, f"{what} number {number!r} is not 1..{MAX_SEQ}")
        return number

    def _last(self, sub: str) -> int:
        """The highest number in ``sub`` (0 if none), refused when numbering leaps."""
        numbers = self.files.list_numbered((sub,))
        if not numbers:
            return 0
        if numbers[-1] > len(numbers) + MAX_GAP:
            raise JobInputError(
                self.job_id,
                f"{sub}/{numbers[-1]:06d}.json: numbers leap past the {len(numbers)} found",
            )
        return numbers[-1]

    @staticmethod
    def _in_range(number: Any) -> bool:
        return isinstance(number, int) and 1 <= number <= MAX_SEQ

    # ------------------------------------------------------------------ orders
    def order_path(self, seq: int) -> Path:
        """The file of order ``seq``."""
        return self.path / "orders" / f"{seq:06d}.json"

    def write_order(self, order: ResizeOrder) -> None:
        """Publish an order (the job sees it at its next resize point)."""
        name = f"{self._number(order.seq, 'order'):06d}.json"
        self.files.write_json(("orders",), name, order.to_json())

    def read_order(self, seq: int) -> ResizeOrder | None:
        """Order ``seq`` if it was issued.

        Raises
        ------
        JobInputError
            The file is unusable, or holds another order's number.
        """
        if not self._in_range(seq):
            return None
        order = self._read(("orders",), f"{seq:06d}.json", _order)
        if order is not None and order.seq != seq:
            raise JobInputError(self.job_id, f"orders/{seq:06d}.json: holds order {order.seq}")
        return order

    def last_order_seq(self) -> int:
        """The highest order number issued so far (0 if none).

        Raises
        ------
        JobInputError
            A number beyond :data:`~elastic_slurm.protocol.files.MAX_SEQ`, a leap of more than
            :data:`MAX_GAP` past the orders found, or too many entries.
        """
        return self._last("orders")

    # ------------------------------------------------------------------ offers
    def offer_path(self, number: int) -> Path:
        """The file of offer ``number``."""
        return self.path / "offers" / f"{number:06d}.json"

    def write_offer(self, offer: Offer) -> None:
        """Publish (or rewrite, e.g. withdrawn) an offer."""
        name = f"{self._number(offer.number, 'offer'):06d}.json"
        self.files.write_json(("offers",), name, offer.model_dump(mode="json"))

    def read_offer(self, number: int) -> Offer | None:
        """Offer ``number`` if it was made."""
        if not self._in_range(number):
            return None
        offer = self._read(("offers",), f"{number:06d}.json", _offer)
        if offer is not None and offer.number != number:
            raise JobInputError(self.job_id, f"offers/{number:06d}.json: holds {offer.number}")
        return offer

    def last_offer_number(self) -> int:
        """The highest offer number made so far (0 if none); bounded as :meth:`last_order_seq`."""
        return self._last("offers")

    def open_offer(self) -> Offer | None:
        """The last offer made, if it is neither withdrawn nor answered."""
        number = self.last_offer_number()
        offer = self.read_offer(number) if number else None
        if offer is None or offer.withdrawn or self.read_answer(number) is not None:
            return None
        return offer

    def answer_offer_path(self, number: int) -> Path:
        """The file of the job's answer to offer ``number``."""
        return self.path / "offers" / f"{number:06d}.answer.json"

    def write_answer(self, answer: Answer) -> None:
        """Record the job's answer to an offer."""
        name = f"{self._number(answer.number, 'offer'):06d}.answer.json"
        self.files.write_json(("offers",), name, answer.model_dump(mode="json"))

    def read_answer(self, number: int) -> Answer | None:
        """The job's answer to offer ``number``, if it answered."""
        if not self._in_range(number):
            return None
        answer = self._read(("offers",), f"{number:06d}.answer.json", _answer)
        if answer is not None and answer.number != number:
            raise JobInputError(self.job_id, f"offers/{number:06d}.answer.json: another offer")
        return answer

    # ------------------------------------------------------------------ secret, registration
    @property
    def secret_path(self) -> Path:
        """The job's secret, readable by its user (and the controller, running as root)."""
        return self.path / "secret"

    def write_secret(self, secret: str) -> None:
        """Store the job's secret, mode 0600 from the start (never world-readable)."""
        self.files.write_bytes((), "secret", secret.encode(), mode=0o600)

    def read_secret(self) -> str | None:
        """The job's secret, if its launcher stored one.

        Raises
        ------
        JobInputError
            Not a regular file of the job's user, larger than :data:`SECRET_CAP`, not UTF-8.
        """
        data = self.files.read_bytes((), "secret", SECRET_CAP)
        if data is None:
            return None
        try:
            return data.decode("utf-8").strip() or None
        except UnicodeDecodeError:
            raise JobInputError(self.job_id, "secret: not UTF-8 text") from None

    @property
    def registration_path(self) -> Path:
        """Written by the controller's server when the job registers."""
        return self.path / "registered.json"

    def write_registration(self, data: dict[str, Any]) -> None:
        """Record that the job registered (who, when, on which hosts)."""
        self.files.write_json((), "registered.json", data)

    def registration(self) -> dict[str, Any] | None:
        """The job's registration, if it registered (then the controller negotiates)."""
        return self._read((), "registered.json", _object)

    # ------------------------------------------------------------------ acks
    def ack_path(self, seq: int, status: AckStatus) -> Path:
        """The file of the ``status`` acknowledgement of order ``seq``."""
        return self.path / "acks" / f"{seq:06d}.{status.value}.json"

    def write_ack(self, ack: ResizeAck) -> None:
        """Publish an acknowledgement."""
        name = f"{self._number(ack.seq, 'order'):06d}.{AckStatus(ack.status).value}.json"
        self.files.write_json(("acks",), name, ack.to_json())

    def read_ack(self, seq: int, status: AckStatus) -> ResizeAck | None:
        """The ``status`` acknowledgement of order ``seq``, if written."""
        if not self._in_range(seq):
            return None
        name = f"{seq:06d}.{AckStatus(status).value}.json"
        ack = self._read(("acks",), name, _ack)
        if ack is not None and (ack.seq, ack.status) != (seq, status):
            raise JobInputError(self.job_id, f"acks/{name}: acknowledges something else")
        return ack

    def final_ack(self, seq: int) -> ResizeAck | None:
        """The ``done`` or ``failed`` acknowledgement of order ``seq``, if written."""
        return self.read_ack(seq, AckStatus.DONE) or self.read_ack(seq, AckStatus.FAILED)

    def open_order(self) -> ResizeOrder | None:
        """The last order issued, if the job has not yet finished it (no final acknowledgement)."""
        seq = self.last_order_seq()
        if seq == 0 or self.final_ack(seq) is not None:
            return None
        return self.read_order(seq)

    # ------------------------------------------------------------------ evolving requests
    def request_path(self, number: int) -> Path:
        """The file of the application's evolving request ``number``."""
        return self.path / "requests" / f"{number:06d}.json"

    def write_request(self, number: int, delta: int, ranks: int) -> None:
        """Record an evolving request: ``delta`` nodes more (or ``-delta`` fewer)."""
        name = f"{self._number(number, 'request'):06d}.json"
        self.files.write_json(
            ("requests",),
            name,
            {"number": number, "delta": delta, "ranks": ranks, "at": time.time()},
        )

    def answer_path(self, number: int) -> Path:
        """Where the controller answers evolving request ``number``."""
        return self.path / "requests" / f"{number:06d}.answer.json"

    def answer_request(self, number: int, granted: bool, order_seq: int | None, why: str) -> None:
        """Close evolving request ``number`` (granted by order ``order_seq``, or refused)."""
        name = f"{self._number(number, 'request'):06d}.answer.json"
        self.files.write_json(
            ("requests",),
            name,
            {
                "number": number,
                "granted": granted,
                "order": order_seq,
                "why": why,
                "at": time.time(),
            },
        )

    # ------------------------------------------------------------------ sizes asked by hand
    def write_size_request(self, number: int, nodes: int, user: str) -> None:
        """A service controller's spool: ``user`` asked (``elastic-slurm resize``) for ``nodes``.

        ``number`` counts the job's such requests; only the last one is kept.
        """
        data = {"number": number, "nodes": nodes, "user": user, "at": time.time()}
        self.files.write_json((), "resize.json", data)

    def size_request(self) -> dict[str, Any] | None:
        """The last size asked by hand (``number``, ``nodes``, ``user``, ``at``), if any."""
        return self._read((), "resize.json", _size_request)

    def write_size_answer(self, number: int, *, seq: int | None = None, refused: str = "") -> None:
        """The controller's answer to size request ``number``: its order ``seq``, or why not."""
        data = {"number": number, "seq": seq, "refused": refused, "at": time.time()}
        self.files.write_json((), "resize.answer.json", data)

    def size_answer(self) -> dict[str, Any] | None:
        """The answer to the last size asked by hand (``number``, ``seq`` or ``refused``)."""
        return self._read((), "resize.answer.json", _size_answer)

    def answered(self, number: int) -> bool:
        """Whether evolving request ``number`` has an answer file (an entry; nothing followed)."""
        if not self._in_range(number):
            return False
        return self.files.exists(("requests",), f"{number:06d}.answer.json")

    def request_answer(self, number: int) -> dict[str, Any] | None:
        """The controller's answer to evolving request ``number``, once it answered."""
        if not self._in_range(number):
            return None
        return self._read(("requests",), f"{number:06d}.answer.json", _request_answer)

    def requests(self) -> list[dict[str, Any]]:
        """Every evolving request written so far, in order.

        Raises
        ------
        JobInputError
            A request file is unusable, holds another number, or the directory is refused
            (see :meth:`~elastic_slurm.protocol.files.JobFiles.list_numbered`).
        """
        found = []
        for number in self.files.list_numbered(("requests",)):
            request = self._read(("requests",), f"{number:06d}.json", _request, 4096)
            if request is None:
                continue
            if request["number"] != number:
                raise JobInputError(self.job_id, f"requests/{number:06d}.json: another number")
            found.append(request)
        return found

    # ------------------------------------------------------------------ restart requests
    @property
    def restart_path(self) -> Path:
        """Written by the application when it exits to be restarted at another size."""
        return self.path / "restart.json"

    def request_restart(self, request: dict[str, Any]) -> None:
        """Record the application's restart request (rank 0, before the ranks exit)."""
        self.files.write_json((), "restart.json", request)

    def take_restart(self, name: str = "restart.json") -> dict[str, Any] | None:
        """Read and remove the restart request, if any (the launcher, after mpirun exits).

        ``name``: another request of the same form (a waiting successor's). The request is
        checked (:func:`restart_request`); an unusable one is removed all the same, so that it
        is read once.

        Raises
        ------
        JobInputError
            The request is unusable (the message names the file and the field), or cannot be
            removed.
        """
        try:
            data = self._read((), name, restart_request)
        except JobInputError:
            with contextlib.suppress(OSError, JobInputError):  # a directory, a foreign owner
                self.files.unlink((), name)
            raise
        if data is not None:
            self.files.unlink((), name)
        return data

    # ------------------------------------------------------------------ events
    def log_event(self, event: str, **fields: Any) -> None:
        """Append one event to ``events.jsonl`` (``t`` is added: seconds since the epoch)."""
        line = json.dumps({"t": time.time(), "event": event, **fields})
        self.files.append_bytes((), "events.jsonl", (line + "\n").encode())

    def events(self) -> list[dict[str, Any]]:
        """All events logged so far, in order.

        Raises
        ------
        JobInputError
            ``events.jsonl`` is unusable (larger than :data:`EVENTS_CAP`, a line not JSON).
        """
        data = self.files.read_bytes((), "events.jsonl", EVENTS_CAP)
        if data is None:
            return []
        return [
            decode_json(line, self.job_id, "events.jsonl")
            for line in data.splitlines()
            if line.strip()
        ]
