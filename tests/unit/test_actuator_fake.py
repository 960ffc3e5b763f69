"""The actuator driven through every phase, fault and recovery path on the in-memory Slurm.

No cluster: :class:`~elastic_slurm.adapter.fake.FakeSlurm` plays Slurm (it passes the same
contract tests as the real backends), and :class:`Job` plays the job's part (it reads its
orders and offers, and writes acknowledgements and answers in its job directory).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from elastic_slurm.adapter.fake import FakeSlurm
from elastic_slurm.adapter.tags import ElasticTag
from elastic_slurm.controller import metrics
from elastic_slurm.controller.actuate import Actuator, ResizeOutcome
from elastic_slurm.controller.daemon import Controller
from elastic_slurm.controller.journal import Journal
from elastic_slurm.errors import SlurmUnavailableError
from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.offer import Answer, AnswerKind, Offer
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.resize_order import AckStatus, ResizeAck, ResizeOrder
from elastic_slurm.model.snapshot import ClusterSnapshot
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.protocol.jobdir import JobDir

pytestmark = pytest.mark.usefixtures("fictional_users")

#: Calls that change something in Slurm (queries are not in it).
CHANGES = {
    "submit",
    "release",
    "cancel",
    "requeue",
    "update_nodelist",
    "update_numnodes",
    "set_array_throttle",
    "set_time_limit",
    "allocate",
    "reconfigure",
}


def down() -> SlurmUnavailableError:
    return SlurmUnavailableError(["squeue"], 1, "", "Unable to contact slurm controller")


class Job:
    """A job on the fake Slurm, and its side of the protocol (orders, acks, offers)."""

    def __init__(
        self,
        slurm: FakeSlurm,
        tmp: Path,
        *,
        nodes: int = 2,
        kind: JobKind = JobKind.MALLEABLE,
        lo: int = 1,
        hi: int = 4,
        grace_s: float | None = None,
        negotiates: bool = False,
    ) -> None:
        self.slurm = slurm
        tag = ElasticTag(kind, lo, hi, grace_s=grace_s).encode()
        self.id = slurm.sbatch(
            [f"--nodes={nodes}", "--time=60", f"--chdir={tmp}", f"--comment={tag}"]
        )
        assert slurm.store[self.id].state == "RUNNING"
        self.dir = JobDir.for_job(tmp, self.id)
        if negotiates:
            self.dir.write_registration({"job_id": self.id})

    @property
    def nodes(self) -> tuple[str, ...]:
        """What Slurm gives the job now (its own and its siblings' nodes)."""
        return tuple(self.slurm.elastic_nodes(self.id))

    def order(self, seq: int) -> ResizeOrder:
        order = self.dir.read_order(seq)
        assert order is not None, f"no order {seq}"
        return order

    def ack(self, seq: int, status: AckStatus, nodes: tuple[str, ...], reason: str = "") -> None:
        self.dir.write_ack(ResizeAck(seq, status, nodes, time.time(), "spawn", reason))

    def offer(self) -> Offer:
        offer = self.dir.read_offer(self.dir.last_offer_number())
        assert offer is not None
        return offer

    def answer(self, kind: AnswerKind, count: int | None = None) -> None:
        self.dir.write_answer(Answer(number=self.offer().number, answer=kind, count=count))


@pytest.fixture()
def slurm() -> FakeSlurm:
    return FakeSlurm(("n1", "n2", "n3", "n4", "n5", "n6"))


@pytest.fixture()
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "state" / "journal.db")


def jobs(slurm: FakeSlurm) -> dict:
    return {j.job_id: j for j in slurm.jobs()}


def phase(journal: Journal, job_id: int) -> str:
    (row,) = [r for r in journal.resizes() if r.job_id == job_id and r.open] or [None]
    return row.phase if row is not None else "closed"


def closed(journal: Journal, job_id: int) -> list[str]:
    return [r.outcome for r in journal.resizes() if r.job_id == job_id and not r.open]


def records(journal: Journal, kind: str) -> list[dict]:
    return [r for r in journal.records if r["kind"] == kind]


def changes(slurm: FakeSlurm) -> list[tuple[str, tuple]]:
    return [c for c in slurm.calls if c[0] in CHANGES]


# ---------------------------------------------------------------------------- legality


class Scripted(Policy):
    """A buggy policy: it returns the decisions it is given, whatever the snapshot says."""

    name = "scripted"

    def __init__(self, decisions: list[Decision]) -> None:
        super().__init__()
        self.decisions = decisions

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        return list(self.decisions)


def refused_count(kind: str) -> float:
    value = metrics.REGISTRY.get_sample_value(
        "elastic_slurm_decisions_total", {"kind": kind, "legal": "false"}
    )
    return value or 0.0


def test_illegal_decisions_of_a_policy_never_reach_slurm(slurm, journal, tmp_path) -> None:
    rigid = Job(slurm, tmp_path, nodes=2, kind=JobKind.RIGID, lo=2, hi=2)
    elastic = Job(slurm, tmp_path, nodes=2, lo=1, hi=3)
    policy = Scripted([Expand(rigid.id, 1, "bug"), Expand(elastic.id, 2, "beyond max")])
    before = refused_count("Expand")
    controller = Controller(slurm, policy, journal, min_resize_interval_s=0.0)
    slurm.calls.clear()
    controller.step()
    assert changes(slurm) == []  # nothing sent to Slurm
    assert len(rigid.nodes) == 2
    assert len(elastic.nodes) == 2 and journal.resizes() == []
    assert rigid.dir.last_order_seq() == elastic.dir.last_order_seq() == 0
    refused = [
        (r["job_id"], r["decision"], r["count"], r["reason"]) for r in records(journal, "refused")
    ]
    assert refused == [
        (rigid.id, "Expand", 1, "a rigid job cannot be resized while it runs"),
        (elastic.id, "Expand", 2, "the job would have 4 node(s), outside its range 1-3"),
    ]
    assert refused_count("Expand") == before + 2


def test_refusals_are_logged_and_legal_decisions_go_on(slurm, journal, tmp_path, caplog) -> None:
    rigid = Job(slurm, tmp_path, nodes=2, kind=JobKind.RIGID, lo=2, hi=2)
    elastic = Job(slurm, tmp_path, nodes=1)
    actuator = Actuator(slurm, journal)
    verdicts = actuator.apply([Shrink(rigid.id, 1), Expand(elastic.id, 1)], jobs(slurm))
    assert [v.legal for v in verdicts] == [False, True]
    assert "a rigid job cannot be resized" in caplog.text
    assert len(elastic.nodes) == 2 and len(rigid.nodes) == 2  # the legal one was carried out
    assert phase(journal, elastic.id) == "awaiting_done"


# ---------------------------------------------------------------------------- phases


def test_expand_through_its_phases(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2)
    actuator = Actuator(slurm, journal)
    actuator.apply([Expand(job.id, 2, "room")], jobs(slurm))
    # granting -> ordering -> awaiting_done: Slurm granted, the job ordered onto 4 nodes
    assert len(job.nodes) == 4
    order = job.order(1)
    assert set(order.nodes) == set(job.nodes)
    assert phase(journal, job.id) == "awaiting_done"
    assert actuator.poll(jobs(slurm)) == []  # no ack yet
    job.ack(1, AckStatus.DONE, order.nodes)
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.ok and outcome.after == order.nodes and "grant" in outcome.phases_s
    assert closed(journal, job.id) == ["done"] and actuator.in_flight == {}


def test_shrink_waits_for_the_job_to_vacate(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=4)
    actuator = Actuator(slurm, journal)
    actuator.apply([Shrink(job.id, 2, "pending job")], jobs(slurm))
    order = job.order(1)
    assert len(order.nodes) == 2 and slurm.store[job.id].batch_host in order.nodes
    assert phase(journal, job.id) == "awaiting_vacate"
    actuator.poll(jobs(slurm))
    assert len(job.nodes) == 4  # never taken before the job vacated them
    gone = tuple(n for n in job.nodes if n not in order.nodes)
    job.ack(1, AckStatus.VACATED, gone)
    assert actuator.poll(jobs(slurm)) == []
    assert set(job.nodes) == set(order.nodes)  # given back to Slurm
    assert phase(journal, job.id) == "awaiting_done"
    job.ack(1, AckStatus.DONE, order.nodes)
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.ok and "release" in outcome.phases_s
    assert closed(journal, job.id) == ["done"]


def test_a_shrink_stretches_the_time_limit_once_the_nodes_are_back(
    slurm, journal, tmp_path
) -> None:
    job = Job(slurm, tmp_path, nodes=4)  # --time=60 (minutes)
    slurm.store[job.id].start_time_s = time.time() - 600  # ran 10 of its 60 minutes
    actuator = Actuator(slurm, journal)
    actuator.apply([Shrink(job.id, 3)], jobs(slurm))  # give back 3: 4 -> 1
    order = job.order(1)
    actuator.poll(jobs(slurm))
    assert slurm.store[job.id].time_limit_s == 3600.0  # not before the nodes are back
    job.ack(1, AckStatus.VACATED, tuple(n for n in job.nodes if n not in order.nodes))
    actuator.poll(jobs(slurm))
    # 10 min done, 50 left on 4 nodes: at most 200 on 1 (a concave speedup)
    assert slurm.store[job.id].time_limit_s == 210 * 60.0
    (note,) = [r for r in records(journal, "note") if "stretched" in r["message"]]
    assert "from 60 to 210 min" in note["message"] and "from 4 to 1 nodes" in note["message"]


def test_a_merge_grows_by_the_idle_nodes_after_the_batch_host(slurm, journal, tmp_path) -> None:
    # n1-n2 go idle ahead of the job's batch host n3: a merge cannot bring them in, so an
    # expansion by 3 grows by the 2 that come after it (n5, n6) instead of failing each cycle
    first = Job(slurm, tmp_path, nodes=2)
    job = Job(slurm, tmp_path, nodes=2, hi=6)
    assert slurm.store[job.id].batch_host == "n3"
    slurm.cancel(first.id)
    assert slurm.merge_room(job.id) == 2
    actuator = Actuator(slurm, journal)
    actuator.apply([Expand(job.id, 3, "room")], jobs(slurm))
    order = job.order(1)
    assert set(order.nodes) == {"n3", "n4", "n5", "n6"} and set(job.nodes) == set(order.nodes)
    assert any("growing by 2 of the 3" in r["message"] for r in records(journal, "note"))
    slurm.cancel(job.id)
    assert slurm.merge_room(job.id) == 0  # not running


def test_a_failed_grow_keeps_the_added_nodes_the_job_still_runs_on(
    slurm, journal, tmp_path
) -> None:
    # a job that ends with a spawn under way keeps Open MPI daemons on the added nodes until
    # mpirun ends: given back, Slurm would kill them and Open MPI fail the job (soak job 279)
    job = Job(slurm, tmp_path, nodes=2)
    before = job.nodes
    actuator = Actuator(slurm, journal)
    actuator.apply([Expand(job.id, 2)], jobs(slurm))
    order = job.order(1)
    job.ack(1, AckStatus.FAILED, order.nodes, "the application ended before ...")
    (outcome,) = actuator.poll(jobs(slurm))
    assert not outcome.ok and set(job.nodes) == set(order.nodes)
    assert not [c for c in slurm.calls if c[0] == "update_nodelist"]
    assert any("still runs on" in r["message"] for r in records(journal, "note"))
    # one that says it runs on its old nodes only gets the grant taken back, as before
    other = Job(slurm, tmp_path, nodes=1)
    had = other.nodes
    actuator.apply([Expand(other.id, 1)], jobs(slurm))
    assert len(other.order(1).nodes) == 2
    other.ack(1, AckStatus.FAILED, had, "spawn failed")
    actuator.poll(jobs(slurm))
    assert other.nodes == had and set(job.nodes) == set(order.nodes) != set(before)


def test_a_refused_stretch_leaves_the_shrink_in_place(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2)
    actuator = Actuator(slurm, journal)
    actuator.apply([Shrink(job.id, 1)], jobs(slurm))
    order = job.order(1)
    job.ack(1, AckStatus.VACATED, tuple(n for n in job.nodes if n not in order.nodes))
    slurm.fail("set_time_limit")  # no operator rights, say
    actuator.poll(jobs(slurm))
    assert job.nodes == order.nodes and phase(journal, job.id) == "awaiting_done"
    assert slurm.store[job.id].time_limit_s == 3600.0
    assert any("not stretched" in r["message"] for r in records(journal, "note"))
    job.ack(1, AckStatus.DONE, order.nodes)
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.ok


def test_a_site_can_keep_time_limits_as_they_are(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2)
    actuator = Actuator(slurm, journal, stretch_time_limit=False)
    actuator.apply([Shrink(job.id, 1)], jobs(slurm))
    order = job.order(1)
    job.ack(1, AckStatus.VACATED, tuple(n for n in job.nodes if n not in order.nodes))
    actuator.poll(jobs(slurm))
    assert job.nodes == order.nodes and slurm.store[job.id].time_limit_s == 3600.0
    assert not [c for c in slurm.calls if c[0] == "set_time_limit"]


def test_a_job_that_negotiates_is_offered_first(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2, negotiates=True)
    actuator = Actuator(slurm, journal)
    actuator.apply([Expand(job.id, 2, "room")], jobs(slurm))
    assert phase(journal, job.id) == "offered" and job.dir.last_order_seq() == 0
    offer = job.offer()
    assert offer.action == "expand" and offer.count == 2 and len(job.nodes) == 4  # held for it
    job.answer(AnswerKind.COUNTER, 1)  # it wants only one of the two
    assert actuator.poll(jobs(slurm)) == []
    final = job.offer()
    assert final.final and final.count == 1 and len(job.nodes) == 3  # the other went back
    assert phase(journal, job.id) == "offered"
    job.answer(AnswerKind.ACCEPT)
    actuator.poll(jobs(slurm))
    assert phase(journal, job.id) == "awaiting_done" and len(job.order(1).nodes) == 3
    job.ack(1, AckStatus.DONE, job.order(1).nodes)
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.ok


def test_a_rejected_offer_gives_the_hosts_back(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2, negotiates=True)
    before = job.nodes
    actuator = Actuator(slurm, journal)
    actuator.apply([Expand(job.id, 2)], jobs(slurm))
    job.answer(AnswerKind.REJECT)
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.declined and not outcome.ok
    assert job.nodes == before and closed(journal, job.id) == ["failed"]
    assert job.offer().withdrawn


# ---------------------------------------------------------------------------- faults


def test_slurm_down_mid_grant_is_rolled_back_when_it_answers(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2)
    before = job.nodes
    actuator = Actuator(slurm, journal)
    # granted, then slurmctld stops answering before the expander is merged
    slurm.fail("update_numnodes", down())
    slurm.fail("cancel", down())
    actuator.apply([Expand(job.id, 2)], jobs(slurm))
    assert phase(journal, job.id) == "granting" and job.id in actuator.in_flight
    assert [j.name for j in slurm.store.values() if j.state == "RUNNING"].count(f"expand:{job.id}")
    view = jobs(slurm)  # the last view the controller had
    slurm.down = True
    assert actuator.poll(view) == []
    assert phase(journal, job.id) == "granting"  # kept while Slurm does not answer
    slurm.down = False
    (outcome,) = actuator.poll(jobs(slurm))
    assert not outcome.ok and "rolled back" in outcome.message
    assert job.nodes == before and closed(journal, job.id) == ["rolled_back"]
    assert not [j for j in slurm.store.values() if j.name.startswith("expand:") and j.nodes]


def test_slurm_refusing_the_shrink_leaves_the_job_to_report(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=3)
    actuator = Actuator(slurm, journal)
    actuator.apply([Shrink(job.id, 1)], jobs(slurm))
    order = job.order(1)
    job.ack(1, AckStatus.VACATED, tuple(n for n in job.nodes if n not in order.nodes))
    slurm.fail("update_nodelist")
    assert actuator.poll(jobs(slurm)) == []
    assert phase(journal, job.id) == "awaiting_done" and len(job.nodes) == 3
    assert any("injected failure" in r["message"] for r in records(journal, "note"))
    job.ack(1, AckStatus.FAILED, job.nodes, "could not shrink")
    (outcome,) = actuator.poll(jobs(slurm))
    assert not outcome.ok and closed(journal, job.id) == ["failed"]


def test_slurm_down_while_a_shrink_is_given_back_waits(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=3)
    actuator = Actuator(slurm, journal)
    actuator.apply([Shrink(job.id, 1)], jobs(slurm))
    order = job.order(1)
    job.ack(1, AckStatus.VACATED, tuple(n for n in job.nodes if n not in order.nodes))
    view = jobs(slurm)
    slurm.down = True
    assert actuator.poll(view) == []
    assert phase(journal, job.id) == "awaiting_vacate"  # nothing moved
    slurm.down = False
    actuator.poll(jobs(slurm))
    assert set(job.nodes) == set(order.nodes) and phase(journal, job.id) == "awaiting_done"


@pytest.mark.parametrize("on_overdue", ["keep", "force", "requeue"])
def test_a_job_that_never_acknowledges(slurm, journal, tmp_path, on_overdue) -> None:
    job = Job(slurm, tmp_path, nodes=3, grace_s=0.01)
    actuator = Actuator(slurm, journal, on_overdue=on_overdue)
    actuator.apply([Shrink(job.id, 1)], jobs(slurm))
    time.sleep(0.05)
    finished = actuator.poll(jobs(slurm))
    (overdue,) = records(journal, "overdue")
    assert overdue["job_id"] == job.id and overdue["action"] == on_overdue
    if on_overdue == "keep":
        assert (
            finished == [] and len(job.nodes) == 3 and phase(journal, job.id) == "awaiting_vacate"
        )
    elif on_overdue == "force":
        (outcome,) = finished
        assert not outcome.ok and set(job.nodes) == set(job.order(1).nodes)
        assert closed(journal, job.id) == ["failed"]
    else:
        (outcome,) = finished
        assert not outcome.ok and slurm.store[job.id].state == "PENDING"
        assert ("requeue", (job.id,)) in slurm.calls


def test_a_failed_expansion_gives_the_new_nodes_back(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2)
    before = job.nodes
    actuator = Actuator(slurm, journal)
    actuator.apply([Expand(job.id, 2)], jobs(slurm))
    job.ack(1, AckStatus.FAILED, before, "spawn failed")
    (outcome,) = actuator.poll(jobs(slurm))
    assert not outcome.ok and outcome.message == "spawn failed"
    assert job.nodes == before and closed(journal, job.id) == ["failed"]


def test_a_job_that_ends_during_its_resize(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=3)
    actuator = Actuator(slurm, journal)
    actuator.apply([Shrink(job.id, 1)], jobs(slurm))
    slurm.finish(job.id, "FAILED")
    (outcome,) = actuator.poll(jobs(slurm))
    assert not outcome.ok and outcome.message == "the job ended during the resize"
    assert closed(journal, job.id) == ["failed"]


def test_no_grant_closes_the_expansion_at_once(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2)
    Job(slurm, tmp_path, nodes=4)  # every other node taken
    actuator = Actuator(slurm, journal)
    actuator.apply([Expand(job.id, 1)], jobs(slurm), snapshot=_free_snapshot(slurm, job.id))
    assert actuator.in_flight == {} and closed(journal, job.id) == ["failed"]
    (outcome,) = records(journal, "outcome")
    assert "only 0 node(s) are idle" in outcome["message"]


def _free_snapshot(slurm: FakeSlurm, job_id: int) -> ClusterSnapshot:
    """A stale view in which one node still looked idle (the policy decided on it)."""
    from elastic_slurm.controller.observe import snapshot
    from elastic_slurm.model.snapshot import NodeState, NodeView

    snap = snapshot(slurm.jobs(), slurm.nodes())
    return ClusterSnapshot(snap.time_s, snap.jobs, (*snap.nodes, NodeView("n9", NodeState.IDLE)))


# ---------------------------------------------------------------------------- recovery


def test_a_new_actuator_follows_an_order_the_old_one_sent(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2)
    Actuator(slurm, journal).apply([Expand(job.id, 1)], jobs(slurm))
    journal.close()
    again = Journal(journal.path)
    actuator = Actuator(slurm, again)
    lines = actuator.recover(slurm.jobs())
    assert lines and "order found" in lines[0]
    assert phase(again, job.id) == "awaiting_done"
    job.ack(1, AckStatus.DONE, job.order(1).nodes)
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.ok and closed(again, job.id) == ["done"]


def test_a_grant_whose_order_was_never_sent_is_rolled_back(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2)
    before = job.nodes
    first = Actuator(slurm, journal)

    def killed(r) -> None:  # the controller dies between the grant and the order
        raise KeyboardInterrupt

    first._send_order = killed  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        first.apply([Expand(job.id, 2)], jobs(slurm))
    assert len(job.nodes) == 4 and phase(journal, job.id) == "ordering"
    actuator = Actuator(slurm, Journal(journal.path))
    (line,) = actuator.recover(slurm.jobs())
    assert "rolled back" in line and job.nodes == before
    assert closed(actuator.journal, job.id) == ["rolled_back"]


def test_a_shrink_offered_and_ordered_before_the_kill_is_followed(slurm, journal, tmp_path) -> None:
    # killed after the order was written but before the journal said so (phase: offered)
    job = Job(slurm, tmp_path, nodes=3, negotiates=True)
    first = Actuator(slurm, journal)
    first.apply([Shrink(job.id, 1)], jobs(slurm))
    assert phase(journal, job.id) == "offered"
    offer = job.offer()
    job.dir.write_order(
        ResizeOrder(1, first.in_flight[job.id].action, first.in_flight[job.id].target, time.time())
    )
    job.dir.write_offer(offer.model_copy(update={"withdrawn": "accepted"}))
    actuator = Actuator(slurm, Journal(journal.path))
    actuator.recover(slurm.jobs())
    assert phase(actuator.journal, job.id) == "awaiting_vacate"
    job.ack(1, AckStatus.VACATED, tuple(n for n in job.nodes if n not in job.order(1).nodes))
    actuator.poll(jobs(slurm))
    assert len(job.nodes) == 2


def test_an_offer_still_standing_is_awaited_after_a_restart(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=3, negotiates=True)
    Actuator(slurm, journal).apply([Shrink(job.id, 1)], jobs(slurm))
    actuator = Actuator(slurm, Journal(journal.path))
    (line,) = actuator.recover(slurm.jobs())
    assert "awaiting the answer" in line and phase(actuator.journal, job.id) == "offered"
    job.answer(AnswerKind.ACCEPT)
    actuator.poll(jobs(slurm))
    assert phase(actuator.journal, job.id) == "awaiting_vacate"


def test_a_job_that_ended_while_the_controller_was_down(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=3)
    Actuator(slurm, journal).apply([Shrink(job.id, 1)], jobs(slurm))
    slurm.finish(job.id)
    actuator = Actuator(slurm, Journal(journal.path))
    (line,) = actuator.recover(slurm.jobs())
    assert "no longer running" in line and closed(actuator.journal, job.id) == ["job_ended"]
    assert actuator.in_flight == {}


def test_slurm_down_mid_grant_then_a_restart(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2)
    before = job.nodes
    slurm.fail("update_numnodes", down())
    slurm.fail("cancel", down())
    Actuator(slurm, journal).apply([Expand(job.id, 2)], jobs(slurm))
    actuator = Actuator(slurm, Journal(journal.path))  # the controller restarted
    (line,) = actuator.recover(slurm.jobs())
    assert "rolled back" in line and job.nodes == before
    assert slurm.helpers(job.id) == []


@pytest.mark.parametrize("slurm_fails", [False, True])
def test_an_evolving_request_is_answered_only_once_granted(
    slurm, journal, tmp_path, slurm_fails
) -> None:
    from elastic_slurm.controller.observe import Progress

    job = Job(slurm, tmp_path, nodes=2, kind=JobKind.EVOLVING)
    job.dir.write_request(1, 1, 2)
    if slurm_fails:
        slurm.fail("update_numnodes", down())
        slurm.fail("cancel", down())
    actuator = Actuator(slurm, journal)
    progress = {job.id: Progress(evolving_request=1, request_number=1)}
    actuator.apply([Expand(job.id, 1)], jobs(slurm), progress=progress)
    answer = job.dir.request_answer(1)
    if slurm_fails:  # rolled back later: the request stays open
        assert answer is None and phase(journal, job.id) == "granting"
    else:
        assert answer is not None and answer["granted"] and answer["order"] == 1


def test_an_offer_left_unanswered_is_withdrawn(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2, negotiates=True, grace_s=0.01)
    before = job.nodes
    actuator = Actuator(slurm, journal)  # on_overdue: keep
    actuator.apply([Expand(job.id, 2)], jobs(slurm))
    assert len(job.nodes) == 4 and phase(journal, job.id) == "offered"
    time.sleep(0.05)
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.declined and job.nodes == before  # the hosts held for it went back
    assert job.offer().withdrawn and closed(journal, job.id) == ["failed"]


def test_a_shrink_the_job_fails_before_vacating(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=3)
    before = job.nodes
    actuator = Actuator(slurm, journal)
    actuator.apply([Shrink(job.id, 1)], jobs(slurm))
    job.ack(1, AckStatus.FAILED, before, "cannot checkpoint")
    (outcome,) = actuator.poll(jobs(slurm))
    assert not outcome.ok and outcome.message == "cannot checkpoint" and job.nodes == before


def test_an_expansion_never_acknowledged_keeps_its_nodes(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=2, grace_s=0.01)
    actuator = Actuator(slurm, journal, on_overdue="force")  # nothing to force: kept
    actuator.apply([Expand(job.id, 1)], jobs(slurm))
    time.sleep(0.05)
    assert actuator.poll(jobs(slurm)) == []
    (overdue,) = records(journal, "overdue")
    assert overdue["action"] == "keep" and len(job.nodes) == 3
    assert phase(journal, job.id) == "awaiting_done"
    job.ack(1, AckStatus.DONE, job.order(1).nodes)  # a late answer still closes it
    (outcome,) = actuator.poll(jobs(slurm))
    assert outcome.ok


def test_a_shrink_whose_order_was_never_sent_is_closed(slurm, journal, tmp_path) -> None:
    job = Job(slurm, tmp_path, nodes=3)
    first = Actuator(slurm, journal)

    def killed(r) -> None:
        raise KeyboardInterrupt

    first._send_order = killed  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        first.apply([Shrink(job.id, 1)], jobs(slurm))
    actuator = Actuator(slurm, Journal(journal.path))
    (line,) = actuator.recover(slurm.jobs())
    assert "never sent" in line and closed(actuator.journal, job.id) == ["not_sent"]
    assert len(job.nodes) == 3 and changes(slurm) == []


def test_the_controller_runs_a_real_policy_without_a_cluster(journal, tmp_path) -> None:
    # Ghafoor's pending-first policy shrinks a malleable job to start a rigid one
    from elastic_slurm.plugins.policies.pending_first import PendingFirst

    small = FakeSlurm(("n1", "n2", "n3", "n4"))
    elastic = Job(small, tmp_path, nodes=4, lo=1, hi=4)
    tag = ElasticTag(JobKind.RIGID, 2, 2).encode()
    rigid = small.sbatch(["--nodes=2", "--time=60", f"--chdir={tmp_path}", f"--comment={tag}"])
    assert small.store[rigid].state == "PENDING"
    controller = Controller(small, PendingFirst(), journal, min_resize_interval_s=0.0)
    cycle = controller.step()
    assert [type(d).__name__ for d in cycle.decisions] == ["Shrink", "Start"]
    assert records(journal, "refused") == []  # the start counts on the nodes the shrink frees
    order = elastic.order(1)
    assert len(order.nodes) == 2 and small.store[rigid].state == "PENDING"
    elastic.ack(1, AckStatus.VACATED, tuple(n for n in elastic.nodes if n not in order.nodes))
    controller.step()
    assert small.store[rigid].state == "RUNNING" and set(elastic.nodes) == set(order.nodes)
    elastic.ack(1, AckStatus.DONE, order.nodes)
    (outcome,) = controller.step().finished
    assert outcome.ok and closed(journal, elastic.id) == ["done"]


def test_a_hostile_job_directory_does_not_stop_recovery_for_the_others(
    slurm, journal, tmp_path
) -> None:
    import shutil

    good_dir, bad_dir = tmp_path / "good", tmp_path / "bad"
    good_dir.mkdir()
    bad_dir.mkdir()
    good = Job(slurm, good_dir, nodes=2)
    bad = Job(slurm, bad_dir, nodes=2)
    actuator = Actuator(slurm, journal)
    actuator.apply([Expand(good.id, 1), Expand(bad.id, 1)], jobs(slurm))
    assert good.order(1) and bad.order(1)
    # the controller is killed; the bad job's user swaps its orders for a symlink outside
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(bad.dir.path / "orders")
    (bad.dir.path / "orders").symlink_to(outside)
    restarted = Actuator(slurm, Journal(journal.path))
    lines = restarted.recover(slurm.jobs())
    assert any(f"job {good.id} resize 1" in line and "following it" in line for line in lines)
    assert any(f"job {bad.id} resize 1" in line and "unusable" in line for line in lines)
    assert closed(restarted.journal, bad.id) == ["rolled_back"] and len(bad.nodes) == 2
    assert list(outside.iterdir()) == []
    assert phase(restarted.journal, good.id) == "awaiting_done"


def test_a_grant_slurm_cannot_give_is_not_asked_again_every_cycle(journal, tmp_path) -> None:
    # only nodes ahead of the job's batch host are idle: the merge refuses at once, and the
    # controller leaves the job alone for offer_cooldown_s instead of retrying each cycle
    small = FakeSlurm(("n1", "n2", "n3", "n4"))
    first = small.sbatch(["--nodes=2", "--time=60"])
    job = Job(small, tmp_path, nodes=2, lo=1, hi=4)  # n3, n4
    small.cancel(first)
    controller = Controller(
        small, Scripted([Expand(job.id, 1, "grow")]), journal, min_resize_interval_s=0.0
    )
    for _ in range(5):
        controller.step()
    failed = [r for r in journal.records if r["kind"] == "outcome" and r.get("ok") is False]
    assert len(failed) == 1 and "before its batch host" in failed[0]["message"]
    controller.actuator.failed_grants[job.id] -= controller.offer_cooldown_s  # time passes
    controller.step()
    failed = [r for r in journal.records if r["kind"] == "outcome" and r.get("ok") is False]
    assert len(failed) == 2


# ---------------------------------------------------------------------------- weeks of work


def test_a_controller_keeps_only_the_outcomes_its_cool_downs_still_read(journal, tmp_path) -> None:
    # a controller runs for weeks: the resizes it closed must not pile up in its memory (and
    # in every cycle's look at them); each one is still reported by the cycle that closes it
    slurm = FakeSlurm(("n1", "n2", "n3", "n4"))
    policy = Scripted([])
    controller = Controller(slurm, policy, journal, min_resize_interval_s=0.0, offer_cooldown_s=0.0)
    closed: list[ResizeOutcome] = []
    kept = []
    for k in range(30):
        workdir = tmp_path / f"w{k}"
        workdir.mkdir()
        job = Job(slurm, workdir, nodes=2, hi=3)
        policy.decisions = [Expand(job.id, 1, "grow")]
        closed += controller.step().finished
        policy.decisions = []
        job.ack(1, AckStatus.DONE, job.order(1).nodes)
        closed += controller.step().finished
        kept.append(len(controller.actuator.outcomes))
        slurm.cancel(job.id)
    assert [(o.action, o.ok) for o in closed] == [("expand", True)] * 30
    assert max(kept) <= 1  # (30 before: every outcome ever closed)
    # with a cool-down, the outcome just closed is still there for it
    patient = Controller(slurm, policy, Journal(tmp_path / "j2.db"), min_resize_interval_s=0.0)
    workdir = tmp_path / "last"
    workdir.mkdir()
    job = Job(slurm, workdir, nodes=2, hi=3)
    policy.decisions = [Expand(job.id, 1, "grow")]
    patient.step()
    policy.decisions = []
    job.ack(1, AckStatus.DONE, job.order(1).nodes)
    (outcome,) = patient.step().finished
    assert patient.actuator.outcomes == [outcome]


def test_the_actuator_forgets_what_no_later_cycle_reads(slurm, journal) -> None:
    actuator = Actuator(slurm, journal)

    def outcome(job_id: int, finished_at: float) -> ResizeOutcome:
        return ResizeOutcome(job_id, 1, "expand", (), (), True, 1.0, "merge", {}, "", finished_at)

    actuator.outcomes = [outcome(1, 100.0), outcome(2, 200.0)]
    actuator.failed_grants = {1: 100.0, 3: 300.0}
    actuator.not_ordered = {1: "kept: listed", 4: "kept: resizing", 5: "gone"}
    actuator.in_flight[4] = object()  # type: ignore[assignment]
    for job_id in range(200):  # expectations of pending jobs, journaled once per size
        actuator.starts.apply(Start(job_id, 2, "fits"), None)
    journaled = len(records(journal, "decision"))
    actuator.forget({1, 2, 3, 7}, before_s=150.0)
    assert [o.job_id for o in actuator.outcomes] == [2]
    assert actuator.failed_grants == {3: 300.0}
    assert actuator.not_ordered == {1: "kept: listed", 4: "kept: resizing"}
    actuator.starts.apply(Start(7, 2, "fits"), None)  # still listed: known
    assert len(records(journal, "decision")) == journaled
    actuator.starts.apply(Start(9, 2, "fits"), None)  # gone, then listed again: anew
    assert len(records(journal, "decision")) == journaled + 1
