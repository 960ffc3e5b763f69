"""One job record and one metrics function for the simulator, a controller's journal and live
validation: the same schedule measured the three ways gives the same numbers."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_slurm.controller import report
from elastic_slurm.model import JobKind
from elastic_slurm.model.speedup import Linear
from elastic_slurm.simulator import SimJob, run
from elastic_slurm.simulator.cluster import JobRecord
from elastic_slurm.simulator.metrics import compute_metrics, measured
from elastic_slurm.simulator.output import node_assignment
from elastic_slurm.validation.compare import RunTimes, compare


def simulated():  # noqa: ANN201
    jobs = [
        SimJob(i, 9.0 * i, 30.0 + 7 * (i % 4), 1 + i % 3, walltime_s=90.0) for i in range(1, 25)
    ]
    jobs[4] = SimJob(
        5, 36.0, 80.0, 2, kind=JobKind.MALLEABLE, nodes_min=1, nodes_max=4, speedup=Linear()
    )
    return run(jobs, "pending_first", nodes=4)


def as_journal(result: Any) -> list[dict[str, Any]]:
    """The simulated schedule as a controller would journal it: a ``sizes`` record at every
    change, with node names (rigid jobs keep theirs; a resized job's names follow its size)."""
    start_nodes = node_assignment(result.timeline, result.nodes)
    held: dict[int, int] = {}
    times = sorted({r.submit_s for r in result.records} | {t for t, _, _ in result.timeline})
    by_time: dict[float, list[tuple[int, int]]] = {}
    for t, job_id, count in result.timeline:
        by_time.setdefault(t, []).append((job_id, count))
    kinds = {r.job_id: str(r.kind) for r in result.records}
    out = []
    for t in times:
        for job_id, count in by_time.get(t, []):
            held[job_id] = count
        jobs = []
        free = [f"n{i}" for i in range(result.nodes)]
        used = {f"n{i}" for j, c in held.items() if c for i in start_nodes[j]}
        spare = [n for n in free if n not in used]
        for r in result.records:
            if r.submit_s <= t < r.start_s:
                jobs.append(
                    {"job_id": r.job_id, "kind": kinds[r.job_id], "state": "pending", "nodes": []}
                )
            elif held.get(r.job_id):
                own = [f"n{i}" for i in start_nodes[r.job_id]][: held[r.job_id]]
                while len(own) < held[r.job_id]:
                    own.append(spare.pop(0))
                jobs.append(
                    {"job_id": r.job_id, "kind": kinds[r.job_id], "state": "running", "nodes": own}
                )
        out.append({"t": 1000.0 + t, "kind": "sizes", "nodes_total": result.nodes, "jobs": jobs})
    return out


def test_a_journal_of_a_simulated_schedule_measures_the_same() -> None:
    result = simulated()
    assert result.metrics.expansions and result.metrics.shrinks  # a job changes size
    journal = as_journal(result)
    # utilisation: journal window = first submission to last end = the simulator's makespan
    assert report.average_utilization(journal) == pytest.approx(result.metrics.utilization)
    # job records: the simulator's, from the journal
    got = {r.job_id: r for r in report.job_records(journal)}
    origin = min(r.submit_s for r in result.records)  # the journal's times start at 0
    for r in result.records:
        j = got[r.job_id]
        assert isinstance(j, JobRecord)
        want = (r.submit_s - origin, r.start_s - origin, r.end_s - origin)
        assert (j.submit_s, j.start_s, j.end_s) == pytest.approx(want)
        assert j.node_s == pytest.approx(r.node_s)
    # job metrics: jobs running at the first record are left out (submission unknown)
    first = {j["job_id"] for j in journal[0]["jobs"] if j["state"] == "running"}
    want = compute_metrics([r for r in result.records if r.job_id not in first], result.nodes)
    m = report.job_metrics(journal)
    for key in ("avg_wait_s", "p95_wait_s", "avg_turnaround_s", "avg_bounded_slowdown"):
        assert getattr(m, key) == pytest.approx(getattr(want, key))
    s = report.summary(journal)
    assert s["avg_wait_s"] == pytest.approx(want.avg_wait_s)
    assert "mean wait" in report.summary_line(s)


def test_validation_of_a_schedule_against_itself_has_no_error() -> None:
    result = simulated()
    live = RunTimes(
        {
            r.job_id: measured(r.job_id, r.submit_s, r.start_s, r.end_s, r.node_s)
            for r in result.records
        },
        result.nodes,
    )
    sim = RunTimes({r.job_id: r for r in result.records}, result.nodes)
    c = compare(live, sim)
    assert all(row["relative_error"] == 0 for row in c.aggregate)
    util = next(row for row in c.aggregate if row["measure"] == "utilisation")
    assert util["simulated"] == result.metrics.utilization


def test_shared_nodes_count_once_in_the_journal_s_records() -> None:
    def sizes(t: float, *jobs: tuple[int, list[str]]) -> dict[str, Any]:
        listed = [{"job_id": i, "state": "running", "nodes": n} for i, n in jobs]
        return {"t": t, "kind": "sizes", "nodes_total": 4, "jobs": listed}

    journal = [sizes(0, (1, ["a", "b"]), (2, ["b", "c"])), sizes(10)]
    one, two = report.job_records(journal)
    assert (one.node_s, two.node_s) == (20.0, 10.0)  # b counted once, for job 1
    times, values = report.utilization_series(journal)
    assert report.average_utilization(journal) == pytest.approx(values[0]) == 0.75


def test_one_spelling() -> None:
    import elastic_slurm.controller.report as r
    import elastic_slurm.validation.compare as v

    assert not [n for n in dir(r) + dir(v) if "utilisation" in n]
    assert "utilization" in compute_metrics([measured(1, 0, 0, 1, 1)], 1).as_dict()
