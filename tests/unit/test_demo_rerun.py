"""A demo run again in the same work directory starts from a clean slate (no Slurm needed).

A cluster brought up afresh numbers its jobs from 1 again: seen with ``bash scripts/demo.sh``
run twice with the cluster recycled in between, the second malleable job found the first
job 1's directory, followed its two orders at once, and the demo failed.
"""

from __future__ import annotations

from pathlib import Path

from elastic_slurm.config import load_site
from elastic_slurm.demo.scenario import Demo, DemoOptions


def _earlier_run(workdir: Path) -> None:
    job = workdir / ".elastic-slurm" / "job-1"
    (job / "orders").mkdir(parents=True)
    (job / "orders" / "000001.json").write_text("{}")
    (workdir / ".elastic-slurm" / "job-3").mkdir()
    for name in ("journal.sqlite", "heat2d-malleable-1.out", "heat2d-rigid-3.out"):
        (workdir / name).write_text("x")


def test_a_demo_removes_only_what_an_earlier_demo_left(tmp_path: Path) -> None:
    _earlier_run(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "heat2d-other.out").write_text("mine")
    said: list[str] = []
    Demo(load_site("local"), DemoOptions(workdir=tmp_path), say=said.append)._clear_previous_run()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heat2d-other.out", "notes.txt"]
    assert said == [
        f"removed the previous demo's .elastic-slurm, journal.sqlite, heat2d-malleable-1.out, "
        f"heat2d-rigid-3.out from {tmp_path}"
    ]


def test_a_symlinked_job_tree_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "job-1").mkdir(parents=True)
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / ".elastic-slurm").symlink_to(elsewhere)
    said: list[str] = []
    Demo(load_site("local"), DemoOptions(workdir=workdir), say=said.append)._clear_previous_run()
    assert (elsewhere / "job-1").is_dir() and said == []
