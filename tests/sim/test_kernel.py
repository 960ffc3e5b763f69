"""The compiled engine (``simulator/kernel.py``) gives the general loop's result, field for field.

FCFS and EASY on rigid jobs run compiled by default; everything else, and any run asked for
with ``SimConfig(engine="general")``, goes through the general loop that calls the policy
objects. These tests compare the two on real trace slices and on random small workloads
(equal arrival times, 0-second jobs, jobs without a time limit, jobs running past it), and
check when the compiled engine must not run.
"""

from __future__ import annotations

import functools
import math
import pickle
import warnings
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.speedup import Linear
from elastic_slurm.plugins.kit.backfill import BackfillOptions
from elastic_slurm.plugins.policies.easy_backfill import EasyBackfill
from elastic_slurm.plugins.policies.fcfs import FCFS
from elastic_slurm.simulator import (
    SimConfig,
    SimJob,
    Simulation,
    Workload,
    from_swf,
    kernel,
    read_swf,
)
from elastic_slurm.simulator.engine import EventQueue
from elastic_slurm.simulator.rigid_loop import schedule

pytest.importorskip("numba", reason="the compiled engine needs numba (the sim extra)")

WORKLOADS = Path("/work/shared/workloads")
TRACES = ["SDSC-SP2-1998-4.2-cln.swf.gz", "KTH-SP2-1996-2.1-cln.swf.gz", "lublin_256.swf.gz"]
GENERAL = SimConfig(engine="general")
POLICIES = {
    "fcfs": FCFS,
    "easy": EasyBackfill,
    "easy-runtime": lambda: EasyBackfill(BackfillOptions(estimates="runtime")),
}


@cache
def _slice(name: str, count: int) -> Workload:
    return from_swf(read_swf(WORKLOADS / name, max_jobs=count + 500), max_jobs=count)


def _both(jobs, make, nodes):  # noqa: ANN001, ANN202
    fast = Simulation(jobs, make(), nodes).run()
    slow = Simulation(jobs, make(), nodes, config=GENERAL).run()
    return fast, slow


def _same(fast, slow) -> None:  # noqa: ANN001
    assert (fast.engine, slow.engine) == ("compiled", "general")
    assert fast.records == slow.records
    assert fast.timeline == slow.timeline
    assert fast.metrics == slow.metrics  # includes the cycles and decisions
    assert fast == slow


@pytest.mark.skipif(not WORKLOADS.is_dir(), reason=f"the shared traces are not here ({WORKLOADS})")
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("name", TRACES)
def test_the_compiled_engine_gives_the_general_loop_s_result_on_real_traces(name, policy) -> None:
    workload = _slice(name, 3000)
    fast, slow = _both(workload.jobs, POLICIES[policy], workload.nodes)
    _same(fast, slow)
    waited = sum(1 for r in fast.records if r.start_s > r.submit_s)
    assert waited > 300  # a real test: a queue forms


# random small workloads: arrivals on a coarse grid (many at once), 0-second jobs, no time
# limit, run times past the limit, widths up to the whole machine, ids in any order
_job = st.tuples(
    st.integers(0, 40).map(float),  # submit
    st.sampled_from([0.0, 0.0, 1.0, 5.0, 10.0, 30.0, 7.5]),  # run time
    st.integers(1, 8),  # nodes
    st.sampled_from([None, 0.0, 5.0, 10.0, 20.0, 60.0]),  # time limit
)


@settings(max_examples=300, deadline=None)
@given(specs=st.lists(_job, min_size=1, max_size=30), policy=st.sampled_from(sorted(POLICIES)))
def test_the_compiled_engine_agrees_on_random_workloads(specs, policy) -> None:
    jobs = [
        SimJob(100 - i, submit, run, nodes, walltime_s=limit)
        for i, (submit, run, nodes, limit) in enumerate(specs)
    ]
    fast, slow = _both(jobs, POLICIES[policy], 8)
    _same(fast, slow)


def test_odd_jobs_give_the_same_result_without_warnings() -> None:
    # a job that never ends (NaN in its wait's neighbours: Python's max keeps it as numpy must)
    # and a job id beyond 64 bits (the general loop takes it)
    never = [
        SimJob(1, 0.0, math.inf, 2, walltime_s=10.0),
        SimJob(2, 1.0, 5.0, 4, walltime_s=10.0),
        SimJob(3, 2.0, 5.0, 1, walltime_s=1.0),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fast, slow = _both(never, EasyBackfill, 4)
        assert fast.engine == "compiled" and fast.records == slow.records
        assert repr(fast.metrics) == repr(slow.metrics)  # NaN and inf in the same places
        huge = [SimJob(2**70, 0.0, 5.0, 2), SimJob(2, 1.0, 5.0, 4)]
        assert Simulation(huge, FCFS(), 4).run().engine == "general"


def test_the_loop_gives_the_same_schedule_compiled_and_as_plain_python() -> None:
    workload = _slice(TRACES[2], 400) if WORKLOADS.is_dir() else None
    jobs = workload.jobs if workload else [SimJob(i, i * 3.0, 20.0, 1 + i % 4) for i in range(50)]
    nodes = workload.nodes if workload else 4
    cols = kernel.prepare(jobs, nodes)
    assert cols is not None
    for easy in (False, True):
        args = (cols.submit, cols.runtime, cols.size, cols.walltime, nodes, easy)
        compiled, plain = kernel._compiled()(*args), schedule(*args)  # type: ignore[misc]
        assert compiled[0].tolist() == plain[0].tolist()
        assert compiled[1].tolist() == plain[1].tolist() and compiled[2] == plain[2]


JOBS = [SimJob(1, 0.0, 100.0, 3, walltime_s=100.0), SimJob(2, 1.0, 10.0, 4, walltime_s=10.0)]


def test_a_running_job_past_its_estimate_is_expected_to_end_now() -> None:
    # job 1 (3 of 4 nodes) was estimated to end at 10 but runs to 100; at 20 job 2 (4 nodes)
    # is blocked: its shadow time is now (20), not 10, so job 3 (estimate 0 s) ends by it
    jobs = [
        SimJob(1, 0.0, 100.0, 3, walltime_s=10.0),
        SimJob(2, 1.0, 10.0, 4, walltime_s=10.0),
        SimJob(3, 20.0, 5.0, 1, walltime_s=0.0),
    ]
    fast, slow = _both(jobs, EasyBackfill, 4)
    _same(fast, slow)
    assert [r.start_s for r in fast.records] == [0.0, 100.0, 20.0]  # 3 ends at 25


class Slower(FCFS):
    """A subclass may decide otherwise: it never runs compiled."""


@pytest.mark.parametrize(
    ("jobs", "policy", "config", "queue", "why"),
    [
        (JOBS, Slower(), SimConfig(), None, "is not fcfs or easy_backfill"),
        (JOBS, FCFS(), SimConfig(periodic_s=10.0), None, "periodic ticks"),
        (JOBS, FCFS(), GENERAL, None, "engine 'general'"),
        (JOBS, FCFS(), SimConfig(), EventQueue(), "a queue was given"),
        (
            [*JOBS, SimJob(3, 2.0, 5.0, 2, JobKind.MALLEABLE, 1, 4, 60.0, speedup=Linear())],
            EasyBackfill(),
            SimConfig(),
            None,
            "elastic jobs",
        ),
    ],
)
def test_the_general_loop_runs_what_the_compiled_engine_cannot(
    jobs, policy, config, queue, why
) -> None:
    sim = Simulation(jobs, policy, 4, config=config, queue=queue)
    assert sim.why_general is not None and why in sim.why_general
    assert sim.run().engine == "general"


def test_a_replaced_or_wrapped_decide_is_called_every_cycle(monkeypatch) -> None:
    calls: list[float] = []
    shipped = FCFS.decide

    def spy(self, snapshot, trigger):  # noqa: ANN001, ANN202
        calls.append(snapshot.time_s)
        return shipped(self, snapshot, trigger)

    monkeypatch.setattr(FCFS, "decide", spy)
    result = Simulation(JOBS, FCFS(), 4).run()
    assert result.engine == "general" and len(calls) == result.metrics.cycles > 0
    monkeypatch.setattr(FCFS, "decide", functools.wraps(shipped)(spy))
    assert Simulation(JOBS, FCFS(), 4).why_general is not None
    monkeypatch.undo()
    policy = FCFS()
    policy.decide = lambda snapshot, trigger: shipped(policy, snapshot, trigger)  # type: ignore[method-assign]
    assert Simulation(JOBS, policy, 4).run().engine == "general"
    assert Simulation(JOBS, FCFS(), 4).run().engine == "compiled"


def test_without_numba_the_general_loop_runs(monkeypatch) -> None:
    monkeypatch.setattr(kernel, "_compiled", lambda: None)
    sim = Simulation(JOBS, FCFS(), 4)
    assert sim.why_general is not None and "numba is not installed" in sim.why_general
    assert sim.run().engine == "general"


def test_stepping_uses_the_general_loop_and_gives_the_same_result() -> None:
    sim = Simulation(JOBS, EasyBackfill(), 4)
    assert sim.why_general is None  # would run compiled
    assert sim.step()
    stepped = sim.run()
    assert stepped.engine == "general" and sim.why_general == "stepped"
    _same(Simulation(JOBS, EasyBackfill(), 4).run(), stepped)


@pytest.mark.parametrize("config", [SimConfig(), GENERAL], ids=["compiled", "general"])
def test_a_finished_run_is_not_run_again(config) -> None:  # noqa: ANN001
    sim = Simulation(JOBS, EasyBackfill(), 4, config=config)
    first = sim.run()
    assert not sim.step()  # no event left, in either engine
    second = sim.run()
    assert second == first and second.engine == first.engine
    if first.engine == "compiled":
        assert second is first  # not simulated a second time in the general loop


def test_bad_workloads_get_the_general_loop_s_errors_at_once() -> None:
    with pytest.raises(ValueError, match="appears twice"):
        Simulation([*JOBS, SimJob(1, 5.0, 1.0, 1)], FCFS(), 4)
    with pytest.raises(InvalidRequest, match="could never start"):
        Simulation([*JOBS, SimJob(3, 5.0, 1.0, 9)], FCFS(), 4)


def test_a_compiled_result_reports_progress_and_pickles_as_the_general_one() -> None:
    seen: list[tuple[int, int]] = []
    fast = Simulation(JOBS, FCFS(), 4, progress=lambda done, total: seen.append((done, total)))
    result = fast.run()
    assert result.engine == "compiled" and seen == [(2, 2)]
    again = pickle.loads(pickle.dumps(result))
    assert again == result and type(again.records) is tuple
    assert result.records[1].start_s == 100.0 and len(result.timeline) == 4
    assert result.summary()["engine"] == "compiled"


def test_where_numba_can_write_no_cache_the_loop_is_compiled_in_memory(monkeypatch) -> None:
    import numba

    real = numba.njit

    def no_cache(*args, cache=False, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        compiled = real(*args, **kw)
        if not cache:
            return compiled

        def refuse(*a):  # noqa: ANN002, ANN202
            raise RuntimeError("cannot cache function 'schedule': no locator available")

        return lambda fn: refuse

    monkeypatch.setattr(numba, "njit", no_cache)
    kernel._compiled.cache_clear()
    try:
        assert kernel._compiled() is not None
        assert Simulation(JOBS, FCFS(), 4).run().engine == "compiled"
    finally:
        kernel._compiled.cache_clear()
