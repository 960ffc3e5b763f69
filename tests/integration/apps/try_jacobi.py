"""Fixture program of ``test_local_try.py``: a row-block Jacobi sweep with ghost rows.

``python try_jacobi.py MODE [ITERATIONS]`` where MODE is one of

* ``right``: a correct port (the sweep assigns its result to ``u.local``; the iteration
  counter lives in ``ec.state``; initial values only when not ``ec.resumed``);
* ``stale``: a wrong port that computes on its own copy ``work`` and never takes the
  redistributed rows back from ``u.local`` after a resize (spawned grows break it);
* ``noguard``: a wrong port that fills the initial values even when it resumed (restarted and
  spawned ranks overwrite the rows they were handed);
* ``missing``: rank 1 stops calling ``ec.resize_point()`` after two iterations;
* ``badstate``: puts a list into ``ec.state`` (refused where it is set).

Rank 0 prints one line at the end: the global sum and the iteration count.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

from elastic_slurm.mpi_runtime import init

ROWS, COLS = 48, 16


def sweep(comm: MPI.Intracomm, local: np.ndarray) -> np.ndarray:
    """One Jacobi step over the rows (ghost rows from the neighbours; the top edge is hot)."""
    up = comm.rank - 1 if comm.rank > 0 else MPI.PROC_NULL
    down = comm.rank + 1 if comm.rank < comm.size - 1 else MPI.PROC_NULL
    top = np.ones(COLS) if comm.rank == 0 else np.zeros(COLS)
    bottom = np.zeros(COLS)
    comm.Sendrecv(np.ascontiguousarray(local[0]), dest=up, recvbuf=bottom, source=down)
    comm.Sendrecv(np.ascontiguousarray(local[-1]), dest=down, recvbuf=top, source=up)
    if comm.rank == 0:
        top = np.ones(COLS)
    padded = np.vstack([top, local, bottom])
    left = np.pad(padded[1:-1], ((0, 0), (1, 0)))[:, :-1]
    right = np.pad(padded[1:-1], ((0, 0), (0, 1)))[:, 1:]
    return 0.25 * (padded[:-2] + padded[2:] + left + right)


def main(mode: str, iterations: int) -> None:
    ec = init()
    u = ec.array("u", (ROWS, COLS), np.float64)
    ec.state.setdefault("iteration", 0)
    if mode == "badstate":
        ec.state["history"] = [0.0]  # a list cannot travel: refused here
    if not ec.resumed or mode == "noguard":
        rows = u.indices()
        u.local[:] = (rows[:, None] % 7) * 0.1 + np.arange(COLS)[None, :] * 0.01
    work = u.local
    while ec.state["iteration"] < iterations:
        if mode == "stale":
            work = sweep(ec.comm, work)
            u.local = work
        else:
            u.local = sweep(ec.comm, u.local)
        ec.state["iteration"] += 1
        time.sleep(0.01)
        if mode == "missing" and ec.rank == 1 and ec.state["iteration"] > 2:
            continue
        ec.resize_point()  # the stale port forgets "work = u.local" when this returns True
    total = ec.comm.allreduce(float(u.local.sum()))
    if ec.rank == 0:
        print(f"sum {total:.15e} after {ec.state['iteration']} iterations", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "right", int(sys.argv[2]) if sys.argv[2:] else 60)
