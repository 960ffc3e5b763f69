"""The simulation loop on small hand-worked workloads: schedules, metrics, decision semantics."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from elastic_slurm.errors import InvalidRequest, PolicyError
from elastic_slurm.model import (
    ClusterSnapshot,
    Decision,
    Expand,
    JobKind,
    Shrink,
    Start,
    Trigger,
    TriggerKind,
)
from elastic_slurm.model.estimates import TRUE_RUNTIMES
from elastic_slurm.model.speedup import Linear, LinearResizeCost
from elastic_slurm.plugins.policies.easy_backfill import EasyBackfill
from elastic_slurm.plugins.policies.fcfs import FCFS
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.simulator import (
    EvolvingEvent,
    SimConfig,
    SimJob,
    Simulation,
    SimulationError,
    run,
)
from elastic_slurm.simulator.engine import EventKind, EventQueue
from elastic_slurm.simulator.metrics import compute_metrics, utilization_series

M = JobKind.MALLEABLE
E = JobKind.EVOLVING


def rigid(job_id: int, submit: float, runtime: float, nodes: int, wall: float) -> SimJob:
    return SimJob(job_id, submit, runtime, nodes, walltime_s=wall)


# Four nodes, four rigid jobs (id: submit, run, nodes, time limit):
#   1: 0, 100, 2, 100    2: 10, 50, 4, 60    3: 20, 5, 2, 40    4: 30, 200, 2, 200
FOUR = [rigid(1, 0, 100, 2, 100), rigid(2, 10, 50, 4, 60), rigid(3, 20, 5, 2, 40)]
FOUR.append(rigid(4, 30, 200, 2, 200))


def schedule(result) -> dict[int, tuple[float, float]]:  # noqa: ANN001
    return {r.job_id: (r.start_s, r.end_s) for r in result.records}


def test_easy_schedule_and_metrics_by_hand() -> None:
    # t=0 job 1 starts (2 nodes, ends 100). t=10 job 2 (4 nodes) is blocked; its shadow time is
    # 100 (job 1's estimated end), extra 0. t=20 job 3 (2 nodes, limit 40) ends by 60 <= 100:
    # backfilled, runs 20-25. t=30 job 4 arrives, no idle node. t=25 job 4 is not there yet;
    # at t=30 it needs 2 nodes for 200 s > shadow and 2 > extra: waits. t=100 job 1 ends, job 2
    # starts (100-150). t=150 job 4 starts (150-350).
    result = run(FOUR, EasyBackfill(), nodes=4)
    assert schedule(result) == {
        1: (0, 100),
        2: (100, 150),
        3: (20, 25),
        4: (150, 350),
    }
    m = result.metrics
    # waits 0, 90, 0, 120; turnarounds 100, 140, 5, 320
    assert m.avg_wait_s == pytest.approx(52.5)
    assert m.max_wait_s == 120
    assert m.avg_turnaround_s == pytest.approx(141.25)
    # bounded slowdowns (bound 10 s): 100/100 = 1, 140/50 = 2.8, max(1, 5/10) = 1, 320/200 = 1.6
    assert m.avg_bounded_slowdown == pytest.approx(1.6)
    assert m.bsld_bound_s == 10.0
    # node-seconds 2*100 + 4*50 + 2*5 + 2*200 = 810 over 4 nodes * 350 s
    assert m.makespan_s == 350
    assert m.node_s == 810
    assert m.utilization == pytest.approx(810 / 1400)
    assert (m.expansions, m.shrinks, m.waste_node_s) == (0, 0, 0)
    assert m.jobs == 4 and m.decisions == 4


def test_fcfs_blocks_and_the_bound_matters() -> None:
    # As above, but job 3 waits behind job 2: job 2 runs 100-150, then jobs 3 (150-155) and
    # 4 (150-350) start together. Waits 0, 90, 130, 120. Job 3's bounded slowdown is
    # 135 / max(5, 10) = 13.5 (its plain slowdown would be 27).
    result = run(FOUR, FCFS(), nodes=4)
    assert schedule(result) == {1: (0, 100), 2: (100, 150), 3: (150, 155), 4: (150, 350)}
    m = result.metrics
    assert m.avg_wait_s == pytest.approx(85.0)
    assert m.avg_turnaround_s == pytest.approx((100 + 140 + 135 + 320) / 4)
    assert m.avg_bounded_slowdown == pytest.approx((1 + 2.8 + 13.5 + 1.6) / 4)
    assert m.avg_slowdown == pytest.approx((1 + 2.8 + 27 + 1.6) / 4)
    assert m.max_bounded_slowdown == pytest.approx(13.5)


def test_compute_metrics_with_another_bound_and_no_jobs() -> None:
    records = run(FOUR, FCFS(), nodes=4).records
    m = compute_metrics(records, 4, bound_s=100.0)
    # job 3: 135 / max(5, 100) = 1.35; job 2: 140 / 100 = 1.4; others unchanged
    assert m.avg_bounded_slowdown == pytest.approx((1 + 1.4 + 1.35 + 1.6) / 4)
    empty = compute_metrics([], 4)
    assert (empty.jobs, empty.avg_wait_s, empty.utilization) == (0, 0.0, 0.0)
    with pytest.raises(ValueError, match="bound"):
        compute_metrics(records, 4, bound_s=0)


def test_utilization_series_never_exceeds_the_machine() -> None:
    result = run(FOUR, EasyBackfill(), nodes=4)
    times, values = utilization_series(result.timeline, 4)
    assert times[0] == 0 and values[0] == 0.5
    assert max(values) == 1.0 and values[-1] == 0.0
    assert times == sorted(times)


# --- decision semantics with a scripted policy ----------------------------------------------


@dataclass
class Scripted(Policy):
    """Decisions given by a function of the snapshot; records every call."""

    script: Callable[[ClusterSnapshot, Trigger], list[Decision]]
    calls: list[tuple[float, frozenset[TriggerKind], tuple[int, ...]]] = field(default_factory=list)
    name = "scripted"  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.config = None

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        self.calls.append((snapshot.time_s, trigger.kinds, trigger.job_ids))
        return self.script(snapshot, trigger)


def fcfs_then(extra: Callable[[ClusterSnapshot], list[Decision]]):  # noqa: ANN201
    """FCFS starts after ``extra``'s decisions (evaluated first)."""

    def script(snap: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        decisions = extra(snap)
        free = len(snap.idle_nodes())
        for d in decisions:
            if isinstance(d, Shrink):
                free += d.count
            elif isinstance(d, Expand):
                free -= d.count
        for job in snap.pending():
            if job.nodes_requested > free:
                break
            decisions.append(Start(job.job_id, job.nodes_requested))
            free -= job.nodes_requested
        return decisions

    return script


def malleable(job_id: int, submit: float, runtime: float, nodes: int, lo: int, hi: int, **kw):  # noqa: ANN003, ANN201
    return SimJob(
        job_id,
        submit,
        runtime,
        nodes,
        kind=kw.pop("kind", M),
        nodes_min=lo,
        nodes_max=hi,
        walltime_s=runtime,
        speedup=Linear(),
        **kw,
    )


def test_expansion_pays_its_cost_and_conserves_work() -> None:
    # Job 1: malleable, 100 s on 2 nodes, linear speedup, 2.5 s per node changed. At t=10
    # (job 2 arrives) it is expanded by 2: done 10/100 = 0.1; it computes nothing from 10 to
    # 15 (cost 2 * 2.5), holding 4 nodes; then 0.9 of the work at 4 nodes takes 0.9 * 50 = 45 s:
    # it ends at 60. Node-seconds 2*10 + 4*5 + 4*45 = 220, of which 4*5 = 20 wasted.
    jobs = [
        malleable(1, 0, 100, 2, 1, 8, resize_cost=LinearResizeCost(per_node_s=2.5)),
        rigid(2, 10, 1000, 1, 1000),
    ]

    def expand_at_10(snap: ClusterSnapshot) -> list[Decision]:
        return [Expand(1, 2)] if snap.time_s == 10 else []

    policy = Scripted(fcfs_then(expand_at_10))
    result = Simulation(jobs, policy, 8).run()
    r1 = result.records[0]
    assert (r1.start_s, r1.end_s) == (0, pytest.approx(60.0))
    assert (r1.nodes_start, r1.nodes_end, r1.expansions) == (2, 4, 1)
    assert r1.node_s == pytest.approx(220.0)
    assert r1.waste_node_s == pytest.approx(20.0)
    assert result.records[1].start_s == 10
    # the resize completion is a cycle of its own
    assert (15.0, frozenset({TriggerKind.RESIZE_DONE}), (1,)) in policy.calls
    assert result.metrics.expansions == 1


def test_shrink_frees_nodes_for_a_start_in_the_same_cycle_after_its_cost() -> None:
    # 4 nodes. Job 1 malleable on all 4 (range 2-4), 100 s, 1.5 s per node changed. Job 2
    # (rigid, 2 nodes, 10 s) arrives at 20: the policy shrinks job 1 by 2 and starts job 2. The
    # shrink takes 3 s, so job 2 starts at 23 on the released nodes and ends at 33. Job 1 had
    # done 0.2; it resumes at 23 on 2 nodes, 0.8 * 200 s = 160 s: ends at 183. Job 3 (1 node)
    # arrives at 21, during the shrink: no cycle runs until it completes (23), which then sees
    # both events; no node is free until job 2 ends at 33.
    jobs = [
        malleable(1, 0, 100, 4, 2, 4, resize_cost=LinearResizeCost(per_node_s=1.5)),
        rigid(2, 20, 10, 2, 10),
        rigid(3, 21, 5, 1, 5),
    ]

    def shrink_at_20(snap: ClusterSnapshot) -> list[Decision]:
        return [Shrink(1, 2)] if snap.time_s == 20 else []

    policy = Scripted(fcfs_then(shrink_at_20))
    result = Simulation(jobs, policy, 4).run()
    assert schedule(result) == {
        1: (0, pytest.approx(183.0)),
        2: (23, 33),
        3: (33, 38),
    }
    r1 = result.records[0]
    assert r1.node_s == pytest.approx(4 * 20 + 4 * 3 + 2 * 160)
    assert r1.waste_node_s == pytest.approx(12.0)
    times = [t for t, _, _ in policy.calls]
    assert 21 not in times
    assert (
        23.0,
        frozenset({TriggerKind.RESIZE_DONE, TriggerKind.JOB_SUBMITTED}),
        (1, 3),
    ) in policy.calls


def serve_requests(snap: ClusterSnapshot) -> list[Decision]:
    """Serve every evolving request that fits in the idle nodes."""
    free = len(snap.idle_nodes())
    out: list[Decision] = []
    for job in snap.running():
        if job.evolving_request > 0 and job.evolving_request <= free:
            out.append(Expand(job.job_id, job.evolving_request))
            free -= job.evolving_request
        elif job.evolving_request < 0:
            out.append(Shrink(job.job_id, -job.evolving_request))
    return out


@pytest.mark.parametrize("blocking", [True, False])
def test_evolving_request_blocking_or_lapsing(blocking: bool) -> None:
    # 4 nodes. Job 1 evolving, 100 s on 2 nodes (range 1-4), asks +2 at half its work (t=50).
    # Job 2 rigid on the 2 other nodes until 80. Nothing is free at 50.
    # Blocking: job 1 waits 50-80 (2 nodes * 30 s wasted); at 80 it gets 2 nodes, does the
    # other half on 4 nodes in 25 s: ends at 105.
    # Not blocking: the request lapses at 50 (refused); job 1 goes on at 2 nodes, ends at 100.
    event = EvolvingEvent(at_work=0.5, delta_nodes=2, blocking=blocking)
    jobs = [
        malleable(1, 0, 100, 2, 1, 4, kind=E, evolving=(event,)),
        rigid(2, 0, 80, 2, 80),
    ]
    policy = Scripted(fcfs_then(serve_requests))
    result = Simulation(jobs, policy, 4).run()
    r1 = result.records[0]
    assert (50.0, frozenset({TriggerKind.EVOLVING_REQUEST}), (1,)) in policy.calls
    if blocking:
        assert r1.end_s == pytest.approx(105.0)
        assert r1.waste_node_s == pytest.approx(60.0)
        assert (r1.expansions, r1.requests_refused) == (1, 0)
        assert r1.node_s == pytest.approx(2 * 80 + 4 * 25)
    else:
        assert r1.end_s == pytest.approx(100.0)
        assert (r1.expansions, r1.requests_refused) == (0, 1)
        assert result.metrics.requests_refused == 1


def test_evolving_request_is_clipped_to_the_range_and_shrinks_are_served() -> None:
    # Job 1 evolving on 2 of 1-3 nodes asks +5 (clipped to +1) at 0.25 and -9 (clipped to -2)
    # at 0.5 of its work; the policy serves both. 100 s on 2 nodes: 0.25 at t=25; on 3 nodes
    # the next 0.25 takes 0.25 * 200/3 s; then 0.5 on 1 node takes 100 s.
    events = (EvolvingEvent(0.25, 5), EvolvingEvent(0.5, -9))
    jobs = [malleable(1, 0, 100, 2, 1, 3, kind=E, evolving=events)]
    policy = Scripted(fcfs_then(serve_requests))
    r1 = Simulation(jobs, policy, 4).run().records[0]
    assert (r1.expansions, r1.shrinks, r1.nodes_end) == (1, 1, 1)
    assert r1.end_s == pytest.approx(25 + 0.25 * 200 / 3 + 100)


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("decisions", "message"),
    [
        ([Start(3, 3)], "it needs 3 node(s) but only 2 are idle"),
        ([Start(2, 1)], "a rigid job starts at its requested size, 2"),
        ([Start(9, 1)], "job 9 is not pending"),
        ([Start(2, 2), Start(2, 2)], "job 2 is not pending"),
        ([Expand(1, 1)], "a rigid job cannot be resized"),
        ([Shrink(5, 1)], "job 5 is not running"),
        ([Start(2, 2.0)], "the node count must be an int"),  # type: ignore[arg-type]
        (["start 2"], "this is not a Start, Expand or Shrink"),
    ],
)
def test_a_bad_decision_is_an_error_naming_policy_and_decision(
    decisions: list[Decision], message: str
) -> None:
    # 4 nodes; job 1 (rigid, 2 nodes) runs from 0; jobs 2 and 3 (rigid, 2 and 3 nodes) arrive
    # at 5.
    jobs = [rigid(1, 0, 100, 2, 100), rigid(2, 5, 10, 2, 10), rigid(3, 5, 10, 3, 10)]

    def script(snap: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        if snap.time_s == 0:
            return [Start(1, 2)]
        return list(decisions)

    sim = Simulation(jobs, Scripted(script), 4)
    with pytest.raises(PolicyError) as info:
        sim.run()
    text = str(info.value)
    assert text.startswith("policy 'scripted' decided ")
    assert "at t=5 s" in text
    assert message in text


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (Shrink(1, 3), "the job would have 1 node(s), outside its range 2-6"),
        (Expand(1, 3), "the job would have 7 node(s), outside its range 2-6"),
        (Expand(1, 0), "the count must be at least 1"),
    ],
)
def test_resizes_stay_within_the_range(decision: Decision, message: str) -> None:
    jobs = [malleable(1, 0, 100, 4, 2, 6), rigid(2, 5, 1, 1, 1)]

    def script(snap: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        return [Start(1, 4)] if snap.time_s == 0 else [decision]

    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Simulation(jobs, Scripted(script), 8).run()


def test_two_resizes_of_one_job_in_a_cycle_are_refused() -> None:
    jobs = [malleable(1, 0, 100, 2, 1, 6), rigid(2, 5, 1, 1, 1)]

    def script(snap: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        return [Start(1, 2)] if snap.time_s == 0 else [Expand(1, 1), Expand(1, 1)]

    with pytest.raises(PolicyError, match="already resizing"):
        Simulation(jobs, Scripted(script), 8).run()


def test_an_evolving_job_is_resized_only_to_serve_its_request() -> None:
    jobs = [malleable(1, 0, 100, 2, 1, 6, kind=E), rigid(2, 5, 1, 1, 1)]

    def script(snap: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        return [Start(1, 2)] if snap.time_s == 0 else [Expand(1, 1)]

    with pytest.raises(PolicyError, match=r"it asks for \+0 node"):
        Simulation(jobs, Scripted(script), 8).run()


def test_a_policy_that_never_starts_a_job_is_reported_stuck() -> None:
    jobs = [rigid(1, 0, 10, 1, 10), rigid(2, 3, 10, 2, 10)]
    with pytest.raises(SimulationError, match=r"2 job\(s\) never started, first 1 \(rigid"):
        Simulation(jobs, Scripted(lambda s, t: []), 4).run()


def test_a_policy_that_resizes_for_ever_at_one_instant_is_stopped() -> None:
    # job 2 starts at 10 and ends at 15; from that cycle on, every zero-cost resize of job 1
    # completes at 15 and makes another cycle, which resizes it again
    jobs = [malleable(1, 0, 100, 2, 1, 4), rigid(2, 10, 5, 1, 5)]

    def flip(snap: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        if snap.pending():
            return [Start(j.job_id, j.nodes_requested) for j in snap.pending()]
        job = snap.job(1)
        return [Expand(1, 1)] if job.size == 2 else [Shrink(1, 1)]

    sim = Simulation(jobs, Scripted(flip), 4, config=SimConfig(max_cycles_per_instant=50))
    with pytest.raises(SimulationError, match="made 50 cycles at t=15 s without time advancing"):
        sim.run()


def test_impossible_workloads_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="needs at least 5 node"):
        Simulation([rigid(1, 0, 1, 5, 1)], FCFS(), 4)
    with pytest.raises(ValueError, match="appears twice"):
        Simulation([rigid(1, 0, 1, 1, 1), rigid(1, 2, 1, 1, 1)], FCFS(), 4)
    with pytest.raises(InvalidRequest, match="needs a speedup model"):
        SimJob(1, 0, 1, 2, kind=M, nodes_min=1, nodes_max=4)
    with pytest.raises(InvalidRequest, match="impossible sizes"):
        SimJob(1, 0, 1, 2, kind=M, nodes_min=3, nodes_max=4, speedup=Linear())
    with pytest.raises(InvalidRequest, match="only evolving jobs"):
        SimJob(1, 0, 1, 2, evolving=(EvolvingEvent(0.5, 1),))
    with pytest.raises(InvalidRequest, match="at_work"):
        EvolvingEvent(1.0, 1)
    with pytest.raises(InvalidRequest, match="give the machine size"):
        run([rigid(1, 0, 1, 1, 1)], "fcfs")


def test_periodic_trigger_ticks_while_jobs_remain() -> None:
    jobs = [rigid(1, 0, 25, 1, 25)]
    policy = Scripted(fcfs_then(lambda s: []))
    Simulation(jobs, policy, 2, config=SimConfig(periodic_s=10)).run()
    periodic = [t for t, kinds, _ in policy.calls if TriggerKind.PERIODIC in kinds]
    assert periodic == [0, 10, 20]
    assert policy.calls[-1][0] == 25


def test_unknown_policy_lists_the_known_ones() -> None:
    with pytest.raises(PolicyError, match="known policies: .*easy_backfill.*fcfs"):
        run(FOUR, "no_such_policy", nodes=4)


def test_event_queue_orders_by_time_priority_then_insertion() -> None:
    q = EventQueue()
    q.push(1.0, EventKind.JOB_SUBMIT, "s1")
    q.push(1.0, EventKind.JOB_END, "e1")
    q.push(1.0, EventKind.JOB_SUBMIT, "s2")
    q.push(0.5, EventKind.PERIODIC, "p")
    assert q.pop_batch() == (0.5, [(EventKind.PERIODIC, "p")])
    assert q.pop_batch() == (
        1.0,
        [(EventKind.JOB_END, "e1"), (EventKind.JOB_SUBMIT, "s1"), (EventKind.JOB_SUBMIT, "s2")],
    )
    with pytest.raises(ValueError, match="before now"):
        q.push(0.9, EventKind.JOB_END, "late")


def test_sim_snapshot_behaves_as_the_plain_snapshot() -> None:
    seen: list[ClusterSnapshot] = []

    class Spy(EasyBackfill):
        def decide(self, snapshot, trigger):  # noqa: ANN001, ANN201
            seen.append(snapshot)
            return super().decide(snapshot, trigger)

    jobs = [malleable(1, 0, 30, 2, 1, 4)] + FOUR[1:]
    Simulation(jobs, Spy(), 4).run()
    assert len(seen) > 4
    for snap in seen:
        assert type(snap) is ClusterSnapshot  # no subclass
        plain = ClusterSnapshot(snap.time_s, snap.jobs, snap.nodes, estimates=snap.estimates)
        assert snap.estimates is TRUE_RUNTIMES  # the simulator knows the true run times
        assert plain == snap
        assert plain.jobs == snap.jobs and plain.nodes == snap.nodes
        assert plain.pending() == snap.pending()
        assert plain.running() == snap.running()
        assert plain.idle_nodes() == snap.idle_nodes()
        assert plain.node_count == snap.node_count == len(snap.nodes)
        for job in plain.jobs:
            assert snap.job(job.job_id) == plain.job(job.job_id)
        assert len(snap.idle_nodes()) + sum(j.size for j in snap.running()) == 4


def test_an_injected_empty_queue_is_used_and_a_stray_periodic_event_does_not_crash() -> None:
    class Counting(EventQueue):
        pops = 0

        def pop_batch(self):  # noqa: ANN202
            Counting.pops += 1
            return super().pop_batch()

    queue = Counting()
    sim = Simulation(FOUR, FCFS(), 4, queue=queue)  # no periodic_s
    assert sim.queue is queue
    queue.push(15.0, EventKind.PERIODIC, None)  # e.g. a policy's own wake-up time
    result = sim.run()
    assert Counting.pops > 0
    assert result.records == Simulation(FOUR, FCFS(), 4).run().records


class LoadsOnce(Policy):
    """FCFS whose first ``decide`` loads something slow, unless ``prepare`` did it first."""

    name = "loads_once"  # type: ignore[assignment]
    LOAD_S = 0.3

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []
        self.loaded = False

    def _load(self) -> None:
        if not self.loaded:
            time.sleep(self.LOAD_S)  # a compiled kernel read from Numba's cache, say
            self.loaded = True

    def prepare(self) -> None:
        self.events.append("prepare")
        self._load()

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        self.events.append("decide")
        self._load()
        return fcfs_then(lambda snap: [])(snapshot, trigger)


def test_a_policy_is_prepared_once_before_its_first_cycle_and_out_of_its_timing() -> None:
    policy = LoadsOnce()
    result = Simulation(FOUR, policy, 4).run()
    assert policy.events[0] == "prepare" and policy.events.count("prepare") == 1
    assert policy.events.count("decide") == result.timing.cycles > 1
    # the load is not one cycle's time: "policy time per cycle" is the policy's own
    assert result.timing.max_s < LoadsOnce.LOAD_S


def test_a_stepped_simulation_prepares_its_policy_before_the_first_step_too() -> None:
    # the Klein & Perez reproduction steps a simulation by hand before run()
    policy = LoadsOnce()
    sim = Simulation(FOUR, policy, 4)
    while sim.step():
        pass
    result = sim.run()
    assert policy.events[0] == "prepare" and policy.events.count("prepare") == 1
    assert result.timing.max_s < LoadsOnce.LOAD_S
