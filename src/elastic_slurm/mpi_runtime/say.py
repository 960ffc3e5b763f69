"""What the runtime tells the job's output: one line from rank 0, and the log."""

from __future__ import annotations

import logging
import sys

from mpi4py import MPI

log = logging.getLogger("elastic_slurm.mpi_runtime")


def say(comm: MPI.Intracomm, message: str) -> None:
    """One line ``elastic-slurm: MESSAGE`` on rank 0's standard error, and the log (any rank)."""
    if comm.rank == 0:
        print(f"elastic-slurm: {message}", file=sys.stderr, flush=True)
    log.info("%s", message)
