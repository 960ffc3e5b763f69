"""CooRMv2's equi-partitioning (Klein's thesis, chapter 6 and appendix A.1): hand-worked cycles.

Each test is one cycle on a small machine; the expected decisions are worked out in comments.
Malleable jobs here ask for ``nodes_min`` non-preemptibly and ``nodes_max - nodes_min`` more
preemptibly; evolving jobs pre-allocate ``nodes_max``.
"""

from __future__ import annotations

import logging

import pytest
from snapshots import job, snapshot

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
from elastic_slurm.plugins.policies.coorm import EquiPartition, _Requests, equipartition
from elastic_slurm.plugins.registry import make_policy

M = JobKind.MALLEABLE
E = JobKind.EVOLVING
R = JobKind.RIGID
TICK = Trigger.periodic()
SMART = "smart equi-partition"


def _job(
    job_id: int,
    kind: JobKind,
    size: int,
    nmin: int,
    nmax: int,
    *,
    running: bool = True,
    end: float = 100.0,
    request: int = 0,
) -> JobView:
    return job(
        job_id,
        size,
        kind=kind,
        running=running,
        nodes_min=nmin,
        nodes_max=nmax,
        walltime=end,
        end=end,
        request=request,
    )


def _snap(idle: int, *jobs: JobView, total: int = 10) -> ClusterSnapshot:
    return snapshot(*jobs, idle=idle, total=total)


@pytest.mark.parametrize(
    ("asks", "pool", "smart", "grants"),
    [
        ([10, 2, 10], 12, True, [5, 2, 5]),  # shares of 4; job 2 leaves 2, shared again
        ([10, 2, 10], 12, False, [4, 2, 4]),  # strict: what job 2 leaves stays idle
        ([3, 3], 7, True, [3, 3]),  # uncongested: everybody gets all it asks
        ([5, 5, 5], 4, True, [2, 1, 1]),  # the remainder goes to the first in the list
        ([0, 4], 3, True, [0, 3]),  # an application asking nothing takes no share
        ([2, 9], 8, True, [2, 6]),
        ([2, 9], 8, False, [2, 4]),
        ([], 5, True, []),
    ],
)
def test_equipartition(asks, pool, smart, grants):
    assert equipartition(asks, pool, smart=smart) == grants
    assert sum(grants) <= max(pool, 0)


def test_a_rigid_job_takes_preemptible_nodes_back():
    # 10 nodes, all held by two malleable jobs (5 each, 1 to 10 nodes). A rigid 4-node job
    # arrives: non-preemptibly only 1 + 1 nodes are used, so it starts now. Preemptible pool:
    # 10 - (1 + 1 + 4) = 4, asks 9 and 9: 2 each, so both shrink from 5 to 3.
    snap = _snap(
        0,
        _job(1, M, 5, 1, 10),
        _job(2, M, 5, 1, 10),
        _job(3, R, 4, 4, 4, running=False, end=50.0),
    )
    assert EquiPartition().decide(snap, TICK) == [
        Shrink(1, 2, f"{SMART}: 3 node(s)"),
        Shrink(2, 2, f"{SMART}: 3 node(s)"),
        Start(3, 4, "its non-preemptible request fits now (conservative backfilling)"),
    ]


def test_evolving_growth_inside_its_preallocation_preempts_a_malleable_job():
    # 10 nodes: evolving job 1 (2 nodes, pre-allocation 6) asks for 3 more; malleable job 2
    # holds the other 8 (1 to 10). Growth is served at once (5 nodes); the pool left for job 2
    # is 10 - 5 - 1 = 4 preemptible nodes: it shrinks from 8 to 5.
    snap = _snap(0, _job(1, E, 2, 1, 6, request=3), _job(2, M, 8, 1, 10))
    assert EquiPartition().decide(snap, TICK) == [
        Shrink(2, 3, f"{SMART}: 5 node(s)"),
        Expand(1, 3, "the application grows (inside its pre-allocation)"),
    ]


def test_preallocated_but_unused_nodes_are_filled_but_not_given_away():
    # Evolving job 1 uses 2 of its 6 pre-allocated nodes until 100. Pending evolving job 3
    # (pre-allocation 6) does not fit beside it (10 - 6 < 6): it is reserved at 100. Malleable
    # job 2 (1 node, 1 to 10) gets every node not used now: 10 - 2 - 1 = 7 preemptible ones.
    snap = _snap(7, _job(1, E, 2, 1, 6), _job(2, M, 1, 1, 10), _job(3, E, 2, 1, 6, running=False))
    assert EquiPartition().decide(snap, TICK) == [Expand(2, 7, f"{SMART}: 8 node(s)")]


def test_a_release_is_served_at_once_and_the_nodes_are_shared():
    # Evolving job 1 gives back 3 of its 5 nodes; malleable job 2 (2 nodes, 1 to 10) and the
    # 3 idle nodes: pool 10 - 2 - 1 = 7, so job 2 grows to 8.
    snap = _snap(3, _job(1, E, 5, 1, 6, request=-3), _job(2, M, 2, 1, 10))
    assert EquiPartition().decide(snap, TICK) == [
        Shrink(1, 3, "the application releases nodes"),
        Expand(2, 6, f"{SMART}: 8 node(s)"),
    ]


def test_smart_and_strict_with_a_narrow_malleable_job():
    # Two malleable jobs of 1 node each (1 to 3, and 1 to 10), 8 idle nodes: asks 2 and 9.
    # Smart: shares of 4, job 1 takes 2, the 2 it leaves go to job 2: 3 and 7 nodes.
    # Strict: job 2 gets only its share of 4: 3 and 5 nodes, 2 nodes stay idle.
    jobs = (_job(1, M, 1, 1, 3), _job(2, M, 1, 1, 10))
    assert EquiPartition().decide(_snap(8, *jobs), TICK) == [
        Expand(1, 2, f"{SMART}: 3 node(s)"),
        Expand(2, 6, f"{SMART}: 7 node(s)"),
    ]
    strict = EquiPartition(EquiPartition.Config(smart=False))
    assert strict.decide(_snap(8, *jobs), TICK) == [
        Expand(1, 2, "strict equi-partition: 3 node(s)"),
        Expand(2, 4, "strict equi-partition: 5 node(s)"),
    ]


def test_a_pending_malleable_job_starts_at_its_minimum_plus_its_share():
    # Empty machine of 10; rigid job 1 (6 nodes) and malleable job 2 (2 to 8) pending. Both
    # fit non-preemptibly (6 + 2); the pool 10 - 6 - 2 = 2 goes to job 2: it starts on 4.
    snap = _snap(10, _job(1, R, 6, 6, 6, running=False), _job(2, M, 2, 2, 8, running=False))
    assert EquiPartition().decide(snap, TICK) == [
        Start(1, 6, "its non-preemptible request fits now (conservative backfilling)"),
        Start(2, 4, "minimum 2 + 2 preemptible (smart)"),
    ]


def test_without_preallocation_growth_needs_free_nodes():
    # Probable execution: evolving job 1 (2 nodes) asks for 3 more, rigid job 2 holds 7, one
    # node is idle: only 1 node can be given (the rest is held non-preemptibly).
    probable = EquiPartition(EquiPartition.Config(preallocate=False))
    snap = _snap(1, _job(1, E, 2, 1, 6, request=3), _job(2, R, 7, 7, 7))
    assert probable.decide(snap, TICK) == [
        Expand(1, 1, "the application grows (nodes are free)"),
    ]


def test_options_and_registry():
    assert isinstance(make_policy("coorm_equipartition", {"smart": False}), EquiPartition)
    with pytest.raises(PolicyError, match="smart must be true or false"):
        EquiPartition.from_options({"smart": "no"})


def test_a_job_past_its_estimate_keeps_its_nodes():
    # Rigid job 1 (6 of 10 nodes) should have ended at 50 but still runs at 60. Rigid job 2
    # (6 nodes) must wait for it (only 4 idle); rigid job 3 (4 nodes, 5 s) fits now. (Before
    # the fix, job 1 counted as gone and job 2 was started on nodes still held.)
    late = _job(1, R, 6, 6, 6, end=50.0)
    waiting = (_job(2, R, 6, 6, 6, running=False), _job(3, R, 4, 4, 4, running=False, end=5.0))
    snap = snapshot(late, *waiting, idle=4, total=10, time_s=60.0)
    assert EquiPartition().decide(snap, TICK) == [
        Start(3, 4, "its non-preemptible request fits now (conservative backfilling)"),
    ]


def test_a_preallocation_far_above_the_request_is_reported_once(caplog):
    # Evolving jobs of 2 nodes that may grow to 16 (Lina et al.'s conversion) pre-allocate 16:
    # the policy says so once, naming the option that avoids it; with it there is no warning.
    snap = _snap(16, _job(1, E, 2, 1, 16, running=False), _job(2, E, 2, 1, 16, running=False))
    policy = EquiPartition()
    with caplog.at_level(logging.WARNING, logger="elastic_slurm.plugins.policies.coorm"):
        for _ in range(3):
            policy.decide(snap, TICK)
        EquiPartition(EquiPartition.Config(preallocate=False)).decide(snap, TICK)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "job 1 pre-allocates its maximum, 16 nodes, 8x" in warnings[0]
    assert "preallocate=false" in warnings[0]


def test_request_columns_kept_across_cycles_are_the_fresh_ones():
    # The columns kept from the last cycle (its queue without its starts, arrivals appended)
    # are those computed afresh; a queue that does not follow last cycle's is read afresh.
    pytest.importorskip("numpy")
    config = EquiPartition.Config()
    jobs = [_job(k, M if k % 2 else R, 2, 1, 4, running=False, end=10.0 * k) for k in range(1, 7)]
    kept = _Requests()
    first = tuple(jobs[:4])
    kept.columns(first, config)
    kept.started(first, [jobs[0], jobs[2], jobs[3]], [1])
    for queue in ((jobs[0], jobs[2], jobs[3], jobs[4], jobs[5]), (jobs[5], jobs[0])):
        need, duration = kept.columns(queue, config)
        fresh_need, fresh_duration = _Requests().columns(queue, config)
        assert need.tolist() == fresh_need.tolist()
        assert duration.tolist() == fresh_duration.tolist()


def test_request_columns_over_many_cycles_of_starts_and_arrivals():
    # Starts anywhere in the queue (several a cycle, first and last included), arrivals past
    # the buffers' room, views made again unchanged (equal, not the same objects): the kept
    # columns are always the fresh ones.
    pytest.importorskip("numpy")
    import random

    config = EquiPartition.Config()
    rng = random.Random(5)
    jobs = [
        _job(k, (M, R, E)[k % 3], 2, 1, 4 + k % 5, running=False, end=float(k % 7))
        for k in range(1, 1200)
    ]
    kept = _Requests()
    queue: tuple[JobView, ...] = ()
    arrivals = iter(jobs)
    for cycle in range(300):
        queue += tuple(next(arrivals) for _ in range(rng.choice([0, 1, 3, 9])))
        if cycle % 50 == 49:  # the same jobs, their views made again
            queue = tuple(JobView.from_fields(vars(j)) for j in queue)
        need, duration = kept.columns(queue, config)
        fresh_need, fresh_duration = _Requests().columns(queue, config)
        assert need.tolist() == fresh_need.tolist()
        assert duration.tolist() == fresh_duration.tolist()
        k = rng.choice([0, 1, 2, 4])
        started = sorted(rng.sample(range(len(queue)), min(k, len(queue))))
        rest = tuple(j for i, j in enumerate(queue) if i not in started)
        kept.started(queue, rest, started)
        queue = rest


@pytest.mark.parametrize("compiled", [True, False])
def test_zero_durations_are_found_among_views_made_again(compiled):
    # A view made again, equal to the one cached, may skip the cache (its columns' rows are
    # kept): its zero duration is still found, after the old views were forgotten too.
    if compiled:
        pytest.importorskip("numpy")
    config = EquiPartition.Config()
    jobs = tuple(_job(k, R, 2, 1, 4, running=False, end=0.0 if k == 3 else 5.0) for k in range(5))
    kept = _Requests()
    assert kept.zero_durations(jobs, 0, config, compiled) == [3]
    again = tuple(JobView.from_fields(vars(j)) for j in jobs)
    kept.by_id.clear()  # the old views forgotten
    assert kept.zero_durations(again, 1, config, compiled) == [3]
    assert kept.zero_durations(again, 4, config, compiled) == []
