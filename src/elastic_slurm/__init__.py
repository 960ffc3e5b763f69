"""elastic-slurm: elastic (moldable, malleable, evolving) MPI jobs on stock Slurm.

Two flows (see ``docs/`` and the README): *submit* (request -> adapter -> Slurm) and *resize*
(Slurm -> controller -> policy -> adapter -> mpi_runtime in the job).
"""

from elastic_slurm.errors import (
    ClusterError,
    ConfigError,
    ElasticSlurmError,
    InvalidRequest,
    PolicyError,
    ResizeError,
    SlurmCommandError,
)
from elastic_slurm.model import ElasticRequest, JobKind

__version__ = "0.1.0"

__all__ = [
    "ClusterError",
    "ConfigError",
    "ElasticRequest",
    "ElasticSlurmError",
    "InvalidRequest",
    "JobKind",
    "PolicyError",
    "ResizeError",
    "SlurmCommandError",
]
