"""The controller-job protocol on the real cluster: offers, answers, deadlines and security.

A real malleable MPI job (``apps/negotiator.py``) talks to the controller's HTTP server on the
cluster's bridge; its answers come from a script. Slurm (``squeue``) is the judge of sizes; the
job's own log and the journal show the negotiation. Security is checked with real MUNGE
credentials and a real second Unix user.
"""

from __future__ import annotations

import json
import pwd
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from elastic_slurm import api
from elastic_slurm.config import load_site
from elastic_slurm.controller.actuate import Actuator, ResizeOutcome
from elastic_slurm.controller.journal import Journal
from elastic_slurm.model import ElasticRequest, JobKind
from elastic_slurm.model.decisions import Decision, Expand, Shrink
from elastic_slurm.protocol.address import default_address, site_munge_socket
from elastic_slurm.protocol.client import ControllerClient, RefusedError
from elastic_slurm.protocol.identity import make_credential, request_digest
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.protocol.server import ProtocolServer, serve

from .helpers import all_idle, job_state, scontrol_job, slurm_held, wait

pytestmark = pytest.mark.slurm

APP = Path(__file__).parent / "apps" / "negotiator.py"
OTHER_USER = "esother"


@pytest.fixture()
def server(slurm) -> Iterator[ProtocolServer]:
    site = load_site()
    host = default_address(site).rsplit(":", 1)[0]  # the cluster's bridge
    srv = serve(slurm, f"{host}:0", operators=("root",), munge_socket=site_munge_socket(site))
    yield srv
    srv.stop()


def submit(
    slurm, srv, tmp: Path, script: str, deaf_after: int, nodes: int, deaf: bool = False
) -> int:
    req = ElasticRequest(
        program=(
            str(APP),
            "--script",
            script,
            "--deaf-after",
            str(deaf_after),
            "--stop-file",
            str(tmp / "STOP"),
            *(["--deaf"] if deaf else []),
        ),
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=4,
        nodes_start=nodes,
        walltime=timedelta(minutes=6),
        job_name="negotiator",
        grace_period_s=6.0,
    )
    return api.submit(req, slurm, workdir=tmp, output=str(tmp / "neg-%j.out"), controller=srv.url)


def run(actuator: Actuator, slurm, decision: Decision, timeout_s: float = 60) -> ResizeOutcome:
    """Apply one decision and poll until its resize is closed; return the outcome."""
    actuator.apply([decision], {j.job_id: j for j in slurm.jobs()})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = actuator.poll({j.job_id: j for j in slurm.jobs()})
        if done:
            return done[0]
        time.sleep(0.3)
    raise AssertionError(f"{decision} not closed within {timeout_s} s")


def test_offers_counter_offers_rejections_and_a_lapsed_offer(slurm, shared_tmp, server):
    wait(all_idle, 60, "all nodes idle before the test")
    job = submit(slurm, server, shared_tmp, "counter:1,accept,reject,accept", 2, nodes=3)
    jobdir = JobDir.for_job(shared_tmp, job)
    journal = Journal()
    actuator = Actuator(slurm, journal, resize_timeout_s=600.0, on_overdue="keep")
    try:
        wait(lambda: job_state(job) == "RUNNING", 30, "the job to start")
        wait(jobdir.registration, 60, "the job to register with the controller")
        assert len(slurm_held(job)) == 3

        # offered "give back 2", the job counters 1, the final offer of 1 is accepted
        shrunk = run(actuator, slurm, Shrink(job, 2, "test"))
        assert shrunk.ok and len(shrunk.after) == 2
        assert slurm_held(job) == set(shrunk.after)
        offers = [
            (r["number"], r["count"], r["final"]) for r in journal.records if r["kind"] == "offer"
        ]
        assert offers == [(1, 2, False), (2, 1, True)]
        answers = [r["answer"] for r in journal.records if r["kind"] == "answer"]
        assert answers == ["counter", "accept"]
        time.sleep(2.1)  # Slurm's accounting keys sizes by the second

        # rejected: nothing changes in Slurm
        before = slurm_held(job)
        rejected = run(actuator, slurm, Shrink(job, 1, "test"))
        assert not rejected.ok and rejected.declined and "rejected offer 3" in rejected.message
        assert slurm_held(job) == before and jobdir.read_order(2) is None

        # an expansion: hosts granted first, offered, accepted, then ordered
        grown = run(actuator, slurm, Expand(job, 1, "test"))
        assert grown.ok and len(grown.after) == 3 and slurm_held(job) == set(grown.after)
        (expand_offer,) = [r for r in journal.records if r["kind"] == "offer" and r["number"] == 4]
        assert expand_offer["action"] == "expand" and len(expand_offer["hosts"]) == 1
        assert expand_offer["hosts"][0] in grown.after and expand_offer["hosts"][0] not in before
        time.sleep(2.1)

        # the job goes deaf: the offer lapses after its 6 s grace, it keeps its nodes
        t0 = time.monotonic()
        lapsed = run(actuator, slurm, Shrink(job, 1, "test"), timeout_s=30)
        assert time.monotonic() - t0 >= 6.0
        assert not lapsed.ok and lapsed.declined and "has not answered offer 5" in lapsed.message
        assert "offer withdrawn" in lapsed.message
        assert len(slurm_held(job)) == 3
        offer5 = jobdir.read_offer(5)
        assert offer5 is not None and "has not answered" in offer5.withdrawn
        # (a loaded machine may also make an earlier order late: only offer 5's record counts)
        (late,) = [
            r for r in journal.records if r["kind"] == "overdue" and "offer 5" in r["message"]
        ]
        assert late["action"] == "keep"

        # what the job itself saw and answered, from its own log
        seen = [(e["number"], e["answer"]) for e in jobdir.events() if e["event"] == "offer"]
        assert seen == [(1, "counter"), (2, "accept"), (3, "reject"), (4, "accept")]
        assert all(not r.open for r in journal.resizes())
        (shared_tmp / "STOP").touch()
        wait(lambda: job_state(job) == "COMPLETED" or None, 60, "the job to end")
        out = (shared_tmp / f"neg-{job}.out").read_text()
        last = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
        assert last == {"done": True, "ranks": 3, "sum_ok": True}
    finally:
        (shared_tmp / "STOP").touch()
        slurm.cancel_job(job)
    wait(all_idle, 30, "nothing left allocated")


def _ensure_user(name: str) -> int:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
        )
        return pwd.getpwnam(name).pw_uid


def _munge_as(user: str, socket: str | Path | None):  # type: ignore[no-untyped-def]
    """A credential maker that runs ``munge`` as ``user`` for each message's payload."""

    def make(payload: str) -> str:
        return subprocess.run(
            ["runuser", "-u", user, "--", "munge", "--socket", str(socket)],
            input=payload,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()

    return make


def test_wrong_secret_and_another_users_messages_are_refused(slurm, shared_tmp, server):
    wait(all_idle, 60, "all nodes idle before the test")
    job = submit(slurm, server, shared_tmp, "", 0, nodes=1)
    jobdir = JobDir.for_job(shared_tmp, job)
    socket = site_munge_socket(load_site())
    try:
        wait(jobdir.registration, 60, "the job to register with the controller")
        secret = jobdir.read_secret()
        assert secret and jobdir.secret_path.stat().st_mode & 0o777 == 0o600

        def as_root(s: str) -> ControllerClient:
            return ControllerClient(server.url, job, s, retry_s=0, munge_socket=socket)

        with pytest.raises(RefusedError) as info:
            as_root("not-the-secret").request(1, 1)
        assert info.value.status == 401 and f"wrong secret for job {job}" in info.value.reason
        with pytest.raises(RefusedError) as info:  # and no answer tells anything about it
            as_root("not-the-secret").next(1)
        assert info.value.status == 401

        # a real MUNGE credential can be used once: a replay is refused
        made: list[str] = []

        def captured(payload: str) -> str:  # the first credential, sent again and again
            if not made:
                made.append(make_credential(socket, payload=payload))
            return made[0]

        replay = ControllerClient(
            server.url, job, secret, retry_s=0, munge_socket=socket, credential=captured
        )
        replay.register(1, ["n1"])
        with pytest.raises(RefusedError) as info:
            replay.register(1, ["n1"])
        assert info.value.status == 403
        assert "MUNGE credential refused: Replayed credential" in info.value.reason

        # a credential is bound to its message: one made for a registration, captured before
        # it reached the controller, does not carry an evolving request
        register_digest = request_digest(
            "POST", f"/v1/jobs/{job}/register", job, b'{"ranks":1,"hosts":["n1"]}'
        )
        captured_cred = make_credential(socket, payload=register_digest)
        thief = ControllerClient(
            server.url, job, secret, retry_s=0, credential=lambda payload: captured_cred
        )
        with pytest.raises(RefusedError) as info:
            thief.request(4, 1)
        assert info.value.status == 403 and "made for another message" in info.value.reason

        # another Unix user, with the job's secret, is refused: the job is root's in Slurm.
        # The credential is made by that user (``munge`` run as them, for this message); who
        # carries it does not matter, which is the point of MUNGE.
        _ensure_user(OTHER_USER)

        other = ControllerClient(
            server.url, job, secret, retry_s=0, credential=_munge_as(OTHER_USER, socket)
        )
        with pytest.raises(RefusedError) as info:
            other.request(1, 1)
        assert info.value.status == 403
        assert f"user {OTHER_USER} may not act on job {job}: it belongs to root" in str(info.value)
        assert jobdir.requests() == []  # nothing of theirs reached the job

        # the job's own user (root here) is served
        assert as_root(secret).request(1, 1) == 1
        assert [r["delta"] for r in jobdir.requests()] == [1]
    finally:
        (shared_tmp / "STOP").touch()
        slurm.cancel_job(job)
    wait(all_idle, 30, "nothing left allocated")


@pytest.mark.parametrize("on_overdue", ["force", "requeue"])
def test_an_unanswered_shrink_offer_is_forced_or_requeued(slurm, shared_tmp, server, on_overdue):
    wait(all_idle, 60, "all nodes idle before the test")
    job = submit(slurm, server, shared_tmp, "", 0, nodes=2, deaf=True)
    jobdir = JobDir.for_job(shared_tmp, job)
    journal = Journal()
    actuator = Actuator(slurm, journal, resize_timeout_s=600.0, on_overdue=on_overdue)
    try:
        wait(jobdir.registration, 60, "the job to register with the controller")
        batch_host = scontrol_job(job)["BatchHost"]
        t0 = time.monotonic()
        outcome = run(actuator, slurm, Shrink(job, 1, "test"), timeout_s=30)
        assert time.monotonic() - t0 >= 6.0  # its grace period
        assert not outcome.ok and "has not answered offer 1 (shrink 1) after 6 s" in outcome.message
        (late,) = [r for r in journal.records if r["kind"] == "overdue"]
        assert late["action"] == on_overdue
        offer = jobdir.read_offer(1)
        assert offer is not None and "has not answered" in offer.withdrawn
        if on_overdue == "force":
            # the order was written (the job finds where it runs if it wakes up) and Slurm
            # took the node back anyway
            assert jobdir.read_order(1) is not None
            assert slurm_held(job) <= {batch_host} and outcome.after == (batch_host,)
        else:
            assert jobdir.read_order(1) is None
            wait(lambda: job_state(job) in ("PENDING", "REQUEUED") or None, 30, "requeued")
    finally:
        (shared_tmp / "STOP").touch()
        slurm.cancel_job(job)
    wait(all_idle, 30, "nothing left allocated")


def test_a_service_controller_takes_a_job_s_secret_only_from_its_own_user(slurm, shared_tmp):
    # Under controller.privilege: service the controller keeps the job's secret in its spool,
    # given by the job's first registration. That first registration is a door: another
    # user (a real second account, a real MUNGE credential) must not get through it, nor
    # anyone with a wrong secret once the job's own user registered.
    from elastic_slurm.protocol.jobdir import JobDirs

    site = load_site()
    socket = site_munge_socket(site)
    host = default_address(site).rsplit(":", 1)[0]
    spool = JobDirs(shared_tmp / "spool")
    srv = serve(slurm, f"{host}:0", operators=("root",), munge_socket=socket, jobdirs=spool)
    wait(all_idle, 60, "all nodes idle before the test")
    job = int(
        subprocess.run(
            ["sbatch", "--parsable", "-N1", "-t", "2", "-D", str(shared_tmp), "--wrap", "sleep 60"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split(";")[0]
    )
    try:
        wait(lambda: job_state(job) == "RUNNING", 60, "the job to run")
        mine = spool.of(shared_tmp, job)
        _ensure_user(OTHER_USER)

        squatter = ControllerClient(
            srv.url,
            job,
            "the-squatters-own-secret",
            retry_s=0,
            credential=_munge_as(OTHER_USER, socket),
        )
        with pytest.raises(RefusedError) as info:
            squatter.register(1, ["n1"], retry_s=0)
        assert info.value.status == 403 and f"user {OTHER_USER} may not act" in info.value.reason
        assert mine.read_secret() is None and mine.registration() is None

        owner = ControllerClient(srv.url, job, "the-jobs-secret", retry_s=0, munge_socket=socket)
        with pytest.raises(RefusedError) as info:  # nothing is served before it registers
            owner.next(1)
        assert info.value.status == 401 and "has not registered" in info.value.reason
        assert owner.register(1, ["n1"], retry_s=0)["own_state"] is True  # root owns the job
        assert mine.read_secret() == "the-jobs-secret"
        assert owner.next(1) is None
        again = ControllerClient(srv.url, job, "another-secret", retry_s=0, munge_socket=socket)
        with pytest.raises(RefusedError) as info:  # the first registration's secret stands
            again.register(1, ["n1"], retry_s=0)
        assert info.value.status == 401 and mine.read_secret() == "the-jobs-secret"
        assert not (shared_tmp / ".elastic-slurm").exists()  # the job's directory untouched
    finally:
        srv.stop()
        slurm.cancel_job(job)
    wait(all_idle, 30, "nothing left allocated")
