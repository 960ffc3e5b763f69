"""Job specs: ``sbatch``-like options and YAML job files, turned into elastic requests.

A job file holds the same keys as the command-line options (``elastic-slurm submit
job.yaml``); options given on the command line override the file's values. Values are checked
before anything reaches Slurm, with errors that name the file and the key. Job files are read
with :mod:`elastic_slurm.yamlsafe` (``time: 1:00:00`` is one hour and ``nodes: 010`` is ten,
as Slurm reads them), and every number is bounded (the ``MAX_*`` constants of
:mod:`elastic_slurm.model.request`).

Formats (as Slurm's where Slurm has one):

* ``nodes``: ``N`` or ``MIN-MAX`` (``--nodes=2-8``);
* ``time``: ``minutes``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM`` or ``D-HH:MM:SS``;
* ``speedup``: ``amdahl:P`` (parallel fraction ``0 <= P <= 1``), ``downey:A:SIGMA`` (average
  parallelism and variance; Downey's low-variance model for ``SIGMA <= 1``, high-variance
  above; Huang et al. eqs. 2-5), or ``linear``;
* ``evolution_profile``: an evolving job's ``SECONDS:NODES`` steps, ``600:2,300:4,600:2``,
  the first at the start size (:mod:`elastic_slurm.model.evolution`);
* ``array``: ``0-99``, ``1,3,5-7``, with ``%K`` for at most ``K`` tasks at once;
* ``sized_by``: ``slurm`` or ``controller``, who chooses a moldable job's start size (default:
  the site's ``controller.sizes_moldable``); ``controller`` only for a moldable job;
* ``with_ranks``: run a rigid or moldable job's program with its ranks (one ``srun`` step:
  nodes x ``ntasks_per_node``; the default), or ``false``: once, on the batch host;
* ``sbatch_options``: other sbatch options, passed to sbatch unchanged (``[--mem=4G, -c 2,
  "--dependency=afterok:12"]``); the command line's come after the file's, so they win;
* ``script``: the text of a batch script to run instead of launching ``program`` (rigid and
  moldable jobs; ``elastic-slurm submit script.sh`` fills it in).
"""

from __future__ import annotations

import math
import re
import shlex
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from elastic_slurm import yamlsafe
from elastic_slurm.adapter.tags import SizedBy, check_sized_by
from elastic_slurm.batch_script import MAX_SCRIPT_BYTES, check_passed, split_command_line
from elastic_slurm.errors import ConfigError, InvalidRequest
from elastic_slurm.model.evolution import parse_profile
from elastic_slurm.model.request import (
    MAX_ARGS,
    MAX_ENV,
    MAX_GRACE_PERIOD_S,
    MAX_NAME,
    MAX_NODES,
    MAX_OPTION,
    MAX_TASKS_PER_NODE,
    MAX_WALLTIME,
    ElasticRequest,
    JobKind,
)
from elastic_slurm.model.speedup import SpeedupModel, from_spec, to_spec

_TIME = re.compile(r"^(?:([0-9]+)-)?([0-9]+)(?::([0-9]+))?(?::([0-9]+))?$")
_DIGITS = 12  # more digits than any bounded value below has
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAX_PATH = 4096


def parse_time_limit(text: str) -> timedelta:
    """A Slurm time limit as a :class:`~datetime.timedelta`, at most :data:`MAX_WALLTIME`.

    Read as Slurm's ``--time`` reads it: ``1:00:00`` is one hour, numbers are decimal
    (``010`` is ten minutes).

    >>> [parse_time_limit(t).total_seconds() for t in ("90", "1:30", "1-02:00:00")]
    [5400.0, 90.0, 93600.0]

    Raises
    ------
    InvalidRequest
        Not one of Slurm's formats (the message lists them), or longer than
        :data:`MAX_WALLTIME`.
    """
    m = _TIME.match(text.strip()) if len(text) <= 4 * _DIGITS else None
    if not m or any(g is not None and len(g) > _DIGITS for g in m.groups()):
        raise InvalidRequest(
            f"time limit {text[:40]!r} is not in a Slurm format: minutes, MM:SS, HH:MM:SS, "
            "D-HH, D-HH:MM or D-HH:MM:SS"
        )
    days, a, b, c = (int(g) if g is not None else None for g in m.groups())
    if days is not None:  # D-HH[:MM[:SS]]
        limit = timedelta(days=days, hours=a or 0, minutes=b or 0, seconds=c or 0)
    elif c is not None:  # HH:MM:SS
        limit = timedelta(hours=a or 0, minutes=b or 0, seconds=c)
    elif b is not None:  # MM:SS
        limit = timedelta(minutes=a or 0, seconds=b)
    else:
        limit = timedelta(minutes=a or 0)
    if limit > MAX_WALLTIME:
        raise InvalidRequest(
            f"time limit {text!r} is longer than {MAX_WALLTIME.days} days, the most a job "
            "may ask for"
        )
    return limit


def parse_nodes(text: str | int) -> tuple[int, int]:
    """``"2-8"`` -> ``(2, 8)``, ``"4"`` -> ``(4, 4)``; decimal, as Slurm reads ``--nodes``.

    Raises
    ------
    InvalidRequest
        Not ``N`` or ``MIN-MAX`` with decimal integers, or a count above :data:`MAX_NODES`.
    """
    raw = str(text).strip()
    m = re.fullmatch(r"([0-9]{1,12})(?:-([0-9]{1,12}))?", raw) if len(raw) <= 30 else None
    if not m:
        raise InvalidRequest(f"node count {raw[:40]!r} is not N or MIN-MAX (e.g. 4 or 2-8)")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) else lo
    if hi > MAX_NODES or lo > MAX_NODES:
        raise InvalidRequest(f"node count {raw!r} is above {MAX_NODES}, the most a job may ask for")
    return lo, hi


def parse_speedup(text: str) -> SpeedupModel:
    """A speedup model from ``amdahl:P``, ``downey:A:SIGMA`` or ``linear``.

    Raises
    ------
    InvalidRequest
        Unknown model or values out of range (the model's own message is quoted).
    """
    for part in text.split(":")[1:]:
        try:
            value = float(part)
        except ValueError:
            continue  # from_spec names the form
        if not math.isfinite(value) or abs(value) > MAX_NODES:
            raise InvalidRequest(
                f"speedup model {text[:60]!r}: {part[:20]!r} is not a finite number up to "
                f"{MAX_NODES}"
            )
    try:
        return from_spec(text)
    except ValueError as exc:
        raise InvalidRequest(
            str(exc) if "speedup model" in str(exc) else f"speedup model {text!r}: {exc}"
        ) from exc


def speedup_spec(model: SpeedupModel | None) -> str | None:
    """The text form of ``model``, ``None`` for no model."""
    return None if model is None else to_spec(model)


class JobSpec(BaseModel):
    """A job as a file or the command line describes it (every key optional but ``program``).

    ``program`` is the command and its arguments (a list, or one string split like a shell
    would, without running one); for malleable and evolving jobs an mpi4py program run
    through the elastic runtime.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    program: list[Annotated[str, Field(max_length=_MAX_PATH)]] = Field(
        min_length=1, max_length=MAX_ARGS
    )
    kind: Literal["rigid", "moldable", "malleable", "evolving"] = "rigid"
    nodes: str = Field("1", max_length=30)
    start_nodes: int | None = Field(None, ge=1, le=MAX_NODES)
    ntasks_per_node: int = Field(1, ge=1, le=MAX_TASKS_PER_NODE)
    time: str = Field("30", max_length=60)
    job_name: str = Field("elastic", max_length=MAX_NAME)
    partition: str | None = Field(None, max_length=MAX_NAME)
    account: str | None = Field(None, max_length=MAX_NAME)
    qos: str | None = Field(None, max_length=MAX_NAME)
    output: str | None = Field(None, max_length=_MAX_PATH)
    workdir: str | None = Field(None, max_length=_MAX_PATH)
    array: str | None = Field(None, max_length=MAX_NAME)
    speedup: str | None = Field(None, max_length=100)
    evolution_profile: str | None = Field(None, max_length=2000)
    grace_period_s: float | None = Field(None, gt=0, le=MAX_GRACE_PERIOD_S)
    sized_by: Literal["slurm", "controller"] | None = None
    env: dict[str, Annotated[str, Field(max_length=_MAX_PATH)]] = Field(
        default_factory=dict, max_length=MAX_ENV
    )
    with_ranks: bool = True
    sbatch_options: list[Annotated[str, Field(max_length=MAX_OPTION)]] = Field(
        default_factory=list, max_length=MAX_ARGS
    )
    script: str | None = Field(None, max_length=MAX_SCRIPT_BYTES)

    @field_validator("sbatch_options")
    @classmethod
    def _sbatch_options(cls, value: list[str]) -> list[str]:
        """``["--mem 4G", "-c", "2"]`` -> ``["--mem=4G", "-c2"]``: one word per option."""
        try:
            words = [word for item in value for word in shlex.split(item)]
            line = split_command_line(words, {}, where="sbatch_options")
            if line.file is not None or line.rest:
                raise InvalidRequest(f"{(line.file or '--')[:40]!r} is not an sbatch option")
            check_passed(line.passed, where="sbatch_options")
        except (InvalidRequest, ValueError) as exc:
            raise ValueError(str(exc).removeprefix("sbatch_options: ")) from None
        return line.passed

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, value: str) -> str:
        try:
            parse_nodes(value)
        except InvalidRequest as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("time")
    @classmethod
    def _time(cls, value: str) -> str:
        try:
            parse_time_limit(value)
        except InvalidRequest as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("job_name", "partition", "account", "qos", "output", "workdir", "array")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and _CONTROL.search(value):
            raise ValueError("holds a control character (newline, tab, ...): not allowed here")
        return value

    @field_validator("program")
    @classmethod
    def _no_nul(cls, value: list[str]) -> list[str]:
        if any("\0" in word for word in value):
            raise ValueError("a word of the program holds a NUL character")
        return value

    def sizing(self, site_sizes_moldable: bool = False) -> SizedBy:
        """Who chooses the job's start size: ``sized_by``, else the site's default.

        The site's default (``controller.sizes_moldable``) applies to moldable jobs that are
        not arrays; every other job is sized by Slurm (rigid: by its request).

        Parameters
        ----------
        site_sizes_moldable
            The site's ``controller.sizes_moldable``.

        Raises
        ------
        InvalidRequest
            ``sized_by: controller`` for a job that is not moldable, or for an array.
        """
        kind = JobKind(self.kind)
        if self.sized_by is not None:
            return check_sized_by(kind, self.sized_by, array=self.array is not None)
        if site_sizes_moldable and kind is JobKind.MOLDABLE and self.array is None:
            return "controller"
        return "slurm"

    def request(self, max_grace_period_s: float | None = None) -> ElasticRequest:
        """The elastic request this spec describes.

        Parameters
        ----------
        max_grace_period_s
            The site's cap on grace periods (``controller.max_grace_period_s``, seconds);
            ``None``: only the hard cap of :data:`~elastic_slurm.model.request.MAX_GRACE_PERIOD_S`.

        Raises
        ------
        InvalidRequest
            An impossible combination (``sized_by: controller`` for a job that is not
            moldable included), or a grace period above the site's cap; the message says what
            to change.
        """
        if (
            max_grace_period_s is not None
            and self.grace_period_s is not None
            and self.grace_period_s > max_grace_period_s
        ):
            raise InvalidRequest(
                f"grace period {self.grace_period_s:g} s is longer than this site allows "
                f"(controller.max_grace_period_s = {max_grace_period_s:g} s)"
            )
        kind = JobKind(self.kind)
        if self.sized_by is not None:
            check_sized_by(kind, self.sized_by, array=self.array is not None)
        lo, hi = parse_nodes(self.nodes)
        if kind is JobKind.MOLDABLE and lo == hi:
            raise InvalidRequest(
                f"a moldable job needs a node range to choose from, got {self.nodes}: give "
                "--nodes MIN-MAX"
            )
        if kind.resizable and lo == hi and self.array is None:  # a sweep: its throttle
            raise InvalidRequest(
                f"a {kind.value} job needs a node range to grow and shrink in, got {self.nodes}, "
                "which fixes its size: give --nodes MIN-MAX (and --start-nodes N to start at N)"
            )
        array, throttle = self.array, None
        if array and "%" in array:
            array, limit = array.split("%", 1)
            if not re.fullmatch(r"[0-9]{1,7}", limit):
                raise InvalidRequest(
                    f"array {self.array[:40]!r}: the %K limit must be a number up to 9999999"
                )
            throttle = int(limit)
        return ElasticRequest(
            program=tuple(self.program),
            kind=kind,
            nodes_min=lo,
            nodes_max=hi,
            nodes_start=self.start_nodes,
            walltime=parse_time_limit(self.time),
            ntasks_per_node=self.ntasks_per_node,
            job_name=self.job_name,
            partition=self.partition,
            account=self.account,
            qos=self.qos,
            extra_env=tuple(sorted(self.env.items())),
            array=array,
            array_max_running=throttle,
            speedup=parse_speedup(self.speedup) if self.speedup else None,
            evolution_profile=(
                parse_profile(self.evolution_profile) if self.evolution_profile else None
            ),
            grace_period_s=self.grace_period_s,
            with_ranks=self.with_ranks,
            sbatch_options=tuple(self.sbatch_options),
            script=self.script,
        )


def load_spec(path: Path | None, overrides: dict[str, Any]) -> JobSpec:
    """A job spec from a YAML file (optional) with command-line ``overrides`` on top.

    ``overrides`` holds only the options the user gave (``None`` values are dropped).

    Raises
    ------
    ConfigError
        The file is missing or not YAML, or a key is unknown or wrong; the message names the
        file (or "the command line") and the key.
    """
    data: dict[str, Any] = {}
    where = "the command line"
    if path is not None:
        where = str(path)
        loaded = yamlsafe.load_file(path)
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping of keys, got {type(loaded).__name__}")
        data = loaded
        if isinstance(data.get("program"), str):
            data["program"] = data["program"].split()
        for key in ("nodes", "time"):  # a plain number (decimal: 010 is 10) is Slurm's text
            if type(data.get(key)) is int:
                data[key] = str(data[key])
    given = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(data.get("sbatch_options"), list) and "sbatch_options" in given:
        given["sbatch_options"] = [*data["sbatch_options"], *given["sbatch_options"]]
    data.update(given)
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"{where}: {'.'.join(map(str, e['loc']))[:80] or '(top)'}: {e['msg']}"
            for e in exc.errors()
        ]
        raise ConfigError("\n".join(lines)) from exc
