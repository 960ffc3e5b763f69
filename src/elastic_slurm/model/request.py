"""What a user asks for: an elastic request (Feitelson's job kinds, a node range, a time limit)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from datetime import timedelta

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.speedup import SpeedupModel

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ARRAY = re.compile(r"\d+(-\d+(:\d+)?)?(,\d+(-\d+(:\d+)?)?)*")


class JobKind(enum.StrEnum):
    """Feitelson's taxonomy of parallel jobs by who decides their size, and when.

    rigid: the user, at submission. moldable: the scheduler, once, at start. malleable: the
    resource manager, while the job runs. evolving: the application, while it runs.
    """

    RIGID = "rigid"
    MOLDABLE = "moldable"
    MALLEABLE = "malleable"
    EVOLVING = "evolving"

    @property
    def resizable(self) -> bool:
        """True for kinds whose size changes while they run (malleable, evolving)."""
        return self in (JobKind.MALLEABLE, JobKind.EVOLVING)


@dataclass(frozen=True)
class ElasticRequest:
    """A job to submit, with how it may change size.

    Parameters
    ----------
    program
        The command to run, as an argument list (``("examples/heat2d.py", "--n", "2048")``).
        For malleable and evolving jobs it is an mpi4py program run through the elastic
        runtime; for rigid and moldable jobs any command.
    kind
        Who decides the size, and when (:class:`JobKind`).
    nodes_min, nodes_max
        The node range, in nodes, ``1 <= nodes_min <= nodes_max``. Rigid jobs have
        ``nodes_min == nodes_max``.
    nodes_start
        For malleable and evolving jobs, the size (nodes) the job is submitted at; it then grows
        or shrinks within the range. Defaults to ``nodes_min``.
    walltime
        The time limit (``sbatch --time``).
    ntasks_per_node
        MPI ranks per node (``--ntasks-per-node``); ranks = nodes x ntasks_per_node.
    job_name
        ``sbatch --job-name``.
    partition, account, qos
        ``sbatch --partition``, ``--account``, ``--qos``; ``None`` for the defaults.
    speedup
        How the job's run time depends on its size (a policy may use it to choose a moldable
        job's start size); ``None`` when unknown.
    grace_period_s
        How long (seconds) the job may take to follow a shrink order before the site's rule
        for jobs that do not answer applies; ``None`` for the site's default.
    array, array_max_running
        A parameter sweep as a job array: task ids (``"0-99"``, ``"1,3,5-7"``) and how many
        tasks may run at once (``%8``); each task gets the node range above. An elastic sweep
        (``kind`` malleable) changes ``array_max_running`` while it runs.

    Raises
    ------
    InvalidRequest
        For an impossible range (``nodes_min < 1``, ``nodes_min > nodes_max``, a rigid job with a
        range, a start size outside the range), an empty program or a non-positive time limit.
    """

    program: tuple[str, ...]
    kind: JobKind = JobKind.RIGID
    nodes_min: int = 1
    nodes_max: int = 1
    nodes_start: int | None = None
    walltime: timedelta = timedelta(minutes=30)
    ntasks_per_node: int = 1
    job_name: str = "elastic"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    extra_env: tuple[tuple[str, str], ...] = field(default=())
    array: str | None = None
    array_max_running: int | None = None
    speedup: SpeedupModel | None = None
    grace_period_s: float | None = None

    def __post_init__(self) -> None:
        if not self.program:
            raise InvalidRequest("the job has no program to run: give a command")
        if self.nodes_min < 1:
            raise InvalidRequest(f"nodes_min must be at least 1, got {self.nodes_min}")
        if self.nodes_min > self.nodes_max:
            raise InvalidRequest(
                f"impossible node range {self.nodes_min}-{self.nodes_max}: the minimum "
                f"({self.nodes_min}) is larger than the maximum ({self.nodes_max}); "
                "swap them or use --nodes=MIN-MAX with MIN <= MAX"
            )
        if self.kind is JobKind.RIGID and self.nodes_min != self.nodes_max:
            raise InvalidRequest(
                f"a rigid job has one size, got the range {self.nodes_min}-{self.nodes_max}: "
                "give one node count, or choose the moldable, malleable or evolving kind"
            )
        if self.nodes_start is not None and not (
            self.nodes_min <= self.nodes_start <= self.nodes_max
        ):
            raise InvalidRequest(
                f"start size {self.nodes_start} is outside the node range "
                f"{self.nodes_min}-{self.nodes_max}"
            )
        if self.ntasks_per_node < 1:
            raise InvalidRequest(f"ntasks_per_node must be at least 1, got {self.ntasks_per_node}")
        if self.array is not None and not _ARRAY.fullmatch(self.array):
            raise InvalidRequest(
                f"array {self.array!r} is not a list of task ids like 0-99 or 1,3,5-7"
            )
        if self.array_max_running is not None and (
            self.array is None or self.array_max_running < 1
        ):
            raise InvalidRequest(
                "array_max_running needs an array and must be at least 1, got "
                f"{self.array_max_running}"
            )
        if self.grace_period_s is not None and self.grace_period_s <= 0:
            raise InvalidRequest(f"the grace period must be positive, got {self.grace_period_s} s")
        for name, _value in self.extra_env:
            if not _ENV_NAME.fullmatch(name):
                raise InvalidRequest(
                    f"environment variable name {name!r} is not valid: use letters, digits and "
                    "underscores, not starting with a digit"
                )
        if self.walltime <= timedelta(0):
            raise InvalidRequest(f"the time limit must be positive, got {self.walltime}")

    @property
    def initial_nodes(self) -> int:
        """Nodes asked of Slurm at submission (the start size, or the minimum)."""
        return self.nodes_start if self.nodes_start is not None else self.nodes_min
