"""The job's side of the protocol: an HTTP client (requests) with retries (tenacity).

A connection error or a 5xx answer is retried with backoff for up to ``retry_s`` seconds (a
controller being restarted comes back); a 4xx answer is final and raised as
:class:`RefusedError` with the controller's reason. Every message that changes something
carries a MUNGE credential made for it (its payload is the message's digest), and over
``https`` the controller's certificate is verified against the site's CA
(:data:`CA_ENV`, or the ``ca_file`` given).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
)

from elastic_slurm.errors import ElasticSlurmError
from elastic_slurm.model.offer import Answer, Offer
from elastic_slurm.model.resize_order import ResizeAck, ResizeOrder
from elastic_slurm.protocol.gateway import MAX_TEXT
from elastic_slurm.protocol.identity import IdentityError, make_credential, request_digest

PREFIX = "/v1"
#: The CA file (PEM) that signed the controller's certificate, for ``https`` URLs.
CA_ENV = "ELASTIC_SLURM_CONTROLLER_CA"


class RefusedError(ElasticSlurmError):
    """The controller refused the message (``status``: its HTTP status)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"controller refused ({status}): {message}")
        self.status = status
        self.reason = message


class _Unavailable(Exception):
    """A retryable failure (no answer, or a 5xx)."""


class _NotRunningYet(_Unavailable):
    """409 "not running": retried (the controller's view lags a start), then a refusal."""


class ControllerClient:
    """Talks to the controller on behalf of job ``job_id``.

    Parameters
    ----------
    url
        The controller's base URL (``http://host:port``).
    job_id
        The Slurm job id.
    secret
        The job's secret (given at submission).
    timeout_s
        Seconds per HTTP request.
    retry_s
        For how long (seconds) an unreachable controller, or a MUNGE daemon that gives no
        credential, is retried before giving up (``ConnectionError``).
    munge_socket
        The MUNGE socket for credentials (``None``: found from slurm.conf).
    credential
        ``payload -> credential``: makes the identity credential sent with each message that
        changes something, carrying ``payload`` (the message's
        :func:`~elastic_slurm.protocol.identity.request_digest`); default: a fresh MUNGE
        credential from :func:`~elastic_slurm.protocol.identity.make_credential`.
    ca_file
        For an ``https`` URL: the CA file (PEM) the controller's certificate is checked
        against; default: :data:`CA_ENV` if set, else the system's CAs.
    """

    def __init__(
        self,
        url: str,
        job_id: int,
        secret: str,
        *,
        timeout_s: float = 5.0,
        retry_s: float = 5.0,
        munge_socket: str | None = None,
        credential: Callable[[str], str] | None = None,
        ca_file: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.job_id = job_id
        self.secret = secret
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.munge_socket = munge_socket
        self.credential = credential or (lambda p: make_credential(munge_socket, payload=p))
        # made at the first message: every rank of a job builds a client, rank 0 alone talks
        # (and ``requests`` costs about 50 ms to import: on the path of a restart's start)
        self._session: Any = None
        # per request: a Session's ``verify`` loses to REQUESTS_CA_BUNDLE in the environment
        self._verify: str | bool = True
        if urlsplit(self.url).scheme == "https":
            self._verify = ca_file or os.environ.get(CA_ENV) or True

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        changes: bool,
        retry_s: float | None = None,
    ) -> dict[str, Any]:
        """One message; ``ConnectionError`` once ``retry_s`` (default :attr:`retry_s`) is over."""
        import requests

        if self._session is None:
            self._session = requests.Session()
        url = f"{self.url}{PREFIX}/jobs/{self.job_id}{path}"
        data = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()

        @retry(
            retry=retry_if_exception_type(_Unavailable),
            wait=wait_exponential(multiplier=0.2, max=3.0),
            stop=stop_after_delay(self.retry_s if retry_s is None else retry_s),
            reraise=True,
        )
        def once() -> dict[str, Any]:
            headers = {"Authorization": f"Bearer {self.secret}"}
            if body is not None:
                headers["Content-Type"] = "application/json"
            if changes:  # a fresh credential each try, for this message: MUNGE refuses replays
                digest = request_digest(method, urlsplit(url).path, self.job_id, data)
                try:
                    headers["X-Munge-Credential"] = self.credential(digest)
                except IdentityError as exc:  # munged down or restarting: tried again
                    raise _Unavailable(f"no MUNGE credential for the controller: {exc}") from exc
            try:
                r = self._session.request(
                    method,
                    url,
                    data=data or None,
                    headers=headers,
                    timeout=self.timeout_s,
                    verify=self._verify,
                )
            except requests.RequestException as exc:
                raise _Unavailable(f"controller at {self.url} unreachable: {exc}") from exc
            if r.status_code >= 500:
                raise _Unavailable(f"controller error {r.status_code}: {r.text[:200]}")
            try:
                answer = r.json()
            except ValueError:
                answer = {"error": r.text[:200]}
            if not isinstance(answer, dict):
                answer = {"error": str(answer)[:200]}
            if r.status_code == 409 and "is not running" in str(answer.get("error", "")):
                # the controller's view lags the job's start by up to a cycle: ask again
                raise _NotRunningYet(str(answer.get("error")))
            if r.status_code >= 400:
                raise RefusedError(r.status_code, str(answer.get("error", answer)))
            return answer

        try:
            return once()
        except _NotRunningYet as exc:
            raise RefusedError(409, str(exc)) from exc
        except _Unavailable as exc:
            raise ConnectionError(str(exc)) from exc

    def register(self, ranks: int, hosts: list[str], retry_s: float = 3.0) -> dict[str, Any]:
        """Register the job: its resizes are offered to it from now on."""
        body = {"ranks": ranks, "hosts": hosts}
        return self._call("POST", "/register", body, changes=True, retry_s=retry_s)

    def next(self, seq: int, retry_s: float = 0.0) -> Offer | ResizeOrder | None:
        """The open offer, else order ``seq`` if it was issued, else ``None``."""
        data = self._call("GET", f"/next?seq={seq}", changes=False, retry_s=retry_s)
        if "offer" in data:
            return Offer.model_validate(data["offer"])
        if "order" in data:
            return ResizeOrder.from_json(data["order"])
        return None

    def answer(self, answer: Answer) -> None:
        """Answer an offer (raises :class:`RefusedError` 409 if it no longer stands)."""
        body = answer.model_dump(mode="json", exclude={"number", "at"})
        self._call("POST", f"/offers/{answer.number}/answer", body, changes=True)

    def ack(self, ack: ResizeAck) -> None:
        """Acknowledge an order (``vacated``: the hosts released; ``done``; ``failed``)."""
        body = ack.to_json()  # the controller takes texts of at most MAX_TEXT characters
        body.update(strategy=ack.strategy[:MAX_TEXT], reason=ack.reason[:MAX_TEXT])
        self._call("POST", "/acks", body, changes=True)

    def request(self, delta: int, ranks: int) -> int:
        """An evolving request: ``delta`` nodes more (or fewer); returns its number."""
        data = self._call("POST", "/requests", {"delta": delta, "ranks": ranks}, changes=True)
        return int(data["number"])

    def resize(self, nodes: int) -> int:
        """Ask a service controller for the job on ``nodes`` nodes; the request's number."""
        data = self._call("POST", "/resize", {"nodes": nodes}, changes=True)
        return int(data["number"])

    def resize_answer(self, number: int) -> dict[str, Any] | None:
        """The answer to size request ``number`` (its order's ``seq``, or ``refused``)."""
        data = self._call("GET", f"/resize/{number}", changes=False)
        return data.get("answer")

    def request_answer(self, number: int) -> dict[str, Any] | None:
        """The controller's answer to evolving request ``number``, once it answered."""
        data = self._call("GET", f"/requests/{number}", changes=False)
        return data.get("answer")
