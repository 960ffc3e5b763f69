"""``elastic-slurm simulate``: percentiles, seeds with confidence intervals, per-job files,
one rigid baseline, progress on stderr beside ``--json``, the Gantt window."""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

from elastic_slurm.cli import simulate
from elastic_slurm.errors import ConfigError, InvalidRequest
from elastic_slurm.simulator import SWFHeader, SWFJob, read_swf, write_swf
from elastic_slurm.simulator.stats import mean_ci

needs_scipy = pytest.mark.skipif(
    importlib.util.find_spec("scipy") is None,
    reason="SciPy is not installed (--seeds' confidence intervals; the sim extra should bring it)",
)


def call(*argv: str) -> int:
    p = argparse.ArgumentParser(prog="elastic-slurm")
    simulate.add_parser(p.add_subparsers(dest="command"))
    args = p.parse_args(["simulate", *argv])
    return args.func(args)


def last_json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.fixture
def four(tmp_path: Path) -> Path:
    # EASY on 4 nodes gives waits 0, 90, 0, 120 (test_sim_replay's hand-worked example)
    rows = [(1, 0, 100, 2, 100), (2, 10, 50, 4, 60), (3, 20, 5, 2, 40), (4, 30, 200, 2, 200)]
    jobs = [
        SWFJob(j, s, -1, r, n, -1, -1, n, w, -1, 1, 1, 1, -1, 1, -1, -1, -1)
        for j, s, r, n, w in rows
    ]
    path = tmp_path / "four.swf"
    write_swf(path, jobs, SWFHeader.from_directives([("MaxNodes", 4), ("MaxProcs", 4)]))
    return path


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """120 jobs on 8 nodes, loaded enough that jobs wait."""
    rng = random.Random(5)
    jobs, t = [], 0
    for j in range(1, 121):
        t += rng.randint(0, 60)
        run_s = rng.randint(30, 600)
        n = rng.choice((1, 2, 2, 4, 8))
        jobs.append(
            SWFJob(j, t, -1, run_s, n, -1, -1, n, run_s * 2, -1, 1, j % 7, 1, -1, 1, -1, -1, -1)
        )
    path = tmp_path_factory.mktemp("busy") / "busy.swf"
    write_swf(path, jobs, SWFHeader.from_directives([("MaxNodes", 8), ("MaxProcs", 8)]))
    return path


def test_percentiles_of_wait_and_bounded_slowdown(
    four: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call(str(four), "--json")
    s = last_json(capsys)
    # waits 0, 0, 90, 120; bounded slowdowns 1, 1, 1.6, 2.8 (linear between ranks)
    assert (s["p50_wait_s"], s["p95_wait_s"], s["p99_wait_s"]) == pytest.approx((45, 115.5, 119.1))
    assert s["p50_bounded_slowdown"] == pytest.approx(1.3)
    assert s["p95_bounded_slowdown"] == pytest.approx(1.6 + 0.85 * 1.2)
    assert s["p99_bounded_slowdown"] == pytest.approx(1.6 + 0.97 * 1.2)
    call(str(four))
    out = capsys.readouterr().out
    assert "wait, 95th percentile" in out and "115.5 s" in out
    assert "bounded slowdown, 99th percentile" in out
    assert "average bounded slowdown (bound 10 s)" in out


@needs_scipy
def test_seeds_give_means_and_student_t_intervals(
    busy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ("--json", "--policy", "pending_first", "--elastic-fraction", "0.5")
    each = []
    for seed in (3, 4, 5):
        call(str(busy), *common, "--seed", str(seed))
        each.append(last_json(capsys)["avg_turnaround_s"])
    assert len(set(each)) > 1  # the seed changes which jobs are elastic
    call(str(busy), *common, "--seed", "3", "--seeds", "3")
    s = last_json(capsys)
    assert s["seeds"] == [3, 4, 5]
    assert [r["avg_turnaround_s"] for r in s["runs"]] == each
    want = mean_ci(each)
    ci = s["confidence_intervals"]["avg_turnaround_s"]
    assert s["avg_turnaround_s"] == pytest.approx(want.mean)
    assert (ci["ci_low"], ci["ci_high"]) == pytest.approx((want.low, want.high))
    assert ci["n"] == 3 and ci["confidence"] == 0.95
    call(str(busy), *common, "--seeds", "5,3")
    assert last_json(capsys)["seeds"] == [5, 3]
    call(str(busy), *common[1:], "--seeds", "2")
    out = capsys.readouterr().out
    assert "means over 2 seeds with 95 % confidence intervals (Student t)" in out
    assert " ± " in out
    call(str(busy), "--fractions", "0.5", "--compare-policies", "lina_elastic", "--seeds", "2")
    sweep = capsys.readouterr().out.split("elastic fraction sweep")[1]
    assert "lina_elastic" in sweep and " ± " in sweep and "% vs" not in sweep


def test_bad_seeds_and_windows(four: Path) -> None:
    with pytest.raises(InvalidRequest, match="--seeds"):
        call(str(four), "--seeds", "0")
    with pytest.raises(InvalidRequest, match="--seeds"):
        call(str(four), "--seeds", "1,1")
    with pytest.raises(InvalidRequest, match="--seeds"):
        call(str(four), "--seeds", "x")
    with pytest.raises(InvalidRequest, match="--window"):
        call(str(four), "--window", "5")
    with pytest.raises(InvalidRequest, match="--window"):
        call(str(four), "--window", "9:3")
    assert simulate._window("1h:2d") == (3600.0, 172800.0)


def test_missing_scipy_or_matplotlib_is_one_line_before_any_run(
    four: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    with pytest.raises(ConfigError, match=r"SciPy .*elastic-slurm\[sim\]"):
        call(str(four), "--seeds", "2")
    call(str(four), "--seeds", "1")  # one seed needs no interval
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConfigError, match=r"--plot needs matplotlib"):
        call(str(four), "--plot", str(tmp_path))


def test_per_job_files(busy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call(
        str(busy),
        "--json",
        "--jobs-out",
        str(tmp_path / "j.swf"),
        "--jobs-csv",
        str(tmp_path / "j.csv"),
    )
    s = last_json(capsys)
    assert s["job_files"] == [str(tmp_path / "j.swf"), str(tmp_path / "j.csv")]
    back = read_swf(tmp_path / "j.swf")
    assert len(back.jobs) == 120
    waits = sorted(j.wait_time for j in back.jobs)
    assert sum(waits) / 120 == pytest.approx(s["avg_wait_s"])
    assert (tmp_path / "j.csv").read_text().startswith("job_id,workload_name,profile,")


@needs_scipy
def test_one_file_per_seed(busy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call(
        str(busy),
        "--json",
        "--seeds",
        "2",
        "--elastic-fraction",
        "0.5",
        "--jobs-out",
        str(tmp_path / "k.swf.gz"),
    )
    names = sorted(Path(p).name for p in last_json(capsys)["job_files"])
    assert names == ["k-seed0.swf.gz", "k-seed1.swf.gz"]


def test_one_rigid_baseline_for_every_elastic_comparison(
    busy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call(
        str(busy),
        "--json",
        "--fractions",
        "0,0.5",
        "--compare-policies",
        "lina_elastic,pending_first",
    )
    s = last_json(capsys)
    base = s["baseline"]
    assert base["policy"] == "easy_backfill" and base["elastic_fraction"] == 0.0
    assert "rigid" in base["description"] and "easy_backfill" in base["description"]
    points = {(p["policy"], p["elastic_fraction"]): p for p in s["sweep"]}
    assert set(points) == {
        ("lina_elastic", 0.0),
        ("lina_elastic", 0.5),
        ("pending_first", 0.0),
        ("pending_first", 0.5),
    }
    for p in points.values():  # every point against the same baseline
        want = (p["avg_turnaround_s"] - base["avg_turnaround_s"]) / base["avg_turnaround_s"]
        assert p["vs_baseline"]["avg_turnaround_s"] == pytest.approx(want)
    call(str(busy), "--elastic-fraction", "0.5", "--policy", "lina_elastic", "--baseline", "fcfs")
    out = capsys.readouterr().out
    assert "rigid baseline: fcfs (default options) on the rigid trace" in out
    assert "% vs baseline" in out


def test_progress_goes_to_stderr_and_json_stays_last(
    busy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call(str(busy), "--json", "--progress", "--fractions", "0,1", "--compare-policies", "fcfs")
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1])["jobs"] == 120
    assert len(captured.out.strip().splitlines()) == 1
    lines = captured.err.strip().splitlines()
    assert lines and all(line.startswith("simulating ") for line in lines)
    assert lines[-1].endswith(")") or "jobs (100 %)" in lines[-1]
    assert "480/480 jobs (100 %)" in captured.err  # 4 runs of 120 jobs: sweep included
    call(str(busy), "--json")  # stderr is not a terminal here: nothing unless asked
    assert capsys.readouterr().err == ""


def test_the_bar_waits_a_few_seconds_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    quiet = simulate._Progress(None, 100)  # a terminal, not asked: only after the delay
    assert quiet.enabled and not quiet.plain and quiet.delay_s == simulate.PROGRESS_DELAY_S
    update = quiet.callback("run")
    assert update is not None
    update(50, 100)
    assert quiet.bar is None  # a short run shows nothing
    monkeypatch.setattr(simulate, "PROGRESS_DELAY_S", 0.0)
    shown = simulate._Progress(None, 100)
    shown.callback("run")(50, 100)  # type: ignore[misc]
    assert shown.bar is not None
    assert shown.bar.tasks[0].completed == 50 and shown.bar.tasks[0].total == 100
    shown.close()
    assert shown.bar is None
    assert simulate._Progress(False, 100).callback("run") is None  # --no-progress


def test_gantt_of_a_window(busy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call(str(busy), "--json", "--plot", str(tmp_path), "--window", "10m:1h")
    figures = sorted(Path(f).name for f in last_json(capsys)["figures"])
    assert figures == [
        "busy-easy_backfill-gantt.png",
        "busy-easy_backfill-sizes.png",
        "busy-easy_backfill-utilization.png",
    ]
    assert (tmp_path / figures[0]).read_bytes()[:4] == b"\x89PNG"
