"""Job specs: ``sbatch``-like options and YAML job files, turned into elastic requests.

A job file holds the same keys as the command-line options (``elastic-slurm submit
job.yaml``); options given on the command line override the file's values. Values are checked
before anything reaches Slurm, with errors that name the file and the key.

Formats (as Slurm's where Slurm has one):

* ``nodes``: ``N`` or ``MIN-MAX`` (``--nodes=2-8``);
* ``time``: ``minutes``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM`` or ``D-HH:MM:SS``;
* ``speedup``: ``amdahl:P`` (parallel fraction ``0 <= P <= 1``), ``downey:A:SIGMA`` (average
  parallelism and variance; Downey's low-variance model for ``SIGMA <= 1``, high-variance
  above; Huang et al. eqs. 2-5), or ``linear``;
* ``array``: ``0-99``, ``1,3,5-7``, with ``%K`` for at most ``K`` tasks at once;
* ``sized_by``: ``slurm`` or ``controller``, who chooses a moldable job's start size (default:
  the site's ``controller.sizes_moldable``); ``controller`` only for a moldable job.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from elastic_slurm.adapter.tags import SizedBy, check_sized_by
from elastic_slurm.errors import ConfigError, InvalidRequest
from elastic_slurm.model.request import ElasticRequest, JobKind
from elastic_slurm.model.speedup import SpeedupModel, from_spec, to_spec

_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_time_limit(text: str) -> timedelta:
    """A Slurm time limit as a :class:`~datetime.timedelta`.

    >>> [parse_time_limit(t).total_seconds() for t in ("90", "1:30", "1-02:00:00")]
    [5400.0, 90.0, 93600.0]

    Raises
    ------
    InvalidRequest
        Not one of Slurm's formats (the message lists them).
    """
    m = _TIME.match(text.strip())
    if not m:
        raise InvalidRequest(
            f"time limit {text!r} is not in a Slurm format: minutes, MM:SS, HH:MM:SS, D-HH, "
            "D-HH:MM or D-HH:MM:SS"
        )
    days, a, b, c = m.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        return timedelta(days=int(days), hours=int(a), minutes=int(b or 0), seconds=int(c or 0))
    if c is not None:  # HH:MM:SS
        return timedelta(hours=int(a), minutes=int(b), seconds=int(c))
    if b is not None:  # MM:SS
        return timedelta(minutes=int(a), seconds=int(b))
    return timedelta(minutes=int(a))


def parse_nodes(text: str | int) -> tuple[int, int]:
    """``"2-8"`` -> ``(2, 8)``, ``"4"`` -> ``(4, 4)``.

    Raises
    ------
    InvalidRequest
        Not ``N`` or ``MIN-MAX`` with positive integers.
    """
    raw = str(text).strip()
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", raw)
    if not m:
        raise InvalidRequest(f"node count {raw!r} is not N or MIN-MAX (e.g. 4 or 2-8)")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) else lo
    return lo, hi


def parse_speedup(text: str) -> SpeedupModel:
    """A speedup model from ``amdahl:P``, ``downey:A:SIGMA`` or ``linear``.

    Raises
    ------
    InvalidRequest
        Unknown model or values out of range (the model's own message is quoted).
    """
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

    model_config = ConfigDict(extra="forbid")

    program: list[str] = Field(min_length=1)
    kind: Literal["rigid", "moldable", "malleable", "evolving"] = "rigid"
    nodes: str = "1"
    start_nodes: int | None = Field(None, ge=1)
    ntasks_per_node: int = Field(1, ge=1)
    time: str = "30"
    job_name: str = "elastic"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    output: str | None = None
    workdir: str | None = None
    array: str | None = None
    speedup: str | None = None
    grace_period_s: float | None = Field(None, gt=0)
    sized_by: Literal["slurm", "controller"] | None = None
    env: dict[str, str] = Field(default_factory=dict)

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

    def request(self) -> ElasticRequest:
        """The elastic request this spec describes.

        Raises
        ------
        InvalidRequest
            An impossible combination (``sized_by: controller`` for a job that is not
            moldable included); the message says what to change.
        """
        kind = JobKind(self.kind)
        if self.sized_by is not None:
            check_sized_by(kind, self.sized_by, array=self.array is not None)
        lo, hi = parse_nodes(self.nodes)
        if kind is JobKind.MOLDABLE and lo == hi:
            raise InvalidRequest(
                f"a moldable job needs a node range to choose from, got {self.nodes}: give "
                "--nodes MIN-MAX"
            )
        array, throttle = self.array, None
        if array and "%" in array:
            array, limit = array.split("%", 1)
            if not limit.isdigit():
                raise InvalidRequest(f"array {self.array!r}: the %K limit must be a number")
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
            grace_period_s=self.grace_period_s,
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
        try:
            loaded = yaml.safe_load(path.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read the job file: {exc}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping of keys, got {type(loaded).__name__}")
        data = loaded
        if isinstance(data.get("program"), str):
            data["program"] = data["program"].split()
        if "nodes" in data:
            data["nodes"] = str(data["nodes"])
        if "time" in data:
            data["time"] = str(data["time"])
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"{where}: {'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()
        ]
        raise ConfigError("\n".join(lines)) from exc
