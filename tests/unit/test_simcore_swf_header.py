"""Real traces read right: N/A header values, header lines never malformed, MaxProcs not a
multiple of MaxNodes, the first K records, zero-run-time jobs dropped (issue 17, item 5)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from elastic_slurm.simulator import load_workload
from elastic_slurm.simulator.swf import TraceError, read_swf
from elastic_slurm.simulator.workload import from_swf


def job(number: int, run_time: int = 100, procs: int = 4) -> str:
    return f"{number} {number} 5 {run_time} {procs} -1 -1 {procs} 200 -1 1 7 3 -1 1 -1 -1 -1\n"


def parse(text: str, **kwargs):  # noqa: ANN201
    return read_swf(io.StringIO(text), **kwargs)


@pytest.mark.parametrize("value", ["N/A", "n/a", "NA"])
def test_a_numeric_directive_may_be_not_applicable(value: str) -> None:
    trace = parse(f"; MaxRuntime: {value}\n; MaxNodes: 8\n" + job(1))  # strict mode
    assert trace.header.get("MaxRuntime") == value
    assert trace.header.get_int("MaxRuntime") is None
    assert trace.header.max_nodes == 8
    assert len(trace.jobs) == 1 and trace.skipped == ()


def test_a_bad_header_line_is_never_a_malformed_line_when_skipping(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = "; MaxNodes: many\n; MaxProcs: 16\n" + job(1) + "2 x\n"
    trace = parse(text, on_error="skip")
    assert [n for n, _ in trace.skipped] == [4]  # the job line only
    assert [n for n, _ in trace.ignored_directives] == [1]
    assert trace.header.max_nodes is None  # ignored, not read as some other number
    assert "; MaxNodes: many" in trace.header.lines
    assert "skipped 1 malformed line(s)" in caplog.text
    assert "ignored 1 header directive(s)" in caplog.text
    with pytest.raises(TraceError, match=r":1: directive MaxNodes is 'many'"):
        parse(text)  # strict mode still names it


def test_max_records_counts_records_before_any_filter_and_stops_reading() -> None:
    text = job(1) + "; a comment\n" + job(2, run_time=0) + "3 bad line\n" + job(4) + job(5)
    trace = parse(text, on_error="skip", max_records=3, drop_zero_runtime=True)
    assert [j.job_number for j in trace.jobs] == [1]  # records 1-3: job 1, job 2 (0 s), bad
    assert trace.dropped_zero_runtime == 1
    assert len(trace.skipped) == 1
    assert [
        j.job_number for j in parse(text + "garbage\n", on_error="raise", max_records=1).jobs
    ] == [1]  # the malformed lines after the first record are never read
    assert parse(job(1), max_records=0).jobs == ()
    with pytest.raises(ValueError, match="not both"):
        parse(job(1), max_records=1, max_jobs=1)


def test_zero_run_time_jobs_are_kept_unless_dropped_and_the_drop_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = "; MaxNodes: 8\n; MaxProcs: 8\n" + job(1) + job(2, run_time=0) + job(3, run_time=0)
    assert len(parse(text).jobs) == 3
    with caplog.at_level(logging.WARNING):
        trace = parse(text, drop_zero_runtime=True)
    assert [j.job_number for j in trace.jobs] == [1]
    assert trace.dropped_zero_runtime == 2
    assert "dropped 2 job(s) whose run time is 0" in caplog.text
    report = from_swf(trace).report
    assert report is not None
    assert (report.records, report.kept) == (3, 1)
    assert dict(report.dropped)["with run time 0 (dropped by read_swf)"] == 2
    assert "2 with run time 0" in report.describe()


def test_maxprocs_not_a_multiple_of_maxnodes_keeps_the_node_count_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # CEA-Curie's header: 93,312 processors on 5,544 nodes of several sizes
    text = "; MaxNodes: 5544\n; MaxProcs: 93312\n" + job(1, procs=16) + job(2, procs=93312)
    with caplog.at_level(logging.WARNING):
        workload = from_swf(parse(text))
    assert workload.nodes == 5544  # not 5,544 one-processor nodes
    assert workload.report is not None and workload.report.procs_per_node == 17
    assert [j.nodes_requested for j in workload.jobs] == [1, 5489]  # the widest job fits
    assert "MaxProcs 93312 is not a multiple of MaxNodes 5544" in caplog.text
    assert "assuming 5544 nodes of 17 processors" in caplog.text
    caplog.clear()
    exact = from_swf(parse("; MaxNodes: 4\n; MaxProcs: 8\n" + job(1)))
    assert exact.report is not None and exact.report.procs_per_node == 2
    assert "not a multiple" not in caplog.text


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ("; MaxProcs: 100\n", "gives no MaxNodes: assuming MaxProcs 100 / 1 processor(s)"),
        ("; MaxNodes: 0\n; MaxProcs: 100\n", "gives no MaxNodes above 0: assuming MaxProcs 100"),
        ("; MaxNodes: N/A\n; MaxProcs: 100\n", "gives no MaxNodes: assuming MaxProcs 100"),
    ],
)
def test_a_machine_size_taken_from_maxprocs_is_said(
    header: str, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        workload = from_swf(parse(header + job(1)))
    assert workload.nodes == 100
    assert said in caplog.text and "= 100 node(s)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        from_swf(parse("; MaxNodes: 100\n; MaxProcs: 100\n" + job(1)))
    assert caplog.text == ""


def test_fewer_processors_than_nodes_is_called_a_contradiction(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        workload = from_swf(parse("; MaxNodes: 100\n; MaxProcs: 50\n" + job(1)))
    assert workload.nodes == 100
    assert "MaxProcs 50 is less than MaxNodes 100 (fewer processors than nodes)" in caplog.text
    assert "several sizes" not in caplog.text


def test_load_workload_passes_the_record_options_to_the_reader(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_text("; MaxNodes: 8\n; MaxProcs: 8\n" + "".join(job(i, i % 3) for i in range(1, 10)))
    workload = load_workload(path, max_records=6, drop_zero_runtime=True)
    assert [j.job_id for j in workload.jobs] == [1, 2, 4, 5]
    assert workload.report is not None and workload.report.records == 6
