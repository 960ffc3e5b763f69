"""A controller that runs as an unprivileged service user (``controller.privilege: service``).

It keeps every job's protocol files in its own spool and never changes a user's job in Slurm:
an expansion is ordered by count and the job asks Slurm for the nodes itself
(:func:`~elastic_slurm.mpi_runtime.grant.take_nodes`), a shrink's nodes are given back by the
job's launcher. The in-memory Slurm plays Slurm; the same flow runs live as two unprivileged
users with the controller as a service user in ``tests/integration/test_unprivileged_live.py``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from elastic_slurm.adapter.backend import EXPANDER_PREFIX
from elastic_slurm.adapter.fake import FakeSlurm
from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.adapter.tags import ElasticTag
from elastic_slurm.cli.controller import spool_dir
from elastic_slurm.controller.actuate import Actuator
from elastic_slurm.controller.daemon import ORPHAN_RETRY_S, Controller
from elastic_slurm.controller.journal import Journal, ResizeRow
from elastic_slurm.errors import ConfigError, JobInputError, ResizeError, SlurmCommandError
from elastic_slurm.model.decisions import Expand, Shrink
from elastic_slurm.model.offer import Answer, AnswerKind
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.resize_order import AckStatus, ResizeAck, ResizeAction, ResizeOrder
from elastic_slurm.mpi_runtime.grant import give_back, take_nodes
from elastic_slurm.mpi_runtime.launcher import _Generation
from elastic_slurm.mpi_runtime.local_launcher import LocalLauncher
from elastic_slurm.mpi_runtime.orders import OrderWatcher
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.protocol.jobdir import JobDir, JobDirs
from elastic_slurm.waiting import wait_for

pytestmark = pytest.mark.usefixtures("fictional_users")

#: Calls that change something in Slurm.
CHANGES = {"submit", "cancel", "requeue", "update_nodelist", "update_numnodes", "allocate"}


def changes(slurm: FakeSlurm) -> list[tuple]:
    return [c for c in slurm.calls if c[0] in CHANGES]


@pytest.fixture()
def slurm() -> FakeSlurm:
    return FakeSlurm(("n1", "n2", "n3", "n4", "n5", "n6"))


@pytest.fixture()
def jobdirs(tmp_path: Path) -> JobDirs:
    return JobDirs(tmp_path / "spool")


@pytest.fixture()
def actuator(slurm: FakeSlurm, jobdirs: JobDirs, tmp_path: Path) -> Actuator:
    return Actuator(slurm, Journal(tmp_path / "journal.db"), jobdirs=jobdirs)


def submit(slurm: FakeSlurm, tmp: Path, nodes: int, hi: int = 6) -> int:
    tag = ElasticTag(JobKind.MALLEABLE, 1, hi).encode()
    job_id = slurm.sbatch([f"--nodes={nodes}", "--time=60", f"--chdir={tmp}", f"--comment={tag}"])
    assert slurm.store[job_id].state == "RUNNING"
    return job_id


def jobs(slurm: FakeSlurm) -> dict:
    return {j.job_id: j for j in slurm.jobs()}


def ack(jobdir: JobDir, seq: int, status: AckStatus, nodes) -> None:
    jobdir.write_ack(ResizeAck(seq, status, tuple(nodes), time.time(), "restart"))


def test_the_protocol_files_are_in_the_spool_not_the_job_directory(tmp_path, jobdirs) -> None:
    assert jobdirs.by_job and not JobDirs().by_job
    assert jobdirs.of(tmp_path / "work", 12, user="alice").path == tmp_path / "spool" / "job-12"
    assert JobDirs().of(tmp_path / "work", 12).path == tmp_path / "work/.elastic-slurm/job-12"


def test_an_expansion_is_ordered_by_count_and_the_job_takes_the_nodes(
    slurm, actuator, jobdirs, tmp_path
) -> None:
    job = submit(slurm, tmp_path, 2)
    before = tuple(slurm.elastic_nodes(job))
    slurm.calls.clear()
    actuator.apply([Expand(job, 2, "room")], jobs(slurm))
    assert changes(slurm) == []  # the controller asked Slurm for nothing
    assert not (tmp_path / ".elastic-slurm").exists()  # nor wrote into the job's directory
    jobdir = jobdirs.of(tmp_path, job)
    order = jobdir.read_order(1)
    assert order is not None and order.needs_grant
    assert (order.count, order.nodes, order.grow_path) == (2, before, "merge")
    # the job's side: it asks Slurm as its user, then acknowledges on what it got
    granted = take_nodes(order, slurm, job)
    assert len(granted.nodes) == 4 and not granted.needs_grant and "grant" in granted.phases_s
    assert set(slurm.elastic_nodes(job)) == set(granted.nodes)
    assert actuator.poll(jobs(slurm)) == []
    ack(jobdir, 1, AckStatus.DONE, granted.nodes)
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.ok and outcome.after == granted.nodes
    (row,) = actuator.journal.resizes()
    assert row.outcome == "done" and set(row.target) == set(granted.nodes)


def test_a_shrink_is_given_back_by_the_job_not_the_controller(
    slurm, actuator, jobdirs, tmp_path
) -> None:
    job = submit(slurm, tmp_path, 4)
    actuator.apply([Shrink(job, 2, "pending job")], jobs(slurm))
    jobdir = jobdirs.of(tmp_path, job)
    order = jobdir.read_order(1)
    assert order is not None and order.by_job and order.action is ResizeAction.SHRINK
    leaving = [n for n in slurm.elastic_nodes(job) if n not in order.nodes]
    give_back(slurm, job, order.nodes)  # the launcher, once the nodes are vacated
    ack(jobdir, 1, AckStatus.VACATED, leaving)
    listed = jobs(slurm)
    slurm.calls.clear()
    assert actuator.poll(listed) == []
    # the controller only stretches the time limit (if it may): no shrink, not even a no-op
    assert {c[0] for c in slurm.calls} <= {"set_time_limit"}, slurm.calls
    ack(jobdir, 1, AckStatus.DONE, order.nodes)
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.ok and set(slurm.elastic_nodes(job)) == set(order.nodes)


def test_a_failed_expansion_leaves_the_job_s_nodes_to_the_job(
    slurm, actuator, jobdirs, tmp_path
) -> None:
    job = submit(slurm, tmp_path, 2)
    actuator.apply([Expand(job, 2)], jobs(slurm))
    jobdir = jobdirs.of(tmp_path, job)
    granted = take_nodes(jobdir.read_order(1), slurm, job)  # type: ignore[arg-type]
    slurm.calls.clear()
    ack(jobdir, 1, AckStatus.FAILED, granted.nodes)  # it got them but could not use them
    (outcome,) = actuator.poll(jobs(slurm))
    assert not outcome.ok and changes(slurm) == []  # a service controller cannot shrink it
    notes = [r["message"] for r in actuator.journal.records if r["kind"] == "note"]
    assert any("cannot shrink another user's job" in m for m in notes), notes


def test_a_counter_offer_lowers_the_count_the_job_will_ask_for(
    slurm, actuator, jobdirs, tmp_path
) -> None:
    job = submit(slurm, tmp_path, 2)
    jobdir = jobdirs.of(tmp_path, job)
    jobdir.write_registration({"job_id": job})  # it negotiates
    actuator.apply([Expand(job, 3)], jobs(slurm))
    offer = jobdir.read_offer(1)
    assert offer is not None and offer.count == 3 and offer.hosts == ()
    jobdir.write_answer(Answer(number=1, answer=AnswerKind.COUNTER, count=1))
    slurm.calls.clear()
    actuator.poll(jobs(slurm))
    final = jobdir.read_offer(2)
    assert final is not None and final.final and final.count == 1
    jobdir.write_answer(Answer(number=2, answer=AnswerKind.ACCEPT))
    actuator.poll(jobs(slurm))
    order = jobdir.read_order(1)
    assert order is not None and order.count == 1 and changes(slurm) == []


def test_recovery_of_an_expansion_never_ordered_asks_slurm_nothing(
    slurm, actuator, tmp_path
) -> None:
    job = submit(slurm, tmp_path, 2)
    nodes = tuple(slurm.elastic_nodes(job))
    actuator.journal.open_resize(
        ResizeRow(job, 1, "expand", "ordering", nodes, (), time.time(), "room")
    )
    slurm.calls.clear()
    (line,) = actuator.recover(slurm.jobs())
    assert "nothing to undo" in line and changes(slurm) == []
    assert [r.outcome for r in actuator.journal.resizes()] == ["rolled_back"]


class Idle(Policy):
    name = "idle"

    def decide(self, snapshot, trigger):  # type: ignore[no-untyped-def]
        return []


def test_a_service_controller_cancels_helpers_of_ended_jobs_only_with_operator_rights(
    slurm, jobdirs, tmp_path, monkeypatch, caplog
) -> None:
    # an expander whose job is gone (its launcher was killed before it could cancel it)
    helper = slurm.sbatch(["--nodes=1", f"--job-name={EXPANDER_PREFIX}999", "--time=5"])
    controller = Controller(slurm, Idle(), Journal(tmp_path / "j.db"), jobdirs=jobdirs)
    real_cancel = slurm.cancel

    def refused(*job_ids: int) -> None:  # a service user without operator rights
        slurm.calls.append(("cancel", job_ids))
        raise SlurmCommandError(
            ["scancel", *map(str, job_ids)],
            1,
            "",
            f"scancel: error: Kill job error on job id {job_ids[0]}: Access/permission denied",
        )

    monkeypatch.setattr(slurm, "cancel", refused)
    slurm.calls.clear()
    with caplog.at_level("WARNING", logger="elastic_slurm.controller.daemon"):
        controller.step()
        controller.step()  # refused: not asked again at once, and said once
    assert changes(slurm) == [("cancel", (helper,))] and slurm.store[helper].state == "RUNNING"
    said = [r.getMessage() for r in caplog.records if "could not cancel" in r.getMessage()]
    assert len(said) == 1 and "operator rights" in said[0] and "permission denied" in said[0]
    # once the site gives the rights, the next try (a minute later) cancels it
    monkeypatch.setattr(slurm, "cancel", real_cancel)
    start = time.monotonic()
    monkeypatch.setattr(
        "elastic_slurm.controller.daemon.time.monotonic", lambda: start + ORPHAN_RETRY_S + 1
    )
    controller.step()
    assert slurm.store[helper].state == "CANCELLED"
    assert controller._cancel_refused == {}


def test_a_service_controller_leaves_helpers_of_running_jobs_to_their_launchers(
    slurm, jobdirs, tmp_path
) -> None:
    # a running job's expander that no order of the controller's uses: a root controller
    # cancels it as stale; a service controller cannot tell it from a grant under way
    job = submit(slurm, tmp_path, 2)
    helper = slurm.sbatch(["--nodes=1", f"--job-name={EXPANDER_PREFIX}{job}", "--time=5"])
    slurm.store[helper].start_time_s = time.time() - 3600
    controller = Controller(slurm, Idle(), Journal(tmp_path / "j.db"), jobdirs=jobdirs)
    slurm.calls.clear()
    controller.step()
    assert changes(slurm) == [] and slurm.store[helper].state == "RUNNING"
    root = Controller(slurm, Idle(), Journal(tmp_path / "k.db"))
    root.step()
    assert ("cancel", (helper,)) in changes(slurm)


def test_the_job_asks_only_for_the_idle_nodes_a_merge_can_bring_in(slurm, tmp_path) -> None:
    first = submit(slurm, tmp_path, 2)
    job = submit(slurm, tmp_path, 2)  # n3, n4; n5 and n6 idle after it
    slurm.cancel(first)  # n1 and n2 idle, but ahead of its batch host
    order = ResizeOrder(
        1, ResizeAction.EXPAND, ("n3", "n4"), time.time(), by_job=True, count=3, grow_path="merge"
    )
    granted = take_nodes(order, slurm, job)
    assert set(granted.nodes) == {"n3", "n4", "n5", "n6"}
    slurm.cancel(job)
    with pytest.raises(ResizeError):
        take_nodes(order, slurm, job)


class _Channel:
    def __init__(self, order: ResizeOrder) -> None:
        self.order = order

    def next(self, seq: int):  # type: ignore[no-untyped-def]
        return self.order if seq == self.order.seq else None


def _watch(order: ResizeOrder, grant) -> OrderWatcher:  # type: ignore[no-untyped-def]
    watcher = OrderWatcher(_Channel(order), 1, interval_s=0.01, grant=grant)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and watcher.ready() is None:
        if watcher._refused:
            break
        time.sleep(0.01)
    return watcher


def test_the_order_watcher_takes_the_nodes_once_before_handing_the_order_out() -> None:
    order = ResizeOrder(1, ResizeAction.EXPAND, ("n1",), time.time(), by_job=True, count=2)
    calls = []

    def grant(o: ResizeOrder) -> ResizeOrder:
        calls.append(o.seq)
        return ResizeOrder(o.seq, o.action, ("n1", "n2", "n3"), o.issued_at, by_job=True)

    watcher = _watch(order, grant)
    try:
        ready = watcher.ready()
        assert ready is not None and ready.nodes == ("n1", "n2", "n3")
        time.sleep(0.05)  # it keeps looking, but the order is taken
        assert calls == [1]
    finally:
        watcher.close()


def test_an_order_whose_nodes_slurm_did_not_grant_is_refused_with_the_reason() -> None:
    order = ResizeOrder(1, ResizeAction.EXPAND, ("n1",), time.time(), by_job=True, count=2)

    def grant(o: ResizeOrder) -> ResizeOrder:
        raise ResizeError("no grant within 30 s")

    watcher = _watch(order, grant)
    try:
        assert watcher.ready() is None
        ((refused, why),) = watcher.take_refused()
        assert refused.seq == 1 and why == "no nodes granted: no grant within 30 s"
    finally:
        watcher.close()


def test_an_order_the_watcher_cannot_get_ready_for_is_refused_and_the_watcher_goes_on() -> None:
    orders = {s: ResizeOrder(s, ResizeAction.SHRINK, ("n1",), time.time()) for s in (1, 2)}

    class Two:
        def next(self, seq: int) -> ResizeOrder | None:
            return orders.get(seq)

    def check(order: ResizeOrder) -> str | None:
        if order.seq == 1:  # a full disk while asking the launcher for a successor, say
            raise JobInputError(7, "successor.json: No space left on device")
        return None

    watcher = OrderWatcher(Two(), 1, interval_s=0.005, check=check)
    try:
        wait_for(lambda: watcher._refused, timeout_s=10, what="the refusal", interval_s=0.01)
        ((refused, why),) = watcher.take_refused()
        assert refused.seq == 1
        assert why.startswith("could not get ready: JobInputError:"), why
        assert "No space left on device" in why
        ready = wait_for(watcher.ready, timeout_s=10, what="order 2", interval_s=0.01)
        assert ready.seq == 2  # the watcher's thread lived on
    finally:
        watcher.close()


def test_the_order_watcher_warns_once_of_an_order_it_cannot_read(caplog) -> None:
    class Damaged:
        reason = "order 1: not JSON"
        looks = 0

        def next(self, seq: int) -> None:
            self.looks += 1
            raise JobInputError(7, self.reason)

    channel = Damaged()
    watcher = OrderWatcher(channel, 1, interval_s=0.005)
    try:
        wait_for(lambda: channel.looks >= 20, timeout_s=10, what="20 looks", interval_s=0.01)
        channel.reason = "order 1: too large"
        wait_for(lambda: channel.looks >= 40, timeout_s=10, what="40 looks", interval_s=0.01)
    finally:
        watcher.close()
    said = [r.getMessage() for r in caplog.records if "looking for order" in r.getMessage()]
    assert len(said) == 2, said  # once per reason, not once per look
    assert "not JSON" in said[0] and "too large" in said[1]
    assert watcher.ready() is None


def test_a_by_job_order_round_trips_and_an_ordinary_one_keeps_its_old_json() -> None:
    order = ResizeOrder(
        3, ResizeAction.EXPAND, ("n1",), 1.0, by_job=True, count=2, grow_path="sibling"
    )
    assert ResizeOrder.from_json(order.to_json()) == order
    plain = ResizeOrder(3, ResizeAction.SHRINK, ("n1",), 1.0)
    assert set(plain.to_json()) == {"seq", "action", "nodes", "issued_at", "phases_s"}
    assert not plain.needs_grant and not ResizeOrder.from_json(plain.to_json()).by_job


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("count", 10**9, "count must be an integer"),
        ("count", "3", "count must be an integer"),
        ("grow_path", "teleport", "grow_path must be"),
        ("grant_timeout_s", 1e6, "grant_timeout_s"),
        ("grant_timeout_s", -1, "grant_timeout_s"),
    ],
)
def test_a_by_job_order_out_of_bounds_is_refused(tmp_path, field, value, words) -> None:
    import json

    jobdir = JobDir(tmp_path / "job-5")
    data = ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0, by_job=True, count=1).to_json()
    data[field] = value
    (jobdir.path / "orders").mkdir(parents=True)
    (jobdir.path / "orders" / "000001.json").write_text(json.dumps(data))
    with pytest.raises(JobInputError, match=words):
        jobdir.read_order(1)


def test_the_spool_is_made_private_and_a_loose_one_is_refused(tmp_path) -> None:
    made = spool_dir(tmp_path / "a" / "spool")
    assert made.is_dir() and made.stat().st_mode & 0o777 == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    with pytest.raises(ConfigError, match="mode 0700"):
        spool_dir(loose)
    link = tmp_path / "link"
    link.symlink_to(made)
    with pytest.raises(ConfigError, match="must be a directory of this user"):
        spool_dir(link)
    assert os.path.islink(link)


# ---------------------------------------------------------------------------- the protocol

SECRET = "s3cret-of-job-12"


def _verify(credential: str, socket: str | None):  # type: ignore[no-untyped-def]
    """``cred-<user>:<payload>``: a MUNGE credential of ``user`` (see test_protocol.py)."""
    from elastic_slurm.protocol.identity import Credential, IdentityError

    name, _, payload = credential.partition(":")
    users = {"cred-alice": "alice", "cred-bob": "bob"}
    if name not in users:
        raise IdentityError("MUNGE credential refused: Invalid credential")
    return Credential(users[name], payload)


@pytest.fixture()
def service_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    from elastic_slurm.protocol.gateway import Gateway, JobRecord
    from elastic_slurm.protocol.server import ProtocolServer

    records = {12: JobRecord(12, "alice", str(tmp_path / "work"), True)}
    spool = JobDirs(tmp_path / "spool")
    gateway = Gateway(records.get, operators=(), verify=_verify, jobdirs=spool)
    srv = ProtocolServer(gateway, "127.0.0.1:0").start()
    yield srv, spool.of(tmp_path / "work", 12)
    srv.stop()


def _client(srv, secret: str = SECRET, cred: str = "cred-alice"):  # type: ignore[no-untyped-def]
    from elastic_slurm.protocol.client import ControllerClient

    return ControllerClient(
        srv.url, 12, secret, retry_s=0, credential=lambda payload: f"{cred}:{payload}"
    )


def test_a_job_s_first_registration_gives_the_service_controller_its_secret(
    service_server, tmp_path
) -> None:
    from elastic_slurm.protocol.client import RefusedError

    srv, jobdir = service_server
    with pytest.raises(RefusedError) as info:  # nothing before it registers
        _client(srv).next(1)
    assert info.value.status == 401 and "has not registered" in info.value.reason
    with pytest.raises(RefusedError) as info:  # another user cannot register it
        _client(srv, cred="cred-bob").register(1, ["n1"])
    assert info.value.status == 403 and jobdir.read_secret() is None
    answer = _client(srv).register(1, ["n1"])  # its own user, proved by MUNGE
    assert answer["own_state"] is True  # the job learns that it must resend, not file
    assert jobdir.read_secret() == SECRET and jobdir.registration() is not None
    assert _client(srv).next(1) is None
    with pytest.raises(RefusedError) as info:  # from now on the secret is checked
        _client(srv, secret="another-secret").register(1, ["n1"])
    assert info.value.status == 401 and "wrong secret" in info.value.reason
    assert jobdir.read_secret() == SECRET
    assert not (tmp_path / "work").exists()  # the user's directory was never touched


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_what_the_job_sent_while_a_service_controller_was_down_reaches_it_later(
    tmp_path,
) -> None:
    # a service controller never reads the job's directory: what could not be sent is kept
    # by the job and sent again, and the job registers once the controller is back
    from elastic_slurm.mpi_runtime.channel import HttpChannel
    from elastic_slurm.protocol.client import ControllerClient
    from elastic_slurm.protocol.gateway import Gateway, JobRecord
    from elastic_slurm.protocol.server import ProtocolServer

    port = _free_port()
    own = JobDir(tmp_path / "work" / ".elastic-slurm" / "job-12")
    client = ControllerClient(
        f"http://127.0.0.1:{port}", 12, SECRET, retry_s=0, credential=lambda p: f"cred-alice:{p}"
    )
    channel = HttpChannel(own, client, own_state=True)
    channel.register(1, ["n1"])
    assert channel.offline and not channel.negotiates
    done = ResizeAck(1, AckStatus.DONE, ("n1", "n2"), time.time(), "spawn")
    channel.ack(done)  # the controller is down: kept, and in the job's own record
    assert own.read_ack(1, AckStatus.DONE) == done
    spool = JobDirs(tmp_path / "spool")
    mine = spool.of(tmp_path / "work", 12)
    mine.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0, by_job=True, count=1))
    records = {12: JobRecord(12, "alice", str(tmp_path / "work"), True)}
    gateway = Gateway(records.get, operators=(), verify=_verify, jobdirs=spool)
    srv = ProtocolServer(gateway, f"127.0.0.1:{port}").start()
    try:
        channel._register_at = 0.0  # do not wait REGISTER_RETRY_S
        assert channel.next(2) is None  # resends first, then looks
        assert not channel.offline and channel.negotiates
        assert mine.read_ack(1, AckStatus.DONE) == done and mine.read_secret() == SECRET
        shrink = ResizeOrder(2, ResizeAction.SHRINK, ("n1",), 2.0, by_job=True)
        mine.write_order(shrink)
        assert channel.next(2) == shrink
        assert own.read_order(2) == shrink  # the job's own record of what it followed
    finally:
        srv.stop()


def test_a_shrink_whose_vacated_message_was_lost_closes_on_the_job_s_done(
    slurm, actuator, jobdirs, tmp_path
) -> None:
    job = submit(slurm, tmp_path, 4)
    actuator.apply([Shrink(job, 2)], jobs(slurm))
    jobdir = jobdirs.of(tmp_path, job)
    order = jobdir.read_order(1)
    assert order is not None
    # the next generation says "done" before the launcher gave the old nodes back (the
    # handover): that alone does not close the shrink, or its give-back would look foreign
    ack(jobdir, 1, AckStatus.DONE, order.nodes)
    assert actuator.poll(jobs(slurm)) == []
    give_back(slurm, job, order.nodes)  # its "vacated" is lost, but Slurm shows the nodes back
    slurm.calls.clear()
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.ok and outcome.after == order.nodes
    # 4 -> 2 nodes: the time limit stretches all the same (the 32-node soak lost jobs shrunk
    # to one node on this path: they ran out of their unchanged limits)
    (stretch,) = [c for c in slurm.calls if c[0] == "set_time_limit"]
    assert stretch[1] == (job, 120)  # 60 minutes, nearly all left, at half the nodes
    assert any("time limit stretched" in r.get("message", "") for r in actuator.journal.records)


def test_an_expansion_a_merge_cannot_serve_is_not_ordered_at_all(
    slurm, actuator, jobdirs, tmp_path
) -> None:
    first = submit(slurm, tmp_path, 2)
    job = submit(slurm, tmp_path, 4)  # n3-n6: nothing idle after its batch host
    slurm.cancel(first)  # n1, n2 idle, but ahead of it
    actuator.apply([Expand(job, 2, "room")], jobs(slurm))
    assert jobdirs.of(tmp_path, job).last_order_seq() == 0  # the job is not bothered
    (row,) = actuator.journal.resizes()
    assert row.outcome == "failed" and job in actuator.failed_grants
    (outcome,) = [r for r in actuator.journal.records if r["kind"] == "outcome"]
    assert "no idle node comes after its batch host" in outcome["message"]


def test_a_service_controller_orders_only_what_a_merge_can_add(
    slurm, actuator, jobdirs, tmp_path
) -> None:
    first = submit(slurm, tmp_path, 2)
    job = submit(slurm, tmp_path, 2)  # n3, n4: n5, n6 idle after it
    slurm.cancel(first)
    actuator.apply([Expand(job, 3, "room")], jobs(slurm))
    order = jobdirs.of(tmp_path, job).read_order(1)
    assert order is not None and order.count == 2


def test_nodes_taken_for_an_order_the_job_then_refuses_are_given_back_by_the_job(
    tmp_path, monkeypatch, caplog
) -> None:
    # the grant came, then an added node failed its check: the job refuses the order and,
    # since a service controller cannot shrink it, gives the unused nodes back itself
    from types import SimpleNamespace

    from elastic_slurm.mpi_runtime import grant, slurm_env
    from elastic_slurm.mpi_runtime.channel import FileChannel
    from elastic_slurm.mpi_runtime.session import ElasticComm

    given: list[tuple[int, tuple[str, ...]]] = []
    monkeypatch.setattr(grant, "give_back", lambda slurm, job, keep: given.append((job, keep)))
    monkeypatch.setattr(slurm_env, "job_slurm", lambda: None)
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    ec = object.__new__(ElasticComm)  # rank 0's side only: no MPI call is made
    ec.jobdir = JobDir(tmp_path / "job-12")
    ec.jobdir.create()
    ec.channel = FileChannel(ec.jobdir)
    ec._watcher = None
    ec.comm = SimpleNamespace(size=2)
    granted = ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2", "n3"), 1.0, by_job=True)
    ec._refuse(granted, ["n1", "n2"], "added nodes unusable: n3: down")
    assert given == [(12, ("n1", "n2"))]
    failed = ec.jobdir.read_ack(1, AckStatus.FAILED)
    assert failed is not None and failed.nodes == ("n1", "n2")
    given.clear()  # a root controller's order: the controller gives them back, not the job
    ec._refuse(ResizeOrder(2, ResizeAction.EXPAND, ("n1", "n2", "n3"), 1.0), ["n1"], "no")
    assert given == []
    # the launcher failed it (a restart's waiting successor) and gave the nodes back itself:
    # rank 0 neither gives them back a second time nor acknowledges again
    launcher_ack = ResizeAck(3, AckStatus.FAILED, ("n1", "n2"), 1.0, reason="by the launcher")
    FileChannel(ec.jobdir).ack(launcher_ack)
    ec._refuse(replace(granted, seq=3), ["n1", "n2"], "the successor failed")
    assert given == []
    again = ec.jobdir.read_ack(3, AckStatus.FAILED)
    assert again is not None and again.reason == "by the launcher"
    events = (ec.jobdir.path / "events.jsonl").read_text()
    assert events.count('"failed"') == 2  # orders 1 and 2: the launcher logs order 3's
    # a damaged acknowledgement: rank 0 (alone here) warns and refuses, it does not raise
    (ec.jobdir.path / "acks" / "000004.failed.json").write_text("{not an ack")
    with caplog.at_level(logging.WARNING, logger="elastic_slurm.mpi_runtime"):
        ec._refuse(replace(granted, seq=4), ["n1", "n2"], "the spawn failed")
    assert "order 4: the launcher's acknowledgement is unreadable" in caplog.text
    assert ec.next_seq == 5


# ---------------------------------------------------------------------------- sizes by hand


def test_a_size_asked_by_hand_is_recorded_by_a_service_controller_only(service_server) -> None:
    from elastic_slurm.protocol.client import RefusedError

    srv, jobdir = service_server
    _client(srv).register(1, ["n1"])
    with pytest.raises(RefusedError) as info:  # another user cannot ask for the job's size
        _client(srv, cred="cred-bob").resize(3)
    assert info.value.status == 403 and jobdir.size_request() is None
    assert _client(srv).resize(3) == 1
    asked = jobdir.size_request()
    assert asked is not None and (asked["number"], asked["nodes"], asked["user"]) == (1, 3, "alice")
    assert _client(srv).resize_answer(1) is None  # the controller has not acted yet
    jobdir.write_size_answer(1, seq=4)
    assert _client(srv).resize_answer(1)["seq"] == 4
    assert _client(srv).resize(2) == 2  # the next one is numbered on


def test_a_root_controller_refuses_sizes_asked_through_it(tmp_path) -> None:
    from elastic_slurm.protocol.client import RefusedError
    from elastic_slurm.protocol.gateway import Gateway, JobRecord
    from elastic_slurm.protocol.server import ProtocolServer

    records = {12: JobRecord(12, "alice", str(tmp_path), True)}
    JobDir.for_job(tmp_path, 12).write_secret(SECRET)
    srv = ProtocolServer(Gateway(records.get, operators=(), verify=_verify), "127.0.0.1:0").start()
    try:
        with pytest.raises(RefusedError) as info:
            _client(srv).resize(3)
        assert info.value.status == 409 and "acts directly" in info.value.reason
    finally:
        srv.stop()


def _service_controller(slurm, jobdirs, tmp_path):  # type: ignore[no-untyped-def]
    return Controller(
        slurm, Idle(), Journal(tmp_path / "c.db"), jobdirs=jobdirs, min_resize_interval_s=0.0
    )


def test_a_service_controller_carries_out_a_size_asked_by_hand_past_the_policy(
    slurm, jobdirs, tmp_path
) -> None:
    job = submit(slurm, tmp_path, 2)
    controller = _service_controller(slurm, jobdirs, tmp_path)
    controller.step()  # the first cycle looks at every job once (none asked)
    mine = jobdirs.of(tmp_path, job)
    mine.write_size_request(1, 4, "alice")
    controller.size_asked(job)
    controller.step()
    answer = mine.size_answer()
    assert answer is not None and answer["number"] == 1 and answer["seq"] == 1
    order = mine.read_order(1)
    assert order is not None and order.needs_grant and order.count == 2
    (row,) = controller.journal.resizes()
    assert row.by == "user" and row.reason == "asked by alice"
    assert job in controller.manual  # the policy leaves it alone for a while
    controller.step()  # answered once only
    assert mine.size_answer() == answer and len(controller.journal.resizes()) == 1


@pytest.mark.parametrize(
    ("nodes", "words"),
    [(2, "already runs on 2 node(s)"), (9, "outside its range")],
)
def test_an_impossible_size_asked_by_hand_is_refused_with_the_reason(
    slurm, jobdirs, tmp_path, nodes, words
) -> None:
    job = submit(slurm, tmp_path, 2)
    controller = _service_controller(slurm, jobdirs, tmp_path)
    mine = jobdirs.of(tmp_path, job)
    mine.write_size_request(1, nodes, "alice")
    controller.step()  # the first cycle (after a start) finds it without being told
    answer = mine.size_answer()
    assert answer is not None and answer["seq"] is None and words in answer["refused"]
    assert controller.journal.resizes() == [] and mine.last_order_seq() == 0


def test_resize_goes_through_a_service_controller_and_reads_the_outcome_in_the_job(
    service_server, tmp_path, monkeypatch
) -> None:
    import threading

    from elastic_slurm import jobs
    from elastic_slurm.protocol import client as client_module

    srv, mine = service_server
    own = JobDir.for_job(tmp_path / "work", 12)
    own.write_secret(SECRET)  # what the job's launcher stores, read by its user's resize
    _client(srv).register(1, ["n1"])
    monkeypatch.setattr(  # the caller's MUNGE credential: alice's
        client_module, "make_credential", lambda socket, payload: f"cred-alice:{payload}"
    )

    def controller_and_job() -> None:  # what the controller's loop and the job do
        deadline = time.monotonic() + 10
        while mine.size_request() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        mine.write_size_answer(1, seq=1)
        order = ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2", "n3"), time.time(), by_job=True)
        own.write_order(order)
        own.write_ack(ResizeAck(1, AckStatus.DONE, order.nodes, time.time() + 1.5, "spawn"))

    helper = threading.Thread(target=controller_and_job)
    helper.start()
    running = SlurmJob(
        job_id=12,
        name="x",
        state="RUNNING",
        nodes=("n1",),
        node_count=1,
        comment="",
        submit_time_s=0.0,
        start_time_s=0.0,
        batch_host="n1",
        workdir=str(tmp_path / "work"),
        user="alice",
        partition="debug",
        account="",
        qos="",
        reason="",
    )
    outcome = jobs.resize_through(srv.url, running, ("n1",), 3, timeout_s=10)
    helper.join()
    assert outcome.ok and outcome.seq == 1 and outcome.after == ("n1", "n2", "n3")
    assert outcome.action == "expand" and outcome.seconds >= 1.0


def _expansion_taken_by_the_job(slurm, actuator, jobdirs, tmp_path):  # noqa: ANN001, ANN202
    """A 2-node job whose expansion by 2 the controller ordered and the job took itself."""
    job = submit(slurm, tmp_path, 2)
    before = tuple(slurm.elastic_nodes(job))
    actuator.apply([Expand(job, 2, "room")], jobs(slurm))
    order = jobdirs.of(tmp_path, job).read_order(1)
    assert order is not None
    return job, before, take_nodes(order, slurm, job)


@pytest.mark.parametrize("by_job", [True, False])
def test_nodes_taken_for_an_expansion_whose_successor_failed_go_back_by_the_launcher(
    slurm, actuator, jobdirs, tmp_path, by_job
) -> None:
    # the waiting successor of a restart expansion ended before the handover: under a
    # service controller the launcher gives back the nodes the job took for it (the
    # controller cannot shrink the user's job); otherwise the controller does, on the ack
    job, before, granted = _expansion_taken_by_the_job(slurm, actuator, jobdirs, tmp_path)
    assert len(granted.nodes) == 4
    jobdir = JobDir(tmp_path / "launcher")
    jobdir.create()
    launcher = LocalLauncher(["app.py"], ranks=2, jobdir=jobdir, env={}, timeout_s=60)
    launcher.slurm, launcher.job_id = slurm, job
    current = _Generation(subprocess.Popen(["sleep", "30"]), before, 1, [], time.monotonic())
    failed = subprocess.Popen(["false"])
    failed.wait()
    waiting = _Generation(failed, granted.nodes, 2, [], time.monotonic(), 1, by_job=by_job)
    try:
        assert launcher._tend_successor(current, waiting) is None
    finally:
        current.proc.kill()
        current.proc.wait()
    ack = jobdir.read_ack(1, AckStatus.FAILED)
    assert ack is not None and ack.nodes == before and "before the handover" in ack.reason
    kept = set(slurm.elastic_nodes(job))
    assert kept == (set(before) if by_job else set(granted.nodes))


@pytest.mark.parametrize("by_job", [True, False])
def test_nodes_whose_check_failed_before_a_sequential_restart_go_back_by_the_launcher(
    slurm, actuator, jobdirs, tmp_path, monkeypatch, by_job
) -> None:
    # the sequential restart path: the old generation left, the launcher's check of the
    # added nodes failed; the job goes on without them and, under a service controller,
    # the launcher gives them back (the controller cannot shrink the user's job)
    from elastic_slurm.mpi_runtime import launcher as launcher_module

    job, before, granted = _expansion_taken_by_the_job(slurm, actuator, jobdirs, tmp_path)
    added = sorted(set(granted.nodes) - set(before))
    monkeypatch.setattr(
        launcher_module, "check_hosts", lambda hosts, job_id, timeout: {added[0]: "down"}
    )
    monkeypatch.setattr(launcher_module.shutil, "which", lambda name, path=None: "/bin/true")
    jobdir = JobDir(tmp_path / "launcher")
    jobdir.create()
    env = {"SLURM_JOB_ID": str(job), "ELASTIC_SLURM_JOB_DIR": str(jobdir.path)}
    launcher = launcher_module.Launcher(["app.py"], env=env, slurm=slurm)
    request = {"seq": 1, "action": "expand", "nodes": list(granted.nodes), "by_job": by_job}
    assert launcher._follow(request, before) == before
    ack = jobdir.read_ack(1, AckStatus.FAILED)
    assert ack is not None and "added nodes unusable" in ack.reason
    kept = set(slurm.elastic_nodes(job))
    assert kept == (set(before) if by_job else set(granted.nodes))


def test_the_spool_lets_go_of_jobs_gone_for_longer_than_its_retention(
    slurm, jobdirs, tmp_path, caplog
) -> None:
    # a service controller runs for weeks: one job-<id>/ per job ever run would pile up
    running = submit(slurm, tmp_path, 2)
    spool = spool_dir(jobdirs.spool)
    long_ago = time.time() - 2 * 86400
    for job_id in (running, 901, 902):
        jobdirs.of(tmp_path, job_id).write_registration({"job_id": job_id})
    for name in (f"job-{running}", "job-901"):  # nothing written there for two days
        os.utime(spool / name, (long_ago, long_ago))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("x")
    (spool / "job-903").symlink_to(outside)  # never followed, never removed
    (spool / "job-904").write_text("not a directory")
    (spool / "notes").mkdir()
    for name in ("job-903", "job-904", "notes"):
        os.utime(spool / name, (long_ago, long_ago), follow_symlinks=False)
    controller = Controller(
        slurm, Idle(), Journal(tmp_path / "j.db"), jobdirs=jobdirs, spool_retention_s=86400.0
    )
    with caplog.at_level(logging.INFO):
        controller.step()
    assert sorted(p.name for p in spool.iterdir()) == sorted(
        [f"job-{running}", "job-902", "job-903", "job-904", "notes"]
    )  # job-901: gone from Slurm, untouched for two days
    assert (outside / "precious").read_text() == "x"
    assert "removed the spool directories of 1 ended job(s)" in caplog.text
    os.utime(spool / "job-902", (long_ago, long_ago))
    controller.step()  # the next look is SPOOL_SWEEP_EVERY_S later
    assert (spool / "job-902").is_dir()
    controller._swept_at = None  # that much later
    controller.step()
    assert not (spool / "job-902").exists() and (spool / f"job-{running}").is_dir()


def test_a_root_controller_sweeps_no_spool(slurm, tmp_path) -> None:
    assert JobDirs().sweep(set(), 0.0) == []
