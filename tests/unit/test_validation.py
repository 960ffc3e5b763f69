"""Live validation's pure parts: the trace mapping, the comparison, the simulated side."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.request import JobKind
from elastic_slurm.plugins.registry import make_policy
from elastic_slurm.simulator.metrics import measured
from elastic_slurm.simulator.swf import SWFJob
from elastic_slurm.validation.compare import RunTimes, compare, relative_error
from elastic_slurm.validation.live import request_for
from elastic_slurm.validation.mapping import map_trace, slice_trace
from elastic_slurm.validation.simulated import sim_jobs, simulate


def job(n: int, submit: float, run: float, procs: int) -> SWFJob:
    return SWFJob(n, submit, 0, run, procs, -1, -1, procs, run, -1, 1, 1, 1, 1, 1, 1, -1, -1)


def test_sizes_times_and_kinds_follow_the_documented_rule() -> None:
    jobs = [job(i, 1000 + 100 * i, 100 * (i + 1), p) for i, p in enumerate([1, 32, 33, 64, 65])]
    s = map_trace(jobs, nodes=4, trace_nodes=128, compress=10, malleable_fraction=0.4)
    assert [t.nodes for t in s.jobs] == [1, 1, 2, 2, 3]  # ceil(p * 4 / 128)
    assert [t.arrival_s for t in s.jobs] == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert [t.runtime_s for t in s.jobs] == [10.0, 20.0, 30.0, 40.0, 50.0]
    # 2 of 5, spread: job i is malleable when floor((i + 1) * 0.4) goes up
    assert [t.malleable for t in s.jobs] == [False, False, True, False, True]
    m, r = s.jobs[2], s.jobs[0]
    assert (m.nodes_min, m.nodes_max) == (1, 4) and (r.nodes_min, r.nodes_max) == (1, 1)
    assert s.jobs[0].walltime_s == 2 * 10.0 + 60.0


def test_clamping_and_default_compression() -> None:
    jobs = [job(1, 0, 30, 4), job(2, 6000, 60000, 4)]
    s = map_trace(jobs, nodes=4, trace_nodes=128, target_span_s=600, max_runtime_s=60)
    assert s.compress == pytest.approx(10.0)  # 6000 s of arrivals into 600 s
    assert [t.runtime_s for t in s.jobs] == [6.0, 60.0] and s.clamped == 2
    assert s.jobs[1].arrival_s == 600.0


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"nodes": 0}, "must be >= 1"),
        ({"malleable_fraction": 1.5}, "malleable_fraction"),
        ({"compress": -1.0}, "compress must be positive"),
        ({"min_runtime_s": 90.0, "max_runtime_s": 60.0}, "min_runtime_s"),
    ],
)
def test_bad_mapping_options(options: dict, words: str) -> None:
    kw = {"nodes": 4, "trace_nodes": 128, **options}
    with pytest.raises(InvalidRequest, match=words):
        map_trace([job(1, 0, 10, 1)], **kw)
    with pytest.raises(InvalidRequest, match="no usable jobs"):
        map_trace([], nodes=4, trace_nodes=128)


def test_slice_trace_reads_swf_and_skips_unusable_jobs(tmp_path: Path) -> None:
    path = tmp_path / "t.swf.gz"
    lines = ["; MaxNodes: 16", "; MaxProcs: 16"]
    lines += [
        " ".join(map(str, [1, 0, 0, 100, 4, -1, -1, 4, 200, -1, 1, 1, 1, 1, 1, 1, -1, -1])),
        " ".join(map(str, [2, 50, 0, 0, 4, -1, -1, 4, 200, -1, 0, 1, 1, 1, 1, 1, -1, -1])),
        " ".join(map(str, [3, 100, 0, 200, 16, -1, -1, 16, 400, -1, 1, 1, 1, 1, 1, 1, -1, -1])),
    ]
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    s = slice_trace(path, count=10, nodes=4, compress=10, min_runtime_s=1)
    assert [t.trace_id for t in s.jobs] == [1, 3] and s.trace_nodes == 16
    assert [t.nodes for t in s.jobs] == [1, 4] and s.source == "t.swf.gz"


def test_compare_by_hand() -> None:
    live = RunTimes({1: measured(1, 0, 2, 12, 10), 2: measured(2, 1, 1, 21, 40)}, 2)
    sim = RunTimes({1: measured(1, 0, 0, 10, 10), 2: measured(2, 1, 1, 16, 30)}, 2)
    c = compare(live, sim)
    agg = {r["measure"]: r for r in c.aggregate}
    # live: turnarounds 12, 20 (mean 16); sim: 10, 15 (mean 12.5)
    assert agg["mean turnaround (s)"]["relative_error"] == pytest.approx(3.5 / 16)
    # live waits 2, 0 (mean 1); sim 0, 0
    assert agg["mean wait (s)"]["relative_error"] == pytest.approx(1.0)
    assert live.metrics.makespan_s == 21 and sim.metrics.makespan_s == 16
    # live waits 2, 0: the 95th percentile by linear interpolation is 1.9; bounded slowdowns
    # max(1, 12 / 10) = 1.2 and 1 (live), 1 and 1 (simulated)
    assert agg["95th percentile wait (s)"]["live"] == pytest.approx(1.9)
    assert agg["mean bounded slowdown"]["live"] == pytest.approx(1.1)
    assert agg["mean bounded slowdown"]["simulated"] == pytest.approx(1.0)
    assert agg["utilisation"]["live"] == pytest.approx(50 / 42)
    assert agg["utilisation"]["simulated"] == pytest.approx(40 / 32)
    rows = {r["trace_id"]: r for r in c.per_job}
    assert rows[1]["wait_error"] == pytest.approx(1.0)  # |2 - 0| / 2
    assert rows[2]["turnaround_error"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="differ in jobs"):
        compare(live, RunTimes({1: sim.jobs[1]}, 2))
    assert relative_error(0.5, 0.0) == 0.5  # floor of 1 s


def test_simulated_side_uses_the_same_jobs_and_policy() -> None:
    jobs = [job(1, 0, 600, 128), job(2, 60, 600, 32), job(3, 120, 300, 64)]
    s = map_trace(jobs, nodes=4, trace_nodes=128, compress=10, malleable_fraction=1 / 3)
    simjobs = sim_jobs(s, resize_cost_s=2.0)
    assert [j.kind for j in simjobs] == [JobKind.RIGID, JobKind.RIGID, JobKind.MALLEABLE]
    assert simjobs[2].resize_cost is not None and simjobs[2].resize_cost.cost_s(2, 3) == 2.0
    times, result = simulate(s, make_policy("fcfs"), 2.0)
    # FCFS, rigid job 1 holds all 4 nodes 0..60 s; job 2 (1 node) then starts at 60 s
    assert times.jobs[1].end_s == pytest.approx(60.0)
    assert times.jobs[2].start_s == pytest.approx(60.0)
    assert len(result.records) == 3
    # one record and one metrics function: the simulator's records, its measures
    assert set(times.jobs.values()) == set(result.records)
    for key in ("avg_wait_s", "avg_turnaround_s", "p95_wait_s", "utilization", "makespan_s"):
        assert getattr(times.metrics, key) == getattr(result.metrics, key)


def test_live_records_from_sacct_are_the_simulator_s_record() -> None:
    from elastic_slurm.simulator.cluster import JobRecord
    from elastic_slurm.validation.live import parse_sacct

    text = "7|100|110|130|2|RESIZING\n7|130|130|150|4|COMPLETED\n8|100|100|160|1|COMPLETED\n"
    got = parse_sacct(text, {1: 7, 2: 8}, {1: JobKind.MALLEABLE})
    assert got is not None and all(isinstance(r, JobRecord) for r in got.values())
    one, two = got[1], got[2]
    assert (one.kind, one.nodes_start, one.nodes_end, one.expansions, one.shrinks) == (
        JobKind.MALLEABLE,
        2,
        4,
        1,
        0,
    )
    assert one.node_s == 2 * 20 + 4 * 20 and (one.wait_s, one.turnaround_s) == (10.0, 50.0)
    assert two.kind is JobKind.RIGID and two.node_s == 60.0


def test_requests_for_the_live_jobs() -> None:
    jobs = [job(1, 0, 600, 64), job(2, 60, 600, 32)]
    s = map_trace(jobs, nodes=4, trace_nodes=128, compress=10, malleable_fraction=0.5)
    rigid, malleable = (request_for(j, python="/py") for j in s.jobs)
    assert rigid.kind is JobKind.RIGID and rigid.nodes_min == rigid.nodes_max == 2
    assert rigid.program[0] == "/py" and rigid.program[-2:] == ("--ref-nodes", "1")
    assert malleable.kind is JobKind.MALLEABLE and malleable.nodes_start == 1
    assert malleable.program[-4:] == ("--ref-nodes", "1", "--max-nodes", "4")
    assert rigid.walltime.total_seconds() == 180.0  # 2 * 60 s (clamped run time) + 60 s
