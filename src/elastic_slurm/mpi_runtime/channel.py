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
from collections.abc import Mapping

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


class HttpChannel(FileChannel):
    """The protocol over HTTP; the job directory stays the job's own (checkpoints, events).

    When the controller cannot be reached (stopped, restarting), a message goes to the job
    directory instead, where the controller finds it: the job never stalls on the network,
    and nothing is lost. Until the job has registered, it only follows orders.
    """

    def __init__(self, jobdir: JobDir, client: ControllerClient) -> None:
        super().__init__(jobdir)
        self.client = client
        self.negotiates = False
        self.offline = False

    def _unreachable(self, what: str, exc: Exception) -> None:
        log.warning("controller unreachable (%s); %s through the job directory", exc, what)

    def register(self, ranks: int, hosts: list[str]) -> None:
        """Register with the controller (its resizes are offered from now on).

        An unreachable controller, or one that refuses (wrong secret, another user), leaves
        the job following orders from its job directory; the reason is logged.
        """
        try:
            self.client.register(ranks, hosts)
            self.negotiates = True
        except ConnectionError as exc:
            self._unreachable("orders are followed", exc)
            self.offline = True  # no controller at start: no network wait at resize points
        except RefusedError as exc:
            log.error("%s; orders are followed through the job directory", exc)

    def next(self, seq: int) -> Offer | ResizeOrder | None:
        """The open offer, else order ``seq``, else ``None``."""
        if self.offline:
            return super().next(seq)
        try:
            return self.client.next(seq)
        except ConnectionError:
            return super().next(seq)

    def answer(self, answer: Answer) -> None:
        """Answer an offer (``RefusedError`` 409 if it no longer stands)."""
        try:
            self.client.answer(answer)
        except ConnectionError as exc:
            self._unreachable(f"answer to offer {answer.number} goes", exc)
            super().answer(answer)

    def ack(self, ack: ResizeAck) -> None:
        """Acknowledge an order."""
        try:
            self.client.ack(ack)
        except ConnectionError as exc:
            self._unreachable(f"acknowledgement of order {ack.seq} goes", exc)
            super().ack(ack)

    def request(self, delta: int, ranks: int) -> int:
        """Send an evolving request; return its number."""
        try:
            return self.client.request(delta, ranks)
        except ConnectionError as exc:
            self._unreachable("the evolving request goes", exc)
            return super().request(delta, ranks)


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
        return HttpChannel(jobdir, ControllerClient(url, job_id, secret))
    if url and not secret:
        log.warning("a controller URL but no job secret: following orders from files only")
    return FileChannel(jobdir)
