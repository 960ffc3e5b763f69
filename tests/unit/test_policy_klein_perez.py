"""Klein and Pérez's list scheduling with ``fit`` (2011): hand-worked schedules and decisions.

The running example: a machine of 4 nodes; application A is rigid, 1 node for 4 s; C is rigid,
2 nodes for 10 s (13 s in the second case); B is evolving, with the profile
``(2 s, 1 node), (3 s, 2 nodes), (2 s, 4 nodes)``. In list order A, C, B, A and C start at 0,
so before B is fitted the resource EP is 3 nodes busy on [0, 4), 2 on [4, 10), 0 afterwards.

Algorithm 2 for B, worked by hand (cap 4; "free" = 4 - busy):

* noX (limit 1). Step 1 fits at 0 (1 free). Step 2 at 2: [2, 5) has 3 busy, 1 free < 2: jump
  to the end of that maximum, 4; placing step 2 at 4 would expand step 1 (earliest allowed
  start of step 1: 4 - 1 x 2 = 2 > 0): step 1 moves to 2. Step 2 at 4 fits (2 free). Step 3 at
  7: [7, 9) has 2 free < 4: jump to 10, which would expand step 2 (10 - 3 = 7 > 4): step 2 moves
  to 7, which would expand step 1 (7 - 2 = 5 > 2): step 1 moves to 5. From 5: step 1 [5, 7),
  step 2 [7, 10), step 3 [10, 12). B starts at 5, ends at 12, no waste.
* 2X (limit 2). Step 1 at 0; step 2 jumps to 4 (step 1 would last 4 = 2 x 2: allowed, and it
  can hold its node on [2, 4), 1 free); step 3 jumps to 10 (step 2 would last 6 = 2 x 3:
  allowed; it holds 2 nodes on [7, 10), 2 free). Starts 0, 4, 10; the first step is delayed
  instead of expanded: it runs on [2, 4). B starts at 2, step 2 holds its nodes on [4, 10)
  (3 s of waiting x 2 nodes = 6 node-s wasted), ends at 12. infX finds the same.
* Compacting (2X+c, infX+c): step 3 keeps its end, 12, on [10, 12); step 2 as late as
  possible: [7, 10) fits (2 free); step 1 just before: [5, 7) fits (2 free). The noX schedule:
  compacting removed the waiting.

With C running 13 s (2 nodes busy on [4, 13)), step 3 can start only at 13. noX: step 2 at
[10, 13), step 1 at [8, 10). 2X: step 2 may last 6 s, so it starts at 13 - 6 = 7 and step 1
runs on [5, 7): 3 s of waiting on 2 nodes, 6 node-s. infX: starts 2, 4, 13: step 2 waits 6 s
on 2 nodes, 12 node-s. Compacting gives the noX schedule again. All end at 15.
"""

from __future__ import annotations

import dataclasses
import logging
import math

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
from elastic_slurm.plugins.policies.klein_perez import (
    KleinPerez,
    Occupancy,
    compact,
    fit,
    merge_steps,
    schedule,
)
from elastic_slurm.plugins.registry import make_policy

E_KIND = JobKind.EVOLVING
A, C, B = 1, 2, 3
B_PROFILE = ((2.0, 1), (3.0, 2), (2.0, 4))
TICK = Trigger.periodic()


def _apps(c_duration: float) -> list[tuple[tuple[float, int], ...]]:
    return [((4.0, 1),), ((c_duration, 2),), B_PROFILE]


@pytest.mark.parametrize(
    ("variant", "c_duration", "starts", "waste"),
    [
        ("noX", 10.0, (5.0, 7.0, 10.0), 0.0),
        ("2X", 10.0, (2.0, 4.0, 10.0), 6.0),
        ("infX", 10.0, (2.0, 4.0, 10.0), 6.0),
        ("2X+c", 10.0, (5.0, 7.0, 10.0), 0.0),
        ("infX+c", 10.0, (5.0, 7.0, 10.0), 0.0),
        ("noX", 13.0, (8.0, 10.0, 13.0), 0.0),
        ("2X", 13.0, (5.0, 7.0, 13.0), 6.0),
        ("infX", 13.0, (2.0, 4.0, 13.0), 12.0),
        ("2X+c", 13.0, (8.0, 10.0, 13.0), 0.0),
        ("infX+c", 13.0, (8.0, 10.0, 13.0), 0.0),
    ],
)
def test_algorithm_1_on_the_worked_example(variant, c_duration, starts, waste):
    eps = schedule(_apps(c_duration), 4, fit_name=variant)
    assert [(e.start_s, e.end_s) for e in eps[:2]] == [(0.0, 4.0), (0.0, c_duration)]
    b = eps[2]
    assert b.starts == starts
    assert b.end_s == c_duration + 2.0
    assert b.allocated_node_s - b.used_node_s == waste
    assert b.expanded is (waste > 0)


def test_fit_delays_the_first_step_and_compacting_keeps_the_end():
    occ = Occupancy(0.0)
    occ.add(0.0, 4.0, 1)
    occ.add(0.0, 10.0, 2)
    base = fit(B_PROFILE, occ, 4, 2.0)
    assert base == [2.0, 4.0, 10.0]  # search started step 1 at 0; delayed to end at 4
    assert compact(B_PROFILE, base, occ, 4, 2.0, 0.0) == [5.0, 7.0, 10.0]
    # a running application: the step under way (1 node from 0 to 2) cannot move, and the
    # next steps are placed as early as they can be: step 2 at 4, step 3 at 10
    rest = fit(B_PROFILE[1:], occ, 4, 2.0, 2.0, first_fixed=True)
    assert rest == [4.0, 10.0]


def test_an_ep_wider_than_the_machine_never_starts():
    (ep,) = schedule([((5.0, 1), (5.0, 9))], 4)
    assert ep.starts == (math.inf, math.inf)


def test_merge_steps_and_occupancy():
    assert merge_steps([(1.0, 2), (2.0, 2), (3.0, 1)]) == ((3.0, 2), (3.0, 1))
    occ = Occupancy(0.0)
    occ.add(0.0, 10.0, 3)
    occ.add(5.0, 20.0, 2)
    assert occ.max_and_last_end(0.0, 8.0) == (5, 10.0)
    assert occ.max_and_last_end(10.0, 10.0) == (0, 10.0)
    assert occ.max_and_first_start(6.0, 30.0) == (5, 5.0)
    assert occ.value_at(15.0) == 2 and occ.value_at(25.0) == 0


# --- the policy --------------------------------------------------------------------------------


def _pending(job_id: int, size: int, walltime: float, kind: JobKind = JobKind.RIGID) -> JobView:
    evolving = kind is JobKind.EVOLVING
    return job(
        job_id,
        size,
        kind=kind,
        nodes_min=1 if evolving else size,
        nodes_max=4 if evolving else size,
        submit=0.0,
        walltime=walltime,
    )


def _running(
    job_id: int,
    size: int,
    start: float,
    end: float,
    *,
    kind: JobKind = JobKind.RIGID,
    request: int = 0,
    first: int = 0,
) -> JobView:
    evolving = kind is JobKind.EVOLVING
    return job(
        job_id,
        size,
        kind=kind,
        running=True,
        node_prefix=f"x{job_id}_",
        requested=1 if evolving else size,
        nodes_min=1 if evolving else size,
        nodes_max=4 if evolving else size,
        submit=0.0,
        start=start,
        walltime=7.0 if evolving else end - start,
        end=end,
        request=request,
    )


def _policy(variant: str) -> KleinPerez:
    return KleinPerez(KleinPerez.Config(fit=variant), profiles={B: B_PROFILE})


def _snapshot(time_s: float, idle: int, *jobs: JobView) -> ClusterSnapshot:
    return snapshot(*jobs, idle=idle, total=4, time_s=time_s)


def test_noX_at_time_0_starts_A_and_C_and_plans_B_at_5():
    # three pending jobs, the example's list: A and C start; B is planned at 5 (see above)
    snap = _snapshot(
        0.0,
        4,
        _pending(A, 1, 4.0),
        _pending(C, 2, 10.0),
        _pending(B, 1, 7.0, JobKind.EVOLVING),
    )
    plan = _policy("noX").plan(snap)
    assert list(plan.decisions) == [
        Start(A, 1, "its noX schedule starts now"),
        Start(C, 2, "its noX schedule starts now"),
    ]
    assert plan.next_starts == {A: 0.0, C: 0.0, B: 5.0}
    assert plan.next_action_s == 5.0
    assert plan.jobs[B] == ((5.0, 7.0, 1), (7.0, 10.0, 2), (10.0, 12.0, 4))


def test_noX_starts_B_at_5():
    # at 5: A ended at 4, C runs until 10, one node idle. B's first step fits now and the
    # others follow without waiting (step 2 at 7 on the 2 nodes A and B leave, step 3 at 10).
    snap = _snapshot(5.0, 2, _running(C, 2, 0.0, 10.0), _pending(B, 1, 7.0, JobKind.EVOLVING))
    assert _policy("noX").decide(snap, TICK) == [Start(B, 1, "its noX schedule starts now")]


def test_2X_starts_B_at_2_and_serves_its_requests_when_planned():
    policy = _policy("2X")
    # t = 2: A (1 node, until 4) and C (2 nodes, until 10) run, 1 node idle: B starts
    snap = _snapshot(
        2.0,
        1,
        _running(A, 1, 0.0, 4.0),
        _running(C, 2, 0.0, 10.0),
        _pending(B, 1, 7.0, JobKind.EVOLVING),
    )
    assert policy.decide(snap, TICK) == [Start(B, 1, "its 2X schedule starts now")]
    # t = 4: A ended; B finished step 1 and waits for +1 node (5 s of work left): served now
    grow = "its 2X schedule starts the next step now"
    b_waiting = _running(B, 1, 2.0, 9.0, kind=JobKind.EVOLVING, request=1)
    snap = _snapshot(4.0, 1, _running(C, 2, 0.0, 10.0), b_waiting)
    assert policy.decide(snap, TICK) == [Expand(B, 1, grow)]
    # t = 7: B finished step 2 and asks for +2; C holds 2 nodes until 10: B waits (step 2 is
    # expanded by 3 s, within the limit)
    b_waiting = _running(B, 2, 2.0, 9.0, kind=JobKind.EVOLVING, request=2)
    plan = policy.plan(_snapshot(7.0, 0, _running(C, 2, 0.0, 10.0), b_waiting))
    assert plan.decisions == ()
    assert plan.next_starts == {B: 10.0}
    assert plan.jobs[B] == ((7.0, 10.0, 2), (10.0, 12.0, 4))
    # t = 10: C ended, 2 nodes idle: step 3 starts
    snap = _snapshot(10.0, 2, _running(B, 2, 2.0, 12.0, kind=JobKind.EVOLVING, request=2))
    assert policy.decide(snap, TICK) == [Expand(B, 2, grow)]


def test_a_release_is_served_when_the_next_step_starts():
    # B (1, 2, 1 nodes: steps of 2, 3, 2 s) ended step 2 at 7 and gives one node back; nothing
    # else runs. Its last step fits at once: Shrink by 1, before any start.
    policy = KleinPerez(profiles={B: ((2.0, 1), (3.0, 2), (2.0, 1))})
    b = _running(B, 2, 2.0, 9.0, kind=JobKind.EVOLVING, request=-1)
    snap = _snapshot(7.0, 2, b, _pending(9, 2, 5.0))
    assert policy.decide(snap, TICK) == [
        Shrink(B, 1, "its noX schedule starts the next step now"),
        Start(9, 2, "its noX schedule starts now"),
    ]


def test_rigid_jobs_only_is_conservative_backfilling():
    # 4 nodes; A holds 2 until 10. B (4 nodes, 5 s) is reserved at 10; C (2 nodes, 10 s) ends
    # by then and starts now; D (2 nodes, 11 s) would overlap B's reservation: it waits.
    snap = _snapshot(
        0.0,
        2,
        _running(A, 2, 0.0, 10.0),
        _pending(5, 4, 5.0),
        _pending(6, 2, 10.0),
        _pending(7, 2, 11.0),
    )
    plan = KleinPerez().plan(snap)
    assert list(plan.decisions) == [Start(6, 2, "its noX schedule starts now")]
    assert plan.next_starts == {5: 10.0, 6: 0.0, 7: 15.0}


def test_an_evolving_job_without_profile_preallocates_its_maximum():
    # no profile: the running evolving job (1 node, up to 4, until 10) holds a pre-allocation
    # of 4 nodes, so the 2-node rigid job cannot start before 10; its request for 2 more
    # nodes is served at once from the idle nodes.
    e = _running(B, 1, 0.0, 10.0, kind=JobKind.EVOLVING, request=2)
    snap = _snapshot(1.0, 3, e, _pending(9, 2, 5.0))
    plan = KleinPerez().plan(snap)
    assert list(plan.decisions) == [Expand(B, 2, "its noX schedule starts the next step now")]
    assert plan.next_starts[9] == 10.0


def test_a_snapshot_off_its_profile_falls_back_to_a_preallocation():
    # B holds 3 nodes, which no step of its profile has: planned as if it had no profile
    b = _running(B, 3, 0.0, 6.0, kind=JobKind.EVOLVING)
    plan = _policy("noX").plan(_snapshot(1.0, 1, b))
    assert plan.jobs[B] == ((1.0, 6.0, 4),)
    assert plan.decisions == ()


def test_options_and_registry():
    policy = make_policy("klein_perez", {"fit": "2X+c"})
    assert isinstance(policy, KleinPerez)
    assert (policy.limit, policy.compacting) == (2.0, True)
    custom = KleinPerez.from_options({"fit": "noX", "expand_limit": 3, "compacting": True})
    assert (custom.limit, custom.compacting) == (3.0, True)
    with pytest.raises(PolicyError, match="unknown fit variant '3X'"):
        KleinPerez.from_options({"fit": "3X"})
    with pytest.raises(PolicyError, match="at least 1"):
        KleinPerez.from_options({"expand_limit": 0.5})
    with pytest.raises(PolicyError, match="compacting must be true or false"):
        KleinPerez.from_options({"compacting": "yes"})


def test_a_job_past_its_estimate_keeps_its_nodes():
    # A (2 of 4 nodes) should have ended at 5 but still runs at 6: it is expected to end just
    # after now, not now. B (4 nodes, 5 s) is reserved then; C (2 nodes, 3 s) would overlap
    # B's reservation on the 2 idle nodes, so it waits until B ends (about 11).
    snap = _snapshot(6.0, 2, _running(A, 2, 0.0, 5.0), _pending(5, 4, 5.0), _pending(6, 2, 3.0))
    plan = KleinPerez().plan(snap)
    assert plan.decisions == ()
    assert 6.0 < plan.next_starts[5] < 6.001
    assert plan.next_starts[6] == pytest.approx(11.0, abs=0.001)


# --- profiles published in the job view, and jobs without one ---------------------------------


def test_a_profile_published_in_the_job_view_plans_as_one_given_to_the_constructor():
    # the 2X walk-through's first cycle, with B's profile in its view instead of the policy's
    b = dataclasses.replace(_pending(B, 1, 7.0, JobKind.EVOLVING), evolution_profile=B_PROFILE)
    snap = _snapshot(2.0, 1, _running(A, 1, 0.0, 4.0), _running(C, 2, 0.0, 10.0), b)
    published = KleinPerez(KleinPerez.Config(fit="2X")).plan(snap)
    given = _policy("2X").plan(_snapshot(2.0, 1, *snap.jobs[:2], _pending(B, 1, 7.0, E_KIND)))
    assert published.decisions == given.decisions == (Start(B, 1, "its 2X schedule starts now"),)
    assert published.jobs == given.jobs


def test_an_evolving_job_without_profile_starts_at_its_size_not_a_preallocation(caplog):
    # 16 nodes; a rigid job holds 8 until 100. Pending evolving job 2 asks for 2 nodes (1 to
    # 16, as Lina et al.'s conversion makes them: up to 8x its size). It starts now on 2 nodes
    # (before the fix: planned as a pre-allocation of 16 nodes, so it waited until 100).
    # Jobs without a profile are reported once per policy, not once per cycle.
    rigid = job(1, 8, running=True, walltime=100.0, end=100.0)
    evolving = job(2, 2, kind=E_KIND, nodes_min=1, nodes_max=16, walltime=10.0)
    policy = KleinPerez()
    with caplog.at_level(logging.WARNING, logger="elastic_slurm.plugins.policies.klein_perez"):
        for _ in range(3):
            plan = policy.plan(snapshot(rigid, evolving, idle=8))
    assert plan.decisions == (Start(2, 2, "its noX schedule starts now"),)
    assert plan.jobs[2] == ((0.0, 10.0, 2),)
    warnings = [r for r in caplog.records if "no evolution profile" in r.getMessage()]
    assert len(warnings) == 1


def test_a_running_job_without_profile_grows_when_the_plan_has_room():
    # 8 nodes: evolving job 1 (2 nodes, 1 to 8, until 50) asks for 4 more; rigid job 2 holds 3
    # until 20; 3 idle. The grown size (6) fits only when job 2 ends: it waits, holding its 2.
    # Pending rigid job 3 (3 nodes, 10 s) may not take the nodes job 1 waits for after 20,
    # but fits before: it starts now.
    evolving = job(1, 2, kind=E_KIND, running=True, nodes_min=1, nodes_max=8, end=50.0, request=4)
    rigid = job(2, 3, running=True, end=20.0)
    plan = KleinPerez().plan(snapshot(evolving, rigid, job(3, 3, walltime=10.0), idle=3))
    assert plan.decisions == (Start(3, 3, "its noX schedule starts now"),)
    assert plan.next_starts[1] == 20.0


def test_decide_stops_placing_once_nothing_can_start_now():
    # 4 nodes all busy until 10; six rigid jobs queued. Nobody can start now, so decide()
    # places none of them, and decides what the complete plan decides (nothing).
    queue = [_pending(10 + i, 1 + i % 3, 5.0) for i in range(6)]
    snap = _snapshot(0.0, 0, _running(A, 4, 0.0, 10.0), *queue)
    policy = KleinPerez()
    fast, full = policy.plan(snap, complete=False), policy.plan(snap, complete=True)
    assert fast.decisions == full.decisions == ()
    assert not {j.job_id for j in queue} & set(fast.jobs)
    # one idle node: the first 1-node job can start now, so the list is placed up to it
    snap = _snapshot(0.0, 1, _running(A, 3, 0.0, 10.0), *queue)
    fast, full = policy.plan(snap, complete=False), policy.plan(snap, complete=True)
    assert fast.decisions == full.decisions == (Start(10, 1, "its noX schedule starts now"),)
