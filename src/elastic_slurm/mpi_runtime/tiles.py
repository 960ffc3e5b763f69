"""Tiles: the part of one rank's 2-D local array that goes to (or comes from) one peer.

A grid redistribution (:func:`~elastic_slurm.mpi_runtime.redistribute.redistribute_grid`)
splits what each rank sends into one tile per peer. A :data:`Tile` is ``(row pieces, column
pieces, the peer's row bytes)``: each piece ``[src start, dst start, length]`` counts local
rows (row pieces) or bytes within a row (column pieces), on the sending side (column 0) and on
the receiving side (column 1). The local arrays are seen as ``uint8`` of shape ``(rows, row
bytes)``.

This module moves a tile's bytes within one process: packing it into a contiguous buffer
(:func:`gather`), unpacking one (:func:`scatter`), copying the tile that stays on a rank
(:func:`copy_local`), and describing it to MPI as a derived datatype (:func:`datatype`). Each
copy uses the fewest NumPy calls it can: strided views (:mod:`.strided`) when the runs are
regular, one slice assignment per rectangle when they are few, one fancy-indexed copy
otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from elastic_slurm.mpi_runtime import strided

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "MAX_SLICES",
    "Tile",
    "copy_local",
    "datatype",
    "flat_index",
    "gather",
    "new_buffer",
    "packed_shape",
    "rectangles",
    "runs_of",
    "scatter",
    "whole_rows",
]

Tile = tuple[np.ndarray, np.ndarray, int]
"""``(row pieces, column pieces, the peer's row bytes)``: see the module docstring."""

MAX_SLICES = 1024
"""A tile made of up to this many (row run x column run) rectangles is packed, unpacked or
copied with one NumPy slice assignment per rectangle; more use one fancy-indexed copy."""


def _slices(runs: np.ndarray) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in runs.tolist()]


def flat_index(runs: np.ndarray) -> np.ndarray:
    """The positions covered by ``[start, length]`` runs, in order (int64)."""
    if len(runs) == 1:
        return np.arange(runs[0, 0], runs[0, 0] + runs[0, 1], dtype=np.int64)
    lengths = runs[:, 1]
    offsets = np.repeat(runs[:, 0] - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(int(lengths.sum()), dtype=np.int64) + offsets


def runs_of(tile: Tile, side: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``[start, length]`` row and column runs of a tile on one side (0 src, 1 dst)."""
    return tile[0][:, [side, 2]], tile[1][:, [side, 2]]


def whole_rows(a: np.ndarray, tile: Tile, side: int) -> np.ndarray | None:
    """A flat view of ``a`` holding exactly the tile, if the tile is one run of whole rows."""
    rows, cols = runs_of(tile, side)
    if len(rows) == 1 and len(cols) == 1 and cols[0, 0] == 0 and cols[0, 1] == a.shape[1]:
        start, n = int(rows[0, 0]), int(rows[0, 1])
        return a[start : start + n].reshape(-1)
    return None


def packed_shape(tile: Tile) -> tuple[int, int]:
    """The tile packed: ``(rows, bytes per row)``."""
    return int(tile[0][:, 2].sum()), int(tile[1][:, 2].sum())


def new_buffer(tile: Tile) -> np.ndarray:
    """An uninitialised ``uint8`` buffer of the tile's :func:`packed_shape`."""
    return np.empty(packed_shape(tile), dtype=np.uint8)


def rectangles(tile: Tile, side: int) -> list[tuple[slice, slice, slice, slice]]:
    """``(rows in a, cols in a, rows in packed, cols in packed)`` for each rectangle."""
    return _rects(*runs_of(tile, side))


def _rects(rows: np.ndarray, cols: np.ndarray) -> list[tuple[slice, slice, slice, slice]]:
    """:func:`rectangles` of ``[start, length]`` row and column runs."""
    out = []
    r_off = 0
    col_runs = _slices(cols)
    for r0, n in _slices(rows):
        c_off = 0
        for c0, m in col_runs:
            out.append(
                (
                    slice(r0, r0 + n),
                    slice(c0, c0 + m),
                    slice(r_off, r_off + n),
                    slice(c_off, c_off + m),
                )
            )
            c_off += m
        r_off += n
    return out


def gather(a: np.ndarray, tile: Tile, side: int) -> np.ndarray:
    """Pack the tile of ``a`` (``uint8``, 2-D) into a new contiguous array."""
    buf = new_buffer(tile)
    rows, cols = runs_of(tile, side)
    rows, cols = strided.merged(rows), strided.merged(cols)  # packing joins adjacent runs
    if _by_views(a, rows, cols, buf, gather=True):
        return buf
    if len(rows) * len(cols) > MAX_SLICES:
        return a[np.ix_(flat_index(rows), flat_index(cols))]
    for ra, ca, rb, cb in _rects(rows, cols):
        buf[rb, cb] = a[ra, ca]
    return buf


def scatter(a: np.ndarray, tile: Tile, buf: np.ndarray, side: int) -> None:
    """Unpack ``buf`` (a packed tile) into the tile of ``a``."""
    rows, cols = runs_of(tile, side)
    rows, cols = strided.merged(rows), strided.merged(cols)
    if _by_views(a, rows, cols, buf, gather=False):
        return
    if len(rows) * len(cols) > MAX_SLICES:
        a[np.ix_(flat_index(rows), flat_index(cols))] = buf
        return
    for ra, ca, rb, cb in _rects(rows, cols):
        a[ra, ca] = buf[rb, cb]


def _by_views(
    a: np.ndarray, rows: np.ndarray, cols: np.ndarray, buf: np.ndarray, *, gather: bool
) -> bool:
    """Copy between the tile of ``a`` and its packed ``buf`` by strided views, if worth it.

    That is when they take fewer NumPy calls than rectangles (:mod:`.strided`); returns False
    (nothing copied) otherwise.
    """
    p_rows, p_cols = strided.packed(rows), strided.packed(cols)
    mode = strided.choose([rows, p_rows], [cols, p_cols])
    if mode is None:
        return False
    pairs = zip(
        strided.views(a, rows, cols, mode), strided.views(buf, p_rows, p_cols, mode), strict=True
    )
    for in_a, in_buf in pairs:
        if gather:
            in_buf[...] = in_a
        else:
            in_a[...] = in_buf
    return True


def copy_local(src: np.ndarray, tile: Tile, dst: np.ndarray) -> None:
    """Copy the tile that stays on the rank from its place in ``src`` to its place in ``dst``."""
    (r_src, c_src), (r_dst, c_dst) = runs_of(tile, 0), runs_of(tile, 1)
    mode = strided.choose([r_src, r_dst], [c_src, c_dst])
    if mode is not None:
        pairs = zip(
            strided.views(src, r_src, c_src, mode),
            strided.views(dst, r_dst, c_dst, mode),
            strict=True,
        )
        for a, b in pairs:
            b[...] = a
        return
    if len(tile[0]) * len(tile[1]) > MAX_SLICES:
        scatter(dst, tile, gather(src, tile, 0), 1)
        return
    pairs2 = zip(rectangles(tile, 0), rectangles(tile, 1), strict=True)
    for (ra, ca, _, _), (rb, cb, _, _) in pairs2:
        dst[rb, cb] = src[ra, ca]


def datatype(a: np.ndarray, tile: Tile, side: int) -> MPI.Datatype:
    """A committed MPI datatype selecting the tile in ``a`` (``uint8``, 2-D, C-contiguous).

    The column runs (bytes) of one row are an ``hindexed`` type of ``MPI_BYTE`` resized to the
    row's extent; the row runs repeat it (``hindexed`` over rows, in bytes). The caller frees
    it, and keeps tiles of at most ``MPI_INT_MAX`` bytes here (the size of one element of a
    message is counted in ``int``). Both sides of a message list the same bytes in the same
    order (rows, then columns), so their type signatures match whatever the shapes of the two
    local arrays.
    """
    from mpi4py import MPI

    rows, cols = runs_of(tile, side)
    rows, cols = strided.merged(rows), strided.merged(cols)
    row_bytes = a.shape[1]
    one_row = MPI.BYTE.Create_hindexed(cols[:, 1].tolist(), cols[:, 0].tolist())
    row = one_row.Create_resized(0, row_bytes)
    one_row.Free()
    try:
        lengths = rows[:, 1].tolist()
        starts = (rows[:, 0] * row_bytes).tolist()
        selected = row.Create_hindexed(lengths, starts)
    finally:
        row.Free()
    selected.Commit()
    return selected
