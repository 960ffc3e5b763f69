"""``elastic-slurm simulate``: JSON output, human output, plots, errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from elastic_slurm.cli import simulate
from elastic_slurm.errors import InvalidRequest, PolicyError
from elastic_slurm.simulator import SWFHeader, SWFJob, TraceError, write_swf


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="elastic-slurm")
    simulate.add_parser(p.add_subparsers(dest="command"))
    return p


def call(*argv: str) -> int:
    args = parser().parse_args(["simulate", *argv])
    return args.func(args)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    # The four-job example of test_sim_replay (4 nodes): EASY gives waits 0, 90, 0, 120.
    rows = [(1, 0, 100, 2, 100), (2, 10, 50, 4, 60), (3, 20, 5, 2, 40), (4, 30, 200, 2, 200)]
    jobs = [
        SWFJob(j, s, -1, r, n, -1, -1, n, w, -1, 1, 1, 1, -1, 1, -1, -1, -1)
        for j, s, r, n, w in rows
    ]
    path = tmp_path / "four.swf"
    write_swf(path, jobs, SWFHeader.from_directives([("MaxNodes", 4), ("MaxProcs", 4)]))
    return path


def test_json_last_line_has_the_metrics(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert call(str(trace), "--json") == 0
    out = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(out[-1])
    assert summary["jobs"] == 4
    assert summary["policy"] == "easy_backfill"
    assert summary["avg_wait_s"] == pytest.approx(52.5)
    assert summary["avg_turnaround_s"] == pytest.approx(141.25)
    assert summary["avg_bounded_slowdown"] == pytest.approx(1.6)
    assert summary["utilization"] == pytest.approx(810 / 1400)
    assert summary["makespan_s"] == 350


def test_policy_nodes_and_jobs_options(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call(str(trace), "--json", "--policy", "fcfs", "--jobs", "3", "--nodes", "8")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # 8 nodes: everything starts on arrival
    assert (summary["policy"], summary["jobs"], summary["nodes"]) == ("fcfs", 3, 8)
    assert summary["avg_wait_s"] == 0


def test_human_output_and_plots(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call(str(trace), "--plot", str(tmp_path / "figs"), "--elastic-fraction", "0.5", "--seed", "3")
    out = capsys.readouterr().out
    assert "policy easy_backfill on 4 nodes, 4 jobs (seed 3)" in out
    assert "average bounded slowdown" in out and "(bound 10 s)" in out
    pngs = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert pngs == [
        "four-easy_backfill-gantt.png",
        "four-easy_backfill-sizes.png",
        "four-easy_backfill-utilization.png",
    ]
    assert (tmp_path / "figs" / pngs[0]).read_bytes()[:4] == b"\x89PNG"


def test_errors(trace: Path, tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="known policies"):
        call(str(trace), "--policy", "nope")
    with pytest.raises(PolicyError, match="has no option"):
        call(str(trace), "--policy", "fcfs", "-o", "depth=3")
    with pytest.raises(InvalidRequest, match="KEY=VALUE"):
        call(str(trace), "-o", "depth")
    with pytest.raises(InvalidRequest, match="--nodes must be at least 1"):
        call(str(trace), "--nodes", "0")
    with pytest.raises(InvalidRequest, match="--elastic-fraction"):
        call(str(trace), "--elastic-fraction", "2")
    bad = tmp_path / "bad.swf"
    bad.write_text("1 0 0 5 1\n")
    with pytest.raises(TraceError, match=r"bad.swf:1: malformed job line: 5 fields"):
        call(str(bad))


def test_skip_bad_lines(trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "mixed.swf"
    bad.write_text(trace.read_text() + "oops\n")
    call(str(bad), "--skip-bad-lines", "--json")
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["jobs"] == 4


def test_fraction_sweep_plots(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call(
        str(trace),
        "--json",
        "--plot",
        str(tmp_path),
        "--fractions",
        "0,1",
        "--compare-policies",
        "fcfs,pending_first",
    )
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["figures"]
    names = sorted(Path(f).name for f in figures)
    assert names == [
        "four-easy_backfill-avg_turnaround_s-by-fraction.png",
        "four-easy_backfill-gantt.png",
        "four-easy_backfill-sizes.png",
        "four-easy_backfill-utilization-by-fraction.png",
        "four-easy_backfill-utilization.png",
    ]
    with pytest.raises(InvalidRequest, match="--fractions"):
        call(str(trace), "--plot", str(tmp_path), "--fractions", "0,x")


def test_compare_policies_alone_compares_at_the_elastic_fraction(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # without --fractions the policies are compared at --elastic-fraction, not ignored
    call(str(trace), "--json", "--compare-policies", "fcfs, easy_backfill")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    sweep = {point["policy"]: point for point in summary["sweep"]}
    assert sorted(sweep) == ["easy_backfill", "fcfs"]
    assert {point["elastic_fraction"] for point in sweep.values()} == {0.0}
    assert sweep["easy_backfill"]["avg_wait_s"] == pytest.approx(52.5)
    assert sweep["fcfs"]["avg_wait_s"] > sweep["easy_backfill"]["avg_wait_s"]
    assert summary["baseline"]["policy"] == "easy_backfill"


def test_policy_scoped_options_reach_the_compared_policy_they_name(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # POLICY:KEY=VALUE goes to that compared policy only: fcfs refuses an option it lacks
    with pytest.raises(PolicyError, match="policy .fcfs. has no option.*surely_not_an_option"):
        call(
            str(trace), "--json", "--compare-policies", "fcfs", "-o", "fcfs:surely_not_an_option=1"
        )
    # ... and a plain KEY=VALUE still goes to --policy's only, not to the compared fcfs
    call(str(trace), "--json", "--compare-policies", "fcfs", "-o", "estimates=runtime")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [point["policy"] for point in summary["sweep"]] == ["fcfs"]
    assert "options" not in summary["sweep"][0]
    call(
        str(trace),
        "--compare-policies",
        "fcfs,pending_first",
        "-o",
        "pending_first:expand_idle=false",
    )
    assert "  pending_first (expand_idle=False) " in capsys.readouterr().out
    with pytest.raises(InvalidRequest, match="'lina_elastic', which is neither"):
        call(str(trace), "--compare-policies", "fcfs", "-o", "lina_elastic:estimates=runtime")
    with pytest.raises(InvalidRequest, match="KEY=VALUE or POLICY:KEY=VALUE"):
        call(str(trace), "-o", "fcfs:=1")
    assert capsys.readouterr().out == ""


def test_an_unknown_compared_policy_stops_before_any_run(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(PolicyError, match="no scheduling policy named 'nope'"):
        call(str(trace), "--json", "--compare-policies", "fcfs,nope")
    with pytest.raises(PolicyError, match="'nothing'"):
        call(str(trace), "--json", "--fractions", "0,1", "--baseline", "nothing")
    assert capsys.readouterr().out == ""  # nothing ran, nothing printed


def test_records_counts_lines_and_zero_runtime_jobs_can_be_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # job 2 ran for 0 s; job 5 is past the first 4 records
    rows = [(1, 0, 100, 2), (2, 10, 0, 2), (3, 20, 5, 2), (4, 30, 200, 2), (5, 40, 10, 2)]
    jobs = [
        SWFJob(j, s, -1, r, n, -1, -1, n, 300, -1, 1, 1, 1, -1, 1, -1, -1, -1)
        for j, s, r, n in rows
    ]
    path = tmp_path / "zero.swf"
    write_swf(path, jobs, SWFHeader.from_directives([("MaxNodes", 4), ("MaxProcs", 4)]))
    call(str(path), "--records", "4", "--json")
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["jobs"] == 4
    call(str(path), "--records", "4", "--drop-zero-runtime", "--json")
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["jobs"] == 3
    with pytest.raises(InvalidRequest, match="--records must be at least 1"):
        call(str(path), "--records", "0")


def test_procs_per_node_sets_how_many_nodes_a_job_takes(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # jobs of 2 and 4 processors on 4 nodes; with 2 processors a node they take 1 and 2 nodes
    call(str(trace), "--json", "--procs-per-node", "2")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["jobs"] == 4
    assert summary["avg_wait_s"] == 0  # the widest takes 2 of the 4 nodes: none waits
    with pytest.raises(InvalidRequest, match="--procs-per-node must be at least 1"):
        call(str(trace), "--procs-per-node", "0")


def test_a_trace_with_no_job_to_simulate_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.swf"
    write_swf(path, [], SWFHeader.from_directives([("MaxNodes", 4), ("MaxProcs", 4)]))
    with pytest.raises(TraceError, match=r"empty.swf: no job to simulate \(0 of 0 jobs"):
        call(str(path))


@pytest.mark.parametrize("suffix", [".swf", ".swf.gz"])
def test_a_byte_order_mark_and_latin1_comments_do_not_stop_the_reading(
    trace: Path, tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import gzip

    text = trace.read_bytes()
    damaged = b"\xef\xbb\xbf; Note: Universit\xe4t (Latin-1)\n" + text  # BOM, then Latin-1
    path = tmp_path / f"odd{suffix}"
    path.write_bytes(gzip.compress(damaged) if suffix.endswith(".gz") else damaged)
    call(str(path), "--json")
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["jobs"], summary["avg_wait_s"]) == (4, pytest.approx(52.5))


def test_bad_periods_and_output_paths_stop_before_any_run(trace: Path, tmp_path: Path) -> None:
    for period in ("0", "-5", "inf", "nan"):
        with pytest.raises(InvalidRequest, match="--periodic must be a positive number"):
            call(str(trace), "--periodic", period)
    with pytest.raises(InvalidRequest, match=r"--jobs-out .*: directory .*nowhere does not exist"):
        call(str(trace), "--jobs-out", str(tmp_path / "nowhere" / "x.swf"))
    with pytest.raises(InvalidRequest, match=r"--jobs-csv .*: is a directory"):
        call(str(trace), "--jobs-csv", str(tmp_path))


def test_json_says_which_jobs_were_left_out(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call(str(trace), "--json", "--nodes", "2")  # job 2 asks for 4 nodes
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["jobs"] == 3
    assert summary["workload"]["records"] == 4 and summary["workload"]["kept"] == 3
    assert summary["workload"]["dropped"] == {"wider than the machine": 1}
    assert summary["workload"]["nodes"] == 2
    assert "3 of 4 jobs" in captured.err and "1 wider than the machine" in captured.err
    call(str(trace), "--json")
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["workload"]["dropped"] == {}
    assert captured.err == ""
