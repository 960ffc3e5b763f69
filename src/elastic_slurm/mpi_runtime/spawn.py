"""Spawning and merging new ranks in the background, while the old ones compute.

``MPI_Comm_spawn`` and ``MPI_Intercomm_merge`` take 0.6-1.3 s each here (SLURM-FACTS.md), and
in the sequential path the application waits for both. With ``MPI_THREAD_MULTIPLE`` they run in
a helper thread on every rank, on a duplicate of the application's communicator, while the main
thread goes on computing on the original; at a later resize point (agreed through the vote of
:mod:`.orders`) only the redistribution of the data remains.

Where the MPI library gives less than ``MPI_THREAD_MULTIPLE``, :func:`thread_support` says why
and the runtime spawns at the resize point as before.

A rank whose spawn or merge failed does not raise alone: every rank raises the same
:class:`ResizeFailed` (:mod:`.collective`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from mpi4py import MPI

from elastic_slurm.errors import ElasticSlurmError
from elastic_slurm.mpi_runtime.collective import raise_together
from elastic_slurm.mpi_runtime.probe import spawn_info


class ResizeFailed(ElasticSlurmError):
    """A collective step of a resize failed on some rank; every rank raises this."""


def thread_support() -> str | None:
    """Why a spawn cannot run in a helper thread here, or ``None`` when it can."""
    provided = MPI.Query_thread()
    if provided != MPI.THREAD_MULTIPLE:
        names = {
            MPI.THREAD_SINGLE: "MPI_THREAD_SINGLE",
            MPI.THREAD_FUNNELED: "MPI_THREAD_FUNNELED",
            MPI.THREAD_SERIALIZED: "MPI_THREAD_SERIALIZED",
        }
        return f"the MPI library provides {names.get(provided, provided)}, not MPI_THREAD_MULTIPLE"
    return None


def spawn_args(argv: Sequence[str], orig_argv: Sequence[str]) -> list[str]:
    """The interpreter's arguments for spawned ranks: this program's, as this rank started.

    ``argv`` is ``sys.argv`` and ``orig_argv`` ``sys.orig_argv``; a program run under
    ``python -m mpi4py`` (as the launcher starts it) spawns its new ranks under it too.

    >>> spawn_args(["/j/app.py", "-n", "3"], ["python", "-m", "mpi4py", "app.py", "-n", "3"])
    ['-m', 'mpi4py', '/j/app.py', '-n', '3']
    >>> spawn_args(["/j/app.py"], ["python", "app.py"])
    ['/j/app.py']
    """
    runner = ["-m", "mpi4py"] if list(orig_argv[1:3]) == ["-m", "mpi4py"] else []
    return [*runner, os.path.abspath(argv[0]), *argv[1:]]


def spawn_and_merge(
    comm: MPI.Intracomm, new_hosts: Sequence[str], ntasks_per_node: int
) -> tuple[MPI.Intercomm, MPI.Intracomm, float, float]:
    """Spawn this program on ``new_hosts`` and merge (collective over ``comm``).

    Returns the intercommunicator, the merged communicator (old ranks first) and the seconds
    spent spawning and merging.
    """
    t0 = time.monotonic()
    info = MPI.Info.Create()
    for key, value in spawn_info(new_hosts, ntasks_per_node, MPI.get_vendor()[1]).items():
        info.Set(key, value)
    inter = comm.Spawn(
        sys.executable,
        spawn_args(sys.argv, sys.orig_argv),
        maxprocs=len(new_hosts) * ntasks_per_node,
        info=info,
        root=0,
    )
    info.Free()
    t1 = time.monotonic()
    merged = inter.Merge(high=False)
    return inter, merged, t1 - t0, time.monotonic() - t1


class BackgroundSpawn:
    """:func:`spawn_and_merge` in a helper thread on a duplicate of ``comm`` (collective start).

    Parameters
    ----------
    comm
        The application's communicator (duplicated here, on every rank at the same point).
    new_hosts
        The nodes to start ranks on.
    ntasks_per_node
        Ranks per new node.
    """

    def __init__(
        self, comm: MPI.Intracomm, new_hosts: Sequence[str], ntasks_per_node: int, **about: Any
    ) -> None:
        self.about = about
        self._dup = comm.Dup()
        self.result: tuple[MPI.Intercomm, MPI.Intracomm, float, float] | None = None
        self.error: str | None = None
        self._thread = threading.Thread(
            target=self._run, args=(list(new_hosts), ntasks_per_node), name="elastic-spawn"
        )
        self._thread.start()

    def _run(self, new_hosts: list[str], ntasks_per_node: int) -> None:
        try:
            self.result = spawn_and_merge(self._dup, new_hosts, ntasks_per_node)
        except Exception as exc:  # noqa: BLE001 - reported on every rank by finish()
            self.error = f"{type(exc).__name__}: {exc}"

    def done(self) -> bool:
        """Whether this rank's thread has finished (cheap)."""
        return not self._thread.is_alive()

    def finish(self, comm: MPI.Intracomm) -> tuple[MPI.Intercomm, MPI.Intracomm, float, float]:
        """Wait for the thread and return its result (collective over ``comm``).

        Raises
        ------
        ResizeFailed
            The spawn or the merge failed on some rank (on every rank).
        """
        self._thread.join()
        problem = (ResizeFailed, self.error) if self.error else None
        raise_together(comm, problem, "spawn and merge")
        assert self.result is not None
        return self.result
