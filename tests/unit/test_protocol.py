"""The protocol over real HTTP on 127.0.0.1: gateway checks, wire format, client errors.

The identity decoder is a table here (credential ``cred-<user>:<payload>`` -> user and
payload); the real MUNGE round trip, with a second Unix user, is tested against the live
cluster (tests/integration/test_protocol_live.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from elastic_slurm.model.offer import Answer, AnswerKind, Offer, final_count
from elastic_slurm.model.resize_order import AckStatus, ResizeAck, ResizeAction, ResizeOrder
from elastic_slurm.mpi_runtime.channel import FileChannel, HttpChannel, channel_for
from elastic_slurm.protocol.client import ControllerClient, RefusedError
from elastic_slurm.protocol.gateway import Gateway, JobRecord
from elastic_slurm.protocol.identity import (
    Credential,
    IdentityError,
    munge_socket,
    request_digest,
    same_secret,
)
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.protocol.server import ProtocolServer

pytestmark = pytest.mark.usefixtures("fictional_users")

SECRET = "s3cret-of-job-12"
USERS = {"cred-alice": "alice", "cred-bob": "bob", "cred-root": "root"}


def verify(credential: str, socket: str | None) -> Credential:
    """``cred-<user>:<payload>`` stands for a MUNGE credential of ``user`` carrying ``payload``."""
    name, _, payload = credential.partition(":")
    try:
        return Credential(USERS[name], payload)
    except KeyError:
        raise IdentityError("MUNGE credential refused: Invalid credential") from None


def signed(path: str, body: bytes, cred: str = "cred-alice", job: int = 12) -> dict[str, str]:
    """Headers of a POST of ``body`` to ``path`` by job ``job``, with a credential made for it."""
    return {
        "Authorization": f"Bearer {SECRET}",
        "Content-Type": "application/json",
        "X-Munge-Credential": f"{cred}:{request_digest('POST', path, job, body)}",
    }


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ProtocolServer, JobDir]]:
    jobs = {
        12: JobRecord(12, "alice", str(tmp_path), True),
        13: JobRecord(13, "alice", str(tmp_path), False),
    }
    gateway = Gateway(jobs.get, operators=("root",), verify=verify)
    srv = ProtocolServer(gateway, "127.0.0.1:0").start()
    jobdir = JobDir.for_job(tmp_path, 12)
    jobdir.write_secret(SECRET)
    yield srv, jobdir
    srv.stop()


def client(srv: ProtocolServer, secret: str = SECRET, cred: str = "cred-alice", job: int = 12):
    return ControllerClient(
        srv.url, job, secret, retry_s=0, credential=lambda payload: f"{cred}:{payload}"
    )


def offer(number: int = 1, *, final: bool = False, count: int = 2) -> Offer:
    now = time.time()
    return Offer(
        number=number,
        seq=1,
        action="shrink",
        count=count,
        hosts=("n3", "n4")[:count],
        final=final,
        issued_at=now,
        deadline_at=now + 60,
    )


def test_health_needs_no_secret(server) -> None:
    srv, _ = server
    r = requests.get(f"{srv.url}/v1/health", timeout=5)
    assert r.status_code == 200 and r.json() == {"ok": True, "protocol": "v1"}


def test_secret_file_is_private(server) -> None:
    _, jobdir = server
    assert jobdir.secret_path.stat().st_mode & 0o777 == 0o600
    assert jobdir.read_secret() == SECRET


@pytest.mark.parametrize(
    ("secret", "cred", "status", "words"),
    [
        ("wrong", "cred-alice", 401, "wrong secret for job 12"),
        (SECRET, "cred-bob", 403, "user bob may not act on job 12: it belongs to alice"),
        (SECRET, "forged", 403, "Invalid credential"),
    ],
)
def test_register_refused(server, secret: str, cred: str, status: int, words: str) -> None:
    srv, jobdir = server
    with pytest.raises(RefusedError) as info:
        client(srv, secret, cred).register(2, ["n1", "n2"])
    assert info.value.status == status and words in info.value.reason
    assert jobdir.registration() is None


def test_missing_secret_and_credential(server) -> None:
    srv, _ = server
    url = f"{srv.url}/v1/jobs/12/register"
    r = requests.post(url, json={"ranks": 1}, timeout=5)
    assert r.status_code == 401 and "no job secret" in r.json()["error"]
    r = requests.post(
        url, json={"ranks": 1}, headers={"Authorization": f"Bearer {SECRET}"}, timeout=5
    )
    assert r.status_code == 403 and "no MUNGE credential" in r.json()["error"]
    r = requests.post(
        url,
        json={"ranks": 1},
        headers={**signed(url, b"{}"), "X-Munge-Credential": "cred-alice"},
        timeout=5,
    )
    assert r.status_code == 403 and "made for another message" in r.json()["error"]


def test_unknown_or_ended_job(server) -> None:
    srv, _ = server
    with pytest.raises(RefusedError) as info:
        client(srv, job=99).next(1)
    assert info.value.status == 404 and "Slurm has no job 99" in info.value.reason
    with pytest.raises(RefusedError) as info:
        client(srv, job=13).next(1)
    assert info.value.status == 409 and "not running" in info.value.reason


def test_register_by_owner_and_operator(server) -> None:
    srv, jobdir = server
    client(srv).register(2, ["n1", "n2"])
    reg = jobdir.registration()
    assert reg is not None and reg["user"] == "alice" and reg["hosts"] == ["n1", "n2"]
    client(srv, cred="cred-root").register(4, ["n1"])  # an operator may act on any job
    assert jobdir.registration()["ranks"] == 4


def test_offer_answer_cycle(server) -> None:
    srv, jobdir = server
    c = client(srv)
    assert c.next(1) is None
    jobdir.write_offer(offer(1))
    got = c.next(1)
    assert isinstance(got, Offer) and got.hosts == ("n3", "n4") and not got.final
    c.answer(Answer(number=1, answer=AnswerKind.COUNTER, count=1, reason="keep 3"))
    recorded = jobdir.read_answer(1)
    assert recorded is not None and recorded.count == 1 and recorded.at > 0
    assert c.next(1) is None  # answered: nothing awaits until the controller acts
    with pytest.raises(RefusedError) as info:  # one answer per offer
        c.answer(Answer(number=1, answer=AnswerKind.ACCEPT))
    assert info.value.status == 409
    jobdir.write_offer(offer(2, final=True, count=1))
    with pytest.raises(RefusedError) as info:
        c.answer(Answer(number=2, answer=AnswerKind.COUNTER, count=1))
    assert "final offer can only be accepted or rejected" in info.value.reason
    c.answer(Answer(number=2, answer=AnswerKind.ACCEPT))
    jobdir.write_order(ResizeOrder(1, ResizeAction.SHRINK, ("n1", "n2", "n3"), time.time()))
    order = c.next(1)
    assert isinstance(order, ResizeOrder) and order.nodes == ("n1", "n2", "n3")


def test_withdrawn_and_superseded_offers_refuse_answers(server) -> None:
    srv, jobdir = server
    c = client(srv)
    jobdir.write_offer(offer(1).model_copy(update={"withdrawn": "no answer in 60 s"}))
    assert c.next(1) is None
    with pytest.raises(RefusedError) as info:
        c.answer(Answer(number=1, answer=AnswerKind.ACCEPT))
    assert info.value.status == 409 and "withdrawn: no answer in 60 s" in info.value.reason
    jobdir.write_offer(offer(2))
    jobdir.write_offer(offer(3))
    with pytest.raises(RefusedError) as info:
        c.answer(Answer(number=2, answer=AnswerKind.ACCEPT))
    assert "superseded" in info.value.reason


def test_malformed_messages(server) -> None:
    srv, jobdir = server
    jobdir.write_offer(offer(1))

    def post(path: str, body: bytes) -> requests.Response:
        return requests.post(f"{srv.url}{path}", data=body, headers=signed(path, body), timeout=5)

    r = post("/v1/jobs/12/offers/1/answer", json.dumps({"answer": "counter"}).encode())
    assert r.status_code == 400 and "counter-offer needs a count" in r.json()["error"]
    r = post("/v1/jobs/12/requests", json.dumps({"delta": 0}).encode())
    assert r.status_code == 400 and "non-zero" in r.json()["error"]
    r = post("/v1/jobs/12/acks", b"not json")
    assert r.status_code == 400 and "not JSON" in r.json()["error"]
    r = post("/v1/jobs/12/acks", b"[1, 2]")
    assert r.status_code == 400 and "JSON object" in r.json()["error"]
    headers = {"Authorization": f"Bearer {SECRET}"}
    r = requests.get(f"{srv.url}/v1/jobs/12/next", headers=headers, timeout=5)
    assert r.status_code == 400 and "?seq=N" in r.json()["error"]


def test_acks_and_evolving_requests(server) -> None:
    srv, jobdir = server
    c = client(srv)
    vacated = ResizeAck(1, AckStatus.VACATED, ("n4",), time.time(), strategy="restart")
    with pytest.raises(RefusedError) as info:
        c.ack(vacated)
    assert info.value.status == 404 and "no order 1" in info.value.reason
    jobdir.write_order(ResizeOrder(1, ResizeAction.SHRINK, ("n1", "n2", "n3"), time.time()))
    c.ack(vacated)
    assert jobdir.read_ack(1, AckStatus.VACATED) == vacated
    assert [c.request(2, 4), c.request(-1, 8)] == [1, 2]
    assert [(r["delta"], r["ranks"]) for r in jobdir.requests()] == [(2, 4), (-1, 8)]
    assert c.request_answer(1) is None
    jobdir.answer_request(1, True, 3, "served")
    assert c.request_answer(1)["order"] == 3


def test_http_channel_falls_back_to_files_when_controller_is_gone(tmp_path: Path) -> None:
    jobdir = JobDir(tmp_path / "job-5")
    dead = ControllerClient("http://127.0.0.1:9", 5, "x", retry_s=0, credential=lambda p: "c")
    channel = HttpChannel(jobdir, dead)
    channel.register(1, ["n1"])
    assert channel.negotiates is False
    ack = ResizeAck(1, AckStatus.DONE, ("n1",), time.time())
    channel.ack(ack)
    assert jobdir.read_ack(1, AckStatus.DONE) == ack  # nothing lost: the controller reads it
    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2"), time.time()))
    assert isinstance(channel.next(1), ResizeOrder)


def test_no_munge_credential_is_an_unreachable_controller_and_is_tried_again(
    server: tuple[ProtocolServer, JobDir],
) -> None:
    srv, jobdir = server
    calls = []

    def munge_down(payload: str) -> str:
        calls.append(payload)
        raise IdentityError("munge failed: Failed to access the socket (Did you start munged?)")

    down = ControllerClient(srv.url, 12, SECRET, retry_s=0, credential=munge_down)
    with pytest.raises(ConnectionError, match="no MUNGE credential.*start munged"):
        down.register(2, ["n1"], retry_s=0)
    assert len(calls) == 1
    channel = HttpChannel(jobdir, down)
    channel.register(2, ["n1"])  # tried for 3 s, then the job goes on through its directory
    assert channel.offline is True and channel.negotiates is False
    assert len(calls) > 2
    # a daemon that restarts: its first refusal is retried, within retry_s
    flaky = iter([IdentityError("munge failed: connection refused")])

    def restarting(payload: str) -> str:
        failure = next(flaky, None)
        if failure is not None:
            raise failure
        return f"cred-alice:{payload}"

    again = ControllerClient(srv.url, 12, SECRET, retry_s=5, credential=restarting)
    assert again.register(2, ["n1"])["registered"] is True


def test_channel_for_reads_the_environment(tmp_path: Path) -> None:
    jobdir = JobDir(tmp_path)
    env = {
        "ELASTIC_SLURM_CONTROLLER": "http://10.77.0.1:7717",
        "ELASTIC_SLURM_JOB_SECRET": "abc",
        "SLURM_JOB_ID": "42",
    }
    ch = channel_for(jobdir, env)
    assert isinstance(ch, HttpChannel) and ch.client.job_id == 42
    assert ch.client.url == "http://10.77.0.1:7717"
    assert type(channel_for(jobdir, {"SLURM_JOB_ID": "42"})) is FileChannel
    assert type(channel_for(jobdir, {**env, "ELASTIC_SLURM_JOB_SECRET": ""})) is FileChannel


def test_final_count_and_secrets() -> None:
    o = offer(1, count=2)
    assert [final_count(o, k) for k in (1, 2, 3, 0)] == [1, 2, 2, 2]
    assert same_secret("a", "a") and not same_secret("a", "b") and not same_secret("", "")
    assert not same_secret("a", None)


def test_munge_socket_from_slurm_conf(tmp_path: Path, monkeypatch) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("AuthType=auth/munge\nAuthInfo=cred_expire=60,socket=/run/x/munge.sock\n")
    monkeypatch.delenv("ELASTIC_SLURM_MUNGE_SOCKET", raising=False)
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert munge_socket() == "/run/x/munge.sock"
    conf.write_text("AuthType=auth/munge\n")
    assert munge_socket() is None
    monkeypatch.setenv("ELASTIC_SLURM_MUNGE_SOCKET", "/elsewhere")
    assert munge_socket() == "/elsewhere"


def test_default_address_is_cluster_internal() -> None:
    from elastic_slurm.config import load_site
    from elastic_slurm.protocol.address import default_address

    site = load_site()  # the embedded local cluster
    assert default_address(site) == "10.77.0.1:7717"  # its bridge, not 0.0.0.0
    moved = site.model_copy(
        update={"controller": site.controller.model_copy(update={"address": "10.0.0.5:8000"})}
    )
    assert default_address(moved) == "10.0.0.5:8000"


def test_file_channel_carries_offers_when_the_server_is_gone(tmp_path: Path) -> None:
    jobdir = JobDir(tmp_path / "job-6")
    channel = FileChannel(jobdir)
    assert channel.next(1) is None
    jobdir.write_offer(offer(1))
    got = channel.next(1)
    assert isinstance(got, Offer) and got.number == 1
    channel.answer(Answer(number=1, answer=AnswerKind.ACCEPT))
    assert channel.next(1) is None and jobdir.read_answer(1).answer is AnswerKind.ACCEPT
