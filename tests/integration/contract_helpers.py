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


# ---------------------------------------------------------------------------- the truth
# The contract tests check a backend against what the Slurm it drives really holds: for a real
# Slurm, what Slurm's own tools print (above and in ``helpers.py``); for the in-memory Slurm,
# its own store, read without the backend methods under test. Both answer the same questions.


def slurm_time(seconds: float | None) -> str:
    """A time limit as ``scontrol`` prints it (``00:07:00``, ``1-00:00:00``, ``UNLIMITED``).

    >>> slurm_time(420), slurm_time(90000), slurm_time(None)
    ('00:07:00', '1-01:00:00', 'UNLIMITED')
    """
    if seconds is None:
        return "UNLIMITED"
    days, rest = divmod(int(seconds), 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


class RealTruth:
    """The real local cluster, as Slurm's own tools show it."""

    runs_programs = True

    def version(self) -> tuple[int, int, int]:
        """``scontrol --version``."""
        from elastic_slurm.adapter import parse

        text = subprocess.run(
            ["scontrol", "--version"], capture_output=True, text=True, check=True
        ).stdout
        return parse.parse_version(text)

    def job(self, job_id: int) -> dict[str, str]:
        """``scontrol show job`` fields."""
        from .helpers import scontrol_job

        return scontrol_job(job_id)

    def nodes_of(self, job_id: int) -> tuple[str, ...]:
        """The job's nodes (``scontrol show job``)."""
        from .helpers import scontrol_nodes

        return scontrol_nodes(job_id)

    def state(self, job_id: int) -> str:
        """The job's state (``scontrol show job``)."""
        return self.job(job_id)["JobState"]

    def held(self, job_id: int) -> set[str]:
        """Nodes of the job and of its running siblings (``squeue``)."""
        from .helpers import slurm_held

        return slurm_held(job_id)

    def helpers_alive(self, job_id: int) -> list[int]:
        """The job's pending or running expander and sibling allocations (``squeue``)."""
        from .helpers import helpers_alive

        return helpers_alive(job_id)

    def all_idle(self) -> bool:
        """Every node idle (``sinfo``)."""
        from .helpers import all_idle

        return all_idle()

    def sinfo(self) -> dict[str, tuple[str, int]]:
        """``{node: (state, cpus)}`` (``sinfo``)."""
        return sinfo_states()

    def sbatch(self, *options: str, workdir: Path) -> int:
        """Submit a plain job with ``sbatch``."""
        return sbatch_raw(*options, workdir=workdir)

    def steps(self, job_id: int) -> dict[str, tuple[str, ...]]:
        """The job's steps (``scontrol show step``)."""
        return scontrol_steps(job_id)

    def array_tasks(self, array_id: int) -> list[tuple[str, str]]:
        """``(task id, state)`` of the array's tasks (``squeue --array``)."""
        return array_tasks(array_id)

    def pause(self, seconds: float) -> None:
        """Let Slurm do what it does on its own for ``seconds`` (scheduling passes)."""
        time.sleep(seconds)

    def next_second(self) -> None:
        """Accounting keys a job's allocation records by the second (see test_adapter_live)."""
        t = time.time()
        while time.time() < int(t) + 1.05:
            time.sleep(0.05)


class FakeTruth:
    """The in-memory Slurm (:class:`elastic_slurm.adapter.fake.FakeSlurm`), from its store."""

    runs_programs = False

    def __init__(self, fake) -> None:  # noqa: ANN001 - FakeSlurm
        self.fake = fake

    def _record(self, job_id: int):  # noqa: ANN202 - FakeJob
        store = self.fake.store
        if job_id in store:
            return store[job_id]
        tasks = sorted(
            (j for j in store.values() if j.array_job_id == job_id),
            key=lambda j: j.array_task_id or 0,
        )
        if not tasks:
            raise KeyError(f"no job {job_id}")
        return tasks[0]

    def version(self) -> tuple[int, int, int]:
        """The version the fake claims."""
        return self.fake._version

    def job(self, job_id: int) -> dict[str, str]:
        """The fields ``scontrol show job`` would print, from the store."""
        j = self._record(job_id)
        if j.state == "RUNNING":
            num = str(len(j.nodes))
        elif j.nodes_min == j.nodes_max and not j.range_given:
            num = str(j.nodes_min)
        else:
            num = f"{j.nodes_min}-{j.nodes_max}"
        fields = {
            "JobId": str(job_id),
            "JobName": j.name,
            "JobState": j.state,
            "Reason": j.reason,
            "Priority": "0" if j.held else "4294901758",
            "NumNodes": num,
            "NodeList": ",".join(j.nodes) or "(null)",
            "BatchHost": j.batch_host or "(null)",
            "TimeLimit": slurm_time(j.time_limit_s),
            "WorkDir": j.workdir,
            "StdOut": j.stdout,
            "Comment": j.comment or "(null)",
            "Partition": j.partition,
            "Account": j.account or "(null)",
            "QOS": j.qos,
        }
        array = self.fake.arrays.get(j.array_job_id) if j.array_job_id else None
        if array is not None:
            fields["ArrayTaskThrottle"] = str(array.throttle)
        return fields

    def nodes_of(self, job_id: int) -> tuple[str, ...]:
        """The job's nodes, from the store."""
        return tuple(self._record(job_id).nodes)

    def state(self, job_id: int) -> str:
        """The job's state, from the store."""
        return self._record(job_id).state

    def held(self, job_id: int) -> set[str]:
        """Nodes of the job and of its running siblings."""
        return {
            n
            for j in self.fake.store.values()
            if j.state == "RUNNING" and (j.job_id == job_id or j.name == f"sibling:{job_id}")
            for n in j.nodes
        }

    def helpers_alive(self, job_id: int) -> list[int]:
        """The job's pending or running expander and sibling allocations."""
        return [
            j.job_id
            for j in self.fake.store.values()
            if j.name in (f"expand:{job_id}", f"sibling:{job_id}")
            and j.state in ("PENDING", "RUNNING")
        ]

    def all_idle(self) -> bool:
        """No job holds a node, and every node is up."""
        busy = any(j.nodes or j.absorbable for j in self.fake.store.values())
        return not busy and all(s == "idle" for s in self.fake.node_states.values())

    def sinfo(self) -> dict[str, tuple[str, int]]:
        """``{node: (state, cpus)}`` from the store."""
        busy = {n for j in self.fake.store.values() if j.state == "RUNNING" for n in j.nodes}
        return {
            n: ("allocated" if n in busy else s, self.fake.cpus)
            for n, s in self.fake.node_states.items()
        }

    def sbatch(self, *options: str, workdir: Path) -> int:
        """Queue a plain job, as ``sbatch`` would (not through the backend's ``submit``)."""
        return self.fake.sbatch(
            ["--parsable", f"--chdir={workdir}", "--output=/dev/null", *options]
        )

    def steps(self, job_id: int) -> dict[str, tuple[str, ...]]:
        """The running job's batch step and its ``srun`` step, from the store."""
        j = self.fake.store.get(job_id)
        if j is None or j.state != "RUNNING":
            return {}
        steps = {f"{job_id}.batch": (j.batch_host,)} if j.batch_host else {}
        if j.srun_step:
            steps[f"{job_id}.0"] = tuple(j.nodes)
        return steps

    def array_tasks(self, array_id: int) -> list[tuple[str, str]]:
        """``(task id, state)`` of the array's tasks that have not ended."""
        from elastic_slurm.adapter.fake import ENDED_STATES

        return [
            (str(j.array_task_id), j.state)
            for j in self.fake.store.values()
            if j.array_job_id == array_id and j.state not in ENDED_STATES
        ]

    def pause(self, seconds: float) -> None:
        """Nothing happens on its own in the fake."""

    def next_second(self) -> None:
        """The fake's records need no distinct seconds."""
