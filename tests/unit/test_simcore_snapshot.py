"""The snapshot at trace scale: cheap construction, cached selections, views built once.

Issue 17, item 1: ``ClusterSnapshot.from_parts`` replaces the simulator's subclass; the
selections are computed once; the simulator keeps its views incrementally and answers
``job()`` from its own index only while that index still describes the snapshot.
"""

from __future__ import annotations

import dataclasses
import gc

import pytest

from elastic_slurm.model import JobKind
from elastic_slurm.model.estimates import TRUE_RUNTIMES
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState, JobView, NodeState, NodeView
from elastic_slurm.model.speedup import Linear
from elastic_slurm.plugins.policies.easy_backfill import EasyBackfill
from elastic_slurm.plugins.policies.fcfs import FCFS
from elastic_slurm.simulator import SimConfig, SimJob, Simulation, run
from elastic_slurm.simulator.cluster import JobRecord, VirtualCluster


def view(job_id: int, state: JobState, nodes: tuple[str, ...] = (), **kw: object) -> JobView:
    fields = {
        "job_id": job_id,
        "kind": JobKind.RIGID,
        "state": state,
        "nodes": nodes,
        "nodes_requested": 2,
        "nodes_min": 2,
        "nodes_max": 2,
        "submit_time_s": float(job_id),
    }
    fields.update(kw)
    return JobView(**fields)  # type: ignore[arg-type]


def test_from_fields_is_the_same_frozen_view() -> None:
    fields = {
        f.name: getattr(view(7, JobState.RUNNING, ("n1", "n2")), f.name)
        for f in dataclasses.fields(JobView)
    }
    fields["estimated_end_s"] = 12.5
    fast = JobView.from_fields(fields)
    slow = JobView(**fields)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert fast.size == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.nodes = ()  # type: ignore[misc]
    minimal = {
        k: fields[k]
        for k in (
            "job_id",
            "kind",
            "state",
            "nodes",
            "nodes_requested",
            "nodes_min",
            "nodes_max",
            "submit_time_s",
        )
    }
    assert JobView.from_fields(minimal) == JobView(**minimal)  # defaults filled in
    with pytest.raises(TypeError, match="unknown \\['colour'\\]"):
        JobView.from_fields(minimal | {"colour": 1})
    with pytest.raises(TypeError, match="missing \\['state'\\]"):
        JobView.from_fields({k: v for k, v in minimal.items() if k != "state"})


PENDING = (view(2, JobState.PENDING), view(4, JobState.PENDING))
RUNNING = (view(1, JobState.RUNNING, ("n1", "n2")), view(3, JobState.RUNNING, ("n4",)))
NAMES = ("n1", "n2", "n3", "n4", "n5")


def test_a_snapshot_from_parts_equals_the_plain_one_and_builds_jobs_and_nodes_only_if_read() -> (
    None
):
    snap = ClusterSnapshot.from_parts(5.0, PENDING, RUNNING, ("n3", "n5"), NAMES)
    assert type(snap) is ClusterSnapshot
    assert snap.pending() is PENDING and snap.running() is RUNNING
    assert snap.idle_nodes() == ("n3", "n5") and snap.node_count == 5
    assert snap.job(3) is RUNNING[1]
    assert "jobs" not in vars(snap) and "nodes" not in vars(snap)  # nothing assembled yet
    plain = ClusterSnapshot(
        5.0,
        (RUNNING[0], PENDING[0], RUNNING[1], PENDING[1]),
        tuple(
            NodeView(n, NodeState.IDLE if n in ("n3", "n5") else NodeState.ALLOCATED) for n in NAMES
        ),
    )
    assert snap == plain and plain == snap
    assert snap.jobs is snap.jobs  # built once
    assert dataclasses.replace(snap) == plain
    with pytest.raises(KeyError):
        snap.job(99)
    with pytest.raises(AttributeError):
        snap.colour  # noqa: B018
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.time_s = 1.0  # type: ignore[misc]


def test_a_parts_maker_makes_what_from_parts_makes_and_keeps_no_state_between_calls() -> None:
    def lookup(job_id: int) -> JobView | None:
        return None

    make = ClusterSnapshot.parts_maker(NAMES, TRUE_RUNTIMES, starts_known=True)
    first = make(5.0, PENDING, RUNNING, ("n3", "n5"), lookup)
    second = make(6.0, PENDING[1:], RUNNING[:1], ("n2", "n3", "n5"), None)
    for snap, args in (
        (first, (5.0, PENDING, RUNNING, ("n3", "n5"), NAMES, lookup)),
        (second, (6.0, PENDING[1:], RUNNING[:1], ("n2", "n3", "n5"), NAMES, None)),
    ):
        slow = ClusterSnapshot.from_parts(*args, TRUE_RUNTIMES, starts_known=True)  # type: ignore[arg-type]
        assert type(snap) is ClusterSnapshot
        assert vars(snap) == vars(slow) and list(vars(snap)) == list(vars(slow))
        assert snap == slow and snap.starts_known() and snap.pending_and_running_only()
    assert first.time_s == 5.0 and first.pending() is PENDING and first.running() is RUNNING
    assert first.idle_nodes() == ("n3", "n5") and first.job(3) is RUNNING[1]
    assert second.time_s == 6.0 and second.pending() == PENDING[1:]
    assert second.running() == RUNNING[:1] and second.idle_nodes() == ("n2", "n3", "n5")
    with pytest.raises(KeyError):
        second.job(3)  # not running in the second snapshot: no state shared with the first
    assert first.job(3) is RUNNING[1]


def test_the_plain_snapshot_computes_each_selection_once() -> None:
    snap = ClusterSnapshot(1.0, RUNNING + PENDING, ())
    assert snap.pending() is snap.pending() and snap.running() is snap.running()
    assert snap.idle_nodes() is snap.idle_nodes()
    assert [j.job_id for j in snap.pending()] == [2, 4]
    assert snap.job(4) is PENDING[1]


def test_a_lookup_is_asked_first_and_given_up_once_it_cannot_answer() -> None:
    asked: list[int] = []
    valid = [True]

    def lookup(job_id: int) -> JobView | None:
        asked.append(job_id)
        return {2: PENDING[0]}[job_id] if valid[0] else None

    snap = ClusterSnapshot.from_parts(0.0, PENDING, RUNNING, (), NAMES, lookup)
    assert snap.job(2) is PENDING[0]
    with pytest.raises(KeyError):
        snap.job(99)
    valid[0] = False
    assert snap.job(4) is PENDING[1]  # answered from the snapshot's own views
    assert snap.job(1) is RUNNING[0]
    assert asked == [2, 99, 4]  # not asked again once it said it cannot answer


def rigid(job_id: int, submit: float, runtime: float, nodes: int) -> SimJob:
    return SimJob(job_id, submit, runtime, nodes, walltime_s=runtime + 10)


JOBS = [rigid(i, float(i), 30.0 + 7 * (i % 5), 1 + i % 3) for i in range(1, 41)]


def test_old_snapshots_keep_their_views_after_the_cluster_changes() -> None:
    kept: list[tuple[ClusterSnapshot, dict[int, JobView]]] = []

    class Spy(EasyBackfill):
        def decide(self, snapshot, trigger):  # noqa: ANN001, ANN201
            jobs = snapshot.pending() + snapshot.running()
            assert all(snapshot.job(j.job_id) is j for j in jobs)  # the simulator's index
            kept.append((snapshot, {j.job_id: j for j in jobs}))
            return super().decide(snapshot, trigger)

    malleable = SimJob(99, 0.5, 50.0, 2, JobKind.MALLEABLE, 1, 4, 60.0, speedup=Linear())
    Simulation([*JOBS, malleable], Spy(), 4).run()
    assert len(kept) > 40
    for snap, seen in kept:  # every one of them changed since: answered from its own views
        for job_id, seen_view in seen.items():
            assert snap.job(job_id) == seen_view
        assert {j.job_id for j in snap.jobs} == set(seen)


def test_each_job_gets_one_pending_view_and_at_most_one_running_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[int] = []
    pending, running = VirtualCluster._pending_view, VirtualCluster._running_view

    def counting_pending(self, job):  # noqa: ANN001, ANN202
        view = pending(self, job)
        built.append(view.job_id)
        return view

    def counting_running(self, job, now_s):  # noqa: ANN001, ANN202
        view = running(self, job, now_s)
        built.append(view.job_id)
        return view

    monkeypatch.setattr(VirtualCluster, "_pending_view", counting_pending)
    monkeypatch.setattr(VirtualCluster, "_running_view", counting_running)
    # the general loop (FCFS on rigid jobs would otherwise run compiled, with no snapshot)
    result = Simulation(JOBS, FCFS(), 4, config=SimConfig(engine="general")).run()
    assert result.metrics.cycles > len(JOBS)  # many cycles ...
    # ... but a job's pending view is built when it arrives and its running view at most
    # once, at the first snapshot while it runs (none if it ends before the next one)
    assert all(1 <= built.count(j.job_id) <= 2 for j in JOBS)
    assert len(built) <= 2 * len(JOBS)


def test_records_hold_every_field_of_a_job_record() -> None:
    record = run(JOBS[:3], "fcfs", nodes=4).records[0]
    assert set(vars(record)) == {f.name for f in dataclasses.fields(JobRecord)}
    assert dataclasses.replace(record) == record


def test_records_come_by_submission_time_then_id_whatever_order_jobs_end_in() -> None:
    # ties in submission time with ids out of order, given out of order, ending in another
    # order (long jobs first): the records are placed by arrival rank, as a sort would order
    jobs = [
        rigid(5, 0.0, 90.0, 1),
        rigid(3, 0.0, 10.0, 1),
        rigid(9, 2.0, 5.0, 2),
        rigid(1, 2.0, 70.0, 1),
        rigid(4, 1.0, 20.0, 1),
    ]
    sim = Simulation(jobs, FCFS(), 4, config=SimConfig(engine="general"))
    result = sim.run()
    ended = [r.job_id for r in sim.cluster.records]
    expected = sorted(sim.cluster.records, key=lambda r: (r.submit_s, r.job_id))
    assert ended != [r.job_id for r in expected]  # they did not end in submission order
    assert sim.cluster.records_by_submission() == expected
    assert [r.job_id for r in result.records] == [3, 5, 4, 1, 9]


def test_the_cyclic_collector_is_paused_during_a_run_and_restored() -> None:
    states: list[bool] = []

    class Spy(FCFS):
        def decide(self, snapshot, trigger):  # noqa: ANN001, ANN201
            states.append(gc.isenabled())
            return super().decide(snapshot, trigger)

    assert gc.isenabled()
    run(JOBS, Spy(), nodes=4)
    Simulation(JOBS, Spy(), 4).run()
    assert states and not any(states)
    assert gc.isenabled()
    gc.disable()
    try:
        Simulation(JOBS, Spy(), 4).run()
        assert not gc.isenabled()  # left as it was
    finally:
        gc.enable()
