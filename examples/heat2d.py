"""The 2-D heat equation by Jacobi iteration: a malleable mpi4py application.

The grid (``--n`` x ``--n`` doubles, 2048 x 2048 = 32 MiB by default) is distributed by row
blocks over the ranks of ``ec.comm``. The boundary is held fixed (top row 1.0, other edges
0.0); every interior point becomes the mean of its four neighbours at each iteration. There is
one resize point per iteration, where the elastic runtime may grow or shrink the job.

Each point's update is the same floating-point expression whatever the number of ranks, so a
run that was resized gives *bitwise* the same grid as a run at a fixed size. The stated
tolerance of the check is 1e-12 (absolute); the expected error is 0.0.

Usage (inside a Slurm job, through the elastic launcher)::

    elastic-slurm run examples/heat2d.py --n 2048 --iterations 1000 --save result.npy

Options ``--save`` (write the final grid as .npy), ``--reference FILE`` (compare with a grid
saved by another run) and ``--check`` (compare with a serial computation on rank 0; for small
grids). The last line printed by rank 0 is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time

import numpy as np
from mpi4py import MPI

from elastic_slurm.mpi_runtime import init

TOLERANCE = 1e-12


def initial_rows(start: int, stop: int, n: int) -> np.ndarray:
    """Rows ``start..stop-1`` of the initial grid: a fixed pattern inside, hot top edge."""
    i = np.arange(start, stop, dtype=np.float64)[:, None]
    j = np.arange(n, dtype=np.float64)[None, :]
    u = ((i * 7.0 + j * 13.0) % 17.0) / 17.0
    u[:, 0] = 0.0
    u[:, -1] = 0.0
    if start == 0 and stop > 0:
        u[0, :] = 1.0
    if stop == n and stop > start:
        u[-1, :] = 0.0
    return u


def jacobi_rows(ext: np.ndarray, start: int, n: int) -> np.ndarray:
    """One Jacobi step of the rows held in ``ext`` (which has one halo row above and below).

    ``ext`` has shape ``(rows + 2, n)``; its first row is global row ``start - 1`` (ignored
    for ``start == 0``) and its last row is global row ``start + rows`` (ignored at the bottom).
    Global rows 0 and ``n - 1`` and columns 0 and ``n - 1`` are kept fixed.
    """
    rows = ext.shape[0] - 2
    new = ext[1:-1].copy()
    new[:, 1:-1] = 0.25 * (ext[:-2, 1:-1] + ext[2:, 1:-1] + ext[1:-1, :-2] + ext[1:-1, 2:])
    if start == 0:
        new[0] = ext[1]
    if start + rows == n:
        new[-1] = ext[-2]
    return new


def exchange_halos(comm: MPI.Intracomm, u: np.ndarray, n: int) -> np.ndarray:
    """``u`` with one halo row from each neighbour rank (zeros at the global edges)."""
    ext = np.zeros((u.shape[0] + 2, n))
    ext[1:-1] = u
    up = comm.rank - 1 if comm.rank > 0 else MPI.PROC_NULL
    down = comm.rank + 1 if comm.rank < comm.size - 1 else MPI.PROC_NULL
    comm.Sendrecv(u[0], dest=up, recvbuf=ext[-1], source=down)
    comm.Sendrecv(u[-1], dest=down, recvbuf=ext[0], source=up)
    return ext


def serial(n: int, iterations: int) -> np.ndarray:
    """The same computation on one process (the fixed-size reference)."""
    u = initial_rows(0, n, n)
    for _ in range(iterations):
        ext = np.zeros((n + 2, n))
        ext[1:-1] = u
        u = jacobi_rows(ext, 0, n)
    return u


def gather_grid(comm: MPI.Intracomm, u: np.ndarray, n: int) -> np.ndarray | None:
    """The whole grid on rank 0 (``None`` elsewhere)."""
    counts = comm.gather(u.size, root=0)
    full = np.empty((n, n)) if comm.rank == 0 else None
    comm.Gatherv(u, [full, counts] if comm.rank == 0 else None, root=0)
    return full


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=2048, help="grid size (n x n doubles)")
    p.add_argument("--iterations", type=int, default=1000)
    p.add_argument("--report-every", type=int, default=100, help="progress line period")
    p.add_argument("--save", help="write the final grid to this .npy file")
    p.add_argument("--reference", help="compare the final grid with this .npy file")
    p.add_argument("--check", action="store_true", help="compare with a serial run (rank 0)")
    p.add_argument(
        "--pace-s",
        type=float,
        default=0.0,
        help="make each iteration last at least this long (s): small, slow runs "
        "for tests and demonstrations",
    )
    args = p.parse_args(argv)

    ec = init()
    n = args.n
    u = ec.array("u", (n, n), np.float64)  # row blocks; restored after a resize
    if not ec.resumed:
        start, stop = u.rows()
        u.local = initial_rows(start, stop, n)
        ec.state.update(iteration=0, elapsed_s=0.0)
    t_start = time.monotonic() - float(ec.state["elapsed_s"])
    while ec.state["iteration"] < args.iterations:
        t_it = time.monotonic()
        start, _ = u.rows()
        u.local = jacobi_rows(exchange_halos(ec.comm, u.local, n), start, n)
        if args.pace_s > 0:
            time.sleep(max(0.0, args.pace_s - (time.monotonic() - t_it)))
        ec.state["iteration"] += 1
        it = ec.state["iteration"]
        if ec.rank == 0 and it % args.report_every == 0:
            print(
                f"heat2d: iteration {it}/{args.iterations} on {ec.size} rank(s) "
                f"[{socket.gethostname()}]",
                flush=True,
            )
        ec.state["elapsed_s"] = time.monotonic() - t_start
        ec.resize_point()  # the world may change here: ec.comm and u.local are then new

    it = ec.state["iteration"]
    grid = gather_grid(ec.comm, u.local, n)
    if ec.rank != 0:
        return 0
    assert grid is not None
    summary: dict[str, object] = {
        "iterations": it,
        "n": n,
        "ranks": ec.size,
        "resizes": ec.generation,
        "seconds": round(time.monotonic() - t_start, 3),
        "checksum": float(grid.sum()),
        "tolerance": TOLERANCE,
    }
    if args.save:
        np.save(args.save, grid)
    reference = None
    if args.reference:
        reference = np.load(args.reference)
    elif args.check:
        reference = serial(n, args.iterations)
    if reference is not None:
        err = float(np.max(np.abs(grid - reference)))
        summary["max_abs_error"] = err
        summary["matches_reference"] = err <= TOLERANCE
    print(json.dumps(summary), flush=True)
    return 0 if summary.get("matches_reference", True) else 1


if __name__ == "__main__":
    sys.exit(main())
