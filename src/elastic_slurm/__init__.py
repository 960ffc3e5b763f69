"""elastic-slurm: elastic (moldable, malleable, evolving) MPI jobs on stock Slurm.

Two flows (see ``docs/`` and the README): *submit* (request -> adapter -> Slurm) and *resize*
(Slurm -> controller -> policy -> adapter -> mpi_runtime in the job).

From Python, :func:`submit` a job and use the :class:`Job` it returns (state, wait, resize,
cancel, history, output files); :meth:`Job.from_id` makes one for a job submitted earlier.
Importing the package is light: ``submit`` and ``Job`` load their modules on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from elastic_slurm.errors import (
    ClusterError,
    ConfigError,
    ElasticSlurmError,
    InvalidRequest,
    PolicyError,
    ResizeError,
    SlurmCommandError,
    SlurmUnavailableError,
)
from elastic_slurm.model import ElasticRequest, JobKind

if TYPE_CHECKING:
    from elastic_slurm.job import Job, submit

__version__ = "0.1.0"

#: Names served by :func:`__getattr__` from their module, imported on first use.
_LAZY = {"Job": "elastic_slurm.job", "submit": "elastic_slurm.job"}

__all__ = [
    "ClusterError",
    "ConfigError",
    "ElasticRequest",
    "ElasticSlurmError",
    "InvalidRequest",
    "Job",
    "JobKind",
    "PolicyError",
    "ResizeError",
    "SlurmCommandError",
    "SlurmUnavailableError",
    "submit",
]


def __getattr__(name: str) -> Any:
    """``Job`` and ``submit``, imported when first asked for (PEP 562)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'elastic_slurm' has no attribute {name!r}")
