"""The one place that reads ``ELASTIC_SLURM_*`` environment variables, with their types.

The launcher (``elastic-slurm run``) sets them for the application's ranks; users may set
``ELASTIC_SLURM_JOIN`` to force a join strategy, ``ELASTIC_SLURM_RESIZE_TIMEOUT_S`` (how long
the launcher waits for Slurm to shrink the job) and ``ELASTIC_SLURM_PREFLIGHT_TIMEOUT_S`` (how
long an added node may take to answer before a grow is refused), both in seconds, and
``ELASTIC_SLURM_PMIX=0`` to keep the runtime from using PMIx at all (:mod:`.mpi_runtime.pmix`;
default on: PMIx is used when a server answers).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

PREFIX = "ELASTIC_SLURM_"


def get_str(
    name: str, default: str | None = None, env: Mapping[str, str] | None = None
) -> str | None:
    """``ELASTIC_SLURM_<name>`` as a string, or ``default``."""
    value = (env if env is not None else os.environ).get(PREFIX + name)
    return value if value not in (None, "") else default


def get_int(name: str, default: int, env: Mapping[str, str] | None = None) -> int:
    """``ELASTIC_SLURM_<name>`` as an integer.

    Raises
    ------
    ValueError
        The variable is set but is not an integer; the message names it.
    """
    raw = get_str(name, None, env)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ValueError(f"{PREFIX}{name}={raw!r} is not an integer") from exc


def get_float(name: str, default: float, env: Mapping[str, str] | None = None) -> float:
    """``ELASTIC_SLURM_<name>`` as a float (seconds, usually); ``ValueError`` if malformed."""
    raw = get_str(name, None, env)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ValueError(f"{PREFIX}{name}={raw!r} is not a number") from exc


def names(**values: object) -> dict[str, str]:
    """``{"ELASTIC_SLURM_<KEY>": str(value)}`` for the launcher to export.

    >>> names(generation=2, job_dir="/x")
    {'ELASTIC_SLURM_GENERATION': '2', 'ELASTIC_SLURM_JOB_DIR': '/x'}
    """
    return {PREFIX + k.upper(): str(v) for k, v in values.items()}
