"""LinaElastic (Lina, Ghafoor and Hines, section 4): hand-worked schedules for each algorithm."""

from __future__ import annotations

import pytest
from snapshots import held_snapshot, job

from elastic_slurm.errors import PolicyError
from elastic_slurm.model import (
    ClusterSnapshot,
    Expand,
    JobKind,
    JobView,
    Shrink,
    Start,
    Trigger,
)
from elastic_slurm.model.estimates import TRUE_RUNTIMES
from elastic_slurm.model.speedup import LinaResizeCost
from elastic_slurm.plugins.policies.lina import LinaElastic
from elastic_slurm.plugins.registry import make_policy

M = JobKind.MALLEABLE
R = JobKind.RIGID
E = JobKind.EVOLVING
NOW = 1000.0


# --- helpers -------------------------------------------------------------------------------


def pending(
    job_id: int,
    size: int,
    *,
    kind: JobKind = R,
    nmin: int | None = None,
    nmax: int | None = None,
    runtime: float = 1000.0,
) -> JobView:
    """A pending job asking for ``size`` nodes, submitted at ``job_id`` s, running ``runtime``."""
    return job(
        job_id, size, kind=kind, nodes_min=nmin, nodes_max=nmax, walltime=runtime, runtime_s=runtime
    )


def running(
    job_id: int,
    size: int,
    nmin: int,
    nmax: int,
    *,
    kind: JobKind = M,
    started: float = 0.0,
    ends: float = NOW + 10_000.0,
    gain: int = 0,
    expansions: int = 0,
    request: int = 0,
    cost: LinaResizeCost | None = None,
) -> JobView:
    """A running job on ``size`` nodes that the simulator predicts to end at ``ends`` s."""
    return job(
        job_id,
        size,
        kind=kind,
        running=True,
        nodes_min=nmin,
        nodes_max=nmax,
        start=started,
        end=ends,
        end_time_s=ends,
        gain_nodes=gain,
        expansions=expansions,
        request=request,
        blocking=False,
        resize_cost=cost,
    )


def snapshot(idle: int, *jobs: JobView) -> ClusterSnapshot:
    return held_snapshot(*jobs, idle=idle, time_s=NOW, estimates=TRUE_RUNTIMES)


def decide(snap: ClusterSnapshot, **options: object) -> list[tuple[str, int, int]]:
    """Run the policy; the decisions as ``(kind, job_id, count)`` for exact comparison."""
    decisions = LinaElastic.from_options(options).decide(snap, Trigger.periodic())
    out = []
    for d in decisions:
        assert d.reason, f"decision without a reason: {d}"
        match d:
            case Start(job_id=j, nodes=n):
                out.append(("start", j, n))
            case Expand(job_id=j, count=n):
                out.append(("expand", j, n))
            case Shrink(job_id=j, count=n):
                out.append(("shrink", j, n))
    return out


# Two running malleable jobs and a rigid one, 2 idle nodes, 17 in all:
#   job 1: 6 nodes of 2-8, gained 3 nodes so far, ends at NOW + 1000 (can give 4, take 2)
#   job 2: 5 nodes of 1-8, gained nothing, ends at NOW + 500       (can give 4, take 3)
#   job 3: rigid, 4 nodes, ends at NOW + 10000
# Pending rigid job 10 asks for 7 nodes: 2 idle, so 5 must come from shrinking.
def base(*, rigid_ends: float = NOW + 10_000.0, job1_started: float = 0.0) -> list[JobView]:
    return [
        running(1, 6, 2, 8, gain=3, ends=NOW + 1000.0, started=job1_started),
        running(2, 5, 1, 8, ends=NOW + 500.0),
        running(3, 4, 4, 4, kind=R, ends=rigid_ends),
        pending(10, 7),
    ]


# --- Default (Algorithm 5) -----------------------------------------------------------------


def test_default_gain_shrinks_the_highest_gain_first_then_the_next() -> None:
    # EASY: job 10 (7) does not fit in 2 idle -> head; nothing behind it. Algorithm 4:
    # shortfall 7 - 2 = 5. Gain order: job 1 (gain 3) gives all it can, 4 (6 -> 2); 1 still
    # needed, job 2 (gain 0) gives 1 (5 -> 4). Start job 10 on 2 idle + 5 released = 7.
    # No idle node is left, so nothing expands. Shrinks come first.
    assert decide(snapshot(2, *base()), priority="gain") == [
        ("shrink", 1, 4),
        ("shrink", 2, 1),
        ("start", 10, 7),
    ]


def test_default_shrinkable_takes_the_job_with_most_nodes_above_its_minimum() -> None:
    # Job 2 now holds 7 of 1-8: it can give 6, job 1 only 4 (6 of 2-8). Shrinkable order:
    # job 2 first, and its 6 cover the shortfall of 5 alone -> shrink job 2 by 5, start 10.
    # (With 17 + 2 = 19 nodes the snapshot is different from base(), so build it here.)
    jobs = [
        running(1, 6, 2, 8, gain=3),
        running(2, 7, 1, 8),
        running(3, 4, 4, 4, kind=R),
        pending(10, 7),
    ]
    assert decide(snapshot(2, *jobs), priority="shrinkable") == [
        ("shrink", 2, 5),
        ("start", 10, 7),
    ]
    # The gain priority on the same snapshot still goes to job 1 first: 4 from job 1, 1 from 2.
    assert decide(snapshot(2, *jobs), priority="gain") == [
        ("shrink", 1, 4),
        ("shrink", 2, 1),
        ("start", 10, 7),
    ]


def test_remaining_priority_shrinks_the_job_ending_soonest_first() -> None:
    # Remaining run time: job 2 ends in 500 s, job 1 in 1000 s -> job 2 gives 4 (5 -> 1),
    # job 1 gives the last 1 (6 -> 5).
    assert decide(snapshot(2, *base()), priority="remaining") == [
        ("shrink", 2, 4),
        ("shrink", 1, 1),
        ("start", 10, 7),
    ]


def test_cost_priority_shrinks_the_cheapest_resize_first() -> None:
    # Job 1's cost of giving 4 nodes (6 -> 2): 1.0 * 4 + 0 + 0 = 4 s; job 2's (5 -> 1):
    # 0.1 * 4 = 0.4 s -> job 2 first, gives 4; job 1 gives the last 1.
    jobs = base()
    jobs[0] = running(1, 6, 2, 8, gain=3, cost=LinaResizeCost(alpha_s=1.0))
    jobs[1] = running(2, 5, 1, 8, cost=LinaResizeCost(alpha_s=0.1))
    assert decide(snapshot(2, *jobs), priority="cost") == [
        ("shrink", 2, 4),
        ("shrink", 1, 1),
        ("start", 10, 7),
    ]


def test_no_shrink_when_the_malleable_jobs_cannot_cover_the_shortfall() -> None:
    # Job 10 asks for 12: shortfall 10 > 4 + 4 that jobs 1 and 2 can give -> all or nothing:
    # no shrink, job 10 waits. The 2 idle nodes expand a malleable job, the longest remaining
    # run time first: job 1 (1000 s left) takes 2 (6 -> 8, its maximum).
    jobs = base()
    jobs[3] = pending(10, 12)
    assert decide(snapshot(2, *jobs)) == [("expand", 1, 2)]


def test_a_later_job_starts_when_the_shrinks_just_cover_it_and_the_queue_is_reread() -> None:
    # No idle node; jobs 1 and 2 can give 4 each, 8 in all. Job 10 (12) and job 11 (10) are
    # passed over (shortfall above 8). One policy object sees two queues: without job 12,
    # nothing starts; with job 12 (8 = what the shrinks give), it starts on 4 + 4 released.
    policy = LinaElastic()
    held = [running(1, 6, 2, 8, gain=3, ends=NOW + 1000.0), running(2, 5, 1, 8, ends=NOW + 500.0)]
    first = snapshot(0, *held, pending(10, 12), pending(11, 10))
    assert policy.decide(first, Trigger.periodic()) == []
    second = snapshot(0, *held, pending(10, 12), pending(11, 10), pending(12, 8))
    decisions = policy.decide(second, Trigger.periodic())
    assert [(type(d).__name__, d.job_id) for d in decisions] == [
        ("Shrink", 1),
        ("Shrink", 2),
        ("Start", 12),
    ]
    assert [d.count for d in decisions[:2]] == [4, 4] and decisions[2].nodes == 8


# --- Application (Algorithm 6) -------------------------------------------------------------


def test_application_waits_for_a_job_about_to_end_instead_of_shrinking() -> None:
    # Rigid job 3 ends within t = 5 s (at NOW + 4) -> Algorithm 6 shrinks nothing; job 10
    # waits. The 2 idle nodes go to job 1 (longest remaining, 1000 s): expand by 2.
    snap = snapshot(2, *base(rigid_ends=NOW + 4.0))
    assert decide(snap, shrink_selection="application") == [("expand", 1, 2)]
    # Default does not look: it shrinks as in the first test.
    assert decide(snap, shrink_selection="default")[-1] == ("start", 10, 7)


def test_application_spares_jobs_nearly_done() -> None:
    # Job 1 started at NOW - 19000 and ends at NOW + 1000: 95 % done >= x = 90 % -> spared.
    # Job 2 alone can give 4 < 5 -> nothing is shrunk. Expansion, longest remaining first:
    # job 1 (1000 s) takes 2.
    snap = snapshot(2, *base(job1_started=NOW - 19_000.0))
    assert decide(snap, shrink_selection="application") == [("expand", 1, 2)]
    # With x = 99 % job 1 (95 % done) may be shrunk again: the gain order of the first test.
    assert decide(snap, shrink_selection="application", done_fraction_max=0.99) == [
        ("shrink", 1, 4),
        ("shrink", 2, 1),
        ("start", 10, 7),
    ]


# --- System (Algorithm 7) ------------------------------------------------------------------


def test_system_does_not_shrink_above_the_utilisation_threshold() -> None:
    # 15 of 17 nodes in use: 88 % > u = 80 % -> no shrink; job 1 takes the 2 idle nodes.
    snap = snapshot(2, *base())
    assert decide(snap, shrink_selection="system") == [("expand", 1, 2)]
    # As printed, Algorithm 7 refuses only if a job also ends within t: none does here, so
    # it shrinks as Default does.
    assert decide(snap, shrink_selection="system", system_requires_ending_job=True) == [
        ("shrink", 1, 4),
        ("shrink", 2, 1),
        ("start", 10, 7),
    ]


def test_system_shrinks_below_the_threshold() -> None:
    # 6 idle: 15 of 21 in use, 71 % <= 80 %. Job 10 asks for 7: shortfall 1, from job 1
    # (highest gain). Start 10 on 6 idle + 1.
    assert decide(snapshot(6, *base()), shrink_selection="system") == [
        ("shrink", 1, 1),
        ("start", 10, 7),
    ]


# --- evolving requests (Algorithm 2) --------------------------------------------------------


def test_evolving_request_comes_before_pending_jobs_and_shrinks_malleable_jobs() -> None:
    # Evolving job 4 (4 nodes of 2-32) asks for +6 with 2 idle: shortfall 4, from job 1
    # (gain 3) which gives 4 -> shrink 1 by 4, expand 4 by 6. No node is left for pending
    # job 10 (7): it cannot be covered any more (job 1 can give 0, job 2 4 < 7) and waits.
    jobs = [*base(), running(4, 4, 2, 32, kind=E, request=6)]
    assert decide(snapshot(2, *jobs)) == [("shrink", 1, 4), ("expand", 4, 6)]


def test_evolving_release_frees_nodes_for_a_pending_job() -> None:
    # Evolving job 4 (4 nodes of 2-32) gives back 3, capped at its minimum: 2. Free nodes:
    # 2 idle + 2 = 4 < 7 for job 10: shortfall 3, from job 1 (gain) -> shrink 1 by 3.
    jobs = [*base(), running(4, 4, 2, 32, kind=E, request=-3)]
    assert decide(snapshot(2, *jobs)) == [
        ("shrink", 4, 2),
        ("shrink", 1, 3),
        ("start", 10, 7),
    ]


def test_evolving_request_that_cannot_be_met_is_refused_or_partly_granted() -> None:
    # Job 4 asks for +12 with 2 idle; jobs 1 and 2 could give 8 < 10 -> refused. Pending job
    # 10 (7) then takes the 2 idle + 5 shrunk, as in the first test.
    jobs = [*base(), running(4, 4, 2, 32, kind=E, request=12)]
    assert decide(snapshot(2, *jobs)) == [
        ("shrink", 1, 4),
        ("shrink", 2, 1),
        ("start", 10, 7),
    ]
    # With partial_evolving the 2 idle nodes go to job 4 first; job 10 then needs all 7 from
    # jobs that can give 8: job 1 gives 4, job 2 gives 3.
    assert decide(snapshot(2, *jobs), partial_evolving=True) == [
        ("shrink", 1, 4),
        ("shrink", 2, 3),
        ("expand", 4, 2),
        ("start", 10, 7),
    ]


# --- initial allocation (Algorithm 3) and Algorithm 4's malleable starts ---------------------


def test_easy_backfilling_around_the_head_reservation() -> None:
    # 4 idle; rigid job 3 (4 nodes) ends at NOW + 100. Head job 10 (6) does not fit; its
    # shadow time is NOW + 100 with 4 + 4 - 6 = 2 extra nodes. Job 11 (2 nodes, 50 s) ends
    # before the shadow time: backfilled. Job 12 (2 nodes, 500 s) ends after it but fits in
    # the 2 extra nodes: backfilled. Job 13 (1 node) finds no idle node left.
    jobs = [
        running(3, 4, 4, 4, kind=R, ends=NOW + 100.0),
        pending(10, 6),
        pending(11, 2, runtime=50.0),
        pending(12, 2, runtime=500.0),
        pending(13, 1),
    ]
    assert decide(snapshot(4, *jobs)) == [("start", 11, 2), ("start", 12, 2)]
    # Algorithm 3 as printed (first fit, no reservation) starts 11 and 12 too: same here.
    assert decide(snapshot(4, *jobs), initial_allocation="first_fit") == [
        ("start", 11, 2),
        ("start", 12, 2),
    ]


def test_easy_does_not_backfill_a_job_that_would_delay_the_head() -> None:
    # As above (shadow NOW + 100, 2 extra nodes) but job 12 asks for 3: it does not fit in
    # the 2 idle nodes left after job 11. Job 13 (1 node, 1000 s) ends after the shadow time
    # but takes 1 of the 2 extra nodes (job 11 ends before the shadow, so uses none of them).
    jobs = [
        running(3, 4, 4, 4, kind=R, ends=NOW + 100.0),
        pending(10, 6),
        pending(11, 2, runtime=50.0),
        pending(12, 3, runtime=500.0),
        pending(13, 1),
    ]
    assert decide(snapshot(4, *jobs)) == [("start", 11, 2), ("start", 13, 1)]
    # First fit ignores the reservation: 11 (2) then 12 does not fit in 2, 13 (1) does.
    assert decide(snapshot(4, *jobs), initial_allocation="first_fit") == [
        ("start", 11, 2),
        ("start", 13, 1),
    ]


def test_pending_malleable_job_starts_at_its_minimum() -> None:
    # 3 idle; malleable job 10 asks for 6 (range 3-12): no fit at 6 (Algorithm 3). Algorithm
    # 4: its minimum 3 fits in the idle nodes -> start on 3, nothing shrunk.
    jobs = [running(1, 6, 2, 8), pending(10, 6, kind=M, nmin=3, nmax=12)]
    assert decide(snapshot(3, *jobs)) == [("start", 10, 3)]
    # 1 idle: shortfall 3 - 1 = 2 from job 1 (6 of 2-8) -> shrink 2, start on its minimum 3.
    assert decide(snapshot(1, *jobs)) == [("shrink", 1, 2), ("start", 10, 3)]


# --- random priority and options -------------------------------------------------------------


def test_random_priority_is_a_function_of_seed_and_snapshot() -> None:
    # Six malleable jobs of 4 nodes (1-4 each: each can give 3); job 10 asks for 3 with no
    # idle node: exactly one job gives 3, the first of the random order.
    jobs = [running(i, 4, 1, 4) for i in range(1, 7)] + [pending(10, 3)]
    snap = snapshot(0, *jobs)
    victims = set()
    for seed in range(12):
        first = decide(snap, priority="random", seed=seed)
        assert first == decide(snap, priority="random", seed=seed)  # same seed, same choice
        assert len(first) == 2 and first[0][0] == "shrink" and first[0][2] == 3
        victims.add(first[0][1])
    assert len(victims) > 1  # the seed matters


def test_registry_and_options() -> None:
    policy = make_policy("lina_elastic", {"shrink_selection": "system", "priority": "cost"})
    assert isinstance(policy, LinaElastic)
    assert policy.config.utilization_threshold == 0.8 and policy.config.ending_window_s == 5.0
    with pytest.raises(PolicyError, match="priority must be one of random, gain"):
        LinaElastic.from_options({"priority": "fastest"})
    with pytest.raises(PolicyError, match="utilization_threshold is a fraction"):
        LinaElastic.from_options({"utilization_threshold": 80})


def test_nothing_to_do() -> None:
    assert decide(snapshot(4)) == []
    # Idle nodes and only rigid jobs running: nothing to expand.
    assert decide(snapshot(4, running(3, 4, 4, 4, kind=R))) == []


def test_no_idle_node_starts_only_what_the_shrinks_can_cover() -> None:
    # No idle node; jobs 1 and 2 can give 4 each, 8 in all. Evolving job 10 asks for 9 (its
    # p_r; its minimum of 2 does not count): nothing starts, however small that minimum.
    policy = LinaElastic()
    held = [running(1, 6, 2, 8, gain=3, ends=NOW + 1000.0), running(2, 5, 1, 8, ends=NOW + 500.0)]
    evolving = pending(10, 9, kind=E, nmin=2, nmax=12)
    assert policy.decide(snapshot(0, *held, evolving), Trigger.periodic()) == []
    # Malleable job 11 (minimum 8) fits in what the shrinks give: it starts at 8.
    malleable = pending(11, 10, kind=M, nmin=8, nmax=12)
    assert decide(snapshot(0, *held, evolving, malleable)) == [
        ("shrink", 1, 4),
        ("shrink", 2, 4),
        ("start", 11, 8),
    ]
    # A running evolving job gives back 2 nodes with no idle node (Algorithm 2): with the 8
    # the malleable jobs can give, job 10 starts at 9 (job 1 gives 4, job 2 the 3 left).
    giving = running(4, 4, 2, 6, kind=E, request=-2)
    assert decide(snapshot(0, *held, giving, evolving)) == [
        ("shrink", 4, 2),
        ("shrink", 1, 4),
        ("shrink", 2, 3),
        ("start", 10, 9),
    ]


def test_queue_minimum_follows_a_queue_that_grows_and_shrinks():
    """The cached minima equal a fresh reading of every queue, whether jobs came or went."""
    import random

    from elastic_slurm.plugins.policies.lina import _QueueMinimum, _start_range

    rng = random.Random(7)
    kinds = (R, M, JobKind.MOLDABLE, E)
    queue: tuple[JobView, ...] = ()
    minimum = _QueueMinimum()
    next_id = 1
    grew = 0
    for _ in range(400):
        if queue and rng.random() < 0.4:  # jobs start: from the head, or anywhere
            k = rng.randrange(len(queue))
            queue = queue[1:] if rng.random() < 0.5 else queue[:k] + queue[k + 1 :]
        else:  # jobs arrive at the end, in submission order
            added = []
            for _ in range(rng.randint(1, 3)):
                size = rng.randint(1, 64)
                low = rng.randint(0, size)
                kind = rng.choice(kinds)
                added.append(pending(next_id, size, kind=kind, nmin=low, nmax=size + 5))
                next_id += 1
            queue = queue + tuple(added)
            grew += 1
        if rng.random() < 0.3:
            queue = tuple(list(queue))  # the same jobs in another tuple
        expect_low = min((_start_range(j)[0] for j in queue), default=float("inf"))
        if rng.random() < 0.5:
            assert minimum.low(queue) == expect_low
        expect = (
            min((j.nodes_min for j in queue), default=float("inf")),
            min((j.nodes_requested for j in queue), default=float("inf")),
        )
        assert minimum.of(queue) == expect
        assert minimum.low(queue) == expect_low
    assert grew > 100
