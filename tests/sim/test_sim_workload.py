"""SWF jobs to simulated jobs, and Lina et al.'s elastic conversion."""

from __future__ import annotations

import io
import logging
import random

import pytest

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model import JobKind
from elastic_slurm.model.speedup import LinaOverhead, LinaResizeCost
from elastic_slurm.simulator import LinaConversion, SimJob, TraceError, from_swf, read_swf
from elastic_slurm.simulator.workload import make_elastic


def line(job: int, submit: int, run: int, alloc: int, req: int, wall: int, status: int = 1) -> str:
    return f"{job} {submit} 0 {run} {alloc} -1 -1 {req} {wall} -1 {status} 1 1 -1 1 -1 -1 -1"


TRACE = "\n".join(
    [
        "; MaxNodes: 4",
        "; MaxProcs: 8",
        line(1, 100, 50, 4, 4, 60),  # 4 procs -> 2 nodes
        line(2, 100, 30, 3, -1, -1),  # allocated 3 procs -> 2 nodes; no limit: run time
        line(3, 90, -1, 2, 2, 60),  # no run time: dropped
        line(4, 120, 0, 1, 1, 60, status=5),  # zero length, cancelled
        line(5, 130, 10, -1, -1, 60),  # no processors: dropped
        line(6, 140, 10, 10, 10, 60),  # 5 nodes > 4: too wide
        line(7, 95, 20, 1, 1, 30),
    ]
)


def trace():  # noqa: ANN201
    return read_swf(io.StringIO(TRACE))


def test_from_swf_maps_processors_to_nodes_and_reports_what_it_dropped() -> None:
    w = from_swf(trace())
    assert w.nodes == 4
    # sorted by submit time; times shifted so the first arrival is at 0
    assert [(j.job_id, j.submit_s, j.nodes_requested) for j in w.jobs] == [
        (7, 0.0, 1),
        (1, 5.0, 2),
        (2, 5.0, 2),
        (4, 25.0, 1),
    ]
    two = w.jobs[2]
    assert (two.runtime_s, two.walltime_s, two.kind) == (30.0, 30.0, JobKind.RIGID)
    report = w.report
    assert report is not None
    assert (report.records, report.kept, report.procs_per_node) == (7, 4, 2)
    dropped = dict(report.dropped)
    assert dropped["without run time"] == 1
    assert dropped["without processor count"] == 1
    assert dropped["wider than the machine"] == 1
    assert report.walltime_from_runtime == 1
    assert "4 of 7 jobs" in report.describe()


def test_from_swf_options() -> None:
    assert [j.job_id for j in from_swf(trace(), min_runtime_s=1).jobs] == [7, 1, 2]
    assert [j.job_id for j in from_swf(trace(), statuses=frozenset({1})).jobs] == [7, 1, 2]
    assert [j.job_id for j in from_swf(trace(), max_jobs=2).jobs] == [7, 1]
    assert from_swf(trace(), walltime_fallback="none").jobs[2].walltime_s is None
    w = from_swf(trace(), nodes=8, procs_per_node=1)
    assert [j.nodes_requested for j in w.jobs] == [1, 4, 3, 1, 10][: len(w.jobs)]
    with pytest.raises(TraceError, match="job 6 asks for 5 node"):
        from_swf(trace(), too_wide="error")
    with pytest.raises(InvalidRequest, match="at least 1 node"):
        from_swf(trace(), nodes=0)


def test_machine_size_without_header_is_the_widest_job(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "elastic_slurm.simulator.workload"):
        w = from_swf(read_swf(io.StringIO(line(1, 0, 5, 3, 3, 9))))
    assert w.nodes == 3
    assert "no machine size" in caplog.text and "3 node(s)" in caplog.text  # never silent
    caplog.clear()
    header = "; MaxNodes: 0\n; MaxProcs: N/A\n"  # neither is a machine size
    with caplog.at_level(logging.WARNING, "elastic_slurm.simulator.workload"):
        w = from_swf(read_swf(io.StringIO(header + line(1, 0, 5, 4, 4, 9))))
    assert w.nodes == 4 and "no machine size" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, "elastic_slurm.simulator.workload"):
        w = from_swf(read_swf(io.StringIO("; MaxNodes: 16\n" + line(1, 0, 5, 4, 4, 9))))
    assert w.nodes == 16 and caplog.text == ""


def jobs(n: int) -> list[SimJob]:
    return [SimJob(i, float(i), 100.0, 1 + i % 4, walltime_s=100.0) for i in range(1, n + 1)]


def test_lina_conversion_fractions_ranges_and_models() -> None:
    base = jobs(100)
    out = LinaConversion(elastic_fraction=0.3).apply(base, random.Random(4), 16)
    kinds = [j.kind for j in out]
    assert kinds.count(JobKind.MALLEABLE) == 15 and kinds.count(JobKind.EVOLVING) == 15
    assert [j.job_id for j in out] == [j.job_id for j in base]
    for old, new in zip(base, out, strict=True):
        if new.kind is JobKind.RIGID:
            assert new == old
            continue
        p = old.nodes_requested
        assert new.nodes_min == max(1, -(-p // 2))  # 50 % of P, rounded up
        assert new.nodes_max == min(16, 8 * p)  # 800 % of P, at most the machine
        assert isinstance(new.speedup, LinaOverhead) and new.speedup.reference_nodes == p
        assert 0.005 <= new.speedup.overhead_fraction <= 0.01
        assert isinstance(new.resize_cost, LinaResizeCost)
        if new.kind is JobKind.EVOLVING:
            assert 1 <= len(new.evolving) <= 4
            assert all(0.4 <= e.at_work <= 0.7 for e in new.evolving)
            assert all(1 <= abs(e.delta_nodes) <= p for e in new.evolving)
        else:
            assert new.evolving == ()


def test_lina_conversion_is_seeded_and_odd_counts_favour_malleable() -> None:
    base = jobs(11)
    conv = LinaConversion(elastic_fraction=0.3)  # round(3.3) = 3: 2 malleable, 1 evolving
    a = conv.apply(base, random.Random(1), 8)
    assert a == conv.apply(base, random.Random(1), 8)
    assert [j.kind for j in a].count(JobKind.MALLEABLE) == 2
    assert [j.kind for j in a].count(JobKind.EVOLVING) == 1
    with pytest.raises(InvalidRequest, match="between 0 and 1"):
        LinaConversion(elastic_fraction=1.5)


def test_make_elastic_keeps_the_machine() -> None:
    w = from_swf(trace())
    e = make_elastic(w, LinaConversion(elastic_fraction=1.0), seed=3)
    assert e.nodes == w.nodes and len(e.jobs) == len(w.jobs)
    assert all(j.kind is not JobKind.RIGID for j in e.jobs)
