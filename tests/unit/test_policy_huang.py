"""Huang et al.'s moldable policies and the fair-share baseline, on cases worked out by hand."""

from __future__ import annotations

import pytest
from snapshots import held_snapshot, job

from elastic_slurm.errors import PolicyError
from elastic_slurm.model import (
    ClusterSnapshot,
    JobKind,
    JobView,
    Start,
    Trigger,
)
from elastic_slurm.model.estimates import TRUE_RUNTIMES, USER_ESTIMATES
from elastic_slurm.model.speedup import Amdahl, DowneyHigh, DowneyLow, Linear
from elastic_slurm.plugins.legality import check
from elastic_slurm.plugins.policies.huang import (
    FairShareConfig,
    HuangConfig,
    HuangMoldable,
    ModifiedFairShare,
    knee,
    parallel_allocation,
    serial_allocation,
    size_range,
)
from elastic_slurm.plugins.registry import make_policy
from elastic_slurm.simulator import SimJob, run

NOW = 1000.0
MOLDABLE = JobKind.MOLDABLE


def pending(job_id: int, runtime_s: float, speedup, requested: int = 4, **kw) -> JobView:  # noqa: ANN001, ANN003
    """A moldable job of range 1..nodes_max whose run time on ``requested`` nodes is given."""
    return job(
        job_id,
        requested,
        kind=kw.pop("kind", MOLDABLE),
        nodes_min=kw.pop("nodes_min", 1),
        nodes_max=kw.pop("nodes_max", 8),
        walltime=kw.pop("walltime_s", 2 * runtime_s),
        runtime_s=runtime_s,
        speedup=speedup,
        **kw,
    )


def running(job_id: int, nodes: tuple[str, ...], ends_in_s: float, **kw) -> JobView:  # noqa: ANN003
    return job(
        job_id,
        kind=kw.pop("kind", JobKind.RIGID),
        running=True,
        names=nodes,
        runtime_s=kw.pop("runtime_s", NOW + ends_in_s),
        end=kw.pop("estimated_end_s", NOW + ends_in_s),
        end_time_s=NOW + ends_in_s,
        **kw,
    )


def snapshot(idle: int, *jobs: JobView) -> ClusterSnapshot:
    idle_names = tuple(f"i{k:02d}" for k in range(idle))
    return held_snapshot(
        *jobs, idle=idle_names, time_s=NOW, sort_nodes=True, estimates=TRUE_RUNTIMES
    )


def starts(policy, snap: ClusterSnapshot) -> list[tuple[int, int]]:  # noqa: ANN001
    decisions = policy.decide(snap, Trigger.periodic())
    assert all(isinstance(d, Start) and d.reason for d in decisions)
    return [(d.job_id, d.nodes) for d in decisions]


def huang(variant: str, **kw) -> HuangMoldable:  # noqa: ANN003
    return HuangMoldable(HuangConfig(variant=variant, **kw))


AMDAHL = Amdahl(0.9)


# ------------------------------------------------------------------ speedup-derived sizes
def test_size_ranges_from_the_speedup_models() -> None:
    # Amdahl p=0.9 keeps speeding up: its best size in 1..8 is 8; its knee, the maximum of
    # S(n)^2/n = n / (0.1 n + 0.9)^2, is at n = p/(1-p) = 9, so 8 within 1..8 and 9 in 1..128.
    assert size_range(pending(1, 100, AMDAHL), "max_speedup") == (1, 8)
    assert size_range(pending(1, 100, AMDAHL), "knee") == (1, 8)
    assert knee(AMDAHL, 1, 128) == 9
    # Downey low variance, A=4, sigma=0.5: T(n) = 1 from n = 2A-1 = 7 on (T(6) = 1.75/6 + 0.75
    # = 1.042), so the best size is 7. Knee: on n <= A, S^2/n grows (S(3)^2/3 = 2.37, S(4)^2/4
    # = (4/1.1875)^2/4 = 2.84); beyond A it falls (S(5) = 4/1.1, S(5)^2/5 = 2.64): knee = A = 4.
    downey = pending(1, 100, DowneyLow(4, 0.5), nodes_max=16)
    assert size_range(downey, "max_speedup") == (1, 7)
    assert size_range(downey, "knee") == (1, 4)
    assert size_range(downey, "none") == (1, 16)
    # Downey high variance, A=4, sigma=2: flat from A + A sigma - sigma = 10 on; the knee
    # maximises n / (2n + 10)^2, at n = 5.
    high = pending(1, 100, DowneyHigh(4, 2.0), nodes_max=16)
    assert size_range(high, "max_speedup") == (1, 10)
    assert size_range(high, "knee") == (1, 5)
    # A rigid job has one size whatever the cap.
    rigid = pending(1, 100, None, requested=3, kind=JobKind.RIGID, nodes_min=3, nodes_max=3)
    assert size_range(rigid, "max_speedup") == (3, 3)


def test_allocation_rules_share_or_serve_in_order() -> None:
    # Parallel: 10 free among ranges 1..128 x 3 -> 4, 3, 3 (the remainder to the first).
    assert parallel_allocation([(1, 128)] * 3, 10) == ([4, 3, 3], 0)
    # More jobs than free nodes: the first 2 get one each.
    assert parallel_allocation([(1, 128)] * 5, 2) == ([1, 1], 0)
    # FCFS: a job whose minimum does not fit stops the ones behind it.
    assert parallel_allocation([(1, 128), (9, 9), (1, 128)], 8) == ([8], 0)
    # Serial: the first job takes what it can use, the next the rest.
    assert serial_allocation([(1, 6), (1, 128), (1, 128)], 8) == ([6, 2], 0)
    assert serial_allocation([(3, 3), (4, 4)], 5) == ([3], 2)


# ------------------------------------------------------------------ HuangMoldable decisions
def test_one_amdahl_job_on_an_idle_8_node_machine_gets_all_8_nodes() -> None:
    # Amdahl p=0.9 speeds up all the way to 8 (S(8) = 1/(0.1 + 0.9/8) = 4.71 > S(7) = 4.38):
    # every variant starts it on the 8 idle nodes (the knee, 9, is beyond the range).
    snap = snapshot(8, pending(1, 100.0, AMDAHL))
    for variant in ("parallel", "serial", "improved", "auxiliary"):
        assert starts(huang(variant), snap) == [(1, 8)], variant


def test_serial_and_parallel_choices_for_two_waiting_jobs() -> None:
    # Two Amdahl jobs wait, 8 idle nodes. Parallel: 8 / 2 = 4 each. Serial: the first all 8.
    snap = snapshot(8, pending(1, 100.0, AMDAHL), pending(2, 100.0, AMDAHL))
    assert starts(huang("parallel"), snap) == [(1, 4), (2, 4)]
    assert starts(huang("serial"), snap) == [(1, 8)]
    # Improved, nothing running: 2 waiting > 0 releases, both share: the parallel choice.
    assert starts(huang("improved"), snap) == [(1, 4), (2, 4)]


def test_serial_gives_what_the_first_job_cannot_use_to_the_next() -> None:
    # Downey low A=2, sigma=0.5: no faster beyond 2A-1 = 3 nodes. 8 idle: job 1 gets 3, job 2
    # (Amdahl) the other 5. Without the cap, the literal rule: job 1 gets all 8.
    snap = snapshot(8, pending(1, 100.0, DowneyLow(2, 0.5)), pending(2, 100.0, AMDAHL))
    assert starts(huang("serial"), snap) == [(1, 3), (2, 5)]
    assert starts(huang("serial", cap_at_max_speedup=False), snap) == [(1, 8)]
    # Parallel: 4 each, but job 1 is capped at 3, so job 2 gets the spare node: 3 and 5 too.
    assert starts(huang("parallel"), snap) == [(1, 3), (2, 5)]


def test_improved_branches_on_waiting_jobs_against_future_releases() -> None:
    # 8 idle nodes; jobs 91, 92 run elsewhere and end at different times (2 releases).
    r1 = running(91, ("r1",), 50.0)
    r2 = running(92, ("r2",), 80.0)
    jobs = [pending(k, 100.0, AMDAHL) for k in (1, 2, 3)]
    # 3 waiting > 2 releases: the first 3 - 2 = 1 job by the parallel policy: all 8 nodes.
    assert starts(huang("improved"), snapshot(8, r1, r2, *jobs)) == [(1, 8)]
    # 2 waiting <= 2 releases: serial branch, the first job gets all 8.
    assert starts(huang("improved"), snapshot(8, r1, r2, *jobs[:2])) == [(1, 8)]
    # The two running jobs end together: 1 release; 3 - 1 = 2 jobs share the 8 nodes.
    r2_same = running(92, ("r2",), 50.0)
    assert starts(huang("improved"), snapshot(8, r1, r2_same, *jobs)) == [(1, 4), (2, 4)]
    # By time limits instead, the same two jobs end at different estimated times: serial-ish
    # again (3 - 2 = 1 job).
    r2_est = running(92, ("r2",), 50.0, estimated_end_s=NOW + 70.0)
    policy = huang("improved", execution_time="walltime")
    assert starts(policy, snapshot(8, r1, r2_est, *jobs)) == [(1, 8)]


def test_improved_spills_nodes_the_chosen_jobs_cannot_use() -> None:
    # Nothing runs; 2 waiting > 0 releases: both share 8 nodes, but each Downey A=2 job is
    # capped at 3 (2A-1): 3 and 3, and no other job waits.
    jobs = [pending(1, 50.0, DowneyLow(2, 0.5)), pending(2, 50.0, DowneyLow(2, 0.5))]
    snap = snapshot(8, *jobs)
    assert starts(huang("improved"), snap) == [(1, 3), (2, 3)]
    # One job runs (1 release), 3 wait: the first 3 - 1 = 2 share the 8 nodes (3 + 3, capped),
    # and the 2 spare nodes go to job 3.
    one_running = snapshot(8, running(91, ("r1",), 10.0), *jobs, pending(3, 50.0, AMDAHL))
    assert starts(huang("improved"), one_running) == [(1, 3), (2, 3), (3, 2)]
    # Two run (2 releases), 2 wait: serial branch: job 1 gets 3 (its cap), job 2 the next 3;
    # no job is left for the other 2 nodes.
    two_running = snapshot(8, running(91, ("r1",), 10.0), running(92, ("r2",), 20.0), *jobs)
    assert starts(huang("improved"), two_running) == [(1, 3), (2, 3)]


def test_auxiliary_stops_at_the_knee_and_rigid_jobs_keep_their_size() -> None:
    # Downey low A=4, sigma=0.5 on 16 idle nodes: knee 4 (see above), so 4, and the next job
    # (rigid, 3 nodes) its 3; serial would give job 1 its best size 7 first.
    jobs = (
        pending(1, 100.0, DowneyLow(4, 0.5), nodes_max=16),
        pending(2, 100.0, None, requested=3, kind=JobKind.RIGID, nodes_min=3, nodes_max=3),
    )
    assert starts(huang("auxiliary"), snapshot(16, *jobs)) == [(1, 4), (2, 3)]
    assert starts(huang("serial"), snapshot(16, *jobs)) == [(1, 7), (2, 3)]
    assert starts(huang("parallel"), snapshot(16, *jobs)) == [(1, 7), (2, 3)]


def test_auxiliary_from_the_users_size_waits_for_it() -> None:
    # Downey low A=2, sigma=0.5: S(n)^2/n rises to A = 2 and falls after (the second branch
    # peaks at sigma (A - 1/2) / (1 - sigma/2) = 1 < A): knee 2. The user asked for 4 nodes.
    # From one node up, the job starts on 2 of the 3 idle nodes; from the user's size up, it
    # needs 4 (its range becomes 4..max(knee, 4) = 4..4) and waits; with 5 idle it gets 4.
    job = pending(1, 100.0, DowneyLow(2, 0.5), requested=4)
    assert starts(huang("auxiliary"), snapshot(3, job)) == [(1, 2)]
    assert starts(huang("auxiliary", auxiliary_min="request"), snapshot(3, job)) == []
    assert starts(huang("auxiliary", auxiliary_min="request"), snapshot(5, job)) == [(1, 4)]


def test_no_idle_node_or_empty_queue_decides_nothing() -> None:
    assert starts(huang("improved"), snapshot(0, pending(1, 10.0, AMDAHL))) == []
    assert starts(huang("parallel"), snapshot(4)) == []
    assert starts(ModifiedFairShare(), snapshot(0, pending(1, 10.0, AMDAHL))) == []


def test_options_are_validated_through_the_registry() -> None:
    policy = make_policy("huang_moldable", {"variant": "serial"})
    assert isinstance(policy, HuangMoldable) and policy.config.variant == "serial"
    assert isinstance(make_policy("huang_fairshare"), ModifiedFairShare)
    with pytest.raises(PolicyError, match="variant must be one of"):
        make_policy("huang_moldable", {"variant": "greedy"})
    with pytest.raises(PolicyError, match="execution_time"):
        make_policy("huang_fairshare", {"execution_time": "guess"})


# ------------------------------------------------------------------ fair share
def test_fair_share_limits_by_square_root_of_sequential_time() -> None:
    # 8 idle nodes, linear jobs: job 1 runs 100 s on 4 nodes, T(1) = 400, sqrt 20; job 2 25 s
    # on 4, T(1) = 100, sqrt 10. Limits: floor(8 * 20/30) = 5 and floor(8 * 10/30) = 2. Job 1
    # completes earliest with 5 nodes now (400/5 = 80 s); job 2 with 2 of the 3 left (50 s).
    # Job 3 is sequential (Downey A = 1: no speedup): limit 1, left out of the sums, so the
    # limits above stand; it takes the last node.
    jobs = [
        pending(1, 100.0, Linear()),
        pending(2, 25.0, Linear()),
        pending(3, 10_000.0, DowneyLow(1, 0.5), requested=1),
    ]
    assert starts(ModifiedFairShare(), snapshot(8, *jobs)) == [(1, 5), (2, 2), (3, 1)]


def test_fair_share_reads_the_estimates_of_each_snapshot_even_for_the_same_queue() -> None:
    # One policy object, two snapshots sharing one pending tuple (as a simulator's do until
    # the queue changes) but not their estimates: job 1's time limit is its run time, job 2's
    # 16 times its run time. By true run times the limits are 5 and 2 (as above); by time
    # limits T(1) is 400 and 1,600 s, sqrt 20 and 40, so they are floor(8 * 20/60) = 2 and 5.
    jobs = (
        pending(1, 100.0, Linear(), walltime_s=100.0),
        pending(2, 25.0, Linear(), walltime_s=400.0),
    )
    idle = tuple(f"i{k:02d}" for k in range(8))

    def snap(estimates: object) -> ClusterSnapshot:
        return ClusterSnapshot.from_parts(NOW, jobs, (), idle, idle, estimates=estimates)

    policy = ModifiedFairShare()
    assert starts(policy, snap(TRUE_RUNTIMES)) == [(1, 5), (2, 2)]
    assert starts(policy, snap(USER_ESTIMATES)) == [(1, 2), (2, 5)]
    assert starts(policy, snap(TRUE_RUNTIMES)) == [(1, 5), (2, 2)]


def test_fair_share_waits_when_waiting_completes_earlier_and_backfills() -> None:
    # 4 nodes; job 91 (1 node, sequential, so out of the sums) ends in 100 s; 3 idle. Job 1:
    # linear, 2000 s on 4 nodes, T(1) = 8000, the only parallel job: limit 4. Now on 3 nodes
    # it ends at +2666.7; at +100 on 4 at +2100: it waits, reservation at +100 with 0 spare.
    # Job 2 (1 node, 50 s) ends by +100: backfilled. Job 3 (1 node, 500 s) would delay it.
    r = running(91, ("r1",), 100.0)
    one = {"kind": JobKind.RIGID, "requested": 1, "nodes_min": 1, "nodes_max": 1}
    jobs = [
        pending(1, 2000.0, Linear(), nodes_max=4),
        pending(2, 50.0, None, **one),
        pending(3, 500.0, None, **one),
    ]
    assert starts(ModifiedFairShare(), snapshot(3, r, *jobs)) == [(2, 1)]
    # Without backfilling nothing starts.
    assert starts(ModifiedFairShare(FairShareConfig(backfill=False)), snapshot(3, r, *jobs)) == []


def test_fair_share_counts_waiting_jobs_in_the_limits() -> None:
    # As above, but job 2 is parallel (linear, 50 s on 1 node: T(1) = 50, sqrt 7.07): the sum
    # is sqrt(8000) + sqrt(50) = 89.44 + 7.07 = 96.51, so job 1's limit is floor(4 * 89.44 /
    # 96.51) = 3: with 3 nodes at most, it completes earliest by starting now on the 3 idle.
    r = running(91, ("r1",), 100.0)
    jobs = [pending(1, 2000.0, Linear(), nodes_max=4), pending(2, 50.0, Linear(), requested=1)]
    assert starts(ModifiedFairShare(), snapshot(3, r, *jobs)) == [(1, 3)]


# ------------------------------------------------------------------ in the simulator
def test_parallel_beats_serial_for_a_poorly_scaling_pair_in_the_simulator() -> None:
    # Two Amdahl p=0.5 jobs arrive at 0 on an idle 8-node machine, each 100 s on 4 nodes.
    # S(4) = 1/(0.5 + 0.125) = 1.6, S(8) = 1/(0.5 + 0.0625) = 1.778.
    # Parallel: 4 nodes each, both end at 100: mean turnaround 100 s.
    # Serial: job 1 on 8 nodes runs 100 * 1.6/1.778 = 90 s, then job 2 90 s more: (90+180)/2
    # = 135 s.
    jobs = [
        SimJob(k, 0.0, 100.0, 4, kind=MOLDABLE, nodes_min=1, nodes_max=8, speedup=Amdahl(0.5))
        for k in (1, 2)
    ]
    par = run(jobs, huang("parallel"), 8)
    ser = run(jobs, huang("serial"), 8)
    assert par.metrics.avg_turnaround_s == pytest.approx(100.0)
    assert ser.metrics.avg_turnaround_s == pytest.approx(135.0)
    assert [(r.nodes_start, r.end_s) for r in ser.records] == [(8, 90.0), (8, 180.0)]


def test_fairshare_does_not_start_a_job_on_the_nodes_of_a_job_past_its_estimate():
    # 3 nodes at t = 1000: job 3 (1 node) should have ended at 1 s but still runs; jobs 1 (1
    # node) and 2 (2 nodes) wait, without time limits. Job 1 starts on one of the 2 idle nodes;
    # job 2 cannot start now (1 idle node): job 3 is expected to end just after now, not now.
    # (Before the fix: Start(2, 2), which the simulator refuses.)
    late = job(3, 1, running=True, walltime=1.0, end=1.0)
    snap = held_snapshot(job(1, 1), job(2, 2), late, idle=2, time_s=NOW)
    decisions = ModifiedFairShare().decide(snap, Trigger.periodic())
    assert [(d.job_id, d.nodes) for d in decisions] == [(1, 1)]
    assert all(v.legal for v in check(snap, decisions))


@pytest.mark.parametrize(
    "make",
    [ModifiedFairShare, lambda: ModifiedFairShare(FairShareConfig(execution_time="walltime"))]
    + [lambda v=v: huang(v) for v in ("parallel", "serial", "improved", "auxiliary")],
)
def test_facts_kept_across_cycles_decide_as_a_fresh_policy_would(make) -> None:  # noqa: ANN001
    # The policies keep what they derive from the queue from cycle to cycle (starts removed,
    # arrivals appended); every decision must be the one a policy seeing only that snapshot
    # makes. 60 moldable and rigid jobs of mixed sizes, models and lengths on 16 nodes.
    models = (Amdahl(0.9), DowneyLow(6, 0.5), DowneyHigh(4, 1.5), Linear(), Amdahl(0.5))
    jobs = [
        SimJob(
            k,
            float(7 * k % 50),
            float(30 + 37 * k % 400),
            1 + k % 5,
            kind=MOLDABLE if k % 3 else JobKind.RIGID,
            nodes_min=1 if k % 3 else 1 + k % 5,
            nodes_max=8 if k % 3 else 1 + k % 5,
            walltime_s=float(60 + 53 * k % 500),
            speedup=models[k % 5] if k % 3 else None,
        )
        for k in range(1, 61)
    ]
    policy = make()
    seen = 0
    kept_decide = policy.decide

    def checked(snap: ClusterSnapshot, trigger: Trigger):  # noqa: ANN202
        nonlocal seen
        decisions = kept_decide(snap, trigger)
        assert decisions == make().decide(snap, trigger)
        seen += len(decisions)
        return decisions

    policy.decide = checked
    result = run(jobs, policy, 16)
    assert seen == len(result.records) == 60
