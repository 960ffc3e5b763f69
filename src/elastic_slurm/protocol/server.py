"""The controller's HTTP server: the protocol's endpoints (Flask) served by cheroot in a thread.

Flask maps URLs and JSON; cheroot (CherryPy's WSGI server, pure Python) serves them, with TLS
from the standard library's ``ssl`` when the site gives a certificate. cheroot hands a request
to the application before reading its body, so the body is read only once the job's secret
matched, and at most ``max_body_bytes`` of it. Its connection loop waits in ``select`` (0.1 s
at a time) when idle: the idle controller costs next to no CPU. The endpoints, their bodies
and errors are in ``docs/protocol.md``; the checks are
:class:`~elastic_slurm.protocol.gateway.Gateway`'s.

Every refusal is counted (:func:`elastic_slurm.controller.metrics.refusal`) and logged (one
line: job, sender's user when known, remote address, status, reason); a flood is logged at
:data:`REFUSAL_LOG_RATE` lines a second, and the next line says how many were left out.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from cheroot import wsgi
from cheroot.ssl.builtin import BuiltinSSLAdapter
from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.controller import metrics
from elastic_slurm.errors import ConfigError, JobInputError
from elastic_slurm.model.snapshot import JobState
from elastic_slurm.protocol.address import parse_address
from elastic_slurm.protocol.gateway import (
    MAX_SEQ,
    Gateway,
    JobRecord,
    Message,
    ProtocolError,
)
from elastic_slurm.protocol.jobdir import JobDirs

log = logging.getLogger(__name__)

#: The protocol's version (the URL prefix).
PREFIX = "/v1"
#: The header that carries a fresh MUNGE credential.
MUNGE_HEADER = "X-Munge-Credential"
#: The largest body read by default (bytes): ``controller.max_body_bytes``.
MAX_BODY_BYTES = 65536
#: The largest request line plus headers (bytes).
MAX_HEADER_BYTES = 16384
#: Set in a request's WSGI environ: close the connection after the answer (the body was
#: not read; HTTP/1.1 would otherwise have the server read it all before answering).
CLOSE_KEY = "elastic_slurm.close_connection"
#: Set in a request's WSGI environ once its whole body was read.
BODY_READ_KEY = "elastic_slurm.body_read"


#: Refusal lines logged in a burst, then per second (a flood is counted, and summarised).
REFUSAL_LOG_BURST = 50
REFUSAL_LOG_RATE = 10.0


class LogBudget:
    """A token bucket for log lines: ``burst`` at once, then ``rate`` a second.

    A flood of refusals must not fill the disk with log lines: beyond the budget they are
    only counted (the metrics count every one), and the next line logged says how many were
    left out.
    """

    def __init__(
        self,
        burst: int = REFUSAL_LOG_BURST,
        rate: float = REFUSAL_LOG_RATE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst, self.rate, self.clock = burst, rate, clock
        self._tokens = float(burst)
        self._last = clock()
        self._skipped = 0
        self._lock = threading.Lock()

    def take(self) -> int | None:
        """``None``: do not log this line; else how many lines were left out before it."""
        with self._lock:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens < 1:
                self._skipped += 1
                return None
            self._tokens -= 1
            skipped, self._skipped = self._skipped, 0
            return skipped


def _printable(text: str, limit: int = 300) -> str:
    """``text`` fit for one log line: control characters (newlines) as ``?``, ``limit`` at most."""
    return "".join(c if c.isprintable() else "?" for c in text[:limit])


class _Gateway(wsgi.Gateway_10):
    """cheroot's WSGI gateway, closing the connection when the application asks for it.

    cheroot reads a body the application left unread before it answers on a kept-alive
    connection; a refused message's body must not be read at all, so its connection is
    closed instead.
    """

    def start_response(self, status, headers, exc_info=None):  # type: ignore[no-untyped-def]
        if self.env.get(CLOSE_KEY):
            self.req.close_connection = True
        return super().start_response(status, headers, exc_info)


def slurm_lookup(slurm: SlurmBackend) -> Callable[[int], JobRecord | None]:
    """``job_id -> JobRecord`` from Slurm's own record of the job (its user, its directory).

    One query to slurmctld per call; the gateway caches the answers.
    """

    def lookup(job_id: int) -> JobRecord | None:
        return _record(slurm.job(job_id))

    return lookup


def observed_lookup(
    latest: Callable[[], Mapping[int, SlurmJob] | None],
    fallback: Callable[[int], JobRecord | None],
) -> Callable[[int], JobRecord | None]:
    """``job_id -> JobRecord`` from the controller's latest observation of Slurm's jobs.

    Parameters
    ----------
    latest
        The jobs the controller saw in its last cycle (by id), or ``None`` before the first.
    fallback
        Asked for a job the observation does not have or did not see running (one that
        started since), e.g. :func:`slurm_lookup`.
    """

    def lookup(job_id: int) -> JobRecord | None:
        jobs = latest()
        job = jobs.get(job_id) if jobs is not None else None
        if job is not None and job.model_state is JobState.RUNNING:
            return _record(job)
        # unknown to the last cycle, or not running then: a job that just started registers
        # before the next cycle sees it running, so Slurm itself is asked (and cached)
        return fallback(job_id)

    return lookup


def _record(job: SlurmJob | None) -> JobRecord | None:
    if job is None:
        return None
    return JobRecord(job.job_id, job.user, job.workdir, job.model_state is JobState.RUNNING)


def _secret() -> str | None:
    auth = request.headers.get("Authorization", "")
    return auth[len("Bearer ") :].strip() or None if auth.startswith("Bearer ") else None


def _read_body(limit: int) -> bytes:
    """The request's body, at most ``limit`` bytes (413 beyond, checked before reading)."""
    declared = request.headers.get("Content-Length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise ProtocolError(400, f"malformed Content-Length {declared[:40]!r}")
        if int(declared) > limit:
            raise ProtocolError(413, f"the body is {int(declared)} bytes; at most {limit}")
    stream = request.stream
    chunks: list[bytes] = []
    size = 0
    while size <= limit:  # a hard limit too: chunked bodies declare no length
        chunk = stream.read(min(65536, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise ProtocolError(413, f"the body is larger than {limit} bytes")
    request.environ[BODY_READ_KEY] = True
    return b"".join(chunks)


def create_app(
    gateway: Gateway, *, max_body_bytes: int = MAX_BODY_BYTES, log_budget: LogBudget | None = None
) -> Flask:
    """The Flask application of the protocol, backed by ``gateway``.

    ``max_body_bytes``: the largest request body read (bytes); larger ones get 413.
    ``log_budget``: how many refusals are logged one by one (default: :class:`LogBudget`).
    """
    app = Flask("elastic_slurm.protocol")
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes
    budget = log_budget or LogBudget()

    def message(job_id: int) -> Message:
        return Message(
            job_id=job_id,
            method=request.method,
            path=request.path,
            secret=_secret(),
            credential=request.headers.get(MUNGE_HEADER),
            read_body=lambda: _read_body(max_body_bytes),
        )

    def refused(status: int, reason: str, user: str | None = None):  # type: ignore[no-untyped-def]
        metrics.refusal(status)
        skipped = budget.take()
        if skipped is not None:
            job = (request.view_args or {}).get("job_id", "-")
            remote = request.remote_addr or "?"
            reason_ = _printable(reason)
            log.warning(
                "protocol: refused job %s user %s from %s: %d %s%s",
                job,
                user or "?",
                remote,
                status,
                reason_,
                f" ({skipped} more refusals before this one were not logged)" if skipped else "",
                extra={
                    "job_id": job,
                    "user": user,
                    "remote": remote,
                    "status": status,
                    "reason": reason_,
                    "not_logged": skipped,
                },
            )
        return jsonify({"error": reason}), status

    @app.after_request
    def _unread_body(response):  # type: ignore[no-untyped-def]
        """A body left unread (a refusal, a GET with a body) is not read: the connection closes."""
        has_body = request.content_length or "chunked" in request.headers.get(
            "Transfer-Encoding", ""
        )
        if has_body and not request.environ.get(BODY_READ_KEY):
            request.environ[CLOSE_KEY] = True
        return response

    @app.errorhandler(Exception)
    def _failed(exc: Exception):  # type: ignore[no-untyped-def]
        log.exception("protocol: %s %s failed", request.method, _printable(request.path))
        return refused(500, f"the controller failed to serve this message: {exc}")

    @app.errorhandler(ProtocolError)
    def _refused(exc: ProtocolError):  # type: ignore[no-untyped-def]
        return refused(exc.status, str(exc), exc.user)

    @app.errorhandler(JobInputError)
    def _job_input(exc: JobInputError):  # type: ignore[no-untyped-def]
        # the job's own directory is unusable (a symlink, a FIFO, garbage): its problem, a 4xx
        return refused(422, str(exc))

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException):  # type: ignore[no-untyped-def]
        return refused(exc.code or 400, f"{exc.name}: {request.method} {request.path[:200]}")

    @app.get(f"{PREFIX}/health")
    def health():  # type: ignore[no-untyped-def]
        return jsonify({"ok": True, "protocol": PREFIX.strip("/")})

    @app.post(f"{PREFIX}/jobs/<int:job_id>/register")
    def register(job_id: int):  # type: ignore[no-untyped-def]
        return jsonify(gateway.register(message(job_id)))

    @app.get(f"{PREFIX}/jobs/<int:job_id>/next")
    def next_(job_id: int):  # type: ignore[no-untyped-def]
        msg = message(job_id)
        seq = request.args.get("seq", type=int)
        if seq is None or not 1 <= seq <= MAX_SEQ:
            gateway.admit(msg, changes=False)  # a stranger learns nothing from a 400 either
            raise ProtocolError(400, f"give the next order number as ?seq=N (1 <= N <= {MAX_SEQ})")
        return jsonify(gateway.next(msg, seq))

    @app.post(f"{PREFIX}/jobs/<int:job_id>/offers/<int:number>/answer")
    def answer(job_id: int, number: int):  # type: ignore[no-untyped-def]
        msg = message(job_id)
        if not 1 <= number <= MAX_SEQ:
            gateway.admit(msg, changes=False)
            raise ProtocolError(404, f"job {job_id} has no offer {number}")
        return jsonify(gateway.answer(msg, number))

    @app.post(f"{PREFIX}/jobs/<int:job_id>/acks")
    def ack(job_id: int):  # type: ignore[no-untyped-def]
        return jsonify(gateway.ack(message(job_id)))

    @app.post(f"{PREFIX}/jobs/<int:job_id>/requests")
    def evolving_request(job_id: int):  # type: ignore[no-untyped-def]
        return jsonify(gateway.request(message(job_id)))

    @app.post(f"{PREFIX}/jobs/<int:job_id>/resize")
    def resize(job_id: int):  # type: ignore[no-untyped-def]
        return jsonify(gateway.resize(message(job_id)))

    @app.get(f"{PREFIX}/jobs/<int:job_id>/resize/<int:number>")
    def resize_answer(job_id: int, number: int):  # type: ignore[no-untyped-def]
        msg = message(job_id)
        if not 1 <= number <= MAX_SEQ:
            gateway.admit(msg, changes=False)
            raise ProtocolError(404, f"job {job_id} has no size request {number}")
        return jsonify(gateway.resize_answer(msg, number))

    @app.get(f"{PREFIX}/jobs/<int:job_id>/requests/<int:number>")
    def request_answer(job_id: int, number: int):  # type: ignore[no-untyped-def]
        msg = message(job_id)
        if not 1 <= number <= MAX_SEQ:
            gateway.admit(msg, changes=False)
            raise ProtocolError(404, f"job {job_id} has no request {number}")
        return jsonify(gateway.request_answer(msg, number))

    return app


def check_tls_files(cert: Path, key: Path) -> None:
    """Check that ``cert`` and ``key`` are a PEM certificate and its private key.

    Raises
    ------
    ConfigError
        A file is missing or unreadable, or they do not belong together.
    """
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"controller.tls_cert {cert} / controller.tls_key {key}: cannot be used ({exc})"
        ) from exc


class ProtocolServer:
    """Serves the protocol on ``address`` (``host:port``) from a background thread.

    Parameters
    ----------
    gateway
        Admits and carries the messages.
    address
        ``host:port`` (port 0: the system picks one; :attr:`url` tells which).
    threads
        Worker threads (each serves one request at a time).
    max_body_bytes
        The largest request body read (bytes); larger ones get 413.
    tls_cert, tls_key
        PEM files of the site's certificate (with its chain) and private key: serve HTTPS.
    timeout_s
        Seconds a connection may stay silent before it is closed.

    Raises
    ------
    ConfigError
        The address is not ``host:port`` with a port in 0-65535 and a host that resolves, or
        the TLS files cannot be used (from the constructor).
    OSError
        The address cannot be bound (in use, or not an address of this host), from the
        constructor.
    """

    def __init__(
        self,
        gateway: Gateway,
        address: str,
        *,
        threads: int = 8,
        max_body_bytes: int = MAX_BODY_BYTES,
        tls_cert: Path | str | None = None,
        tls_key: Path | str | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        host, port = parse_address(address, what="the protocol server's address", any_port=True)
        if (tls_cert is None) != (tls_key is None):
            raise ConfigError("tls_cert and tls_key go together: give both or neither")
        self._server = wsgi.Server(
            (host, port),
            create_app(gateway, max_body_bytes=max_body_bytes),
            numthreads=threads,
            max=threads,
            server_name="elastic-slurm",
            timeout=max(1, round(timeout_s)),
            shutdown_timeout=5,
        )
        self._server.max_request_header_size = MAX_HEADER_BYTES
        self._server.gateway = _Gateway
        self._server.expiration_interval = 0.1  # select()'s timeout (s): idle, 10 wake-ups/s
        self.tls = tls_cert is not None and tls_key is not None
        if tls_cert is not None and tls_key is not None:
            check_tls_files(Path(tls_cert), Path(tls_key))
            self._server.ssl_adapter = BuiltinSSLAdapter(str(tls_cert), str(tls_key))
        self._server.prepare()  # binds: OSError here, not in the thread
        self.host = host
        self.port = int(self._server.bind_addr[1])
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL jobs are given (``http://host:port``, ``https://`` with TLS)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def start(self) -> ProtocolServer:
        """Start serving (returns at once)."""
        self._thread = threading.Thread(target=self._serve, name="protocol-server", daemon=True)
        self._thread.start()
        log.info("protocol: listening on %s", self.url)
        return self

    def _serve(self) -> None:
        try:
            self._server.serve()
        except Exception:  # noqa: BLE001 - the server thread must not die silently
            log.exception("protocol: the server stopped")

    def stop(self) -> None:
        """Stop serving: close the socket and the connections, wait for the threads (~5 s)."""
        self._server.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)


def serve(
    slurm: SlurmBackend,
    address: str,
    *,
    operators: Iterable[str] = ("root",),
    munge_socket: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    tls_cert: Path | str | None = None,
    tls_key: Path | str | None = None,
    lookup: Callable[[int], JobRecord | None] | None = None,
    jobdirs: JobDirs | None = None,
    on_resize: Callable[[int], None] | None = None,
) -> ProtocolServer:
    """Start the protocol server for ``slurm``'s jobs on ``address``; return it (running).

    ``lookup`` gives a job's record (default: :func:`slurm_lookup`, one Slurm query per job
    and cache period; the controller passes :func:`observed_lookup` over its latest cycle).
    ``jobdirs``: where each job's protocol files are (default: in the job's directory);
    ``on_resize``: told the job id of each size asked by hand (a service controller's loop).
    The other parameters are :class:`Gateway`'s and :class:`ProtocolServer`'s.

    Raises
    ------
    ConfigError
        ``address`` is malformed or does not resolve, or the TLS files cannot be used.
    OSError
        ``address`` cannot be bound.
    """
    gateway = Gateway(
        lookup or slurm_lookup(slurm),
        operators=operators,
        munge_socket=munge_socket,
        jobdirs=jobdirs,
        on_resize=on_resize,
    )
    return ProtocolServer(
        gateway, address, max_body_bytes=max_body_bytes, tls_cert=tls_cert, tls_key=tls_key
    ).start()
