"""PendingFirst (Ghafoor 2007, section 4.2.4): hand-worked schedules and invariants."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from snapshots import held_snapshot, job

from elastic_slurm.errors import PolicyError
from elastic_slurm.model import (
    ClusterSnapshot,
    Decision,
    Expand,
    JobKind,
    JobState,
    JobView,
    Shrink,
    Start,
    Trigger,
    TriggerKind,
)
from elastic_slurm.plugins.policies.pending_first import PendingFirst

M = JobKind.MALLEABLE
R = JobKind.RIGID


# --- helpers -------------------------------------------------------------------------------


def pending(
    job_id: int,
    nmin: int,
    nmax: int | None = None,
    *,
    kind: JobKind = R,
    submit: float | None = None,
    requested: int | None = None,
) -> JobView:
    """A pending job; submitted at ``job_id`` seconds unless told."""
    nmax = nmin if nmax is None else nmax
    return job(job_id, nmin, kind=kind, nodes_max=nmax, submit=submit, requested=requested)


def running(
    job_id: int,
    size: int,
    nmin: int,
    nmax: int,
    *,
    started: float,
    kind: JobKind = M,
    resizing: bool = False,
    submit: float | None = None,
    request: int = 0,
) -> JobView:
    """A running job on ``size`` nodes ``j<id>n<i>``; submitted at ``job_id`` s unless told."""
    return job(
        job_id,
        size,
        kind=kind,
        running=True,
        nodes_min=nmin,
        nodes_max=nmax,
        submit=submit,
        start=started,
        resizing=resizing,
        batch_host=f"j{job_id}n0",
        request=request,
        blocking=False,
    )


def snapshot(idle: int, *jobs: JobView, down: int = 0) -> ClusterSnapshot:
    """``idle`` idle nodes, the running jobs' nodes allocated, ``down`` unavailable nodes."""
    return held_snapshot(*jobs, idle=idle, down=down, time_s=1000.0)


def decide(snap: ClusterSnapshot, **options: bool) -> list[tuple[str, int, int]]:
    """Run the policy; return the decisions as ``(kind, job_id, count)`` for exact comparison."""
    decisions = PendingFirst.from_options(options).decide(snap, Trigger.periodic())
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


# --- hand-worked cases ---------------------------------------------------------------------


def test_idle_nodes_expand_malleable_jobs_earliest_started_first_up_to_max() -> None:
    # 5 idle, nothing pending. Job 1 (started t=10) is 2 of 2-4: can take 2 -> expand 2,
    # 3 left. Job 2 (started t=20) is 2 of 2-8: can take 6 -> expand 3, 0 left.
    snap = snapshot(
        5,
        running(1, 2, 2, 4, started=10.0),
        running(2, 2, 2, 8, started=20.0),
    )
    assert decide(snap) == [("expand", 1, 2), ("expand", 2, 3)]


def test_expansion_order_is_by_start_time_not_submission() -> None:
    # Job 1 was submitted first but started last (t=50); job 2 started at t=5.
    # 3 idle: job 2 (2 of 1-4) takes 2, then job 1 (2 of 1-4) takes the last 1.
    snap = snapshot(
        3,
        running(1, 2, 1, 4, started=50.0),
        running(2, 2, 1, 4, started=5.0),
    )
    assert decide(snap) == [("expand", 2, 2), ("expand", 1, 1)]


def test_rigid_pending_job_that_fits_idle_starts_and_nothing_expands() -> None:
    # 3 idle, rigid job 9 needs 3 -> start 3, 0 idle left, so malleable job 1 (2 of 2-8)
    # gets nothing and nothing is shrunk.
    snap = snapshot(3, running(1, 2, 2, 8, started=0.0), pending(9, 3))
    assert decide(snap) == [("start", 9, 3)]


def test_idle_left_after_starting_goes_to_running_malleable_jobs() -> None:
    # 4 idle, rigid job 9 needs 3 -> start 3; 1 idle left and no pending job waits ->
    # expand job 1 (2 of 2-8) by 1.
    snap = snapshot(4, running(1, 2, 2, 8, started=0.0), pending(9, 3))
    assert decide(snap) == [("start", 9, 3), ("expand", 1, 1)]


def test_shrink_earliest_started_gives_its_maximum_first_then_the_next() -> None:
    # 1 idle; rigid job 20 needs 6, so 5 must be released.
    # Started order: job 3 (t=5) is at its minimum (2 of 2-6): releases 0, skipped;
    # job 2 (t=10) is 4 of 2-8: releases 2 (never below 2) -> shrink 2, 3 still needed;
    # job 1 (t=20, submitted first) is 6 of 1-8: releases 5 -> shrink 3, 0 needed;
    # job 4 (t=30) untouched. Then start job 20 on 1 idle + 5 released = 6.
    snap = snapshot(
        1,
        running(1, 6, 1, 8, started=20.0),
        running(2, 4, 2, 8, started=10.0),
        running(3, 2, 2, 6, started=5.0),
        running(4, 3, 1, 8, started=30.0),
        pending(20, 6),
    )
    assert decide(snap) == [("shrink", 2, 2), ("shrink", 1, 3), ("start", 20, 6)]


def test_jobs_being_resized_are_neither_shrunk_nor_expanded() -> None:
    # Job 1 started first and could release 7, but it is resizing: left alone.
    # 0 idle; rigid job 20 needs 3 -> job 2 (t=10, 4 of 1-4) releases 3 -> shrink 3, start 3.
    snap = snapshot(
        0,
        running(1, 8, 1, 16, started=0.0, resizing=True),
        running(2, 4, 1, 4, started=10.0),
        pending(20, 3),
    )
    assert decide(snap) == [("shrink", 2, 3), ("start", 20, 3)]
    # 2 idle, nothing pending: job 1 could take 8 more but is resizing; job 2 is at its
    # maximum -> no decision at all.
    snap = snapshot(
        2,
        running(1, 8, 1, 16, started=0.0, resizing=True),
        running(2, 4, 1, 4, started=10.0),
    )
    assert decide(snap) == []


def test_no_shrink_for_a_pending_job_that_cannot_fit_even_with_all_preemptible_nodes() -> None:
    # 1 idle; job 20 needs 10. Preemptible: job 1 (4 of 2-6) releases 2; rigid job 2 (6
    # nodes) releases nothing. 1 + 2 = 3 < 10: no shrink, job 20 waits (11 nodes exist, so
    # it could run one day). The 1 idle node no pending job can use goes to job 1 (4 of
    # 2-6, may grow by 2) -> expand 1.
    snap = snapshot(
        1,
        running(1, 4, 2, 6, started=0.0),
        running(2, 6, 6, 6, started=1.0, kind=R),
        pending(20, 10),
    )
    assert decide(snap) == [("expand", 1, 1)]
    assert decide(snap, expand_idle=False) == []


def test_thesis_example_ten_idle_three_malleable_pending_jobs() -> None:
    # Thesis 4.2.4: 10 idle, jobs 1-3 each malleable 4-12.
    # Maximum fit: job 1 gets 4 (6 left), job 2 gets 4 (2 left), job 3 needs 4 > 2: stops.
    # Second step: the 2 left go to job 1 (FCFS, up to 12) -> job 1 on 6, job 2 on 4.
    snap = snapshot(
        10,
        pending(1, 4, 12, kind=M),
        pending(2, 4, 12, kind=M),
        pending(3, 4, 12, kind=M),
    )
    assert decide(snap) == [("start", 1, 6), ("start", 2, 4)]


def test_thesis_example_eight_needed_four_jobs_can_each_release_five() -> None:
    # Thesis 4.2.4, "Shrinkage and Expansion": 8 more nodes needed, four running malleable
    # jobs (6 of 1-6 each, started t=0,1,2,3) can each release 5 -> 5 from the first,
    # 3 from the second (two negotiations, not four), then start job 20 on 8.
    jobs = [running(i, 6, 1, 6, started=float(i)) for i in range(1, 5)]
    snap = snapshot(0, *jobs, pending(20, 8))
    assert decide(snap) == [("shrink", 1, 5), ("shrink", 2, 3), ("start", 20, 8)]


def test_admission_counts_preemptible_nodes_before_handing_out_leftover_idle() -> None:
    # The ordering choice documented in PendingFirst: 6 idle; pending job 1 malleable 4-12,
    # then rigid job 2 needs 4; running malleable job 3 is 8 of 2-8 (releases 6).
    # Capacity 6 + 6 = 12: job 1 gets 4 (8 left), job 2 gets 4 (4 left). Demand 8 > 6 idle:
    # shrink job 3 by 2. No leftover idle, so job 1 stays at 4.
    # (Reading 4.2.4 literally would give job 1 six idle nodes and leave job 2 waiting.)
    snap = snapshot(
        6,
        pending(1, 4, 12, kind=M),
        pending(2, 4),
        running(3, 8, 2, 8, started=0.0, submit=-1.0),
    )
    assert decide(snap) == [("shrink", 3, 2), ("start", 1, 4), ("start", 2, 4)]


def test_fcfs_stops_at_the_first_pending_job_that_does_not_fit() -> None:
    # 2 idle, no malleable jobs to shrink (rigid job 5 holds 4 nodes). Job 1 needs 4 > 2:
    # the scan stops; job 2 (needs 1) does not jump the queue -> nothing at all.
    snap = snapshot(2, running(5, 4, 4, 4, started=0.0, kind=R), pending(1, 4), pending(2, 1))
    assert decide(snap) == []


def test_without_shrink_for_pending_a_blocked_job_waits_and_idle_nodes_expand() -> None:
    # Same cluster as the shrink test, shrink_for_pending=False: capacity is the 1 idle node;
    # job 20 needs 6 > 1, blocked. The idle node goes to the earliest-started malleable job
    # that may grow: job 3 (t=5, 2 of 2-6) -> expand 1.
    snap = snapshot(
        1,
        running(1, 6, 1, 8, started=20.0),
        running(2, 4, 2, 8, started=10.0),
        running(3, 2, 2, 6, started=5.0),
        pending(20, 6),
    )
    assert decide(snap, shrink_for_pending=False) == [("expand", 3, 1)]
    assert decide(snap, shrink_for_pending=False, expand_idle=False) == []


def test_moldable_job_gets_leftover_up_to_its_maximum_and_rigid_jobs_their_size() -> None:
    # 7 idle. Job 1 moldable 2-4 -> 2 (5 left); job 2 rigid 2 -> 2 (3 left).
    # Second step: job 1 grows to its maximum 4 (1 left); job 2 is rigid. No running jobs,
    # so the last idle node stays idle.
    snap = snapshot(7, pending(1, 2, 4, kind=JobKind.MOLDABLE), pending(2, 2))
    assert decide(snap) == [("start", 1, 4), ("start", 2, 2)]


def test_evolving_jobs_start_at_their_requested_size_and_are_never_resized() -> None:
    # 5 idle. Evolving job 1 (range 1-8, requested 3) -> start 3, 2 left. Running evolving
    # job 2 (2 of 1-8) is not the policy's to expand -> the 2 stay idle.
    snap = snapshot(
        5,
        running(2, 2, 1, 8, started=0.0, kind=JobKind.EVOLVING, submit=-1.0),
        pending(1, 1, 8, kind=JobKind.EVOLVING, requested=3),
    )
    assert decide(snap) == [("start", 1, 3)]


def test_a_job_wider_than_the_whole_cluster_does_not_block_the_queue() -> None:
    # 4 nodes in all (3 idle, 1 down). Job 1 needs 10 > 4: can never start, passed over.
    # Job 2 needs 2 -> start 2.
    snap = snapshot(3, pending(1, 10), pending(2, 2), down=1)
    assert decide(snap) == [("start", 2, 2)]


def test_trigger_is_ignored_and_the_snapshot_is_not_changed() -> None:
    snap = snapshot(1, running(1, 6, 1, 8, started=0.0), pending(20, 3))
    before = dataclasses.replace(snap)
    policy = PendingFirst()
    a = policy.decide(snap, Trigger.periodic())
    b = policy.decide(snap, Trigger(frozenset({TriggerKind.JOB_SUBMITTED}), (20,)))
    assert a == b
    assert a == [Shrink(1, 2, a[0].reason), Start(20, 3, a[1].reason)]
    assert snap == before


def test_options() -> None:
    assert PendingFirst.from_options(None).config == PendingFirst.Config()
    policy = PendingFirst.from_options({"expand_idle": False})
    assert policy.config == PendingFirst.Config(expand_idle=False, shrink_for_pending=True)
    with pytest.raises(PolicyError, match="expand_idle"):
        PendingFirst.from_options({"expand_idle": "yes"})
    with pytest.raises(PolicyError, match="no option"):
        PendingFirst.from_options({"expand": True})


# --- invariants on random clusters ---------------------------------------------------------


def start_low(job: JobView) -> int:
    return job.nodes_min if job.kind in (M, JobKind.MOLDABLE) else job.nodes_requested


def start_high(job: JobView) -> int:
    return job.nodes_max if job.kind in (M, JobKind.MOLDABLE) else job.nodes_requested


@st.composite
def clusters(draw: st.DrawFn) -> ClusterSnapshot:
    jobs: list[JobView] = []
    next_id = 1
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from([M, M, R, JobKind.MOLDABLE, JobKind.EVOLVING]))
        nmin = draw(st.integers(1, 6))
        nmax = nmin if kind is R else draw(st.integers(nmin, 10))
        size = draw(st.integers(nmin, nmax))
        jobs.append(
            running(
                next_id,
                size,
                nmin,
                nmax,
                kind=kind,
                started=float(draw(st.integers(0, 20))),
                resizing=draw(st.booleans()),
            )
        )
        next_id += 1
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from([M, R, JobKind.MOLDABLE, JobKind.EVOLVING]))
        nmin = draw(st.integers(1, 12))
        nmax = nmin if kind is R else draw(st.integers(nmin, 14))
        jobs.append(
            pending(next_id, nmin, nmax, kind=kind, requested=draw(st.integers(nmin, nmax)))
        )
        next_id += 1
    return snapshot(draw(st.integers(0, 12)), *jobs, down=draw(st.integers(0, 2)))


@settings(max_examples=300, deadline=None)
@given(snap=clusters(), expand_idle=st.booleans(), shrink_for_pending=st.booleans())
def test_invariants(snap: ClusterSnapshot, expand_idle: bool, shrink_for_pending: bool) -> None:
    policy = PendingFirst(PendingFirst.Config(expand_idle, shrink_for_pending))
    decisions: list[Decision] = policy.decide(snap, Trigger.periodic())
    ids = [d.job_id for d in decisions]
    assert len(ids) == len(set(ids)), "a job got two decisions"
    started = shrunk = expanded = 0
    for d in decisions:
        job = snap.job(d.job_id)
        assert d.reason
        if isinstance(d, Start):
            assert job.state is JobState.PENDING
            assert start_low(job) <= d.nodes <= start_high(job)
            started += d.nodes
        else:
            assert job.state is JobState.RUNNING and job.kind is M and not job.resizing
            assert d.count >= 1
            if isinstance(d, Shrink):
                assert shrink_for_pending
                assert job.size - d.count >= job.nodes_min
                shrunk += d.count
            else:
                assert expand_idle
                assert job.size + d.count <= job.nodes_max
                expanded += d.count
    idle = len(snap.idle_nodes())
    assert started + expanded <= idle + shrunk, "a node used twice"
    if shrunk:
        assert expanded == 0 and started == idle + shrunk, "shrunk more than needed"
    # The started jobs are a first-come-first-served prefix of the queue (jobs wider than
    # the whole cluster are passed over).
    queue = [j.job_id for j in snap.pending() if start_low(j) <= len(snap.nodes)]
    starts = [d.job_id for d in decisions if isinstance(d, Start)]
    assert starts == queue[: len(starts)]


@st.composite
def cycles(draw: st.DrawFn) -> list[ClusterSnapshot]:
    """Snapshots one policy sees in turn: some repeated, some rebuilt from earlier views.

    A rebuilt snapshot has new tuples holding some of the same (immutable) view objects,
    and its running jobs may ask for nodes (evolving requests), as happens between the
    simulator's cycles.
    """
    seen: list[ClusterSnapshot] = []
    for _ in range(draw(st.integers(1, 8))):
        choice = draw(st.sampled_from(["new", "again", "rebuilt"])) if seen else "new"
        if choice == "new":
            snap = draw(clusters())
            views = [
                dataclasses.replace(j, evolving_request=draw(st.integers(-3, 3)))
                if j.kind is JobKind.EVOLVING and j.state is JobState.RUNNING
                else j
                for j in snap.jobs
            ]
            snap = snapshot(len(snap.idle_nodes()), *views)
        elif choice == "again":
            snap = draw(st.sampled_from(seen))
        else:
            old = draw(st.sampled_from(seen))
            kept = [j for j in old.jobs if draw(st.booleans())]
            snap = snapshot(draw(st.integers(0, 12)), *kept)
        seen.append(snap)
    return seen


@settings(max_examples=200, deadline=None)
@given(snaps=cycles(), serve_evolving=st.booleans(), shrink_for_pending=st.booleans())
def test_one_policy_over_many_cycles_decides_as_a_fresh_one_each_cycle(
    snaps: list[ClusterSnapshot], serve_evolving: bool, shrink_for_pending: bool
) -> None:
    """What the policy keeps from cycle to cycle (per view, per tuple) never changes a decision."""
    config = PendingFirst.Config(
        shrink_for_pending=shrink_for_pending, serve_evolving=serve_evolving
    )
    kept = PendingFirst(config)
    for snap in snaps:
        fresh = PendingFirst(config).decide(snap, Trigger.periodic())
        assert kept.decide(snap, Trigger.periodic()) == fresh


# --- evolving requests (thesis 3.1.1.3 and 3.1.1.4) ------------------------------------------

E = JobKind.EVOLVING


def test_an_evolving_release_is_served_and_frees_nodes_for_a_pending_job() -> None:
    # evolving job 1 on 4 nodes (min 1) gives 2 back; rigid job 2 needs 2, no idle node.
    # The release comes first and counts as free: job 2 starts without shrinking anyone.
    snap = snapshot(0, running(1, 4, 1, 8, started=0.0, kind=E, request=-2), pending(2, 2))
    assert decide(snap) == [("shrink", 1, 2), ("start", 2, 2)]


def test_a_release_never_goes_below_the_minimum() -> None:
    # asks to give 5 of its 4 nodes with a minimum of 2: gives 2
    snap = snapshot(0, running(1, 4, 2, 8, started=0.0, kind=E, request=-5))
    assert decide(snap) == [("shrink", 1, 2)]


def test_growth_comes_after_pending_jobs_from_idle_then_malleable_nodes() -> None:
    # 3 idle nodes; pending rigid job 3 takes 2 (pending first); evolving job 1 (4 nodes,
    # max 10) asks for 4: 1 idle node left, malleable job 2 (5 nodes, min 2) gives 3
    snap = snapshot(
        3,
        running(1, 4, 1, 10, started=0.0, kind=E, request=4),
        running(2, 5, 2, 8, started=1.0),
        pending(3, 2),
    )
    assert decide(snap) == [("start", 3, 2), ("shrink", 2, 3), ("expand", 1, 4)]


def test_growth_is_partial_when_not_enough_can_be_found() -> None:
    # 1 idle node, malleable job 2 can give 1 (3 nodes, min 2): 2 of the 5 asked
    snap = snapshot(
        1,
        running(1, 2, 1, 10, started=0.0, kind=E, request=5),
        running(2, 3, 2, 8, started=1.0),
    )
    assert decide(snap) == [("shrink", 2, 1), ("expand", 1, 2)]


def test_growth_stops_at_the_maximum_and_leftovers_expand_malleable_jobs() -> None:
    # evolving job 1 (3 nodes, max 4) asks for 3: gets 1; the 4 other idle nodes expand
    # malleable job 2 up to its maximum 5 (from 3)
    snap = snapshot(
        5,
        running(1, 3, 1, 4, started=0.0, kind=E, request=3),
        running(2, 3, 1, 5, started=1.0),
    )
    assert decide(snap) == [("expand", 1, 1), ("expand", 2, 2)]


def test_evolving_requests_can_be_ignored_by_option() -> None:
    snap = snapshot(2, running(1, 2, 1, 8, started=0.0, kind=E, request=2))
    assert decide(snap, serve_evolving=False) == []


def test_one_shrink_per_job_when_pending_and_evolving_jobs_both_need_nodes() -> None:
    # no idle node; pending rigid job 3 needs 2 and evolving job 1 asks for 2; malleable job 2
    # (6 nodes, min 1) gives 2 for job 3 and 2 for job 1: one shrink of 4, not two
    snap = snapshot(
        0,
        running(1, 2, 1, 8, started=0.0, kind=E, request=2),
        running(2, 6, 1, 8, started=1.0),
        pending(3, 2),
    )
    assert decide(snap) == [("shrink", 2, 4), ("start", 3, 2), ("expand", 1, 2)]
