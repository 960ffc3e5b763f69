"""Every shipped policy's decisions are legal (``plugins/legality.py:check``) on any snapshot.

Random small clusters with rigid, moldable, malleable and evolving jobs, pending and running,
some resizing or past their estimates; each policy with its default options must return
decisions that :func:`~elastic_slurm.plugins.legality.check` accepts, in particular never
more nodes than are free.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from snapshots import MO, E, M, R, job, snapshot

from elastic_slurm.model import Trigger
from elastic_slurm.model.estimates import TRUE_RUNTIMES
from elastic_slurm.plugins.legality import check
from elastic_slurm.plugins.policies.coorm import EquiPartition
from elastic_slurm.plugins.policies.easy_backfill import EasyBackfill
from elastic_slurm.plugins.policies.klein_perez import KleinPerez
from elastic_slurm.plugins.policies.lina import LinaElastic
from elastic_slurm.plugins.registry import installed_registry, make_policy

TICK = Trigger.periodic()


@st.composite
def clusters(draw: st.DrawFn):
    total = draw(st.integers(1, 12))
    free = total
    jobs = []
    for job_id in range(1, draw(st.integers(0, 7)) + 1):
        kind = draw(st.sampled_from([R, MO, M, E]))
        running = draw(st.booleans()) and free > 0
        size = draw(st.integers(1, max(1, free if running else total)))
        low = draw(st.integers(1, size)) if kind is not R else size
        high = draw(st.integers(size, total + 2)) if kind is not R else size
        start = draw(st.sampled_from([0.0, 5.0]))
        walltime = draw(st.sampled_from([None, 1.0, 10.0, 100.0]))
        request = 0
        if running and kind is E:
            request = draw(st.integers(-(size - low), high - size))
        jobs.append(
            job(
                job_id,
                size,
                kind=kind,
                running=running,
                nodes_min=low,
                nodes_max=high,
                start=start,
                walltime=walltime,
                end=None if walltime is None else start + walltime,
                request=request,
                resizing=running and kind is M and draw(st.booleans()),
                node_prefix=f"j{job_id}n",
            )
        )
        if running:
            free -= size
    idle = draw(st.integers(0, free))
    now = draw(st.sampled_from([0.0, 7.0, 50.0]))
    return snapshot(*jobs, idle=idle, total=idle + (total - free), time_s=now)


POLICIES = sorted(installed_registry().names())


@pytest.mark.parametrize("name", POLICIES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=clusters())
def test_every_decision_is_legal(name, snap):
    decisions = make_policy(name).decide(snap, TICK)
    bad = [v for v in check(snap, decisions) if not v.legal]
    assert not bad, bad


def test_coorm_never_expands_beyond_the_free_nodes():
    # 150 nodes: evolving job 1 runs on 24 (1 to 150, pre-allocation 150) and asks for 126
    # more; malleable job 2 holds 100 and is resizing (it cannot be shrunk now); 26 are idle.
    # The growth inside the pre-allocation cannot take nodes job 2 still holds: 26 at most.
    # (Before the fix: Expand(1, 126), which the simulator refuses with a PolicyError.)
    snap = snapshot(
        job(1, 24, kind=E, running=True, nodes_min=1, nodes_max=150, end=100.0, request=126),
        job(2, 100, kind=M, running=True, nodes_min=1, nodes_max=150, end=100.0, resizing=True),
        idle=26,
    )
    decisions = EquiPartition().decide(snap, TICK)
    assert all(v.legal for v in check(snap, decisions)), check(snap, decisions)
    assert sum(getattr(d, "count", 0) for d in decisions) == 26


@st.composite
def profiled_clusters(draw: st.DrawFn):
    """Clusters whose evolving jobs publish random evolution profiles (on or off them)."""
    snap = draw(clusters())
    steps = st.tuples(st.sampled_from([0.0, 1.0, 3.0, 10.0]), st.integers(1, 6))
    jobs = []
    for view in snap.jobs:
        if view.kind is E and draw(st.booleans()):
            profile = draw(st.lists(steps, min_size=1, max_size=3))
            profile[0] = (profile[0][0], view.nodes_requested)
            view = dataclasses.replace(view, evolution_profile=tuple(profile))
        jobs.append(view)
    return dataclasses.replace(snap, jobs=tuple(jobs))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=profiled_clusters())
def test_klein_perez_decides_what_its_complete_plan_decides(snap):
    # decide() stops placing the list once nobody left can be given nodes now; the decisions
    # must be those of the complete plan
    policy = KleinPerez(KleinPerez.Config(fit="2X+c"))
    assert policy.decide(snap, TICK) == list(policy.plan(snap, complete=True).decisions)
    noX = KleinPerez()
    assert noX.decide(snap, TICK) == list(noX.plan(snap, complete=True).decisions)


@st.composite
def rigid_clusters(draw: st.DrawFn):
    """Rigid jobs only, with true run times no longer than their time limits."""
    total = draw(st.integers(1, 10))
    free, jobs = total, []
    for job_id in range(1, draw(st.integers(0, 8)) + 1):
        running = draw(st.booleans()) and free > 0
        size = draw(st.integers(1, free if running else total))
        walltime = draw(st.sampled_from([5.0, 20.0, 100.0]))
        runtime = walltime * draw(st.sampled_from([0.1, 0.5, 1.0]))
        start = draw(st.sampled_from([0.0, 3.0]))
        end = {"end_time_s": start + runtime} if running else {}
        jobs.append(
            job(
                job_id,
                size,
                running=running,
                start=start,
                walltime=walltime,
                end=start + walltime,
                runtime_s=runtime,
                **end,
            )
        )
        free -= size if running else 0
    idle = draw(st.integers(0, free))
    return snapshot(
        *jobs, idle=idle, total=idle + total - free, time_s=4.0, estimates=TRUE_RUNTIMES
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=rigid_clusters())
def test_lina_on_rigid_jobs_is_easy_given_the_same_estimates(snap):
    # "Compare elastic against the same rigid baseline": on a rigid workload lina_elastic
    # (estimates="runtime") starts what EASY with estimates="runtime" starts, and with
    # estimates="walltime" what plain EASY starts.
    def starts(policy):
        return [(d.job_id, d.nodes) for d in policy.decide(snap, TICK)]

    runtime = EasyBackfill(EasyBackfill.Config(estimates="runtime"))
    assert starts(LinaElastic()) == starts(runtime)
    walltime = LinaElastic(LinaElastic.Config(estimates="walltime"))
    assert starts(walltime) == starts(EasyBackfill())
