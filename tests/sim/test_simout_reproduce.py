"""``elastic-slurm reproduce`` from anywhere: traces as an option, nothing written into the
source tree unless asked, a failing paper as a failed check."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from elastic_slurm.cli import reproduce
from elastic_slurm.errors import InvalidRequest
from elastic_slurm.simulator import repro

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reproduction.md"


def call(*argv: str) -> int:
    p = argparse.ArgumentParser(prog="elastic-slurm")
    reproduce.add_parser(p.add_subparsers(dest="command"))
    args = p.parse_args(["reproduce", *argv])
    return args.func(args)


def test_the_report_goes_to_the_current_folder_not_the_docs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = DOCS.read_bytes() if DOCS.exists() else None
    monkeypatch.chdir(tmp_path)
    assert call("--quick", "--paper", "klein_perez") == 0
    assert (tmp_path / "reproduction.md").read_text().startswith("# Reproducing")
    assert (tmp_path / "reproduction" / "klein_perez.png").is_file()
    assert f"wrote {tmp_path / 'reproduction.md'}" in capsys.readouterr().out
    assert (DOCS.read_bytes() if DOCS.exists() else None) == before


def test_out_takes_a_folder_or_a_file(tmp_path: Path) -> None:
    assert reproduce.report_path(tmp_path / "r", False) == tmp_path / "r" / "reproduction.md"
    assert reproduce.report_path(tmp_path / "x.md", False) == tmp_path / "x.md"
    with pytest.raises(InvalidRequest, match="either --out or --update-docs"):
        reproduce.report_path(tmp_path, True)
    with pytest.raises(InvalidRequest, match="without --quick"):
        call("--quick", "--update-docs")


def test_update_docs_names_the_checkout_s_report() -> None:
    assert reproduce.report_path(None, True) == DOCS.resolve()


def test_a_missing_traces_folder_is_one_line_naming_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidRequest, match=r"--traces DIR") as err:
        call(
            "--quick",
            "--paper",
            "huang",
            "--traces",
            str(tmp_path / "nope"),
            "--out",
            str(tmp_path),
        )
    assert "\n" not in str(err.value)
    monkeypatch.setenv("ELASTIC_SLURM_WORKLOADS", str(tmp_path / "gone"))
    with pytest.raises(InvalidRequest, match="ELASTIC_SLURM_WORKLOADS"):
        call("--quick", "--paper", "lina", "--out", str(tmp_path))
    assert not (tmp_path / "reproduction.md").exists()


def test_a_failing_paper_is_a_failed_check_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    rc = call("--quick", "--paper", "huang", "--traces", str(empty), "--out", str(tmp_path))
    assert rc == 1
    text = (tmp_path / "reproduction.md").read_text()
    assert "Traceback" not in text and 'File "' not in text
    assert "| the reproduction of `huang` runs | did not run: TraceError:" in text
    captured = capsys.readouterr()
    assert "did not run" in captured.out
    assert "Traceback" in captured.err  # for whoever debugs it


def test_traces_reach_the_papers_then_the_environment_is_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ELASTIC_SLURM_WORKLOADS", raising=False)
    seen = []

    def fake(out_dir: Path, *, quick: bool, progress: object) -> repro.Section:
        seen.append(repro.trace_dir())
        return repro.Section("fake", "text", checks=[repro.Check("x", "1", "1", True)])

    import elastic_slurm.simulator.repro.ghafoor as ghafoor

    monkeypatch.setattr(ghafoor, "reproduce", fake)
    repro.build_report(tmp_path / "r.md", papers=["ghafoor"], traces=tmp_path)
    assert seen == [tmp_path]
    assert repro.trace_dir() != tmp_path


def test_the_cli_lists_the_same_papers() -> None:
    assert reproduce.PAPERS == repro.PAPERS


def test_from_an_installed_copy_outside_the_checkout(tmp_path: Path) -> None:
    """The package copied away from the checkout (as a wheel installs it): no docs to update,
    no traces beside it, the report in the current folder."""
    import os
    import shutil
    import subprocess
    import sys

    import elastic_slurm

    src = Path(elastic_slurm.__file__).resolve().parent  # the package under test
    site = tmp_path / "a" / "b" / "c" / "site-packages"  # deep enough that no shared/ is near
    shutil.copytree(src, site / "elastic_slurm", ignore=shutil.ignore_patterns("__pycache__"))
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ELASTIC_SLURM_WORKLOADS"}
    env["PYTHONPATH"] = str(site)

    def elastic(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "elastic_slurm", "reproduce", *argv],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    docs = elastic("--update-docs")
    assert docs.returncode == 2 and "not a checkout" in docs.stderr
    assert len(docs.stderr.strip().splitlines()) == 1
    traces = elastic("--quick", "--paper", "huang")
    assert traces.returncode == 2 and "--traces DIR" in traces.stderr
    assert "Traceback" not in traces.stderr
    ok = elastic("--quick", "--paper", "klein_perez")
    assert ok.returncode == 0, ok.stderr
    assert (work / "reproduction.md").is_file() and (
        work / "reproduction" / "klein_perez.png"
    ).is_file()
    assert not (site / "docs").exists()
