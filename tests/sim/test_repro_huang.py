"""The quick Huang et al. reproduction runs, draws its figure and returns its checks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from elastic_slurm.model import (
    ClusterSnapshot,
    JobKind,
    JobState,
    JobView,
    NodeState,
    NodeView,
    Trigger,
)
from elastic_slurm.model.estimates import TRUE_RUNTIMES
from elastic_slurm.model.speedup import DowneyLow
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.simulator.repro import Section
from elastic_slurm.simulator.repro.huang import (
    POLICIES,
    READINGS,
    SDSC,
    ImprovedAsPrinted,
    reproduce,
    sensitivity_table,
    simulate,
    trace_dir,
    unresolved,
)

pytestmark = pytest.mark.skipif(
    not (trace_dir() / SDSC).is_file(), reason=f"the SDSC-SP2 trace is not in {trace_dir()}"
)


def test_quick_reproduction_returns_checks_beside_the_paper(tmp_path: Path) -> None:
    lines: list[str] = []
    section = reproduce(tmp_path, quick=True, progress=lines.append)
    assert isinstance(section, Section)
    assert lines and lines[0].startswith("huang:")
    # 3 comparisons x 2 load factors on SDSC-SP2, 2 "up to" checks, and the other traces
    sdsc = [c for c in section.checks if c.what.startswith("SDSC-SP2,")]
    assert len(sdsc) == 6
    assert any("up to 78" in c.paper for c in section.checks)
    assert any("up to 89" in c.paper for c in section.checks)
    assert any("not in the paper" in c.what for c in section.checks)
    for c in section.checks:
        assert c.ours.endswith("%") and isinstance(c.agrees, bool)
    assert [f.name for f in section.figures] == ["huang_improvement_vs_load.png"]
    assert section.figures[0].stat().st_size > 10_000
    assert "| low variance | 1 |" in section.markdown
    assert "Quick run" in section.markdown


def test_one_workload_is_deterministic() -> None:
    # the same trace prefix, model, load factor and seed give the same metrics every time
    task = (SDSC, 300, "downey_high", 2, "log_uniform", "")
    first, second = simulate(task), simulate(task)
    strip = {p: {k: v for k, v in m.items() if k != "seconds"} for p, m in first.items()}
    assert strip == {p: {k: v for k, v in m.items() if k != "seconds"} for p, m in second.items()}
    assert set(first) == {"auxiliary", "parallel", "improved", "fairshare"}
    assert all(m["jobs"] == 300 for m in first.values())


# ------------------------------------------------------------------ readings under test
def _snapshot(idle: int, *jobs: JobView) -> ClusterSnapshot:
    nodes = [NodeView(f"i{k:02d}", NodeState.IDLE) for k in range(idle)]
    for job in jobs:
        nodes += [NodeView(n, NodeState.ALLOCATED) for n in job.nodes]
    nodes.sort(key=lambda n: n.name)
    # as the simulator builds it: the policies' "runtime" estimates are the true run times
    return ClusterSnapshot(1000.0, jobs, tuple(nodes), estimates=TRUE_RUNTIMES)


def _pending(job_id: int, requested: int = 4) -> JobView:
    return JobView(
        job_id=job_id,
        kind=JobKind.MOLDABLE,
        state=JobState.PENDING,
        nodes=(),
        nodes_requested=requested,
        nodes_min=1,
        nodes_max=16,
        submit_time_s=float(job_id),
        walltime_s=2000.0,
        runtime_s=1000.0,
        speedup=DowneyLow(4, 0.5),  # highest speedup from 2A - 1 = 7 nodes
    )


def _running(job_id: int, nodes: tuple[str, ...], ends_in_s: float) -> JobView:
    return JobView(
        job_id=job_id,
        kind=JobKind.RIGID,
        state=JobState.RUNNING,
        nodes=nodes,
        nodes_requested=len(nodes),
        nodes_min=len(nodes),
        nodes_max=len(nodes),
        submit_time_s=0.0,
        start_time_s=0.0,
        runtime_s=1000.0 + ends_in_s,
        estimated_end_s=1000.0 + ends_in_s,
        end_time_s=1000.0 + ends_in_s,
    )


def _starts(policy: Policy, snap: ClusterSnapshot) -> list[tuple[int, int]]:
    return [(d.job_id, d.nodes) for d in policy.decide(snap, Trigger.periodic())]


def test_the_default_auxiliary_waits_for_the_users_size_and_aux_from_one_does_not() -> None:
    # 3 nodes free, the first job asked for 4: the default reading of [18] keeps it waiting
    # (first come, first served), the aux_from_one reading starts it on 3 (below its knee 4)
    snap = _snapshot(3, _pending(1, requested=4))
    assert _starts(POLICIES["auxiliary"](), snap) == []
    assert _starts(READINGS["aux_from_one"].policies["auxiliary"](), snap) == [(1, 3)]


def test_improved_as_printed_starts_only_the_first_job_with_every_free_node() -> None:
    # 2 waiting jobs, 2 future releases: Fig. 12's serial branch (lines 9-13) starts the first
    # job alone; uncapped it takes all 12 free nodes, capped it takes 7 (2A - 1). The default
    # improved policy gives the nodes the first cannot use to the second.
    ends = (_running(10, ("r0",), 50.0), _running(11, ("r1",), 80.0))
    snap = _snapshot(12, *ends, _pending(1), _pending(2))
    assert _starts(POLICIES["improved"](), snap) == [(1, 7), (2, 5)]
    assert _starts(ImprovedAsPrinted(), snap) == [(1, 12)]
    assert _starts(ImprovedAsPrinted(cap=True), snap) == [(1, 7)]


def test_fair_share_first_at_limit_waits_for_its_whole_limit() -> None:
    # 4 nodes, one running a sequential job (left out of the fair-share sums) for 500 s more:
    # the waiting job's limit is 4. T(n) is 3.75/n + 0.25 (x 1000 s / T(4)): 1263 s on the 3
    # free nodes now, 1000 s on 4 from t + 500 s. The default takes the earliest completion
    # (3 nodes now), the reading waits for its whole limit.
    snap = _snapshot(3, _running(10, ("r0",), 500.0), _pending(1))
    assert _starts(POLICIES["fairshare"](), snap) == [(1, 3)]
    assert _starts(READINGS["fs_first_at_limit"].policies["fairshare"](), snap) == []


@pytest.mark.parametrize("name", sorted(READINGS))
def test_each_reading_changes_what_it_names(name: str) -> None:
    task = (SDSC, 1000, "downey_low", 1, "log_uniform", "")
    base = simulate(task)
    read = simulate((*task[:5], name))
    reading = READINGS[name]
    # only the replaced policies run (all four when the workload changes)
    assert set(read) == (set(reading.policies) or set(POLICIES))
    changed = [p for p in read if read[p]["tat"] != base[p]["tat"]]
    if name == "improved_running_count":
        # it differs only when running jobs end at the same time; on the first 1,000 (and
        # 3,000) SDSC-SP2 jobs it changes no turnaround (checked), on the whole log it does. Its
        # decision is tested on a hand-built case
        # (test_improved_running_count_subtracts_running_jobs_not_release_times)
        assert not changed
        return
    assert changed, f"{name} changed no policy's turnaround"
    if reading.parallelism == "log_uniform":
        assert set(changed) <= set(reading.policies)


def test_sensitivity_table_counts_agreements_per_reading() -> None:
    cells = [("downey_low", 1)]
    table = sensitivity_table(cells, lambda *a: 10.0, lambda name, *a: -1.0)
    assert table[0][:3] == ("default", 3, 3)
    assert [r[0] for r in table[1:]] == list(READINGS)
    assert all(r[1:3] == (0, 3) for r in table[1:])


def test_aux_request_knee_cuts_a_users_size_above_the_knee() -> None:
    # DowneyLow(4, 0.5): S(n)^2 / n peaks at n = A = 4 (the knee). The user asked for 8 nodes
    # and 6 are free: the default reading of [18] waits for its 8 (its range is 8..8), the
    # aux_request_knee reading cuts the size to the knee and starts it on 4.
    snap = _snapshot(6, _pending(1, requested=8))
    assert _starts(POLICIES["auxiliary"](), snap) == []
    assert _starts(READINGS["aux_request_knee"].policies["auxiliary"](), snap) == [(1, 4)]
    # a user's size below the knee is kept as the smallest size: 3 nodes free, asked for 4
    snap = _snapshot(3, _pending(1, requested=4))
    assert _starts(READINGS["aux_request_knee"].policies["auxiliary"](), snap) == []


def test_est_users_limits_counts_releases_by_the_time_limits() -> None:
    # two running jobs really end together (+50 s: one future release time) but their time
    # limits end apart (+100 s and +200 s: two). Three jobs wait, 12 nodes are free.
    # Exact run times: 3 waiting > 1 release, the first 2 share the 12 nodes (6 each).
    # Time limits: 3 > 2, only the first job is allocated by the parallel branch (7, its
    # highest speedup, 2A - 1); the 5 left go to the next job.
    ends = (
        replace(_running(10, ("r0",), 50.0), estimated_end_s=1100.0),
        replace(_running(11, ("r1",), 50.0), estimated_end_s=1200.0),
    )
    snap = _snapshot(12, *ends, _pending(1), _pending(2), _pending(3))
    assert _starts(POLICIES["improved"](), snap) == [(1, 6), (2, 6)]
    assert _starts(READINGS["est_users_limits"].policies["improved"](), snap) == [(1, 7), (2, 5)]


def test_est_users_limits_reserves_for_fair_share_by_the_time_limits() -> None:
    # 4 nodes, one running a sequential job that really ends in 100 s, its time limit in
    # 5,000 s. The waiting job (limit 4, the only parallel job) runs T(n) = 3.75/n + 0.25
    # times 1,000 s (exact) or 2,000 s (its time limit) / T(4). Exact: 1,263 s on the 3 free
    # nodes now, or 1,000 s on 4 from +100 s: it waits (a reservation). By the time limits:
    # 2,526 s on 3 now, or 2,000 s on 4 from +5,000 s: it starts now on 3.
    running = replace(_running(10, ("r0",), 100.0), estimated_end_s=6000.0)
    snap = _snapshot(3, running, _pending(1))
    assert _starts(POLICIES["fairshare"](), snap) == []
    assert _starts(READINGS["est_users_limits"].policies["fairshare"](), snap) == [(1, 3)]


def test_unresolved_names_the_groups_no_reading_reproduces() -> None:
    # one SDSC-SP2 point: improved loses to fair share (wait and run both longer) under the
    # default and every reading but fs_no_speedup_cap; parallel over auxiliary +99 %
    loads = {(SDSC, "downey_low"): (1,)}
    tats = {"auxiliary": 1000.0, "parallel": 10.0, "improved": 9.0, "fairshare": 6.0}
    rows = {p: {"tat": t, "wait": t / 3, "run": 2 * t / 3} for p, t in tats.items()}

    def imp(trace: str, model: str, lf: int, a: str, b: str) -> float:
        return 100.0 * (tats[b] - tats[a]) / tats[b]

    def imp_read(name: str, model: str, lf: int, a: str, b: str) -> float:
        if name == "fs_no_speedup_cap" and b == "fairshare":
            return 5.0
        return imp(SDSC, model, lf, a, b)

    text = unresolved({SDSC: None}, loads, lambda *a: rows, imp, [("downey_low", 1)], imp_read)
    assert "*Improved over fair share*" in text
    assert "worse at 1 of 1 points" in text and "At 1 of the 1 points quoted" in text
    assert "On SDSC-SP2 the reading `fs_no_speedup_cap`, is positive at 1 of 1" in text
    assert "*Up to 78 %" in text and "No reading's largest improvement comes within 20" in text
    # only the readings that change an improvement are listed, with their range
    assert "`fs_no_speedup_cap` +5 % to +10 %, positive at 2 of 2" in text
    assert "`aux_from_one`" not in text
    assert "*Up to 89 %" in text
    # nothing to account for when every check agrees
    tats.update(auxiliary=45.0, fairshare=30.0, parallel=10.0, improved=1.2)
    assert unresolved({SDSC: None}, loads, lambda *a: rows, imp, [], imp_read) == ""


def test_improved_running_count_subtracts_running_jobs_not_release_times() -> None:
    # two running jobs end together (+50 s): one release time, two running jobs. Three jobs
    # wait on 12 free nodes. The default: 3 - 1 = 2 jobs share the nodes (6 each). Fig. 12's
    # line 1: 3 - 2 = 1 job, allocated 7 (2A - 1), the 5 left to the next job.
    ends = (_running(10, ("r0",), 50.0), _running(11, ("r1",), 50.0))
    snap = _snapshot(12, *ends, _pending(1), _pending(2), _pending(3))
    assert _starts(POLICIES["improved"](), snap) == [(1, 6), (2, 6)]
    reading = READINGS["improved_running_count"].policies["improved"]()
    assert _starts(reading, snap) == [(1, 7), (2, 5)]
