"""An elastic sweep (a malleable job array) grows into idle nodes and shrinks for a rigid job
by changing how many of its tasks may run at once."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from elastic_slurm.controller.daemon import Controller
from elastic_slurm.plugins.registry import make_policy

from .helpers import all_idle, job_state, scontrol_job, wait

pytestmark = pytest.mark.slurm


def _cli(*args: str, cwd) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "elastic_slurm", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def _running_tasks(array_id: int) -> int:
    """Running tasks of the array, from squeue (one line per task)."""
    out = subprocess.run(
        ["squeue", "-h", "-r", "-j", str(array_id), "-t", "RUNNING", "-o", "%i"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return len(out.split())


def test_an_elastic_sweep_follows_free_nodes(slurm, shared_tmp):
    wait(all_idle, 60, "all nodes idle before the test")
    array = int(
        _cli(
            "submit",
            "--parsable",
            "--array=0-11%1",
            "--kind",
            "malleable",
            "--nodes",
            "1",
            "-J",
            "sweep",
            "-o",
            "/dev/null",
            "--",
            "/bin/sleep",
            "12",
            cwd=shared_tmp,
        )
    )
    controller = Controller(
        slurm, make_policy("pending_first"), poll_interval_s=0.3, min_resize_interval_s=1.0
    )
    rigid = None

    def run_until(check, timeout_s: float, what: str):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            controller.step()
            if check():
                return
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}")

    try:
        # idle nodes: the policy expands the sweep, i.e. raises its throttle, up to 4 tasks
        run_until(
            lambda: scontrol_job(array)["ArrayTaskThrottle"] == "4" and _running_tasks(array) == 4,
            60,
            "4 tasks at once",
        )
        rigid = int(
            _cli(
                "submit",
                "--parsable",
                "-N",
                "2",
                "-J",
                "rigid",
                "-o",
                "/dev/null",
                "--",
                "/bin/sleep",
                "5",
                cwd=shared_tmp,
            )
        )
        # the rigid job needs 2 nodes: the sweep shrinks to 2 tasks at once, the rigid job
        # starts when 2 tasks have finished
        run_until(lambda: scontrol_job(array)["ArrayTaskThrottle"] == "2", 30, "throttle 2")
        run_until(lambda: job_state(rigid) in ("RUNNING", "COMPLETED"), 60, "the rigid job")
        assert _running_tasks(array) <= 2
    finally:
        slurm.cancel(array, *(j for j in (rigid,) if j))
    wait(all_idle, 60, "nothing left allocated")
