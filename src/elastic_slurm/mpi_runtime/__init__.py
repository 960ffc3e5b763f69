"""The in-job runtime: resize points, join strategies, data redistribution.

Applications use :func:`init` (which imports mpi4py); the launcher and the rest of the package
import the submodules they need without starting MPI.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ElasticComm", "ResizeExit", "init"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from elastic_slurm.mpi_runtime import session

        return getattr(session, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
