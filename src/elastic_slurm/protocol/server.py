"""The controller's HTTP server: the protocol's endpoints (Flask) served by waitress in a thread.

Flask maps URLs and JSON; waitress is a production WSGI server with no dependencies beyond
the standard library. The endpoints, their bodies and errors are in ``docs/protocol.md``; the
work is done by :class:`~elastic_slurm.protocol.gateway.Gateway`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

import waitress.server
from flask import Flask, jsonify, request

from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.model.snapshot import JobState
from elastic_slurm.protocol.gateway import Gateway, JobRecord, ProtocolError

log = logging.getLogger(__name__)

#: The protocol's version (the URL prefix).
PREFIX = "/v1"
#: The header that carries a fresh MUNGE credential.
MUNGE_HEADER = "X-Munge-Credential"


def slurm_lookup(slurm: SlurmBackend) -> Callable[[int], JobRecord | None]:
    """``job_id -> JobRecord`` from Slurm's own record of the job (its user, its directory)."""

    def lookup(job_id: int) -> JobRecord | None:
        job = slurm.job(job_id)
        if job is None:
            return None
        running = job.model_state is JobState.RUNNING
        return JobRecord(job.job_id, job.user, job.workdir, running)

    return lookup


def _secret() -> str | None:
    auth = request.headers.get("Authorization", "")
    return auth[len("Bearer ") :].strip() or None if auth.startswith("Bearer ") else None


def _body() -> dict[str, Any]:
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise ProtocolError(400, "the body must be a JSON object")
    return data


def create_app(gateway: Gateway) -> Flask:
    """The Flask application of the protocol, backed by ``gateway``."""
    app = Flask("elastic_slurm.protocol")

    @app.errorhandler(ProtocolError)
    def _refused(exc: ProtocolError):  # type: ignore[no-untyped-def]
        return jsonify({"error": str(exc)}), exc.status

    @app.get(f"{PREFIX}/health")
    def health():  # type: ignore[no-untyped-def]
        return jsonify({"ok": True, "protocol": PREFIX.strip("/")})

    @app.post(f"{PREFIX}/jobs/<int:job_id>/register")
    def register(job_id: int):  # type: ignore[no-untyped-def]
        return jsonify(
            gateway.register(job_id, _secret(), request.headers.get(MUNGE_HEADER), _body())
        )

    @app.get(f"{PREFIX}/jobs/<int:job_id>/next")
    def next_(job_id: int):  # type: ignore[no-untyped-def]
        seq = request.args.get("seq", type=int)
        if seq is None or seq < 1:
            raise ProtocolError(400, "give the next order number as ?seq=N (N >= 1)")
        return jsonify(gateway.next(job_id, _secret(), seq))

    @app.post(f"{PREFIX}/jobs/<int:job_id>/offers/<int:number>/answer")
    def answer(job_id: int, number: int):  # type: ignore[no-untyped-def]
        return jsonify(
            gateway.answer(job_id, _secret(), request.headers.get(MUNGE_HEADER), number, _body())
        )

    @app.post(f"{PREFIX}/jobs/<int:job_id>/acks")
    def ack(job_id: int):  # type: ignore[no-untyped-def]
        return jsonify(gateway.ack(job_id, _secret(), request.headers.get(MUNGE_HEADER), _body()))

    @app.post(f"{PREFIX}/jobs/<int:job_id>/requests")
    def evolving_request(job_id: int):  # type: ignore[no-untyped-def]
        return jsonify(
            gateway.request(job_id, _secret(), request.headers.get(MUNGE_HEADER), _body())
        )

    @app.get(f"{PREFIX}/jobs/<int:job_id>/requests/<int:number>")
    def request_answer(job_id: int, number: int):  # type: ignore[no-untyped-def]
        return jsonify(gateway.request_answer(job_id, _secret(), number))

    return app


class ProtocolServer:
    """Serves the protocol on ``address`` (``host:port``) from a background thread.

    Raises
    ------
    OSError
        The address cannot be bound (in use, or not an address of this host), from the
        constructor.
    """

    def __init__(self, gateway: Gateway, address: str, *, threads: int = 4) -> None:
        host, port = address.rsplit(":", 1)
        self._server = waitress.server.create_server(
            create_app(gateway),
            host=host,
            port=int(port),
            threads=threads,
            ident="elastic-slurm",
            asyncore_loop_timeout=0.2,
        )
        self.host, self.port = host, int(self._server.effective_port)  # type: ignore[union-attr]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL jobs are given (``http://host:port``)."""
        return f"http://{self.host}:{self.port}"

    def start(self) -> ProtocolServer:
        """Start serving (returns at once)."""
        self._thread = threading.Thread(target=self._serve, name="protocol-server", daemon=True)
        self._thread.start()
        log.info("protocol: listening on %s", self.url)
        return self

    def _serve(self) -> None:
        try:
            self._server.run()
        except OSError:  # the socket was closed by stop()
            pass

    def stop(self) -> None:
        """Stop serving and wait for the thread (at most 5 s).

        waitress serves until its socket map is empty, and clients' keep-alive connections
        stay in it, so they are closed too.
        """
        self._server.close()
        for channel in list(self._server._map.values()):  # type: ignore[union-attr]
            channel.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server.task_dispatcher.shutdown(timeout=5)  # type: ignore[union-attr]


def serve(
    slurm: SlurmBackend,
    address: str,
    *,
    operators: Iterable[str] = ("root",),
    munge_socket: str | None = None,
) -> ProtocolServer:
    """Start the protocol server for ``slurm``'s jobs on ``address``; return it (running).

    Raises
    ------
    OSError
        ``address`` cannot be bound.
    """
    gateway = Gateway(slurm_lookup(slurm), operators=operators, munge_socket=munge_socket)
    return ProtocolServer(gateway, address).start()
