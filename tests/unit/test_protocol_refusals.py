"""The protocol refuses cheaply and visibly (issue 14, item 5), over real HTTP on 127.0.0.1.

The server waits without burning CPU; the secret is checked before the body is read and the
body is capped; job lookups are cached, unknown jobs too; every field is validated with
bounds; the MUNGE credential is bound to its message; every refusal is logged and counted.
The identity decoder is a table (``cred-<user>:<payload>``), as in ``test_protocol.py``.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_slurm.controller import metrics
from elastic_slurm.errors import JobInputError
from elastic_slurm.protocol.gateway import Gateway, JobRecord, ProtocolError
from elastic_slurm.protocol.identity import IdentityError
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.protocol.server import ProtocolServer

pytestmark = pytest.mark.usefixtures("fictional_users")

SECRET = "s3cret-of-job-12"
REGISTER = "/v1/jobs/12/register"


@dataclass(frozen=True)
class Cred:
    user: str
    payload: str


def verify(credential: str, socket_: str | None) -> Cred:
    name, _, payload = credential.partition(":")
    if name not in ("alice", "bob", "root"):
        raise IdentityError("MUNGE credential refused: Invalid credential")
    return Cred(name, payload)


def digest(path: str, body: bytes, job: int = 12) -> str:
    from elastic_slurm.protocol.identity import request_digest

    return request_digest("POST", path, job, body)


class Lookups:
    """A job table that counts how often it is asked."""

    def __init__(self, workdir: Path) -> None:
        self.jobs = {12: JobRecord(12, "alice", str(workdir), True)}
        self.calls: list[int] = []

    def __call__(self, job_id: int) -> JobRecord | None:
        self.calls.append(job_id)
        return self.jobs.get(job_id)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[ProtocolServer, JobDir, Lookups]]:
    lookups = Lookups(tmp_path)
    srv = ProtocolServer(Gateway(lookups, operators=("root",), verify=verify), "127.0.0.1:0")
    srv.start()
    jobdir = JobDir.for_job(tmp_path, 12)
    jobdir.write_secret(SECRET)
    yield srv, jobdir, lookups
    srv.stop()


def post(srv: ProtocolServer, path: str, body: bytes, user: str = "alice") -> requests.Response:
    headers = {
        "Authorization": f"Bearer {SECRET}",
        "Content-Type": "application/json",
        "X-Munge-Credential": f"{user}:{digest(path, body)}",
    }
    return requests.post(f"{srv.url}{path}", data=body, headers=headers, timeout=10)


def refusals(status: int) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "elastic_slurm_protocol_refusals_total", {"status": str(status)}
    )
    return value or 0.0


def raw_exchange(srv: ProtocolServer, head: bytes, timeout_s: float = 3.0) -> bytes:
    """Send ``head`` (request line, headers, maybe part of a body); the status line back."""
    with socket.create_connection((srv.host, srv.port), timeout=timeout_s) as s:
        s.sendall(head)
        try:
            return s.recv(200)
        except TimeoutError:
            return b"(no answer)"


# ---------------------------------------------------------------------- idle CPU
def test_an_idle_server_uses_no_cpu(setup) -> None:
    srv, _, _ = setup
    idle = socket.create_connection((srv.host, srv.port))  # an open, silent connection too
    try:
        time.sleep(0.3)
        cpu0, wall0 = time.process_time(), time.monotonic()
        time.sleep(2.0)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    finally:
        idle.close()
    assert cpu < 0.2, f"the idle server used {cpu:.2f} s of CPU in {wall:.1f} s"


# ---------------------------------------------------------------------- secret before body
def test_a_stranger_is_refused_before_its_body_is_read(setup) -> None:
    srv, _, _ = setup
    head = (
        b"POST /v1/jobs/12/register HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
        b"Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n{"
    )  # 10 MB announced, one byte sent: the answer must not wait for the rest
    t0 = time.monotonic()
    status = raw_exchange(srv, head)
    assert status.startswith(b"HTTP/1.1 401"), status
    assert time.monotonic() - t0 < 2.0
    no_secret = head.replace(b"Authorization: Bearer wrong\r\n", b"")
    assert raw_exchange(srv, no_secret).startswith(b"HTTP/1.1 401")


def test_a_large_body_is_refused_with_413(setup) -> None:
    srv, jobdir, _ = setup
    # announced: refused from Content-Length, before anything is read
    head = (
        f"POST {REGISTER} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SECRET}\r\n"
        "X-Munge-Credential: alice:x\r\nContent-Length: 10000000\r\n\r\n{"
    ).encode()
    assert raw_exchange(srv, head).startswith(b"HTTP/1.1 413")
    # sent (10 MB of valid JSON with a credential made for it)
    big = json.dumps({"ranks": 1, "hosts": ["n1"], "pad": " " * 10_000_000}).encode()
    r = post(srv, REGISTER, big)
    assert r.status_code == 413 and "at most 65536" in r.json()["error"]
    # chunked (no length announced): the hard read limit
    body = json.dumps({"ranks": 1, "hosts": ["n1"] * 20_000}).encode()
    headers = {
        "Authorization": f"Bearer {SECRET}",
        "X-Munge-Credential": f"alice:{digest(REGISTER, body)}",
    }
    chunks = (body[i : i + 8192] for i in range(0, len(body), 8192))
    r = requests.post(f"{srv.url}{REGISTER}", data=chunks, headers=headers, timeout=10)
    assert r.status_code == 413
    assert jobdir.registration() is None


def test_the_body_cap_follows_the_site(tmp_path: Path) -> None:
    lookups = Lookups(tmp_path)
    gateway = Gateway(lookups, verify=verify)
    srv = ProtocolServer(gateway, "127.0.0.1:0", max_body_bytes=1024).start()
    try:
        JobDir.for_job(tmp_path, 12).write_secret(SECRET)
        body = json.dumps({"ranks": 1, "hosts": ["n1"] * 200}).encode()  # 1.2 kB
        assert post(srv, REGISTER, body).status_code == 413
        assert post(srv, REGISTER, b'{"ranks": 1, "hosts": ["n1"]}').status_code == 200
    finally:
        srv.stop()


# ---------------------------------------------------------------------- cached lookups
def test_lookups_are_cached_unknown_jobs_too(setup) -> None:
    srv, _, lookups = setup
    for _ in range(10):
        r = requests.get(
            f"{srv.url}/v1/jobs/99/next?seq=1",
            headers={"Authorization": f"Bearer {SECRET}"},
            timeout=5,
        )
        assert r.status_code == 404
    for _ in range(10):
        r = requests.get(
            f"{srv.url}/v1/jobs/12/next?seq=1",
            headers={"Authorization": f"Bearer {SECRET}"},
            timeout=5,
        )
        assert r.status_code == 200
    assert lookups.calls == [99, 12]  # one Slurm query per job, however many messages


def test_nothing_is_looked_up_without_a_well_formed_secret(setup) -> None:
    srv, _, lookups = setup
    for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Bearer a b\x7f"}):
        r = requests.get(f"{srv.url}/v1/jobs/99/next?seq=1", headers=headers, timeout=5)
        assert r.status_code == 401
    r = requests.get(
        f"{srv.url}/v1/jobs/{2**40}/next?seq=1", headers={"Authorization": "Bearer x"}, timeout=5
    )
    assert r.status_code == 404
    assert lookups.calls == []


def test_cache_entries_expire(tmp_path: Path) -> None:
    now = [0.0]
    lookups = Lookups(tmp_path)
    gateway = Gateway(lookups, record_ttl_s=30.0, negative_ttl_s=5.0, clock=lambda: now[0])
    for t in (0.0, 4.9, 5.0, 9.0):
        now[0] = t
        with pytest.raises(Exception, match="Slurm has no job 99"):
            gateway.record(99)
        assert gateway.record(12).user == "alice"
    assert lookups.calls == [99, 12, 99]  # the unknown job asked again after 5 s
    now[0] = 30.0
    lookups.jobs[12] = JobRecord(12, "alice", str(tmp_path), False)  # it ended
    with pytest.raises(Exception, match="not running"):
        gateway.record(12)


def test_a_failed_lookup_is_503_for_a_second(tmp_path: Path) -> None:
    calls = []
    now = [0.0]

    def down(job_id: int) -> JobRecord | None:
        calls.append(job_id)
        raise RuntimeError("slurmctld did not answer")

    srv = ProtocolServer(Gateway(down, clock=lambda: now[0]), "127.0.0.1:0").start()
    try:
        for t in (0.0, 0.5, 1.0):
            now[0] = t
            r = requests.get(
                f"{srv.url}/v1/jobs/12/next?seq=1", headers={"Authorization": "Bearer x"}
            )
            assert r.status_code == 503 and "slurmctld did not answer" in r.json()["error"]
        assert calls == [12, 12]  # asked again after 1 s
    finally:
        srv.stop()


def test_concurrent_messages_about_one_job_wait_for_one_lookup(tmp_path: Path) -> None:
    calls = []

    def slow(job_id: int) -> JobRecord | None:
        calls.append(job_id)
        time.sleep(0.3)
        return None

    gateway = Gateway(slow)
    errors = []

    def ask() -> None:
        try:
            gateway.record(99)
        except Exception as exc:  # noqa: BLE001
            errors.append(str(exc))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [99] and errors == ["Slurm has no job 99"] * 8


# ---------------------------------------------------------------------- credential binding
def test_a_credential_made_for_one_message_does_not_authenticate_another(setup) -> None:
    srv, jobdir, _ = setup
    honest = b'{"ranks": 1, "hosts": ["n1"]}'
    forged = b'{"ranks": 64, "hosts": ["n1", "n2"]}'
    cred = f"alice:{digest(REGISTER, honest)}"
    headers = {"Authorization": f"Bearer {SECRET}", "X-Munge-Credential": cred}
    r = requests.post(f"{srv.url}{REGISTER}", data=forged, headers=headers, timeout=5)
    assert r.status_code == 403 and "made for another message" in r.json()["error"]
    r = requests.post(f"{srv.url}/v1/jobs/12/requests", data=honest, headers=headers, timeout=5)
    assert r.status_code == 403  # another path
    assert jobdir.registration() is None and jobdir.requests() == []
    r = requests.post(f"{srv.url}{REGISTER}", data=honest, headers=headers, timeout=5)
    assert r.status_code == 200 and jobdir.registration()["ranks"] == 1


# ---------------------------------------------------------------------- field validation
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (REGISTER, {"ranks": -1, "hosts": []}, "ranks"),
        (REGISTER, {"ranks": 10**12, "hosts": []}, "ranks"),
        (REGISTER, {"ranks": True, "hosts": []}, "ranks"),
        (REGISTER, {"ranks": 1, "hosts": ["n1", "../../etc"]}, "hosts"),
        (REGISTER, {"ranks": 1, "hosts": "n1"}, "hosts"),
        (REGISTER, {"ranks": 1, "hosts": [], "evil": 1}, "evil"),
        ("/v1/jobs/12/requests", {"delta": 10**9, "ranks": 1}, "delta"),
        ("/v1/jobs/12/requests", {"delta": 1.5}, "delta"),
        ("/v1/jobs/12/acks", {"seq": 10**12, "status": "done", "nodes": []}, "seq"),
        ("/v1/jobs/12/acks", {"seq": 1, "status": "won", "nodes": []}, "status"),
        ("/v1/jobs/12/acks", {"seq": 1, "status": "done", "nodes": [1]}, "nodes"),
        (
            "/v1/jobs/12/acks",
            {"seq": 1, "status": "done", "nodes": [], "reason": "x" * 5000},
            "reason",
        ),
        (
            "/v1/jobs/12/acks",
            {"seq": 1, "status": "done", "nodes": [], "phases_s": {"a": -1}},
            "phases_s.a",
        ),
        ("/v1/jobs/12/offers/1/answer", {"answer": "counter", "count": 0}, "count"),
        ("/v1/jobs/12/offers/1/answer", {"answer": "accept", "reason": "x" * 501}, "reason"),
    ],
)
def test_every_field_is_checked(setup, path: str, body: dict, field: str) -> None:
    srv, _, _ = setup
    r = post(srv, path, json.dumps(body).encode())
    assert r.status_code == 400, r.text
    assert f"malformed message: {field} " in r.json()["error"]


def test_non_finite_numbers_and_deep_nesting_are_refused(setup) -> None:
    srv, _, _ = setup
    nan = b'{"seq": 1, "status": "done", "nodes": [], "at": NaN}'
    r = post(srv, "/v1/jobs/12/acks", nan)
    assert r.status_code == 400 and "at must be a number" in r.json()["error"]
    deep = b'{"ranks": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"
    r = post(srv, REGISTER, deep)
    assert r.status_code == 400


# ---------------------------------------------------------------------- logged and counted
def test_every_refusal_is_logged_and_counted(setup, caplog) -> None:
    srv, _, _ = setup
    before = {s: refusals(s) for s in (401, 403, 404)}
    with caplog.at_level(logging.WARNING, logger="elastic_slurm.protocol"):
        requests.post(f"{srv.url}{REGISTER}", json={"ranks": 1}, timeout=5)  # no secret
        r = post(srv, REGISTER, b'{"ranks": 1}', user="mallory")  # a bad MUNGE credential
        assert r.status_code == 403
        r = post(srv, REGISTER, b'{"ranks": 1}', user="bob")  # another user
        assert r.status_code == 403
        requests.get(f"{srv.url}/v1/nothing", timeout=5)
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 4, lines
    assert "job 12 user ? from 127.0.0.1: 401 no job secret" in lines[0]
    assert "job 12 user ? from 127.0.0.1: 403 MUNGE credential refused" in lines[1]
    assert "job 12 user bob from 127.0.0.1: 403 user bob may not act on job 12" in lines[2]
    assert "from 127.0.0.1: 404" in lines[3]
    assert refusals(401) == before[401] + 1
    assert refusals(403) == before[403] + 2
    assert refusals(404) == before[404] + 1


# ---------------------------------------------------------------------- lookups and fuzzing
def test_the_controller_s_observation_spares_slurm(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from elastic_slurm.model.snapshot import JobState
    from elastic_slurm.protocol.server import observed_lookup

    seen = {
        12: SimpleNamespace(
            job_id=12, user="alice", workdir=str(tmp_path), model_state=JobState.RUNNING
        )
    }
    asked: list[int] = []

    def slurm(job_id: int) -> JobRecord | None:
        asked.append(job_id)
        return None

    lookup = observed_lookup(lambda: seen, slurm)
    assert lookup(12) == JobRecord(12, "alice", str(tmp_path), True)
    assert lookup(13) is None and asked == [13]  # not seen (yet): Slurm is asked
    assert observed_lookup(lambda: None, slurm)(12) is None and asked == [13, 12]
    # seen pending in the last cycle, running now (it registers as it starts): Slurm is asked
    seen[14] = SimpleNamespace(
        job_id=14, user="alice", workdir=str(tmp_path), model_state=JobState.PENDING
    )
    assert lookup(14) is None and asked == [13, 12, 14]


def test_a_job_seen_pending_is_looked_up_again_within_a_second(tmp_path: Path) -> None:
    # the soak lost four jobs whose registration was refused "not running" for 5 s
    now = [0.0]
    record = JobRecord(12, "alice", str(tmp_path), False)
    gateway = Gateway(lambda job_id: record, verify=verify, clock=lambda: now[0])
    with pytest.raises(ProtocolError) as refused:
        gateway.record(12)
    assert refused.value.status == 409
    record = JobRecord(12, "alice", str(tmp_path), True)
    now[0] = 1.5
    assert gateway.record(12).running


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
fields = st.sampled_from(
    [
        "ranks",
        "hosts",
        "delta",
        "seq",
        "status",
        "nodes",
        "at",
        "reason",
        "strategy",
        "phases_s",
        "answer",
        "count",
        "x",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    endpoint=st.sampled_from(["register", "requests", "acks", "offers/1/answer"]),
    body=st.dictionaries(fields, json_values, max_size=6) | json_values,
)
def test_any_body_is_served_or_refused_with_a_reason(tmp_path_factory, endpoint, body) -> None:
    from elastic_slurm.protocol.gateway import Message, ProtocolError

    workdir = tmp_path_factory.getbasetemp() / "fuzz"
    jobdir = JobDir.for_job(workdir, 12)
    if jobdir.read_secret() is None:
        jobdir.write_secret(SECRET)
    gateway = Gateway(lambda j: JobRecord(12, "alice", str(workdir), True), verify=verify)
    path = f"/v1/jobs/12/{endpoint}"
    raw = json.dumps(body, allow_nan=True).encode()
    msg = Message(12, "POST", path, SECRET, f"alice:{digest(path, raw)}", lambda: raw)
    handler = {
        "register": gateway.register,
        "requests": gateway.request,
        "acks": gateway.ack,
        "offers/1/answer": lambda m: gateway.answer(m, 1),
    }[endpoint]
    try:
        assert isinstance(handler(msg), dict)
    except ProtocolError as exc:
        assert exc.status in (400, 404, 409) and str(exc)


def test_a_flood_of_refusals_is_counted_and_summarised_not_logged_line_by_line() -> None:
    from elastic_slurm.protocol.server import LogBudget

    now = [0.0]
    budget = LogBudget(burst=3, rate=2.0, clock=lambda: now[0])
    assert [budget.take() for _ in range(5)] == [0, 0, 0, None, None]
    now[0] = 0.5  # one line's worth of budget
    assert budget.take() == 2 and budget.take() is None
    now[0] = 10.0
    assert [budget.take() for _ in range(4)] == [1, 0, 0, None]


def test_a_refusal_s_log_line_cannot_be_forged(setup, caplog) -> None:
    srv, _, _ = setup
    body = b'{"ranks": 1, "hosts": [], "x\\nprotocol: job 12 served": 1}'
    with caplog.at_level(logging.WARNING, logger="elastic_slurm.protocol"):
        r = post(srv, REGISTER, body)
    assert r.status_code == 400
    (line,) = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert "\n" not in line and "x?protocol: job 12 served" in line


def test_a_get_with_a_body_is_answered_without_reading_it(setup) -> None:
    srv, _, _ = setup
    head = (
        f"GET /v1/jobs/12/next?seq=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {SECRET}\r\n"
        "Content-Length: 10000000\r\n\r\n{"
    ).encode()
    assert raw_exchange(srv, head).startswith(b"HTTP/1.1 200")


def test_an_unusable_secret_file_or_a_failure_is_an_answer(setup, monkeypatch, caplog) -> None:
    srv, _, _ = setup

    def unreadable(self) -> str:
        raise OSError("secret is a FIFO")

    headers = {"Authorization": f"Bearer {SECRET}"}
    with monkeypatch.context() as patch:
        patch.setattr(JobDir, "read_secret", unreadable)
        r = requests.get(f"{srv.url}/v1/jobs/12/next?seq=1", headers=headers, timeout=5)
    assert r.status_code == 401 and "job 12 has no usable secret" in r.json()["error"]

    def broken(self, seq: int) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(JobDir, "read_order", broken)
    with caplog.at_level(logging.ERROR, logger="elastic_slurm.protocol"):
        r = requests.get(f"{srv.url}/v1/jobs/12/next?seq=1", headers=headers, timeout=5)
    assert r.status_code == 500 and "disk on fire" in r.json()["error"]
    assert any("failed" in r.getMessage() and r.exc_info for r in caplog.records)

    def hostile(self, seq: int) -> None:
        raise JobInputError(12, "orders: a symbolic link")

    monkeypatch.setattr(JobDir, "read_order", hostile)
    r = requests.get(f"{srv.url}/v1/jobs/12/next?seq=1", headers=headers, timeout=5)
    assert r.status_code == 422 and "orders: a symbolic link" in r.json()["error"]


def test_a_job_that_registers_as_it_starts_is_answered_once_running(setup) -> None:
    from elastic_slurm.protocol.client import ControllerClient

    srv, _, lookups = setup
    lookups.jobs[12] = JobRecord(12, "alice", lookups.jobs[12].workdir, False)  # still pending

    def start() -> None:
        time.sleep(0.5)
        lookups.jobs[12] = JobRecord(12, "alice", lookups.jobs[12].workdir, True)

    threading.Thread(target=start, daemon=True).start()
    client = ControllerClient(
        srv.url, 12, SECRET, retry_s=10.0, credential=lambda digest: f"alice:{digest}"
    )
    assert client.register(2, ["n1", "n2"])["registered"] is True
