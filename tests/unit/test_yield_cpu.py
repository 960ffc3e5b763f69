"""The old generation's ranks yield the cores to their starting successor (``yield_cpu``).

Each case runs in a child process: a lowered priority cannot be raised again.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CODE = """
import os, threading
from elastic_slurm.mpi_runtime.handover import yield_cpu
go, other = threading.Event(), []
def watcher():  # a thread that was running already, as rank 0's order watcher is
    go.wait()
    other.append(os.getpriority(os.PRIO_PROCESS, 0))
t = threading.Thread(target=watcher, daemon=True)
t.start()
got = yield_cpu()
go.set(); t.join()
print(got, os.getpriority(os.PRIO_PROCESS, 0), other[0])
"""


def _run(nice: str | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("ELASTIC_SLURM_SUCCESSOR_NICE", None)
    if nice is not None:
        env["ELASTIC_SLURM_SUCCESSOR_NICE"] = nice
    return subprocess.run(
        [sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_calling_thread_takes_nice_10_by_default() -> None:
    res = _run(None)
    assert res.returncode == 0, res.stderr
    got, now, watcher = map(int, res.stdout.split())
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert got == now == max(base, 10)
    assert watcher == base  # Linux: per thread; the other threads keep theirs


@pytest.mark.parametrize(("nice", "want"), [("0", None), ("5", 5), ("19", 19)])
def test_the_variable_sets_it_and_0_turns_it_off(nice, want) -> None:
    res = _run(nice)
    assert res.returncode == 0, res.stderr
    got, now, _ = map(int, res.stdout.split())
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert got == now == (base if want is None else max(base, want))


def test_a_value_out_of_range_is_refused() -> None:
    res = _run("25")
    assert res.returncode != 0 and "ELASTIC_SLURM_SUCCESSOR_NICE=25" in res.stderr
