"""Per-job output of a simulation: SWF with the simulated times and Batsim's jobs.csv."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from elastic_slurm.model import JobKind
from elastic_slurm.model.speedup import Linear
from elastic_slurm.simulator import SimJob, read_swf, run
from elastic_slurm.simulator.output import (
    JOBS_CSV_COLUMNS,
    interval_set,
    node_assignment,
    write_jobs_csv,
    write_jobs_swf,
)


def workload() -> list[SimJob]:
    jobs = [
        SimJob(i, 7.0 * i, 40.0 + 13 * (i % 5), 1 + i % 3, walltime_s=100.0 + i, user_id=i % 4)
        for i in range(1, 40)
    ]
    jobs[3] = SimJob(
        4, 21.0, 90.0, 2, kind=JobKind.MALLEABLE, nodes_min=1, nodes_max=6, speedup=Linear()
    )
    return jobs


@pytest.fixture(scope="module")
def result():  # noqa: ANN201
    r = run(workload(), "pending_first", nodes=6)
    assert r.metrics.expansions + r.metrics.shrinks > 0  # sizes change: the hard case
    return r


def test_swf_has_the_simulated_start_and_end(result, tmp_path: Path) -> None:  # noqa: ANN001
    jobs = {j.job_id: j for j in workload()}
    write_jobs_swf(tmp_path / "out.swf", result, jobs)
    back = read_swf(tmp_path / "out.swf")
    assert back.header.max_nodes == 6
    by_id = {j.job_number: j for j in back.jobs}
    assert set(by_id) == {r.job_id for r in result.records}
    for r in result.records:
        line = by_id[r.job_id]
        assert line.submit_time == pytest.approx(r.submit_s)
        assert line.wait_time == pytest.approx(r.start_s - r.submit_s)  # field 3
        assert line.run_time == pytest.approx(r.end_s - r.start_s)  # field 4
        assert line.requested_processors == r.nodes_requested  # field 8
        assert line.status == 1
        spec = jobs[r.job_id]
        assert line.requested_time == (spec.walltime_s if spec.walltime_s is not None else -1)
        assert line.user_id == spec.user_id
        if not (r.expansions or r.shrinks):
            assert line.allocated_processors == r.nodes_start  # field 5
        else:  # time-averaged size
            assert line.allocated_processors == round(r.node_s / r.run_s)


def _rows(result) -> list[dict[str, str]]:  # noqa: ANN001
    buf = io.StringIO()
    write_jobs_csv(buf, result, {j.job_id: j for j in workload()})
    buf.seek(0)
    return list(csv.DictReader(buf))


def _nodes(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split():
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def test_jobs_csv_columns_times_and_disjoint_nodes(result) -> None:  # noqa: ANN001
    rows = _rows(result)
    assert list(rows[0]) == list(JOBS_CSV_COLUMNS)
    assert len(rows) == len(result.records)
    records = {r.job_id: r for r in result.records}
    for row in rows:
        r = records[int(row["job_id"])]
        assert float(row["starting_time"]) == r.start_s
        assert float(row["finish_time"]) == r.end_s
        assert float(row["waiting_time"]) == r.start_s - r.submit_s
        assert float(row["execution_time"]) == r.end_s - r.start_s
        assert float(row["turnaround_time"]) == r.end_s - r.submit_s
        assert int(row["requested_number_of_resources"]) == r.nodes_requested
        assert len(_nodes(row["allocated_resources"])) == r.nodes_start
        assert row["kind"] == str(r.kind)
    # no two jobs on one node at once (the start allocations, while both run)
    for a in rows:
        for b in rows:
            if a is b:
                continue
            overlap = float(a["starting_time"]) < float(b["finish_time"]) and float(
                b["starting_time"]
            ) < float(a["finish_time"])
            if overlap and not (
                records[int(a["job_id"])].shrinks or records[int(b["job_id"])].shrinks
            ):
                assert not _nodes(a["allocated_resources"]) & _nodes(b["allocated_resources"])


def test_evalys_reads_the_jobs_csv(result, tmp_path: Path) -> None:  # noqa: ANN001
    evalys = pytest.importorskip("evalys.jobset")
    write_jobs_csv(tmp_path / "jobs.csv", result, {j.job_id: j for j in workload()})
    js = evalys.JobSet.from_csv(str(tmp_path / "jobs.csv"))
    assert len(js.df) == len(result.records)
    assert js.MaxProcs <= result.nodes
    waits = sorted(js.df["waiting_time"])
    assert waits == pytest.approx(sorted(r.wait_s for r in result.records))


def test_node_assignment_and_interval_sets() -> None:
    timeline = [(0.0, 1, 3), (0.0, 2, 1), (4.0, 1, 1), (4.0, 3, 2), (9.0, 2, 0), (9.0, 4, 1)]
    got = node_assignment(timeline, 4)
    assert got == {1: (0, 1, 2), 2: (3,), 3: (1, 2), 4: (3,)}
    assert interval_set([5, 0, 1, 2, 9, 10]) == "0-2 5 9-10"
    with pytest.raises(ValueError, match="more than 2 node"):
        node_assignment([(0.0, 1, 2), (0.0, 2, 1)], 2)


def test_evalys_measures_the_same_utilisation_of_a_rigid_run(tmp_path: Path) -> None:
    """An independent tool on our per-job output agrees with our metrics (the cross-check
    per-job output is for)."""
    evalys = pytest.importorskip("evalys.jobset")
    jobs = [
        SimJob(i, 7.0 * i, 40.0 + 13 * (i % 5), 1 + i % 3, walltime_s=100.0 + i)
        for i in range(1, 60)
    ]
    r = run(jobs, "easy_backfill", nodes=6)
    write_jobs_csv(tmp_path / "jobs.csv", r)
    js = evalys.JobSet.from_csv(str(tmp_path / "jobs.csv"), resource_bounds=(0, 5))
    assert js.mean_utilisation() / 6 == pytest.approx(r.metrics.utilization, rel=1e-9)
    assert js.df["turnaround_time"].mean() == pytest.approx(r.metrics.avg_turnaround_s)
