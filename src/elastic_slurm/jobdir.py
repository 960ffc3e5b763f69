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

Every file is written to a temporary name and renamed, so a reader never sees half a file. The
directory lives with the job (its working directory), so it works wherever the job's files
are shared between nodes. A job submitted with a controller URL talks to the controller's
server (:mod:`elastic_slurm.protocol`), which reads and writes these same files on its behalf;
one without talks through the files directly.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from elastic_slurm.model.offer import Answer, Offer
from elastic_slurm.model.resize_order import AckStatus, ResizeAck, ResizeOrder

SUBDIR = ".elastic-slurm"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


class JobDir:
    """The channel directory of one job.

    Parameters
    ----------
    path
        The directory (created on first write).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def for_job(cls, workdir: str | Path, job_id: int) -> JobDir:
        """The directory of job ``job_id`` submitted from ``workdir``."""
        return cls(Path(workdir) / SUBDIR / f"job-{job_id}")

    def __repr__(self) -> str:
        return f"JobDir({str(self.path)!r})"

    @property
    def checkpoint(self) -> Path:
        """Where distributed data and state are kept across a restart."""
        return self.path / "checkpoint"

    # ------------------------------------------------------------------ orders
    def order_path(self, seq: int) -> Path:
        """The file of order ``seq``."""
        return self.path / "orders" / f"{seq:06d}.json"

    def write_order(self, order: ResizeOrder) -> None:
        """Publish an order (the job sees it at its next resize point)."""
        write_json_atomic(self.order_path(order.seq), order.to_json())

    def read_order(self, seq: int) -> ResizeOrder | None:
        """Order ``seq`` if it was issued."""
        data = _read_json(self.order_path(seq))
        return ResizeOrder.from_json(data) if data is not None else None

    def last_order_seq(self) -> int:
        """The highest order number issued so far (0 if none)."""
        orders = self.path / "orders"
        if not orders.is_dir():
            return 0
        seqs = [int(p.stem) for p in orders.glob("*.json") if p.stem.isdigit()]
        return max(seqs, default=0)

    # ------------------------------------------------------------------ offers
    def offer_path(self, number: int) -> Path:
        """The file of offer ``number``."""
        return self.path / "offers" / f"{number:06d}.json"

    def write_offer(self, offer: Offer) -> None:
        """Publish (or rewrite, e.g. withdrawn) an offer."""
        write_json_atomic(self.offer_path(offer.number), offer.model_dump(mode="json"))

    def read_offer(self, number: int) -> Offer | None:
        """Offer ``number`` if it was made."""
        data = _read_json(self.offer_path(number))
        return Offer.model_validate(data) if data is not None else None

    def last_offer_number(self) -> int:
        """The highest offer number made so far (0 if none)."""
        offers = self.path / "offers"
        if not offers.is_dir():
            return 0
        numbers = [int(p.stem) for p in offers.glob("*.json") if p.stem.isdigit()]
        return max(numbers, default=0)

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
        write_json_atomic(self.answer_offer_path(answer.number), answer.model_dump(mode="json"))

    def read_answer(self, number: int) -> Answer | None:
        """The job's answer to offer ``number``, if it answered."""
        data = _read_json(self.answer_offer_path(number))
        return Answer.model_validate(data) if data is not None else None

    # ------------------------------------------------------------------ secret, registration
    @property
    def secret_path(self) -> Path:
        """The job's secret, readable by its user (and the controller, running as root)."""
        return self.path / "secret"

    def write_secret(self, secret: str) -> None:
        """Store the job's secret, mode 0600 from the start (never world-readable)."""
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".secret.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secret)
        os.replace(tmp, self.secret_path)

    def read_secret(self) -> str | None:
        """The job's secret, if its launcher stored one."""
        try:
            return self.secret_path.read_text().strip() or None
        except FileNotFoundError:
            return None

    @property
    def registration_path(self) -> Path:
        """Written by the controller's server when the job registers."""
        return self.path / "registered.json"

    def write_registration(self, data: dict[str, Any]) -> None:
        """Record that the job registered (who, when, on which hosts)."""
        write_json_atomic(self.registration_path, data)

    def registration(self) -> dict[str, Any] | None:
        """The job's registration, if it registered (then the controller negotiates)."""
        return _read_json(self.registration_path)

    # ------------------------------------------------------------------ acks
    def ack_path(self, seq: int, status: AckStatus) -> Path:
        """The file of the ``status`` acknowledgement of order ``seq``."""
        return self.path / "acks" / f"{seq:06d}.{status.value}.json"

    def write_ack(self, ack: ResizeAck) -> None:
        """Publish an acknowledgement."""
        write_json_atomic(self.ack_path(ack.seq, ack.status), ack.to_json())

    def read_ack(self, seq: int, status: AckStatus) -> ResizeAck | None:
        """The ``status`` acknowledgement of order ``seq``, if written."""
        data = _read_json(self.ack_path(seq, status))
        return ResizeAck.from_json(data) if data is not None else None

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
        write_json_atomic(
            self.request_path(number),
            {"number": number, "delta": delta, "ranks": ranks, "at": time.time()},
        )

    def answer_path(self, number: int) -> Path:
        """Where the controller answers evolving request ``number``."""
        return self.path / "requests" / f"{number:06d}.answer.json"

    def answer_request(self, number: int, granted: bool, order_seq: int | None, why: str) -> None:
        """Close evolving request ``number`` (granted by order ``order_seq``, or refused)."""
        write_json_atomic(
            self.answer_path(number),
            {
                "number": number,
                "granted": granted,
                "order": order_seq,
                "why": why,
                "at": time.time(),
            },
        )

    def request_answer(self, number: int) -> dict[str, Any] | None:
        """The controller's answer to evolving request ``number``, once it answered."""
        return _read_json(self.answer_path(number))

    def requests(self) -> list[dict[str, Any]]:
        """Every evolving request written so far, in order."""
        folder = self.path / "requests"
        if not folder.is_dir():
            return []
        found = [_read_json(p) for p in sorted(folder.glob("[0-9]*[0-9].json"))]
        return [r for r in found if r is not None]

    # ------------------------------------------------------------------ restart requests
    @property
    def restart_path(self) -> Path:
        """Written by the application when it exits to be restarted at another size."""
        return self.path / "restart.json"

    def request_restart(self, request: dict[str, Any]) -> None:
        """Record the application's restart request (rank 0, before the ranks exit)."""
        write_json_atomic(self.restart_path, request)

    def take_restart(self) -> dict[str, Any] | None:
        """Read and remove the restart request, if any (the launcher, after mpirun exits)."""
        data = _read_json(self.restart_path)
        if data is not None:
            self.restart_path.unlink()
        return data

    # ------------------------------------------------------------------ events
    def log_event(self, event: str, **fields: Any) -> None:
        """Append one event to ``events.jsonl`` (``t`` is added: seconds since the epoch)."""
        self.path.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"t": time.time(), "event": event, **fields})
        with open(self.path / "events.jsonl", "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    def events(self) -> list[dict[str, Any]]:
        """All events logged so far, in order."""
        try:
            text = (self.path / "events.jsonl").read_text()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]
