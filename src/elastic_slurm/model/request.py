"""What a user asks for: an elastic request (Feitelson's job kinds, a node range, a time limit)."""

from __future__ import annotations

import enum
import math
import numbers
import re
from dataclasses import dataclass, field
from datetime import timedelta

from elastic_slurm.errors import ConfigError, InvalidRequest
from elastic_slurm.model.evolution import check_profile
from elastic_slurm.model.speedup import SpeedupModel

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ARRAY = re.compile(
    r"[0-9]{1,7}(-[0-9]{1,7}(:[0-9]{1,7})?)?(,[0-9]{1,7}(-[0-9]{1,7}(:[0-9]{1,7})?)?)*"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

MAX_NODES = 1_000_000
"""Most nodes a job may ask for (the largest machines have about 160,000)."""
MAX_TASKS_PER_NODE = 65_534
"""Most MPI ranks per node (Slurm keeps ``ntasks_per_node`` in 16 bits)."""
MAX_WALLTIME = timedelta(days=365)
"""Longest time limit a job may ask for."""
MAX_GRACE_PERIOD_S = 7 * 86400.0
"""Longest grace period any site may allow (seconds); a site's own cap is
``controller.max_grace_period_s``, checked at submission."""
MAX_ARRAY_TASK_ID = 4_000_000
"""Largest job array task id (Slurm's ``MaxArraySize`` is at most 4,000,001)."""
MAX_ARGS = 4096
"""Most words in a program's command line."""
MAX_ENV = 1024
"""Most extra environment variables."""
MAX_NAME = 1024
"""Longest job name, partition, account or QOS name (characters)."""
MAX_OPTION = 4096
"""Longest sbatch option passed through (characters)."""


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
    with_ranks
        Rigid and moldable jobs: run ``program`` with its ranks, as one ``srun`` step over the
        allocation (nodes x ``ntasks_per_node`` ranks; a ``.py`` file with the job's Python),
        as malleable and evolving jobs run theirs; ``False`` (the default here): run it once,
        on the batch host, as given. Job specs (``elastic-slurm submit``) set it.
    sbatch_options
        Other sbatch options, passed to sbatch unchanged, one argument each (``"--mem=4G"``,
        ``"-c4"``, ``"--gres=gpu:1"``, ``"--dependency=afterok:12"``); not those set from the
        fields above (:data:`elastic_slurm.batch_script.RESERVED`) nor ``--comment``.
    evolution_profile
        Evolving jobs: the steps ``((duration_s, nodes), ...)`` the application runs through
        at its own speed, the first at the start size (Klein and Pérez 2011, section 3.1;
        :mod:`elastic_slurm.model.evolution`); it travels in the job's elastic tag, and
        planners see it as ``JobView.evolution_profile``. ``None``: not declared.
    script
        A batch script (its text, starting with a shell's ``#!`` line) to run as the job's
        batch step instead of launching ``program``; ``program`` then names the script and
        holds its arguments. Its ``#SBATCH`` lines are not read here (see
        :func:`elastic_slurm.batch_script.parse_script`). Rigid and moldable jobs only.

    Raises
    ------
    InvalidRequest
        For an impossible range (``nodes_min < 1``, ``nodes_min > nodes_max``, a rigid job with a
        range, a start size outside the range), an empty program or a non-positive time limit,
        and for any value beyond its bound: :data:`MAX_NODES`, :data:`MAX_TASKS_PER_NODE`,
        :data:`MAX_WALLTIME`, :data:`MAX_GRACE_PERIOD_S` (grace periods are also finite),
        :data:`MAX_ARRAY_TASK_ID`, :data:`MAX_ARGS`, :data:`MAX_ENV`, :data:`MAX_NAME`
        (names hold no control characters, the program and environment no NUL).
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
    with_ranks: bool = False
    sbatch_options: tuple[str, ...] = ()
    script: str | None = None
    evolution_profile: tuple[tuple[float, int], ...] | None = None

    def __post_init__(self) -> None:
        self._check_types()
        self._check_profile()
        self._check_sbatch()
        if not self.program:
            raise InvalidRequest("the job has no program to run: give a command")
        if len(self.program) > MAX_ARGS or any("\0" in word for word in self.program):
            raise InvalidRequest(
                f"the program's command line has more than {MAX_ARGS} words or a NUL character"
            )
        for what in ("job_name", "partition", "account", "qos"):
            value = getattr(self, what)
            if value is not None and (len(value) > MAX_NAME or _CONTROL.search(value)):
                raise InvalidRequest(
                    f"{what} {value[:40]!r} is longer than {MAX_NAME} characters or holds a "
                    "control character (newline, tab, ...)"
                )
        if self.nodes_max > MAX_NODES:
            raise InvalidRequest(
                f"nodes_max {self.nodes_max} is above {MAX_NODES}, the most a job may ask for"
            )
        if self.ntasks_per_node > MAX_TASKS_PER_NODE:
            raise InvalidRequest(
                f"ntasks_per_node {self.ntasks_per_node} is above {MAX_TASKS_PER_NODE}"
            )
        if self.walltime > MAX_WALLTIME:
            raise InvalidRequest(
                f"the time limit {self.walltime} is longer than {MAX_WALLTIME.days} days"
            )
        if len(self.extra_env) > MAX_ENV or any("\0" in value for _n, value in self.extra_env):
            raise InvalidRequest(
                f"more than {MAX_ENV} environment variables, or a value with a NUL character"
            )
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
        if self.array is not None and (
            len(self.array) > MAX_NAME or not _ARRAY.fullmatch(self.array)
        ):
            raise InvalidRequest(
                f"array {self.array[:40]!r} is not a list of task ids like 0-99 or 1,3,5-7"
            )
        if self.array is not None and max(map(int, re.findall(r"[0-9]+", self.array))) > (
            MAX_ARRAY_TASK_ID
        ):
            raise InvalidRequest(
                f"array {self.array[:40]!r}: task ids go up to {MAX_ARRAY_TASK_ID} at most"
            )
        if self.array_max_running is not None and (
            self.array is None or not 1 <= self.array_max_running <= MAX_ARRAY_TASK_ID
        ):
            raise InvalidRequest(
                f"array_max_running needs an array and must be 1-{MAX_ARRAY_TASK_ID}, got "
                f"{self.array_max_running}"
            )
        if self.grace_period_s is not None and not (
            math.isfinite(self.grace_period_s) and 0 < self.grace_period_s <= MAX_GRACE_PERIOD_S
        ):
            raise InvalidRequest(
                f"the grace period must be a positive, finite number of seconds up to "
                f"{MAX_GRACE_PERIOD_S:g}, got {self.grace_period_s}"
            )
        for name, _value in self.extra_env:
            if not _ENV_NAME.fullmatch(name):
                raise InvalidRequest(
                    f"environment variable name {name!r} is not valid: use letters, digits and "
                    "underscores, not starting with a digit"
                )
        if self.walltime <= timedelta(0):
            raise InvalidRequest(f"the time limit must be positive, got {self.walltime}")

    def _check_sbatch(self) -> None:
        from elastic_slurm.batch_script import MAX_SCRIPT_BYTES, check_passed, parse_script

        options = self.sbatch_options
        if not isinstance(options, (tuple, list)) or not all(isinstance(w, str) for w in options):
            raise InvalidRequest("sbatch_options must be a sequence of strings")
        if len(options) > MAX_ARGS or any(
            len(w) > MAX_OPTION or _CONTROL.search(w) for w in options
        ):
            raise InvalidRequest(
                f"sbatch_options: more than {MAX_ARGS} options, one longer than {MAX_OPTION} "
                "characters, or a control character (newline, tab, ...)"
            )
        check_passed(options)
        if self.script is None:
            return
        if not isinstance(self.script, str):
            raise InvalidRequest(f"script must be the text of a batch script, got {self.script!r}")
        if len(self.script.encode("utf-8", errors="replace")) > MAX_SCRIPT_BYTES:
            raise InvalidRequest(f"the batch script is longer than {MAX_SCRIPT_BYTES} bytes")
        if self.kind.resizable:
            raise InvalidRequest(
                f"a {self.kind.value} job runs a program through the elastic runtime, not a "
                "batch script: give the program (submit --kind "
                f"{self.kind.value} --nodes MIN-MAX app.py)"
            )
        try:
            parsed = parse_script(self.script)
        except ConfigError as exc:
            raise InvalidRequest(str(exc)) from None
        if not parsed.is_shell:
            raise InvalidRequest(
                f"the batch script runs with {parsed.interpreter}: elastic-slurm takes shell "
                "scripts (#!/bin/bash, #!/bin/sh); submit another program as the program"
            )

    def _check_types(self) -> None:
        for what in (
            "nodes_min",
            "nodes_max",
            "ntasks_per_node",
            "nodes_start",
            "array_max_running",
        ):
            value = getattr(self, what)
            if value is None and what in ("nodes_start", "array_max_running"):
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise InvalidRequest(f"{what} must be an integer, got {value!r}")
        if not isinstance(self.kind, JobKind):
            raise InvalidRequest(f"kind must be a JobKind, got {self.kind!r}")
        if not isinstance(self.walltime, timedelta):
            raise InvalidRequest(f"walltime must be a timedelta, got {self.walltime!r}")
        grace = self.grace_period_s
        if grace is not None and (isinstance(grace, bool) or not isinstance(grace, numbers.Real)):
            raise InvalidRequest(f"grace_period_s must be a number, got {grace!r}")
        if not isinstance(self.program, (tuple, list)) or not all(
            isinstance(w, str) for w in self.program
        ):
            raise InvalidRequest("program must be a sequence of strings")
        if not isinstance(self.job_name, str):
            raise InvalidRequest(f"job_name must be a string, got {self.job_name!r}")
        for what in ("partition", "account", "qos", "array"):
            if getattr(self, what) is not None and not isinstance(getattr(self, what), str):
                raise InvalidRequest(
                    f"{what} must be a string or None, got {getattr(self, what)!r}"
                )
        if not isinstance(self.extra_env, (tuple, list)) or not all(
            isinstance(p, tuple) and len(p) == 2 and all(isinstance(x, str) for x in p)
            for p in self.extra_env
        ):
            raise InvalidRequest("extra_env must be (name, value) pairs of strings")
        if not isinstance(self.with_ranks, bool):
            raise InvalidRequest(f"with_ranks must be True or False, got {self.with_ranks!r}")
        if self.speedup is not None and not isinstance(self.speedup, SpeedupModel):
            raise InvalidRequest(f"speedup must be a speedup model, got {self.speedup!r}")

    def _check_profile(self) -> None:
        """An evolution profile: an evolving job's, within its range, starting at its start."""
        if self.evolution_profile is None:
            return
        if self.kind is not JobKind.EVOLVING:
            raise InvalidRequest(
                f"a {self.kind.value} job has no evolution profile: only an evolving job "
                "declares the sizes it will ask for"
            )
        steps = check_profile(self.evolution_profile)
        object.__setattr__(self, "evolution_profile", steps)
        for i, (_seconds, nodes) in enumerate(steps, 1):
            if not self.nodes_min <= nodes <= self.nodes_max:
                raise InvalidRequest(
                    f"evolution profile step {i} is at {nodes} node(s), outside the job's "
                    f"range {self.nodes_min}-{self.nodes_max}"
                )
        if steps[0][1] != self.initial_nodes:
            raise InvalidRequest(
                f"the evolution profile starts at {steps[0][1]} node(s) but the job starts at "
                f"{self.initial_nodes}: make its first step the start size (--start-nodes)"
            )

    @property
    def initial_nodes(self) -> int:
        """Nodes asked of Slurm at submission (the start size, or the minimum)."""
        return self.nodes_start if self.nodes_start is not None else self.nodes_min
