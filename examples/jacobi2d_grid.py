"""The 2-D heat equation by Jacobi iteration on a 2-D process grid (ScaLAPACK-style blocks).

The ``--n`` x ``--n`` grid of doubles is registered with ``ec.array("u", (n, n),
dist=Block2D())``: the ranks form a ``P x Q`` process grid as square as possible (4 ranks
``2 x 2``, 6 ranks ``2 x 3``, 3 ranks ``1 x 3``) and rank ``p * Q + q`` holds one block of
rows *and* columns; ``--block MB`` uses ``BlockCyclic2D(MB, MB)`` instead (ScaLAPACK's 2-D
block-cyclic layout; a point's neighbours are then on other ranks in every direction, so this
example assembles the whole grid each iteration: simple, not fast). Each rank exchanges one halo row
with the ranks above and below and one halo column with the ranks left and right. The
boundary is fixed (top row 1.0, other edges 0.0); each interior point becomes the mean of its
four neighbours, the same floating-point expression on any grid, so any process grid gives
bitwise the same result as the serial run (``--check``).

``--regrid-at K --to M`` shows a redistribution between grids in the middle of a run without a
cluster: at iteration ``K`` the array moves from the ``P x Q`` grid of all ranks to the grid of
the first ``M`` ranks with :func:`~elastic_slurm.mpi_runtime.redistribute.move_array` (for
example ``2 x 2 -> 1 x 3``), and those ranks go on alone. Under the elastic launcher the
runtime's resize points make that move themselves (grow and shrink, spawn or restart).

Usage::

    mpirun -n 4 python examples/jacobi2d_grid.py --n 256 --iterations 50 --check
    mpirun -n 4 python examples/jacobi2d_grid.py --n 256 --regrid-at 20 --to 3 --check
    elastic-slurm run examples/jacobi2d_grid.py --n 2048 --iterations 1000

The last line printed by rank 0 is a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
from mpi4py import MPI

from elastic_slurm.mpi_runtime import init
from elastic_slurm.mpi_runtime.data import Block2D, BlockCyclic2D
from elastic_slurm.mpi_runtime.distribution import Grid2D
from elastic_slurm.mpi_runtime.redistribute import move_array

TOLERANCE = 0.0  # the same expression at every point on any grid: bitwise equal


def initial(rows: np.ndarray, cols: np.ndarray, n: int) -> np.ndarray:
    """The initial values at global ``rows x cols``: a pattern inside, a hot top edge."""
    i = rows.astype(np.float64)[:, None]
    j = cols.astype(np.float64)[None, :]
    u = ((i * 7.0 + j * 13.0) % 17.0) / 17.0
    u[:, (cols == 0) | (cols == n - 1)] = 0.0
    u[rows == 0, :] = 1.0
    u[rows == n - 1, :] = 0.0
    return u


def step(
    u: np.ndarray,
    near: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    rows: np.ndarray,
    cols: np.ndarray,
    n: int,
) -> np.ndarray:
    """One Jacobi step of the local values ``u`` at global ``rows x cols``.

    ``near`` holds, for every local point, its neighbour above, below, left and right (each the
    shape of ``u``). Global rows and columns 0 and ``n - 1`` are kept fixed.
    """
    up, down, left, right = near
    new = u.copy()
    inner = 0.25 * (up + down + left + right)
    fixed = ((rows == 0) | (rows == n - 1))[:, None] | ((cols == 0) | (cols == n - 1))[None, :]
    new[~fixed] = inner[~fixed]
    return new


def around(ext: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The four neighbours of every point of a block padded with one halo on each side."""
    return ext[:-2, 1:-1], ext[2:, 1:-1], ext[1:-1, :-2], ext[1:-1, 2:]


def exchange(comm: MPI.Intracomm, grid: tuple[int, int], u: np.ndarray) -> np.ndarray:
    """``u`` with one halo row above and below and one halo column left and right."""
    p_rows, q_cols = grid
    p, q = divmod(comm.rank, q_cols)
    ext = np.zeros((u.shape[0] + 2, u.shape[1] + 2))
    ext[1:-1, 1:-1] = u

    def rank_at(pp: int, qq: int) -> int:
        inside = 0 <= pp < p_rows and 0 <= qq < q_cols
        return pp * q_cols + qq if inside else MPI.PROC_NULL

    up, down, left, right = (
        rank_at(p - 1, q),
        rank_at(p + 1, q),
        rank_at(p, q - 1),
        rank_at(p, q + 1),
    )
    if u.shape[0]:
        row = np.empty(u.shape[1])
        comm.Sendrecv(u[0].copy(), dest=up, recvbuf=row, source=down)
        if down != MPI.PROC_NULL:
            ext[-1, 1:-1] = row
        comm.Sendrecv(u[-1].copy(), dest=down, recvbuf=row, source=up)
        if up != MPI.PROC_NULL:
            ext[0, 1:-1] = row
    if u.shape[1]:
        col = np.empty(u.shape[0])
        comm.Sendrecv(u[:, 0].copy(), dest=left, recvbuf=col, source=right)
        if right != MPI.PROC_NULL:
            ext[1:-1, -1] = col
        comm.Sendrecv(u[:, -1].copy(), dest=right, recvbuf=col, source=left)
        if left != MPI.PROC_NULL:
            ext[1:-1, 0] = col
    return ext


def cyclic_neighbours(
    comm: MPI.Intracomm, u: np.ndarray, rows: np.ndarray, cols: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The four neighbours of every local point for a block-cyclic layout (via the whole grid).

    Simple, not fast: every rank assembles the whole grid with one ``Allreduce``.
    """
    padded = np.zeros((n + 2, n + 2))
    padded[np.ix_(rows + 1, cols + 1)] = u
    comm.Allreduce(MPI.IN_PLACE, padded, op=MPI.SUM)
    return (
        padded[np.ix_(rows, cols + 1)],  # global row - 1
        padded[np.ix_(rows + 2, cols + 1)],  # global row + 1
        padded[np.ix_(rows + 1, cols)],  # global column - 1
        padded[np.ix_(rows + 1, cols + 2)],  # global column + 1
    )


def serial(n: int, iterations: int) -> np.ndarray:
    """The same computation on one process (the reference)."""
    idx = np.arange(n)
    u = initial(idx, idx, n)
    for _ in range(iterations):
        ext = np.zeros((n + 2, n + 2))
        ext[1:-1, 1:-1] = u
        u = step(u, around(ext), idx, idx, n)
    return u


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=512, help="grid size (n x n doubles)")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--block", type=int, default=0, help="MB: block-cyclic MB x MB (0: block)")
    p.add_argument("--regrid-at", type=int, default=-1, help="iteration of the demo move")
    p.add_argument("--to", type=int, default=0, help="ranks after the demo move")
    p.add_argument("--check", action="store_true", help="compare with a serial run (rank 0)")
    p.add_argument(
        "--pace-s", type=float, default=0.0, help="make each iteration last at least S seconds"
    )
    args = p.parse_args(argv)

    ec = init()
    n = args.n
    dist = BlockCyclic2D(args.block, args.block) if args.block else Block2D()
    u = ec.array("u", (n, n), np.float64, dist=dist)  # its blocks follow a resize
    if not ec.resumed:
        rows, cols = u.grid_indices()
        u.local = initial(rows, cols, n)
        ec.state.update(iteration=0)
    comm, layout, local = ec.comm, u.layout(), u.local
    moved = ""
    t0 = time.monotonic()
    while ec.state["iteration"] < args.iterations:
        if ec.state["iteration"] == args.regrid_at and 0 < args.to <= comm.size:
            before = layout.grid
            local = move_array(comm, local, u.meta(), comm.size, args.to)
            keep = comm.rank < args.to
            comm = comm.Split(0 if keep else MPI.UNDEFINED, comm.rank)
            if not keep:
                break
            layout = dist.layout_of((n, n), comm.size)
            moved = f"{before[0]}x{before[1]} -> {layout.grid[0]}x{layout.grid[1]}"
        assert isinstance(layout, Grid2D)
        pp, qq = layout.coords(comm.rank)
        rows, cols = layout.rows.indices(pp), layout.cols.indices(qq)
        if args.block:
            near = cyclic_neighbours(comm, local, rows, cols, n)
        else:
            near = around(exchange(comm, layout.grid, local))
        local = step(local, near, rows, cols, n)
        ec.state["iteration"] += 1
        if args.pace_s > 0:
            time.sleep(args.pace_s)
        if comm is ec.comm:
            u.local = local
            ec.resize_point()  # under the launcher the grid may change here
            comm, layout, local = ec.comm, u.layout(), u.local
    if comm == MPI.COMM_NULL:
        return 0
    pp, qq = layout.coords(comm.rank)
    rows, cols = layout.rows.indices(pp), layout.cols.indices(qq)
    whole = np.zeros((n, n))
    whole[np.ix_(rows, cols)] = local
    comm.Reduce(MPI.IN_PLACE if comm.rank == 0 else whole, whole, op=MPI.SUM, root=0)
    if comm.rank != 0:
        return 0
    summary: dict[str, object] = {
        "n": n,
        "iterations": ec.state["iteration"],
        "ranks": comm.size,
        "grid": list(layout.grid),
        "distribution": dist.to_json(),
        "moved": moved,
        "resizes": ec.generation,
        "seconds": round(time.monotonic() - t0, 3),
        "checksum": float(whole.sum()),
    }
    if args.check:
        err = float(np.max(np.abs(whole - serial(n, args.iterations))))
        summary["max_abs_error"] = err
        summary["matches_serial"] = err <= TOLERANCE
    print(json.dumps(summary), flush=True)
    return 0 if summary.get("matches_serial", True) else 1


if __name__ == "__main__":
    sys.exit(main())
