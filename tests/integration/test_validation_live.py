"""``elastic-slurm validate`` on the real cluster: a small slice, live and simulated.

The live numbers must be Slurm's (checked here against ``sacct`` directly), the simulated
ones the simulator's for the same jobs, and nothing of the run may be left behind.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from .helpers import all_idle, squeue_jobs, wait

pytestmark = pytest.mark.slurm


def sacct_span(job_id: int) -> tuple[int, int, int]:
    """(submit, first start, last end) of a job from ``sacct`` (seconds since the epoch)."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", str(job_id), "--format=JobIDRaw,Submit,Start,End"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SLURM_TIME_FORMAT": "%s"},
    ).stdout
    rows = [ln.split("|") for ln in out.splitlines() if ln.startswith(f"{job_id}|")]
    return (
        min(int(r[1]) for r in rows),
        min(int(r[2]) for r in rows),
        max(int(r[3]) for r in rows),
    )


def test_validate_a_small_slice(local_cluster, tmp_path):
    wait(all_idle, 60, "all nodes idle before the test")
    out = tmp_path / "val"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "elastic_slurm",
            "validate",
            "--jobs",
            "6",
            "--span",
            "20",
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["jobs"] == 6 and summary["nodes"] == 4
    measures = {r["measure"]: r for r in summary["aggregate"]}
    for m in ("mean turnaround (s)", "mean wait (s)", "makespan (s)", "utilisation"):
        assert measures[m]["live"] > 0 and measures[m]["simulated"] > 0
        expected = abs(measures[m]["live"] - measures[m]["simulated"]) / measures[m]["live"]
        assert measures[m]["relative_error"] == pytest.approx(expected)
    assert 0 < measures["utilisation"]["live"] <= 1
    with open(out / "jobs.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 6
    spans = {int(r["slurm_job_id"]): sacct_span(int(r["slurm_job_id"])) for r in rows}
    for r in rows:  # the live side is what Slurm recorded, not what the jobs claimed
        submit, start, end = spans[int(r["slurm_job_id"])]
        assert float(r["live_turnaround_s"]) == pytest.approx(end - submit)
        assert float(r["live_wait_s"]) == pytest.approx(start - submit)
    assert (out / "live-vs-sim.png").stat().st_size > 10_000
    assert "controller:" in (out / "controller.log").read_text()
    # nothing left: no job of the run in the queue, the controller gone, every node idle
    assert not [j for j in squeue_jobs() if j[0] in spans]
    ps = subprocess.run(["pgrep", "-f", str(out / "journal.sqlite")], capture_output=True)
    assert ps.returncode == 1, ps.stdout
    wait(all_idle, 30, "every node idle")
