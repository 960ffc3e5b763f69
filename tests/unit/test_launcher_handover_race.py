"""A successor that took over and ended before its predecessor's ``mpirun`` is not a failure.

Seen with ``elastic-slurm try`` on a program with millisecond iterations: after a restart
handover the new generation finished its remaining work and exited while the old generation's
``mpirun`` was still tearing down; the launcher took the successor's end for a failed handover,
failed the order, then restarted the application from a checkpoint it had already dropped.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from elastic_slurm.model.resize_order import AckStatus
from elastic_slurm.mpi_runtime import handover
from elastic_slurm.mpi_runtime.launcher import _Generation
from elastic_slurm.mpi_runtime.local_launcher import LocalLauncher
from elastic_slurm.protocol.jobdir import JobDir


def _launcher(tmp_path: Path) -> LocalLauncher:
    jobdir = JobDir(tmp_path / "job")
    jobdir.create()
    return LocalLauncher(["app.py"], ranks=1, jobdir=jobdir, env={}, timeout_s=60)


def test_handed_over_reads_the_manifest_of_that_order_and_generation(tmp_path: Path) -> None:
    jobdir = JobDir(tmp_path / "job")
    jobdir.create()
    assert not handover.handed_over(jobdir, 2, 1)
    jobdir.checkpoint.mkdir()
    (jobdir.checkpoint / "manifest.json").write_text(json.dumps({"seq": 2, "launch": 1}))
    assert handover.handed_over(jobdir, 2, 1)
    assert not handover.handed_over(jobdir, 3, 1)
    assert not handover.handed_over(jobdir, 2, 0)
    (jobdir.checkpoint / "manifest.json").write_text("{half")
    assert not handover.handed_over(jobdir, 2, 1)
    for bad in ([2], "two", None, {"n": 2}, 1e400):  # well-formed JSON, malformed values
        (jobdir.checkpoint / "manifest.json").write_text(json.dumps({"seq": bad, "launch": 1}))
        assert not handover.handed_over(jobdir, 2, 1)


def test_a_successor_that_ended_after_the_handover_is_kept(tmp_path: Path) -> None:
    launcher = _launcher(tmp_path)
    current = _Generation(subprocess.Popen(["sleep", "30"]), ("local1",), 1, [], time.monotonic())
    done = subprocess.Popen(["true"])
    done.wait()
    waiting = _Generation(done, ("local1",), 2, [], time.monotonic(), successor=2)
    try:
        launcher.jobdir.checkpoint.mkdir()
        (launcher.jobdir.checkpoint / "manifest.json").write_text(
            json.dumps({"seq": 2, "launch": 1})
        )
        assert launcher._tend_successor(current, waiting) is waiting
        assert launcher.jobdir.read_ack(2, AckStatus.FAILED) is None
    finally:
        current.proc.kill()
        current.proc.wait()


def test_a_successor_that_ended_before_the_handover_fails_the_order(tmp_path: Path) -> None:
    launcher = _launcher(tmp_path)
    current = _Generation(subprocess.Popen(["sleep", "30"]), ("local1",), 1, [], time.monotonic())
    done = subprocess.Popen(["false"])
    done.wait()
    waiting = _Generation(done, ("local1",), 2, [], time.monotonic(), successor=2)
    try:
        assert launcher._tend_successor(current, waiting) is None
        ack = launcher.jobdir.read_ack(2, AckStatus.FAILED)
        assert ack is not None and "ended (status 1) before the handover" in ack.reason
    finally:
        current.proc.kill()
        current.proc.wait()
