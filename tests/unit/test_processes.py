"""Daemons started and stopped by PID and start time: ``cluster/processes.py``.

These tests start short-lived local children (``sleep``, ``echo``, a Python that ignores
SIGTERM) and always end them by their own PID.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from elastic_slurm.cluster import processes
from elastic_slurm.cluster.processes import DaemonRecord, is_alive, start_daemon, start_ticks, stop


@pytest.fixture
def started() -> Iterator[list[DaemonRecord]]:
    """Records of the children a test starts; any still running afterwards is killed."""
    records: list[DaemonRecord] = []
    yield records
    for rec in records:
        alive = is_alive(rec)  # same PID and start time: still our child
        if alive:
            os.kill(rec.pid, signal.SIGKILL)
        try:
            os.waitpid(rec.pid, 0 if alive else os.WNOHANG)
        except ChildProcessError:
            pass  # already reaped (by stop())


def _wait(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_record_json_round_trip() -> None:
    rec = DaemonRecord("slurmd@n1", 1234, 98765, ("slurmd", "-D"), "/var/log/x.log")
    data = rec.to_json()
    assert data == {
        "name": "slurmd@n1",
        "pid": 1234,
        "start_ticks": 98765,
        "argv": ("slurmd", "-D"),
        "log": "/var/log/x.log",
    }
    assert DaemonRecord.from_json({**data, "argv": list(data["argv"])}) == rec


def test_start_is_alive_and_stop(tmp_path: Path, started: list[DaemonRecord]) -> None:
    log = tmp_path / "logs" / "sleep.log"
    rec = start_daemon("sleeper", ["sleep", "30"], log)
    started.append(rec)
    assert (rec.name, rec.argv, rec.log) == ("sleeper", ("sleep", "30"), str(log))
    assert log.exists()  # the log directory is created
    assert rec.start_ticks == start_ticks(rec.pid)
    assert is_alive(rec) is True
    # the same PID with another start time is some other process
    assert is_alive(DaemonRecord("x", rec.pid, rec.start_ticks + 1, (), "")) is False
    assert stop([rec], timeout_s=5.0) == []  # SIGTERM was enough
    assert is_alive(rec) is False
    assert start_ticks(rec.pid) is None  # reaped


def test_stop_kills_a_process_that_ignores_sigterm(
    tmp_path: Path, started: list[DaemonRecord]
) -> None:
    log = tmp_path / "stubborn.log"
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    rec = start_daemon("stubborn", [sys.executable, "-c", code], log)
    started.append(rec)
    assert _wait(lambda: "ready" in log.read_text()), log.read_text()
    t0 = time.monotonic()
    assert stop([rec], timeout_s=0.3) == ["stubborn"]
    assert time.monotonic() - t0 < 5.0
    assert is_alive(rec) is False


def test_output_goes_to_the_log_and_an_ended_process_is_not_alive(
    tmp_path: Path, started: list[DaemonRecord]
) -> None:
    log = tmp_path / "echo.log"
    log.write_text("earlier line\n")
    rec = start_daemon("echo", ["sh", "-c", "echo out; echo err >&2"], log)
    started.append(rec)
    assert _wait(lambda: not is_alive(rec))  # a zombie (not yet reaped) is not alive
    assert log.read_text() == "earlier line\nout\nerr\n"  # appended, stderr included


def test_env_is_passed(tmp_path: Path, started: list[DaemonRecord]) -> None:
    log = tmp_path / "env.log"
    rec = start_daemon("env", ["sh", "-c", 'echo "$ONLY_THIS"'], log, env={"ONLY_THIS": "v 1"})
    started.append(rec)
    assert _wait(lambda: not is_alive(rec))
    assert log.read_text() == "v 1\n"


def test_start_missing_program_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        start_daemon("nope", ["/nonexistent/elastic-slurm-test-binary"], tmp_path / "x.log")


def test_missing_pid_is_not_alive() -> None:
    pid = 2**22 + 12345  # above the default pid_max: no such process
    assert start_ticks(pid) is None
    assert is_alive(DaemonRecord("gone", pid, 1, (), "")) is False
    assert stop([DaemonRecord("gone", pid, 1, (), "")]) == []


def test_signal_pid_of_a_gone_process_is_fine() -> None:
    assert processes.signal_pid(2**22 + 12345, signal.SIGTERM) is None  # ESRCH is swallowed
