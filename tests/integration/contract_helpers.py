"""Helpers of the backend contract tests: jobs made and read with Slurm's own tools only.

Nothing here uses the project's builders or parsers, so the contract tests check each backend
against Slurm itself (``sbatch``, ``scontrol``, ``squeue``, ``sinfo``).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from elastic_slurm.adapter.hostlist import expand

T = TypeVar("T")

#: A job id far beyond anything the test cluster hands out (Slurm's MAX_JOB_ID is 0x03FFFFFF).
UNKNOWN_JOB = 60_000_000


def sbatch_raw(*options: str, workdir: Path, script: str = "#!/bin/sh\nsleep 300\n") -> int:
    """Submit ``script`` with ``sbatch --parsable`` and ``options``; return the job id."""
    out = subprocess.run(
        ["sbatch", "--parsable", f"--chdir={workdir}", "--output=/dev/null", *options],
        input=script,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.strip().split(";")[0])


def scontrol_steps(job_id: int) -> dict[str, tuple[str, ...]]:
    """The job's steps and their nodes from ``scontrol show step`` (``{"7.0": ("n1",)}``)."""
    res = subprocess.run(
        ["scontrol", "--oneliner", "show", "step", str(job_id)],
        capture_output=True,
        text=True,
        check=False,
    )
    steps: dict[str, tuple[str, ...]] = {}
    for line in res.stdout.splitlines():
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if "StepId" in fields:
            steps[fields["StepId"]] = expand(fields.get("NodeList"))
    return steps


def sinfo_states() -> dict[str, tuple[str, int]]:
    """``{node: (state, cpus)}`` from ``sinfo`` (state in long form: ``idle``, ``allocated``)."""
    out = subprocess.run(
        ["sinfo", "--noheader", "--Node", "--format=%N %T %c"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {n: (s, int(c)) for n, s, c in (line.split() for line in out.splitlines() if line)}


def array_tasks(array_id: int) -> list[tuple[str, str]]:
    """``(task id, state)`` of every task of a job array still in ``squeue`` (one per line)."""
    out = subprocess.run(
        ["squeue", "--noheader", "--array", f"--jobs={array_id}", "--format=%K|%T"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [tuple(line.split("|", 1)) for line in out.splitlines() if "|" in line]  # type: ignore[misc]


def running_tasks(array_id: int) -> int:
    """How many tasks of the array are running, from ``squeue``."""
    return sum(1 for _task, state in array_tasks(array_id) if state == "RUNNING")


def agree_when_stable(
    reference: Callable[[], T], other: Callable[[], T], tries: int = 8
) -> tuple[T, T]:
    """Read ``reference``, ``other``, ``reference`` until both reference reads agree.

    Slurm's state can change between two reads (a scheduling pass sets a reason, a job
    ends); a window where the reference did not change is one where ``other`` must equal it.
    Returns that ``(reference, other)`` pair, or the last one if Slurm never held still.
    """
    for _ in range(tries):
        before = reference()
        got = other()
        after = reference()
        if before == after:
            return before, got
        time.sleep(0.3)
    return after, got
