"""Start daemons in the foreground, and stop exactly those (by PID, never by name).

A PID alone can be reused by another process after ours ends, so a record keeps the process's
start time (field 22 of ``/proc/PID/stat``, in clock ticks since boot) and a PID is treated as
ours only while both match.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DaemonRecord:
    """A process the local cluster started.

    Parameters
    ----------
    name
        A label such as ``slurmd@n1``.
    pid
        Its process id.
    start_ticks
        Its start time in clock ticks since boot (identifies it together with ``pid``).
    argv
        The command it runs.
    log
        The file its standard output and error go to.
    """

    name: str
    pid: int
    start_ticks: int
    argv: tuple[str, ...]
    log: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DaemonRecord:
        """The inverse of :meth:`to_json`."""
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            start_ticks=int(data["start_ticks"]),
            argv=tuple(data["argv"]),
            log=str(data["log"]),
        )


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may contain spaces and parentheses: split after the last ')'
    return raw[raw.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, or ``None`` if it does not exist."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def is_alive(rec: DaemonRecord) -> bool:
    """True while the recorded process runs (same PID and start time, not a zombie)."""
    fields = _stat_fields(rec.pid)
    if not fields:
        return False
    return int(fields[19]) == rec.start_ticks and fields[0] not in ("Z", "X")


def start_daemon(
    name: str,
    argv: Sequence[str],
    log: Path,
    *,
    preexec_fn: Callable[[], None] | None = None,
    env: Mapping[str, str] | None = None,
    user: str | None = None,
    group: str | None = None,
) -> DaemonRecord:
    """Start ``argv`` in a new session with output to ``log`` and return its record.

    The daemon must run in the foreground (``-D``, ``-F``), so that the PID is the daemon's.

    Raises
    ------
    OSError
        The program cannot be started.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec_fn,
            env=dict(env) if env is not None else None,
            user=user,
            group=group,
            close_fds=True,
        )
    ticks = start_ticks(proc.pid)
    if ticks is None:  # it died at once; keep a record that is never alive
        ticks = -1
    return DaemonRecord(name, proc.pid, ticks, tuple(argv), str(log))


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: init reaps it


def signal_pid(pid: int, sig: int) -> None:
    """Send ``sig`` to ``pid``; a process that has already gone is fine."""
    try:
        os.kill(pid, sig)
    except OSError as exc:
        if exc.errno != errno.ESRCH:
            raise


def _wait_gone(records: list[DaemonRecord], timeout_s: float) -> list[DaemonRecord]:
    """Wait until the processes have exited (reaping our own children); return the others."""
    deadline = time.monotonic() + timeout_s
    live = list(records)
    while live:
        for r in live:
            _reap(r.pid)
        live = [r for r in live if is_alive(r)]
        if not live or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    for r in records:
        if r not in live:
            _reap(r.pid)  # it may have turned zombie after the reap above
    return live


def stop(records: Iterable[DaemonRecord], timeout_s: float = 10.0) -> list[str]:
    """Stop the recorded processes: SIGTERM, then SIGKILL after ``timeout_s`` seconds.

    Returns
    -------
    list of str
        Names of the processes that needed SIGKILL.
    """
    live = [r for r in records if is_alive(r)]
    for r in live:
        signal_pid(r.pid, signal.SIGTERM)
    stubborn = _wait_gone(live, timeout_s)
    for r in stubborn:
        signal_pid(r.pid, signal.SIGKILL)
    _wait_gone(stubborn, 5.0)
    return [r.name for r in stubborn]


def stop_pids(pids: Iterable[int], timeout_s: float = 5.0) -> int:
    """Stop processes found by PID (inside the cluster's namespaces), as :func:`stop` does.

    Returns the number of processes that were running.
    """
    records = []
    for pid in pids:
        ticks = start_ticks(pid)
        if ticks is not None and pid != os.getpid():
            records.append(DaemonRecord(f"pid {pid}", pid, ticks, (), ""))
    stop(records, timeout_s)
    return len(records)
