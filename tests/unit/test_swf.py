"""SWF reader and writer: header directives, -1, comments, malformed lines, gz, round trip."""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path

import pytest

from elastic_slurm.simulator.swf import (
    FIELDS,
    SWFHeader,
    SWFJob,
    TraceError,
    format_job,
    read_swf,
    write_swf,
)

HEADER = """\
; Version: 2.2
; Computer: IBM SP2
; Information: http://www.example.org/
;              http://www.cs.huji.ac.il/labs/parallel/workload/
; MaxNodes: 128
; MaxProcs: 256
; Note: first note
; Note: second note
;   a continuation line without a key
"""

JOBS = """\
1 0 10 100 4 -1 -1 4 200 -1 1 7 3 -1 1 -1 -1 -1
2   5   0  50  -1 12.50 -1 8 -1 -1 0 8 3 -1 2 -1 -1 -1

; a comment between jobs
3 9 -1 -1 2 -1 -1 -1 60 -1 5 9 3 -1 1 -1 -1 -1
"""


def parse(text: str, **kwargs):  # noqa: ANN201
    return read_swf(io.StringIO(text), **kwargs)


def test_header_directives_are_parsed_case_insensitively_and_repeated_keys_kept() -> None:
    trace = parse(HEADER + JOBS)
    h = trace.header
    assert (h.max_nodes, h.max_procs) == (128, 256)
    assert h.get("maxprocs") == "256"
    assert h.get("Information") == "http://www.example.org/"
    assert [v for k, v in h.directives if k == "Note"] == ["first note", "second note"]
    # the indented URL is a continuation, not a directive named "http"
    assert h.get("http") is None
    assert len(h.lines) == 10  # 9 header lines + the comment between jobs
    assert h.unix_start_time is None


def test_job_fields_keep_minus_one_and_decimals() -> None:
    jobs = parse(HEADER + JOBS).jobs
    assert len(jobs) == 3
    assert jobs[0] == SWFJob(1, 0, 10, 100, 4, -1, -1, 4, 200, -1, 1, 7, 3, -1, 1, -1, -1, -1)
    assert jobs[1].average_cpu_time == 12.5 and isinstance(jobs[1].average_cpu_time, float)
    assert jobs[1].allocated_processors == -1
    assert jobs[2].run_time == -1
    assert len(FIELDS) == 18 and SWFJob._fields == FIELDS


def test_processors_prefer_requested_then_allocated() -> None:
    jobs = parse(JOBS).jobs
    assert jobs[0].processors == 4  # both given
    assert jobs[1].processors == 8  # allocated missing: requested
    assert jobs[2].processors == 2  # requested missing: allocated
    missing = SWFJob(*([4, 0, 0, 1, -1] + [-1] * 13))
    assert missing.processors == -1


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("1 0 10 100 4 -1 -1 4 200 -1 1 7 3 -1 1 -1 -1", "17 fields, expected 18"),
        ("1 0 10 100 4 -1 -1 4 200 -1 1 7 3 -1 1 -1 -1 -1 9", "19 fields, expected 18"),
        ("1 0 10 1O0 4 -1 -1 4 200 -1 1 7 3 -1 1 -1 -1 -1", "field 4 (run_time) is '1O0'"),
        ("1 0 10 100 4 -1 -1 4 nan -1 1 7 3 -1 1 -1 -1 -1", "field 9 (requested_time) is 'nan'"),
        # issue 14: inf, huge and negative numbers, other scripts' digits, absurd lines
        ("1 0 10 100 4 -1 -1 4 1e400 -1 1 7 3 -1 1 -1 -1 -1", "field 9 (requested_time) is"),
        ("1 0 10 100 4 -1 -1 4 inf -1 1 7 3 -1 1 -1 -1 -1", "field 9 (requested_time) is 'inf'"),
        ("1 0 10 -5 4 -1 -1 4 200 -1 1 7 3 -1 1 -1 -1 -1", "field 4 (run_time) is '-5', not -1"),
        ("1 0 10 100 4 -1 -1 4 -0.5 -1 1 7 3 -1 1 -1 -1 -1", "field 9 (requested_time) is '-0.5'"),
        (
            "1 0 10 100 99999999999999999 -1 -1 4 200 -1 1 7 3 -1 1 -1 -1 -1",
            "field 5 (allocated_processors) is '99999999999999999', not -1 (missing) or 0 to",
        ),
        ("1 0 10 100 4 -1 -1 4 200 -1 1 7 3 -1 1 -1 -1 " + "9" * 900, "field 18 (think_time) is"),
        ("1 0 10 1_000 4 -1 -1 4 200 -1 1 7 3 -1 1 -1 -1 -1", "field 4 (run_time) is '1_000'"),
        ("1 0 10 \u0661\u0660 4 -1 -1 4 200 -1 1 7 3 -1 1 -1 -1 -1", "field 4 (run_time) is"),
        ("1 " * 600, "1199 characters, more than 1000"),
    ],
)
def test_malformed_line_names_file_line_and_field(line: str, expected: str) -> None:
    text = "; MaxProcs: 8\n1 0 1 1 1 -1 -1 1 1 -1 1 1 1 -1 1 -1 -1 -1\n\n" + line + "\n"
    with pytest.raises(TraceError) as info:
        read_swf(io.StringIO(text))
    message = str(info.value)
    assert ":4: malformed job line: " in message  # line 4 (the blank line counts)
    assert expected in message


def test_bad_numeric_directive_is_an_error_with_its_line() -> None:
    with pytest.raises(TraceError, match=r":2: directive MaxNodes is 'many', not an integer"):
        parse("; Version: 2\n; MaxNodes: many\n")


@pytest.mark.parametrize("value", ["99999999999999999999", "-7", "\u0668"])
def test_numeric_directive_is_bounded(value: str) -> None:
    with pytest.raises(TraceError, match=r":1: directive MaxProcs is .*not an integer from -1"):
        parse(f"; MaxProcs: {value}\n")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    os.mkfifo(path)
    with pytest.raises(TraceError, match=r"t.swf: cannot read the trace: not a regular file"):
        read_swf(path)


def test_a_corrupt_gz_is_a_trace_error(tmp_path: Path) -> None:
    path = tmp_path / "t.swf.gz"
    data = gzip.compress(("1 0 1 1 1 -1 -1 1 1 -1 1 1 1 -1 1 -1 -1 -1\n" * 200).encode())
    path.write_bytes(data[:20] + bytes(b ^ 0x55 for b in data[20:-8]) + data[-8:])
    with pytest.raises(TraceError, match=r"t.swf.gz: cannot read the trace"):
        read_swf(path)


def test_skip_mode_keeps_good_lines_and_reports_each_bad_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = JOBS + "4 1 2\n5 x 0 1 1 -1 -1 1 1 -1 1 1 1 -1 1 -1 -1 -1\n"
    trace = parse(text, on_error="skip")
    assert [j.job_number for j in trace.jobs] == [1, 2, 3]
    assert [n for n, _ in trace.skipped] == [6, 7]
    assert "3 fields" in trace.skipped[0][1]
    assert "field 2 (submit_time)" in trace.skipped[1][1]
    assert "skipped 2 malformed line(s)" in caplog.text


def test_on_error_must_be_raise_or_skip() -> None:
    with pytest.raises(ValueError, match="on_error"):
        parse(JOBS, on_error="ignore")  # type: ignore[arg-type]


def test_max_jobs_stops_early() -> None:
    assert [j.job_number for j in parse(JOBS, max_jobs=2).jobs] == [1, 2]


def test_gz_is_read_directly(tmp_path: Path) -> None:
    path = tmp_path / "trace.swf.gz"
    with gzip.open(path, "wt") as f:
        f.write(HEADER + JOBS)
    trace = read_swf(path)
    assert trace.source == str(path)
    assert len(trace.jobs) == 3 and trace.header.max_procs == 256


def test_unreadable_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read the trace"):
        read_swf(tmp_path / "missing.swf")
    broken = tmp_path / "broken.swf.gz"
    broken.write_bytes(b"not gzip at all")
    with pytest.raises(TraceError, match="broken.swf.gz: cannot read"):
        read_swf(broken)


@pytest.mark.parametrize("name", ["round.swf", "round.swf.gz"])
def test_writer_round_trip(tmp_path: Path, name: str) -> None:
    original = parse(HEADER + JOBS)
    path = tmp_path / name
    write_swf(path, original.jobs, original.header)
    again = read_swf(path)
    assert again.jobs == original.jobs
    assert again.header == original.header
    # and writing the re-read trace gives the same text
    first, second = io.StringIO(), io.StringIO()
    write_swf(first, original.jobs, original.header)
    write_swf(second, again.jobs, again.header)
    assert first.getvalue() == second.getvalue()


def test_writer_formats_and_refuses_header_lines_without_semicolon() -> None:
    job = SWFJob(7, 3, -1, 12, 2, 1.5, -1, 2, 60, -1, 1, 1, 1, -1, 1, -1, -1, -1)
    assert format_job(job) == "7 3 -1 12 2 1.5 -1 2 60 -1 1 1 1 -1 1 -1 -1 -1"
    out = io.StringIO()
    write_swf(out, [job], SWFHeader.from_directives([("MaxProcs", 2)]))
    assert out.getvalue() == "; MaxProcs: 2\n" + format_job(job) + "\n"
    with pytest.raises(ValueError, match="does not start with ';'"):
        write_swf(io.StringIO(), [job], SWFHeader(lines=("MaxProcs: 2",)))


def test_shared_trace_headers() -> None:
    trace = read_swf("/work/shared/workloads/KTH-SP2-1996-2.1-cln.swf.gz", max_jobs=10)
    assert (trace.header.max_nodes, trace.header.max_procs) == (100, 100)
    assert trace.header.unix_start_time == 843480031
    assert trace.jobs[0].job_number == 15 and trace.jobs[0].run_time == 3477
