"""FCFS, EASY and conservative backfilling on hand-made snapshots, schedules worked out by hand."""

from __future__ import annotations

import dataclasses

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
from elastic_slurm.model.estimates import TRUE_RUNTIMES
from elastic_slurm.model.speedup import Linear
from elastic_slurm.plugins.policies.conservative_backfill import ConservativeBackfill
from elastic_slurm.plugins.policies.easy_backfill import EasyBackfill
from elastic_slurm.plugins.policies.fcfs import FCFS, start_size
from elastic_slurm.plugins.registry import make_policy

NOW = 1000.0


def pending(job_id: int, nodes: int, walltime_s: float | None, **kw) -> JobView:  # noqa: ANN003
    return job(job_id, nodes, walltime=walltime_s, **kw)


def running(job_id: int, nodes: tuple[str, ...], ends_in_s: float | None) -> JobView:
    return job(
        job_id, running=True, names=nodes, end=None if ends_in_s is None else NOW + ends_in_s
    )


def snapshot(idle: tuple[str, ...], *jobs: JobView) -> ClusterSnapshot:
    return held_snapshot(*jobs, idle=idle, time_s=NOW, sort_nodes=True)


def starts(policy, snap: ClusterSnapshot) -> list[tuple[int, int]]:  # noqa: ANN001
    decisions = policy.decide(snap, Trigger.periodic())
    assert all(isinstance(d, Start) and d.reason for d in decisions)
    return [(d.job_id, d.nodes) for d in decisions]


# Four nodes. Job 1 runs on n1, n2 and should end in 100 s; n3, n4 are idle. Queue: job 2 wants
# 3 nodes (blocked: 2 idle), then the candidates behind it.
RUN1 = running(1, ("n1", "n2"), 100.0)


def base(*queue: JobView) -> ClusterSnapshot:
    return snapshot(("n3", "n4"), RUN1, pending(2, 3, 500.0), *queue)


def test_fcfs_starts_in_order_and_blocks_at_the_first_that_does_not_fit() -> None:
    # 2 idle: job 2 (3 nodes) does not fit, so job 3 (1 node, 10 s) waits behind it.
    assert starts(FCFS(), base(pending(3, 1, 10.0))) == []
    # with 4 idle: job 5 (1) and job 6 (2) start, job 7 (2) does not fit the last 1 node,
    # and job 8 (1) behind it waits although it would fit.
    snap = snapshot(
        ("n1", "n2", "n3", "n4"),
        pending(5, 1, 9.0),
        pending(6, 2, 9.0),
        pending(7, 2, 9.0),
        pending(8, 1, 9.0),
    )
    assert starts(FCFS(), snap) == [(5, 1), (6, 2)]


def test_easy_backfills_a_short_job_that_ends_before_the_reservation() -> None:
    # Shadow time: job 1 frees 2 nodes at 1100, then 4 >= 3 for job 2; extra = 4 - 3 = 1.
    # Job 3 (2 nodes, 50 s) ends at 1050 <= 1100: it cannot delay job 2, so it starts.
    assert starts(EasyBackfill(), base(pending(3, 2, 50.0))) == [(3, 2)]


def test_easy_refuses_a_job_that_would_delay_the_reservation() -> None:
    # Job 3 (2 nodes, 200 s) would hold 2 nodes until 1200 > 1100, and 2 > 1 extra node:
    # starting it would delay job 2. Job 4 (1 node, 1000 s) also runs past 1100 but needs only
    # the one extra node, so it starts.
    assert starts(EasyBackfill(), base(pending(3, 2, 200.0), pending(4, 1, 1000.0))) == [(4, 1)]


def test_easy_passes_over_a_job_wider_than_the_machine() -> None:
    # Job 9 (first in the queue) wants 5 of the 4 nodes: it can never start, so it is no
    # reservation's head (it would make the shadow time infinite and let anything backfill).
    # Job 2 is the head:
    # job 3 (2 nodes, 200 s) would delay it and waits; job 4 (1 node) takes the extra node.
    snap = snapshot(
        ("n3", "n4"),
        RUN1,
        pending(9, 5, 500.0, submit=1.0),
        pending(2, 3, 500.0),
        pending(3, 2, 200.0),
    )
    assert starts(EasyBackfill(), snap) == []
    snap = snapshot(
        ("n3", "n4"),
        RUN1,
        pending(9, 5, 500.0, submit=1.0),
        pending(2, 3, 500.0),
        pending(4, 1, 1000.0),
    )
    assert starts(EasyBackfill(), snap) == [(4, 1)]
    # in front of jobs that fit, it blocks nothing: they start first come, first served
    snap = snapshot(("n1", "n2", "n3", "n4"), pending(9, 5, 500.0, submit=1.0), pending(5, 2, 9.0))
    assert starts(EasyBackfill(), snap) == [(5, 2)]


def test_easy_extra_nodes_are_used_up() -> None:
    # Two long 1-node jobs: the first takes the single extra node, the second must wait.
    assert starts(EasyBackfill(), base(pending(3, 1, 900.0), pending(4, 1, 900.0))) == [(3, 1)]


def test_easy_without_a_time_limit_cannot_fit_before_the_reservation() -> None:
    # Job 3 has no estimate: it may only use the extra node (it needs 2): refused.
    assert starts(EasyBackfill(), base(pending(3, 2, None))) == []


def test_easy_treats_an_overrunning_job_as_ending_now() -> None:
    # Job 1 is past its estimate (it should have ended 5 s ago): the shadow time is now, so
    # only jobs that fit the extra node (4 - 3 = 1) can start, whatever their length.
    late = running(1, ("n1", "n2"), -5.0)
    snap = snapshot(
        ("n3", "n4"), late, pending(2, 3, 500.0), pending(3, 2, 1.0), pending(4, 1, 5.0)
    )
    assert starts(EasyBackfill(), snap) == [(4, 1)]


# EASY and conservative differ: four nodes, job 1 on n1-n2 ends in 100 s, job 2 on n3 ends in
# 50 s, n4 idle. Queue: job 3 wants 3 nodes for 100 s, job 4 all 4 nodes for 100 s, job 5 one
# node for 1000 s.
#
# EASY protects only job 3: shadow at 1100 (1 idle + 1 at 1050 + 2 at 1100 = 4 >= 3), one extra
# node. Job 4 (4 nodes) does not fit now. Job 5 runs past 1100 but fits the extra node: starts.
# It then holds n4 until 2000, so job 4 (all 4 nodes), expected at 1200, is pushed to 2000.
#
# Conservative reserves in order: job 3 at [1100, 1200) (3 nodes), job 4 at [1200, 1300) (4
# nodes). Job 5 would need one node over [1000, 2000), but [1200, 1300) has none free: its
# earliest slot is 1300, so it does not start now.
DIFF = snapshot(
    ("n4",),
    running(1, ("n1", "n2"), 100.0),
    running(2, ("n3",), 50.0),
    pending(3, 3, 100.0),
    pending(4, 4, 100.0),
    pending(5, 1, 1000.0),
)


def test_easy_and_conservative_differ_on_a_job_that_delays_the_second_in_line() -> None:
    assert starts(EasyBackfill(), DIFF) == [(5, 1)]
    assert starts(ConservativeBackfill(), DIFF) == []


def test_conservative_backfills_a_job_that_delays_nobody() -> None:
    # Same queue, but job 6 (1 node, 40 s) fits in n4 before 1050 and ends before every
    # reservation: both policies start it.
    snap = snapshot(
        ("n4",),
        running(1, ("n1", "n2"), 100.0),
        running(2, ("n3",), 50.0),
        pending(3, 3, 100.0),
        pending(4, 4, 100.0),
        pending(6, 1, 40.0),
    )
    assert starts(ConservativeBackfill(), snap) == [(6, 1)]
    assert starts(EasyBackfill(), snap) == [(6, 1)]


def test_conservative_starts_the_fitting_prefix_and_respects_the_present() -> None:
    # 3 idle: job 2 (3 nodes) starts now; job 3 (1 node) would fit nothing now (0 idle left).
    snap = snapshot(("n2", "n3", "n4"), running(1, ("n1",), -10.0), pending(2, 3, 10.0))
    assert starts(ConservativeBackfill(), snap) == [(2, 3)]
    # Job 1 overran its estimate: its node is not free now, so a 4-node job cannot start
    # although the profile frees n1 "now"; a 3-node job can.
    snap = snapshot(("n2", "n3", "n4"), running(1, ("n1",), -10.0), pending(2, 4, 10.0))
    assert starts(ConservativeBackfill(), snap) == []


def test_moldable_and_malleable_jobs_start_at_their_requested_size() -> None:
    job = pending(3, 2, 10.0, kind=JobKind.MOLDABLE, nodes_min=1, nodes_max=4, speedup=Linear())
    assert start_size(job) == 2
    snap = snapshot(("n1", "n2", "n3", "n4"), job)
    for policy in (FCFS(), EasyBackfill(), ConservativeBackfill()):
        assert starts(policy, snap) == [(3, 2)]


def test_baselines_are_registered_under_their_names() -> None:
    assert isinstance(make_policy("fcfs"), FCFS)
    assert isinstance(make_policy("easy_backfill"), EasyBackfill)
    assert isinstance(make_policy("conservative_backfill"), ConservativeBackfill)


def test_nothing_to_do_gives_no_decisions() -> None:
    empty = snapshot(("n1",))
    for policy in (FCFS(), EasyBackfill(), ConservativeBackfill()):
        assert policy.decide(empty, Trigger.periodic()) == []


def test_easy_counts_jobs_started_in_the_same_cycle_in_the_reservation() -> None:
    # Eight nodes: n1-n4 idle, job 9 on n5-n8 until 2000. Queue: job 2 (2 nodes, 10 s) starts
    # now, leaving 2 idle; head job 3 (4 nodes) is blocked. Its shadow time is 1010, when job 2
    # ends (2 idle + 2 = 4), extra 0 -- not 2000, which ignoring job 2 would give (2 idle + 4 at
    # 2000, extra 2). So job 4 (2 nodes, 100 s) must not start: it would hold 2 nodes past 1010
    # and delay job 3.
    snap = snapshot(
        ("n1", "n2", "n3", "n4"),
        running(9, ("n5", "n6", "n7", "n8"), 1000.0),
        pending(2, 2, 10.0),
        pending(3, 4, 50.0),
        pending(4, 2, 100.0),
    )
    assert starts(EasyBackfill(), snap) == [(2, 2)]


def test_easy_with_runtime_estimates_reads_the_snapshots_provider() -> None:
    # As test_easy_refuses_a_job_that_would_delay_the_reservation, but job 3 really runs 50 s
    # (its time limit says 200 s). With estimates="runtime" and the true run times, it ends
    # before the reservation and starts; with the default (time limits) it does not.
    snap = base(pending(3, 2, 200.0, runtime_s=50.0))
    truth = dataclasses.replace(snap, estimates=TRUE_RUNTIMES)
    runtime = EasyBackfill(EasyBackfill.Config(estimates="runtime"))
    assert starts(runtime, truth) == [(3, 2)]
    assert starts(EasyBackfill(), truth) == []
    assert starts(runtime, snap) == []  # live: the provider gives the time limits
    conservative = ConservativeBackfill(ConservativeBackfill.Config(estimates="runtime"))
    assert starts(conservative, truth) == [(3, 2)]
    with pytest.raises(PolicyError, match="estimates must be"):
        EasyBackfill.from_options({"estimates": "oracle"})
