"""How a job hears from and answers the controller: over HTTP, or through its job directory.

A job submitted with a controller URL (``ELASTIC_SLURM_CONTROLLER``) and its secret
(``ELASTIC_SLURM_JOB_SECRET``) talks to the controller's server (:mod:`elastic_slurm.protocol`):
it registers, and its resizes are then *offered* before they are ordered, so it may accept,
reject or counter them. A job without a URL follows orders written into its job directory
(``elastic-slurm resize``; no negotiation). Both use the same messages
(:mod:`elastic_slurm.model.offer`, :mod:`elastic_slurm.model.resize_order`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping

from elastic_slurm import envvars
from elastic_slurm.model.offer import Answer, Offer
from elastic_slurm.model.resize_order import ResizeAck, ResizeOrder
from elastic_slurm.protocol.client import ControllerClient, RefusedError
from elastic_slurm.protocol.jobdir import JobDir

log = logging.getLogger(__name__)


class FileChannel:
    """Orders and acknowledgements as files in the job directory (no controller server)."""

    def __init__(self, jobdir: JobDir) -> None:
        self.jobdir = jobdir
        #: Whether the controller offers resizes to this job (it registered).
        self.negotiates = False
        #: Whether the controller keeps its own state (a service one): see :class:`HttpChannel`.
        self.own_state = False

    def register(self, ranks: int, hosts: list[str]) -> None:
        """Nothing to do: without a server the job only follows orders."""

    def next(self, seq: int) -> Offer | ResizeOrder | None:
        """The open offer, else order ``seq`` if it was issued, else ``None``.

        Offers come only to a job that registered; one whose controller became unreachable
        still finds them here.
        """
        if (self.jobdir.path / "offers").is_dir():
            offer = self.jobdir.open_offer()
            if offer is not None:
                return offer
        if not self.jobdir.order_path(seq).exists():
            return None
        return self.jobdir.read_order(seq)

    def answer(self, answer: Answer) -> None:
        """Record the answer to an offer."""
        self.jobdir.write_answer(answer)

    def ack(self, ack: ResizeAck) -> None:
        """Acknowledge an order."""
        self.jobdir.write_ack(ack)

    def request(self, delta: int, ranks: int) -> int:
        """Record an evolving request; return its number (numbered across restarts)."""
        number = len(self.jobdir.requests()) + 1
        self.jobdir.write_request(number, delta, ranks)
        return number

    def resend(self) -> None:
        """Nothing to resend: the files are where the controller reads them."""

    def record(self, order: ResizeOrder) -> None:
        """Nothing to record: the controller wrote ``order`` into the job directory."""


class HttpChannel(FileChannel):
    """The protocol over HTTP; the job directory stays the job's own (checkpoints, events).

    When the controller cannot be reached (stopped, restarting), a message goes to the job
    directory instead, where a root controller finds it: the job never stalls on the network,
    and nothing is lost. Until the job has registered, it only follows orders.

    A service controller (``own_state``: ``ELASTIC_SLURM_SLURM_SIDE=job``) keeps its own state
    and never reads the job's directory: there a message that could not be sent is also kept
    and sent again (:meth:`resend`, and before each look for orders), registration is tried
    again every :data:`REGISTER_RETRY_S` seconds, and every order followed and every
    acknowledgement are copied into the job's directory, the job's own record of its resizes
    (``elastic-slurm show``).
    """

    #: Seconds between two tries to register with a service controller that was unreachable.
    REGISTER_RETRY_S = 5.0

    def __init__(
        self, jobdir: JobDir, client: ControllerClient, *, own_state: bool = False
    ) -> None:
        super().__init__(jobdir)
        self.client = client
        self.negotiates = False
        self.offline = False
        self.own_state = own_state
        self._unsent: list[tuple[str, Callable[[], object]]] = []
        self._registration: tuple[int, list[str]] | None = None
        self._register_at = 0.0

    def _keep(self, what: str, send: Callable[[], object]) -> None:
        """Under a service controller, send ``send`` again later (in order)."""
        if self.own_state:
            self._unsent.append((what, send))

    def resend(self) -> None:
        """Send again what a service controller did not get, oldest first.

        Stops at the first message that still fails; tries again to register if the
        controller was unreachable at the start.
        """
        if self.offline and self.own_state and self._registration is not None:
            if time.monotonic() >= self._register_at:
                self._register_at = time.monotonic() + self.REGISTER_RETRY_S
                try:
                    self.client.register(*self._registration, retry_s=0.0)
                except (ConnectionError, RefusedError):
                    return
                self.offline, self.negotiates = False, True
                log.info("registered with the controller")
        while self._unsent and not self.offline:
            what, send = self._unsent[0]
            try:
                send()
            except ConnectionError:
                return
            except RefusedError as exc:  # it no longer stands (an answer to a withdrawn offer)
                log.warning("%s not taken by the controller: %s", what, exc)
            self._unsent.pop(0)
            log.info("%s sent to the controller", what)

    def _unreachable(self, what: str, exc: Exception) -> None:
        log.warning("controller unreachable (%s); %s through the job directory", exc, what)

    def register(self, ranks: int, hosts: list[str]) -> None:
        """Register with the controller (its resizes are offered from now on).

        An unreachable controller, or one that refuses (wrong secret, another user), leaves
        the job following orders from its job directory; the reason is logged.
        """
        self._registration = (ranks, list(hosts))
        try:
            answer = self.client.register(ranks, hosts)
            self.negotiates = True
            self.own_state = self.own_state or bool(answer.get("own_state"))
        except ConnectionError as exc:
            self._unreachable("orders are followed", exc)
            self.offline = True  # no controller at start: no network wait at resize points
            self._register_at = time.monotonic() + self.REGISTER_RETRY_S
        except RefusedError as exc:
            log.error("%s; orders are followed through the job directory", exc)

    def next(self, seq: int) -> Offer | ResizeOrder | None:
        """The open offer, else order ``seq``, else ``None``."""
        if self.own_state:
            self.resend()
        if self.offline:
            return super().next(seq)
        try:
            got = self.client.next(seq)
        except ConnectionError:
            return super().next(seq)
        if self.own_state and isinstance(got, ResizeOrder) and not got.needs_grant:
            self.record(got)
        return got

    def record(self, order: ResizeOrder) -> None:
        """Under a service controller, copy ``order`` into the job's directory (its record)."""
        if not self.own_state:
            return
        try:
            self.jobdir.write_order(order)
        except Exception as exc:  # noqa: BLE001 - only a record: the job goes on
            log.warning("order %d not recorded in the job directory: %s", order.seq, exc)

    def answer(self, answer: Answer) -> None:
        """Answer an offer (``RefusedError`` 409 if it no longer stands)."""
        try:
            self.client.answer(answer)
        except ConnectionError as exc:
            self._unreachable(f"answer to offer {answer.number} goes", exc)
            super().answer(answer)
            self._keep(f"answer to offer {answer.number}", lambda: self.client.answer(answer))

    def ack(self, ack: ResizeAck) -> None:
        """Acknowledge an order."""
        if self.own_state:
            super().ack(ack)  # the job's own record (a root controller writes it there)
        try:
            self.client.ack(ack)
        except ConnectionError as exc:
            self._unreachable(f"acknowledgement of order {ack.seq} goes", exc)
            if not self.own_state:
                super().ack(ack)
            self._keep(f"acknowledgement of order {ack.seq}", lambda: self.client.ack(ack))

    def request(self, delta: int, ranks: int) -> int:
        """Send an evolving request; return its number."""
        try:
            return self.client.request(delta, ranks)
        except ConnectionError as exc:
            self._unreachable("the evolving request goes", exc)
            number = super().request(delta, ranks)
            self._keep("the evolving request", lambda: self.client.request(delta, ranks))
            return number


def channel_for(jobdir: JobDir, env: Mapping[str, str] | None = None) -> FileChannel:
    """The channel of the job whose directory is ``jobdir``, from its environment.

    With ``ELASTIC_SLURM_CONTROLLER``, ``ELASTIC_SLURM_JOB_SECRET`` and a job id
    (``ELASTIC_SLURM_JOB_ID`` or ``SLURM_JOB_ID``): :class:`HttpChannel`; else
    :class:`FileChannel`.
    """
    env = os.environ if env is None else env
    url = envvars.get_str("CONTROLLER", None, env)
    secret = envvars.get_str("JOB_SECRET", None, env)
    job_id = envvars.get_int("JOB_ID", 0, env) or int(env.get("SLURM_JOB_ID", "0") or 0)
    if url and secret and job_id:
        own_state = envvars.get_str("SLURM_SIDE", "controller", env) == "job"
        return HttpChannel(jobdir, ControllerClient(url, job_id, secret), own_state=own_state)
    if url and not secret:
        log.warning("a controller URL but no job secret: following orders from files only")
    return FileChannel(jobdir)
