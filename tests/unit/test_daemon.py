"""The controller's loop without a cluster: ``controller/daemon.py`` against a small stub Slurm.

The stub answers ``jobs()``/``nodes()`` from a dict, grows and shrinks by editing it, and
raises :class:`SlurmUnavailableError` on demand (as a backend does when slurmctld does not
answer). The policy is a stub too: it records what it saw and returns what a test says.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from elastic_slurm.adapter.backend import GrowResult
from elastic_slurm.adapter.parse import SlurmJob, SlurmNode
from elastic_slurm.controller import metrics
from elastic_slurm.controller.daemon import Controller
from elastic_slurm.controller.journal import Journal
from elastic_slurm.errors import SlurmCommandError, SlurmUnavailableError
from elastic_slurm.model.decisions import Decision, Expand, Shrink
from elastic_slurm.model.resize_order import ResizeAction, ResizeOrder
from elastic_slurm.model.snapshot import ClusterSnapshot
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.protocol.jobdir import JobDir

pytestmark = pytest.mark.usefixtures("fictional_users")

MALLEABLE = "elastic-slurm:kind=malleable;min=1;max=4"


def _job(job_id: int, nodes: Sequence[str], workdir: str, comment: str = MALLEABLE) -> SlurmJob:
    return SlurmJob(
        job_id=job_id,
        name=f"j{job_id}",
        state="RUNNING",
        nodes=tuple(nodes),
        node_count=len(nodes),
        comment=comment,
        submit_time_s=1.0,
        start_time_s=1.0,  # long ago: not "started too recently"
        batch_host=nodes[0] if nodes else None,
        workdir=workdir,
        user="alice",
        partition="debug",
        account="a",
        qos="normal",
        reason="None",
    )


class StubSlurm:
    """Just enough of a Slurm backend for the loop: jobs, nodes, grow, shrink, cancel."""

    name = "stub"

    def __init__(self, jobs: Sequence[SlurmJob], nodes: int = 4) -> None:
        self.listed = {j.job_id: j for j in jobs}
        self.node_names = [f"n{i}" for i in range(1, nodes + 1)]
        self.down: set[str] = set()  # calls that raise SlurmUnavailableError ("jobs", "nodes")
        self.calls: list[str] = []
        self.on_jobs: Callable[[], None] | None = None

    def _answer(self, op: str) -> None:
        self.calls.append(op)
        if op in self.down:
            raise SlurmUnavailableError(["squeue"], 0, '{"errors": [...]}', "")

    def jobs(self, job_ids: Sequence[int] = ()) -> list[SlurmJob]:
        self._answer("jobs")
        if self.on_jobs is not None:
            self.on_jobs()
        return list(self.listed.values())

    def nodes(self) -> list[SlurmNode]:
        self._answer("nodes")
        used = {n for j in self.listed.values() for n in j.nodes}
        return [SlurmNode(n, "allocated" if n in used else "idle", 1) for n in self.node_names]

    def job(self, job_id: int) -> SlurmJob | None:
        return self.listed.get(job_id)

    def cancel(self, *job_ids: int) -> None:
        self.calls.append("cancel")

    def elastic_nodes(self, job_id: int) -> dict[str, int]:
        return {n: job_id for n in self.listed[job_id].nodes}

    def set_nodes(self, job_id: int, nodes: Sequence[str]) -> None:
        """What ``scontrol update NodeList=`` (or a user's resize) does."""
        j = self.listed[job_id]
        self.listed[job_id] = replace(j, nodes=tuple(nodes), node_count=len(nodes))

    def merge_room(self, job_id: int) -> int:
        used = {n for j in self.listed.values() for n in j.nodes}
        return sum(1 for n in self.node_names if n not in used)

    def grow(self, job_id: int, count: int, **_: Any) -> GrowResult:
        self.calls.append("grow")
        used = {n for j in self.listed.values() for n in j.nodes}
        added = tuple(n for n in self.node_names if n not in used)[:count]
        before = self.listed[job_id].nodes
        self.set_nodes(job_id, (*before, *added))
        return GrowResult("merge", 999, added, (*before, *added), 0.01)

    def shrink(self, job_id: int, keep: Sequence[str]) -> tuple[str, ...]:
        self.calls.append("shrink")
        self.set_nodes(job_id, keep)
        return tuple(keep)


class StubPolicy(Policy):
    """Records each snapshot; decides what ``wants`` returns for it."""

    name = "stub"

    def __init__(self, wants: Callable[[ClusterSnapshot], list[Decision]] | None = None) -> None:
        super().__init__()
        self.seen: list[ClusterSnapshot] = []
        self.wants = wants or (lambda snap: [])

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        self.seen.append(snapshot)
        return self.wants(snapshot)


def _controller(slurm: StubSlurm, policy: Policy, **kw: Any) -> Controller:
    kw.setdefault("min_resize_interval_s", 0.0)
    kw.setdefault("poll_interval_s", 0.01)
    kw.setdefault("slurm_outage_poll_s", 0.01)
    known = inspect.signature(Controller).parameters  # (to run these tests on older code)
    kw = {k: v for k, v in kw.items() if k in known}
    return Controller(slurm, policy, Journal(), **kw)  # type: ignore[arg-type]


def _sample(name: str, labels: dict[str, str] | None = None) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels or {}) or 0.0


def _resizing(snap: ClusterSnapshot) -> set[int]:
    return {v.job_id for v in snap.jobs if v.resizing}


# ---------------------------------------------------------------------- one bad job
def test_a_malformed_request_file_leaves_only_its_job_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad, good = _job(1, ["n1"], str(tmp_path)), _job(2, ["n2"], str(tmp_path))
    path = JobDir.for_job(tmp_path, 1).request_path(1)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    slurm = StubSlurm([bad, good])
    policy = StubPolicy(lambda snap: [Expand(1, 1, "bad wants"), Expand(2, 1, "good wants")])
    controller = _controller(slurm, policy)
    skipped_before = _sample("elastic_slurm_jobs_skipped_total")
    with caplog.at_level(logging.WARNING, "elastic_slurm"):
        cycles = [controller.step() for _ in range(3)]
    assert all(c.skipped == (1,) for c in cycles)
    assert all(1 in _resizing(s) for s in policy.seen)  # the policy leaves it alone
    assert slurm.calls.count("grow") == 1  # the good job's expansion, not the bad one's
    assert len(slurm.listed[2].nodes) == 2 and len(slurm.listed[1].nodes) == 1
    skips = [r for r in controller.journal.records if r["kind"] == "skipped"]
    assert [r["job_id"] for r in skips] == [1]  # once, not every cycle
    assert "job 1 left out" in caplog.text and caplog.text.count("job 1 left out") == 1
    assert _sample("elastic_slurm_jobs_skipped_total") - skipped_before == 3


def test_a_job_whose_acknowledgement_breaks_leaves_the_other_resizes_going(
    tmp_path: Path,
) -> None:
    a, b = _job(1, ["n1"], str(tmp_path)), _job(2, ["n2"], str(tmp_path))
    slurm = StubSlurm([a, b], nodes=6)
    policy = StubPolicy(
        lambda snap: [Expand(j, 1, "x") for j in (1, 2) if j not in _resizing(snap)]
    )
    controller = _controller(slurm, policy)
    controller.step()
    assert set(controller.actuator.in_flight) == {1, 2}
    # job 1 writes garbage where its acknowledgement goes; job 2 acknowledges properly
    acks = JobDir.for_job(tmp_path, 1).path / "acks"
    acks.mkdir(parents=True)
    (acks / "000001.done.json").write_text("[1, 2")
    from elastic_slurm.model.resize_order import AckStatus, ResizeAck

    JobDir.for_job(tmp_path, 2).write_ack(
        ResizeAck(1, AckStatus.DONE, slurm.listed[2].nodes, time.time(), strategy="none")
    )
    cycle = controller.step()
    assert [o.job_id for o in cycle.finished] == [2]
    assert cycle.skipped == (1,)
    assert 1 in controller.actuator.in_flight  # still followed, next cycle again


def test_an_unexpected_error_in_a_cycle_is_logged_and_the_loop_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls = []

    def wants(snap: ClusterSnapshot) -> list[Decision]:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a bug in the policy")
        return []

    controller = _controller(StubSlurm([_job(1, ["n1"], str(tmp_path))]), StubPolicy(wants))
    ok = []
    with caplog.at_level(logging.ERROR, "elastic_slurm"):
        status = controller.run(stop=lambda cycle: ok.append(cycle) or len(ok) == 3)
    assert status == 0 and len(calls) == 4
    assert "a bug in the policy" in caplog.text and "Traceback" in caplog.text
    notes = [r["message"] for r in controller.journal.records if r["kind"] == "note"]
    assert notes == ["cycle failed: a bug in the policy"]


def test_the_loop_gives_up_after_max_failed_cycles_in_a_row(tmp_path: Path) -> None:
    def wants(snap: ClusterSnapshot) -> list[Decision]:
        raise RuntimeError("always broken")

    controller = _controller(
        StubSlurm([_job(1, ["n1"], str(tmp_path))]), StubPolicy(wants), max_failed_cycles=3
    )
    errors_before = _sample("elastic_slurm_cycles_total", {"result": "error"})
    assert controller.run() == 1
    assert _sample("elastic_slurm_cycles_total", {"result": "error"}) - errors_before == 3


# ---------------------------------------------------------------------- durations
def test_a_long_grace_period_does_not_freeze_decisions(tmp_path: Path) -> None:
    # ~347 days: the tag allows it, the site caps it (1 h), and decisions still go on
    sleepy = _job(1, ["n1"], str(tmp_path), MALLEABLE + ";grace=3e7")
    other = _job(2, ["n2"], str(tmp_path))
    slurm = StubSlurm([sleepy, other], nodes=6)
    decided: list[set[int]] = []

    def wants(snap: ClusterSnapshot) -> list[Decision]:
        decided.append(_resizing(snap))
        return [Expand(1, 1, "grow the sleepy one")] if len(decided) == 1 else []

    controller = _controller(slurm, StubPolicy(wants), resize_timeout_s=0.2)
    controller.step()  # job 1 is ordered to grow, and never answers
    assert 1 in controller.actuator.in_flight
    deadline = time.monotonic() + 2.0
    while len(decided) < 2 and time.monotonic() < deadline:
        controller.step()
        time.sleep(0.02)
    assert len(decided) >= 2, "the policy was never asked again while job 1 ignores its order"
    assert 1 in decided[-1]  # and it still leaves job 1 alone


@pytest.mark.parametrize("grace", ["1e7", "3e7"])
def test_a_grace_period_from_a_job_is_bounded(tmp_path: Path, grace: str) -> None:
    job = _job(1, ["n1"], str(tmp_path), MALLEABLE + f";grace={grace}")
    slurm = StubSlurm([job], nodes=4)
    policy = StubPolicy(lambda snap: [] if _resizing(snap) else [Expand(1, 1, "grow")])
    # the cap (max_grace_period_s) applies to long ones: 0.2 s here
    controller = _controller(slurm, policy, max_grace_period_s=0.2, resize_timeout_s=0.2)
    controller.step()
    time.sleep(0.3)
    controller.step()
    overdue = [r for r in controller.journal.records if r["kind"] == "overdue"]
    assert [r["job_id"] for r in overdue] == [1]
    notes = [r["message"] for r in controller.journal.records if r["kind"] == "note"]
    assert len(notes) == 1 and "grace period" in notes[0]


@pytest.mark.parametrize("grace", ["1e12", "inf", "nan", "-5"])
def test_a_grace_period_that_is_no_duration_freezes_nothing(tmp_path: Path, grace: str) -> None:
    # the tag is refused (adapter.tags.decode): the job is not elastic, so the policy's Expand
    # of it is refused by the legality check, and the policy is asked again every cycle
    job = _job(1, ["n1"], str(tmp_path), MALLEABLE + f";grace={grace}")
    slurm = StubSlurm([job], nodes=4)
    policy = StubPolicy(lambda snap: [Expand(1, 1, "grow")])
    controller = _controller(slurm, policy, resize_timeout_s=3600.0)
    for _ in range(3):
        controller.step()
    assert len(policy.seen) == 3
    assert controller.journal.resizes(open_only=True) == []
    refused = [r for r in controller.journal.records if r["kind"] == "refused"]
    assert len(refused) == 3 and all(r["job_id"] == 1 for r in refused)


# ---------------------------------------------------------------------- outages
def test_an_outage_decides_nothing_keeps_resizes_open_and_ends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job = _job(1, ["n1"], str(tmp_path))
    slurm = StubSlurm([job, _job(2, ["n2"], str(tmp_path))], nodes=6)
    policy = StubPolicy(lambda snap: [] if 1 in _resizing(snap) else [Expand(1, 1, "grow")])
    controller = _controller(slurm, policy)
    controller.step()
    assert [r.job_id for r in controller.journal.resizes(open_only=True)] == [1]
    decisions_before = len(policy.seen)
    state: dict[str, Any] = {"outage_cycles": 0, "reachable": []}

    def stop(cycle: Any) -> bool:  # the first cycle after the outage
        state["after"] = cycle
        return True

    # slurmctld stops answering sinfo: squeue's answer alone is half a view
    slurm.down = {"nodes"}

    def watch() -> None:
        deadline = time.monotonic() + 10.0
        while state["outage_cycles"] < 5 and time.monotonic() < deadline:
            state["reachable"].append(_sample("elastic_slurm_slurm_reachable"))
            state["outage_cycles"] = slurm.calls.count("nodes")
            time.sleep(0.005)
        slurm.down = set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with caplog.at_level(logging.WARNING, "elastic_slurm"):
        assert controller.run(stop=stop) == 0
    watcher.join()
    assert len(policy.seen) == decisions_before  # nothing decided (job 1's resize is young)
    assert 1 in {v.job_id for v in state["after"].snapshot.jobs}
    assert slurm.calls.count("grow") == 1
    assert [r.job_id for r in controller.journal.resizes(open_only=True)] == [1]
    outages = [r for r in controller.journal.records if r["kind"] == "outage"]
    assert [r["state"] for r in outages] == ["down", "up"]
    assert caplog.text.count("Slurm unreachable") == 1
    assert caplog.text.count("Slurm reachable again") == 1
    assert 0.0 in state["reachable"]
    assert _sample("elastic_slurm_slurm_reachable") == 1.0
    assert controller.outage_since is None


def test_a_transient_slurm_error_is_an_outage_not_a_failed_cycle(tmp_path: Path) -> None:
    slurm = StubSlurm([_job(1, ["n1"], str(tmp_path))])
    tries = []

    def flaky() -> None:
        tries.append(1)
        if len(tries) <= 30:  # more than max_failed_cycles in a row
            raise SlurmCommandError(["squeue"], 1, "", "Socket timed out", transient=True)

    slurm.on_jobs = flaky
    controller = _controller(slurm, StubPolicy(), max_failed_cycles=2)
    assert controller.run(stop=lambda cycle: True) == 0
    assert len(tries) == 31


# ---------------------------------------------------------------------- manual resizes
def test_a_size_set_by_hand_is_journaled_and_held(tmp_path: Path) -> None:
    slurm = StubSlurm([_job(1, ["n1", "n2"], str(tmp_path))], nodes=4)
    # a policy that always puts the job back to 2 nodes
    policy = StubPolicy(
        lambda snap: [
            Shrink(v.job_id, len(v.nodes) - 2, "back to 2")
            for v in snap.jobs
            if not v.resizing and len(v.nodes) > 2
        ]
    )
    controller = _controller(slurm, policy, manual_hold_s=600.0)
    controller.step()
    slurm.set_nodes(1, ["n1", "n2", "n3"])  # scontrol update, or elastic-slurm resize
    cycle = controller.step()
    assert cycle.observed == (1,)
    for _ in range(3):
        controller.step()
    assert "shrink" not in slurm.calls  # not undone
    assert 1 in _resizing(policy.seen[-1])
    (row,) = controller.journal.resizes()
    assert (row.job_id, row.action, row.by, row.open, row.outcome) == (
        1,
        "expand",
        "user",
        False,
        "observed",
    )
    assert row.before == ("n1", "n2") and row.target == ("n1", "n2", "n3")
    (outcome,) = [r for r in controller.journal.records if r["kind"] == "outcome"]
    assert (outcome["by"], outcome["action"], outcome["ok"]) == ("user", "expand", True)


def test_after_the_hold_the_policy_may_act_again(tmp_path: Path) -> None:
    slurm = StubSlurm([_job(1, ["n1", "n2"], str(tmp_path))], nodes=4)
    policy = StubPolicy()
    controller = _controller(slurm, policy, manual_hold_s=0.1)
    controller.step()
    slurm.set_nodes(1, ["n1"])
    controller.step()
    assert 1 in _resizing(policy.seen[-1])
    time.sleep(0.15)
    controller.step()
    assert 1 not in _resizing(policy.seen[-1])


def test_the_controller_s_own_resizes_are_not_taken_for_a_user_s(tmp_path: Path) -> None:
    slurm = StubSlurm([_job(1, ["n1"], str(tmp_path))], nodes=4)
    policy = StubPolicy(lambda snap: [] if _resizing(snap) else [Expand(1, 1, "grow")])
    controller = _controller(slurm, policy)
    for _ in range(3):
        controller.step()
    assert all(r.by == "policy" for r in controller.journal.resizes())
    assert not [r for r in controller.journal.records if r.get("by") == "user"]


def test_an_order_written_by_elastic_slurm_resize_holds_the_job_and_names_it(
    tmp_path: Path,
) -> None:
    slurm = StubSlurm([_job(1, ["n1", "n2"], str(tmp_path))], nodes=4)
    policy = StubPolicy()
    controller = _controller(slurm, policy, manual_hold_s=0.0)
    controller.step()
    assert 1 not in _resizing(policy.seen[-1])
    # `elastic-slurm resize 1 -N 1` orders the shrink first, then gives the node back
    JobDir.for_job(tmp_path, 1).write_order(
        ResizeOrder(1, ResizeAction.SHRINK, ("n1",), time.time())
    )
    controller.step()
    assert 1 in _resizing(policy.seen[-1])  # left alone while the user's order is followed
    slurm.set_nodes(1, ["n1"])
    controller.step()
    (row,) = controller.journal.resizes()
    assert (row.seq, row.by, row.action) == (1, "user", "shrink")
    assert "elastic-slurm resize" in row.reason


def test_a_decision_repeated_every_cycle_is_logged_and_journaled_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A policy repeats what Slurm has not done yet every 0.5 s; the log says it when new."""
    wants: list[list[Decision]] = (
        [[Expand(1, 1, "idle nodes")]] * 5  # the same wish, cycle after cycle
        + [[Expand(1, 2, "more idle nodes")]] * 2  # a new one
        + [[]]
        + [[Expand(1, 1, "idle nodes")]] * 3  # the first again, after a cycle without it
    )
    slurm = StubSlurm([_job(1, ["n1"], str(tmp_path))])
    policy = StubPolicy(lambda snap: wants[len(policy.seen) - 1])
    controller = _controller(slurm, policy, dry_run=True)
    with caplog.at_level(logging.INFO, "elastic_slurm"):
        cycles = [controller.step() for _ in wants]
    assert [list(c.decisions) for c in cycles] == wants  # every cycle still reports its own
    said = [r.getMessage() for r in caplog.records if "policy stub decided" in r.getMessage()]
    assert said == [
        "policy stub decided: Expand job 1 (idle nodes)",
        "policy stub decided: Expand job 1 (more idle nodes)",
        "policy stub decided: Expand job 1 (idle nodes)",
    ]
    journaled = [
        (r["count"], r["reason"]) for r in controller.journal.records if r["kind"] == "decision"
    ]
    assert journaled == [(1, "idle nodes"), (2, "more idle nodes"), (1, "idle nodes")]
    assert slurm.calls.count("grow") == 0  # a dry run


# ---------------------------------------------------------------------- service
def test_sigterm_finishes_the_cycle_under_way_and_stops(tmp_path: Path) -> None:
    from elastic_slurm.cli.controller import stop_on_signals

    slurm = StubSlurm([_job(1, ["n1"], str(tmp_path))])
    started = threading.Event()

    def slow() -> None:
        started.set()
        time.sleep(0.3)

    slurm.on_jobs = slow
    policy = StubPolicy()
    controller = _controller(slurm, policy, poll_interval_s=60.0)
    threading.Thread(
        target=lambda: started.wait(5) and os.kill(os.getpid(), signal.SIGTERM), daemon=True
    ).start()
    with stop_on_signals(controller):
        t0 = time.monotonic()
        assert controller.run() == 0
    assert time.monotonic() - t0 < 5.0  # did not sleep the 60 s poll interval
    assert slurm.calls == ["jobs", "nodes"] and len(policy.seen) == 1  # the cycle was finished
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers put back


def test_metrics_of_a_cycle_its_decisions_and_resizes(tmp_path: Path) -> None:
    slurm = StubSlurm([_job(1, ["n1"], str(tmp_path))], nodes=4)
    policy = StubPolicy(lambda snap: [] if len(snap.jobs[0].nodes) > 1 else [Expand(1, 1, "x")])
    controller = _controller(slurm, policy)
    before = {
        "ok": _sample("elastic_slurm_cycles_total", {"result": "ok"}),
        "expand": _sample("elastic_slurm_decisions_total", {"kind": "Expand", "legal": "true"}),
        "done": _sample("elastic_slurm_resizes_total", {"action": "expand", "outcome": "done"}),
        "jobs": _sample("elastic_slurm_slurm_call_seconds_count", {"operation": "jobs"}),
        "grow": _sample("elastic_slurm_slurm_call_seconds_count", {"operation": "grow"}),
    }
    controller.run(stop=lambda cycle: True)
    from elastic_slurm.model.resize_order import AckStatus, ResizeAck

    JobDir.for_job(tmp_path, 1).write_ack(
        ResizeAck(
            1, AckStatus.DONE, slurm.listed[1].nodes, time.time(), "none", phases_s={"app": 0.1}
        )
    )
    controller.run(stop=lambda cycle: True)
    after = {
        "ok": _sample("elastic_slurm_cycles_total", {"result": "ok"}),
        "expand": _sample("elastic_slurm_decisions_total", {"kind": "Expand", "legal": "true"}),
        "done": _sample("elastic_slurm_resizes_total", {"action": "expand", "outcome": "done"}),
        "jobs": _sample("elastic_slurm_slurm_call_seconds_count", {"operation": "jobs"}),
        "grow": _sample("elastic_slurm_slurm_call_seconds_count", {"operation": "grow"}),
    }
    assert {k: after[k] - before[k] for k in before} == {
        "ok": 2,
        "expand": 1,
        "done": 1,
        "jobs": 2,
        "grow": 1,
    }
    assert math.isfinite(_sample("elastic_slurm_cycle_seconds_sum"))


def test_a_tag_that_cannot_be_read_leaves_only_its_job_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from elastic_slurm.adapter import tags
    from elastic_slurm.controller import daemon, observe
    from elastic_slurm.errors import JobInputError

    def strict(comment: str | None) -> Any:  # a tag parser that refuses what it cannot read
        if comment and "EVIL" in comment:
            raise JobInputError(None, "its elastic tag is unreadable")
        return tags.decode(comment)

    for module in (observe, daemon):
        monkeypatch.setattr(module, "decode", strict)
    evil = _job(1, ["n1"], str(tmp_path), MALLEABLE + ";speedup=EVIL")
    slurm = StubSlurm([evil, _job(2, ["n2"], str(tmp_path))], nodes=4)
    policy = StubPolicy(lambda snap: [Expand(v.job_id, 1, "grow") for v in snap.jobs][:2])
    controller = _controller(slurm, policy)
    cycle = controller.step()
    assert cycle.skipped == (1,)
    assert {v.job_id for v in cycle.snapshot.jobs} == {1, 2}  # still seen: its nodes are used
    assert 1 in _resizing(cycle.snapshot) and 2 not in _resizing(cycle.snapshot)
    assert len(slurm.listed[1].nodes) == 1 and len(slurm.listed[2].nodes) == 2
    (skip,) = [r for r in controller.journal.records if r["kind"] == "skipped"]
    assert skip["reason"] == "its elastic tag is unreadable"


def test_a_controller_started_during_an_outage_waits_for_slurm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from elastic_slurm.cli.controller import until_slurm_answers
    from elastic_slurm.errors import SlurmUnavailableError

    answers = iter([SlurmUnavailableError(["sinfo"], 1, "", "Unable to contact")] * 3 + ["merge"])

    def probe() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    with caplog.at_level(logging.WARNING):
        assert until_slurm_answers(probe, 0.01) == "merge"
    said = [r.getMessage() for r in caplog.records]
    assert sum("unreachable at start-up" in m for m in said) == 1
    assert sum("reachable again" in m for m in said) == 1


def test_an_unreachable_login_node_is_an_outage_not_a_failed_cycle() -> None:
    from elastic_slurm.controller.daemon import is_outage
    from elastic_slurm.errors import SlurmCommandError

    refused = SlurmCommandError(["ssh", "alice@login:22"], None, "", "", reason="refused")
    assert is_outage(refused)
    # a Slurm command that failed for its own reasons is not an outage
    assert not is_outage(SlurmCommandError(["scontrol", "update"], 1, "", "Invalid job id"))
    assert not is_outage(ValueError("bug"))


def test_the_policy_is_prepared_once_before_the_first_cycle(tmp_path: Path) -> None:
    events: list[str] = []

    class Preparing(StubPolicy):
        def prepare(self) -> None:
            events.append("prepare")

        def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
            events.append("decide")
            return super().decide(snapshot, trigger)

    slurm = StubSlurm([_job(1, ["n1"], str(tmp_path))])
    controller = _controller(slurm, Preparing())
    cycles: list[object] = []
    assert controller.run(stop=lambda cycle: cycles.append(cycle) or len(cycles) == 3) == 0
    assert events == ["prepare", "decide", "decide", "decide"]
