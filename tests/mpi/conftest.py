"""Run real MPI programs under ``mpirun`` from pytest, and the data they check.

The pytest process itself never imports ``mpi4py.MPI``. A test starts
``mpirun -n K python <worker> args`` as a subprocess with a clean environment (no ``SLURM_*``,
``PMI*``, ``PMIX_*`` or ``OMPI_*`` variables inherited from an outer job) and checks its exit
status and output. The first use probes that ``mpirun`` and mpi4py really work and skips the
tests with the reason when they do not.

The test modules double as the MPI workers (``python test_x.py mode args``). A worker imports
the plain helpers below with ``from conftest import ...`` (the script's directory is first on
``sys.path``); inside pytest the same helpers come from the ``mpi_data`` fixture.

Environment overrides: ``ELASTIC_SLURM_TEST_MPIRUN`` names the launcher (default: ``mpirun`` on
``PATH``); ``ELASTIC_SLURM_TEST_MPI=0`` skips the MPI tests.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SRC_DIR = Path(__file__).resolve().parents[2] / "src"
PROBE_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 60.0

_STRIPPED_PREFIXES = ("SLURM_", "PMI", "PMIX_", "OMPI_", "PRTE_", "ORTE_")
_MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_btl": "self,vader,tcp",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",  # CMA often fails in containers
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "OMPI_MCA_mpi_yield_when_idle": "1",  # more ranks than cores: don't spin
}


def mpi_env() -> dict[str, str]:
    """Return the environment for ``mpirun``: ours, minus any outer job's launcher variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STRIPPED_PREFIXES)}
    env.update(_MPI_ENV)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC_DIR), env.get("PYTHONPATH")) if p)
    return env


def mpirun_path() -> str | None:
    """Return the launcher to use, or None when there is none."""
    return os.environ.get("ELASTIC_SLURM_TEST_MPIRUN") or shutil.which("mpirun")


@dataclass(frozen=True)
class MpiResult:
    """Outcome of one ``mpirun``."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float

    def describe(self) -> str:
        """Return the command, status and output, for assertion messages."""
        return (
            f"`{' '.join(self.argv)}` exited {self.returncode} after {self.elapsed_s:.1f} s\n"
            f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        )


def run_mpi(nprocs: int, args: Sequence[str], *, timeout_s: float = RUN_TIMEOUT_S) -> MpiResult:
    """Run ``mpirun -n nprocs python args...``; fail the test if it runs past ``timeout_s``.

    On timeout the whole process group of that ``mpirun`` (started in its own session) is killed,
    so a deadlocked job cannot outlive the test.
    """
    launcher = mpirun_path()
    if launcher is None:
        pytest.skip("mpirun not found")
    argv = (
        launcher,
        "-n",
        str(nprocs),
        "--oversubscribe",
        "--bind-to",
        "none",
        sys.executable,
        *args,
    )
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=mpi_env(),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        result = MpiResult(argv, -9, out, err, time.monotonic() - start)
        pytest.fail(f"timed out (deadlock?) after {timeout_s} s:\n{result.describe()}")
    return MpiResult(argv, proc.returncode, out, err, time.monotonic() - start)


@functools.cache
def mpi_skip_reason() -> str | None:
    """Probe once whether ``mpirun`` can start two mpi4py ranks; return why not, or None."""
    if os.environ.get("ELASTIC_SLURM_TEST_MPI", "1") == "0":
        return "ELASTIC_SLURM_TEST_MPI=0"
    if importlib.util.find_spec("mpi4py") is None or importlib.util.find_spec("numpy") is None:
        return f"mpi4py or numpy is not installed for {sys.executable} (pip install '.[mpi]')"
    launcher = mpirun_path()
    if launcher is None:
        return "no mpirun on PATH (install Open MPI or set ELASTIC_SLURM_TEST_MPIRUN)"
    code = (
        "from mpi4py import MPI; c = MPI.COMM_WORLD; n = c.allreduce(1)\n"
        "if c.Get_rank() == 0: print('mpi-probe', n, c.Get_size())"
    )
    argv = [launcher, "-n", "2", "--oversubscribe", sys.executable, "-c", code]
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=mpi_env(),
            timeout=PROBE_TIMEOUT_S,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        return f"probe `{' '.join(argv)}` did not finish within {PROBE_TIMEOUT_S} s"
    except OSError as exc:
        return f"cannot run {launcher}: {exc}"
    if done.returncode != 0 or "mpi-probe 2 2" not in done.stdout:
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-5:]
        return f"probe `{' '.join(argv)}` failed (exit {done.returncode}): {' | '.join(tail)}"
    return None


@pytest.fixture
def mpirun() -> Callable[..., MpiResult]:
    """Return :func:`run_mpi`, after skipping the test if MPI does not work here."""
    reason = mpi_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    return run_mpi


# ----------------------------------------------------------------------------------------------
# Deterministic test data (no MPI)

DTYPES = (
    "float64",
    "float32",
    "int32",
    "int64",
    "complex128",
    "uint8",
    "bool",
    "float16",  # no MPI type: sent as bytes
    ">i4",  # non-native byte order: sent as bytes
    "datetime64[s]",  # NumPy cannot export it through the buffer protocol
    "S5",
    "[('a', '<i4'), ('b', '<f8')]",  # structured
)


def parse_dtype(text: str) -> np.dtype:
    """Turn a :data:`DTYPES` entry into a dtype (structured ones are written as a descr list)."""
    return np.dtype(ast.literal_eval(text) if text.startswith("[") else text)


def make_global(shape: tuple[int, ...], dtype: Any, salt: int) -> np.ndarray:
    """Return a deterministic global array in which neighbouring elements differ, any dtype."""
    dt = np.dtype(dtype)
    n = math.prod(shape)
    base = np.arange(n, dtype=np.int64) * 7 + salt
    if dt.fields is not None:
        arr = np.zeros(n, dtype=dt)
        arr["a"] = base
        arr["b"] = base * 0.5
    elif dt.kind == "c":
        arr = (base - 1j * base).astype(dt)
    elif dt.kind == "b":
        arr = (base % 3) == 0
    elif dt.kind == "S":
        arr = np.array([str(v).encode()[-dt.itemsize :] for v in base], dtype=dt)
    else:
        arr = base.astype(dt)  # uint8 wraps modulo 256; 7 is coprime with 256
    return arr.reshape(shape)


@dataclass(frozen=True)
class MpiData:
    """The data helpers, for tests (workers import them directly)."""

    dtypes: tuple[str, ...] = DTYPES
    parse_dtype: Callable[[str], np.dtype] = parse_dtype
    make_global: Callable[..., np.ndarray] = make_global


@pytest.fixture
def mpi_data() -> MpiData:
    """Return the deterministic-data helpers shared by the MPI tests and their workers."""
    return MpiData()
