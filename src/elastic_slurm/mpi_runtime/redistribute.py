"""Move a distributed NumPy array from one distribution to another over MPI.

At a resize point the data of an elastic job is split along axis 0 (its rows) over one set of
parts and must end up split over another: ``src_parts`` block-distributed ranks to
``dst_parts`` ranks (:func:`redistribute_rows`), or any
:class:`~elastic_slurm.mpi_runtime.distribution.RowDistribution` to any other
(:func:`redistribute`: block, block-cyclic, or a custom class). Data moves as NumPy buffers
with one MPI derived datatype per row (or per group of rows); nothing is pickled. Block to
block is a single ``MPI_Alltoallv`` of slices of the local block. Other pairs either send
each run of rows that has one source and one destination as its own message, straight into
the result (when the runs are large), or pack the rows each destination needs with one NumPy
gather, send them with one ``MPI_Alltoallv``, and place the received rows with one scatter.

Arrays on 2-D process grids (:class:`~elastic_slurm.mpi_runtime.distribution.Grid2D`, the
ScaLAPACK block and block-cyclic layouts) move with :func:`redistribute_grid`, between grids
of any shape and between a grid and rows; :func:`move_array` is the runtime's entry point for
a registered array (:mod:`~elastic_slurm.mpi_runtime.data`), whatever its distribution. The
grid engine plans here which tile of each rank goes to which peer and moves the tiles by MPI
messages; :mod:`~elastic_slurm.mpi_runtime.tiles` packs, unpacks and copies a tile within one
process, and :mod:`~elastic_slurm.mpi_runtime.cma` copies one straight between two processes
of one machine (when enabled).

How it degrades:

* Every argument and every rank's local block is checked, and every buffer is allocated,
  *before* any data moves; the verdicts are exchanged with one small ``allgather``; if any rank
  found a problem, every rank raises the same :class:`ValueError` (or :class:`MemoryError`),
  which lists each culprit rank and what was wrong. So a shape mismatch on one rank never leaves
  the others blocked in a transfer, and the communicator stays usable afterwards.
* A failure inside MPI itself (a lost process, a broken network) is not collective; it behaves
  as the communicator's error handler says (mpi4py's default raises ``MPI.Exception`` on the
  rank that saw it, usually followed by an abort).

Importing this module does not start MPI: ``mpi4py.MPI`` is imported on the first call (by
then the caller's communicator exists, so MPI is already initialised).
"""

from __future__ import annotations

import dataclasses
import math
import operator
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import DTypeLike

from elastic_slurm.mpi_runtime import cma, tiles
from elastic_slurm.mpi_runtime.collective import raise_together
from elastic_slurm.mpi_runtime.distribution import (
    BlockRows,
    Grid2D,
    RowDistribution,
    axis_pieces,
    exchange_plan,
    transfer_plan,
)

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "MPI_INT_MAX",
    "move_array",
    "redistribute",
    "redistribute_grid",
    "redistribute_rows",
]

MPI_INT_MAX = 2**31 - 1
"""Largest count or displacement an MPI-3 call takes (a C ``int``); Open MPI 4.1 is MPI-3.1."""


def redistribute_rows(
    comm: MPI.Intracomm,
    local: np.ndarray | None,
    global_shape: Sequence[int],
    dtype: DTypeLike,
    src_parts: int,
    dst_parts: int,
) -> np.ndarray:
    """Redistribute a global array split along axis 0 from ``src_parts`` to ``dst_parts`` ranks.

    Collective over ``comm``: every rank of ``comm`` must call it, with the same ``global_shape``,
    ``dtype``, ``src_parts`` and ``dst_parts`` (this is checked). The global array has shape
    ``global_shape == (global_rows, *trailing)``; it is split along axis 0 only, as
    ``BlockRows(global_rows, parts)`` says: part ``p`` (held by rank ``p``) owns
    ``global_rows // parts`` rows, plus one if ``p < global_rows % parts``. Parts at the end own
    0 rows when ``global_rows < parts``.

    Parameters
    ----------
    comm
        An intracommunicator with ``comm.size >= max(src_parts, dst_parts)``. Ranks beyond both
        distributions take part in the call but send and receive nothing.
    local
        On rank ``r < src_parts``: the old block, an ndarray of shape
        ``(BlockRows(global_rows, src_parts).counts()[r], *trailing)`` and dtype ``dtype``. It
        should be C-contiguous; otherwise a contiguous copy is made first (extra memory of one
        block). On ranks ``r >= src_parts``: ``None`` or an array with 0 rows (any trailing
        shape). It is only read.
    global_shape
        Shape of the global array, at least 1-D; entries are ``>= 0``.
    dtype
        NumPy dtype of the data (anything ``numpy.dtype()`` accepts, except object dtypes).
        Types that MPI knows (``float64``, ``float32``, ``int32``, ``int64``, ``complex128``,
        ``uint8``, ``bool`` ...) travel as that MPI type; others (``float16``, non-native byte
        order, structured or fixed-width string dtypes) travel as raw bytes, which is exact
        between ranks of the same architecture.
    src_parts, dst_parts
        Number of parts (ranks ``0 .. parts - 1``) before and after; each ``>= 1``.

    Returns
    -------
    numpy.ndarray
        On rank ``r < dst_parts``: the new block, shape
        ``(BlockRows(global_rows, dst_parts).counts()[r], *trailing)``; on other ranks shape
        ``(0, *trailing)``. Always dtype ``dtype``, C-contiguous, and newly allocated (never a
        view of ``local``).

    Raises
    ------
    ValueError
        On *all* ranks, before any data moves, when any rank finds a problem: a part count
        ``< 1``, ``comm.size < max(src_parts, dst_parts)``, an invalid ``global_shape`` or
        ``dtype``, a ``local`` block whose shape or dtype does not match its part, arguments
        that differ between ranks, or a size beyond the MPI count limit (below). The message
        names every culprit rank.
    MemoryError
        On all ranks, before any data moves, when a rank cannot allocate its result block.
    TypeError
        If ``comm`` is an intercommunicator (raised locally on all ranks, which all see it).

    Notes
    -----
    One row of ``trailing`` elements is an MPI contiguous derived datatype (committed for the
    call and freed afterwards), so counts and displacements are in *rows*, whatever the trailing
    shape. MPI-3 counts are C ``int``: a part may hold at most ``MPI_INT_MAX`` (``2**31 - 1``)
    rows and one row at most ``2**31 - 1`` elements (bytes, for dtypes sent as raw bytes).
    Beyond that this function raises the collective :class:`ValueError` rather than splitting:
    reshape the data so that axis 0 has fewer, longer rows (for example ``(n, k)`` to
    ``(n // m, m * k)`` with ``m`` dividing the block sizes). Messages above 2 GiB are legal
    under these limits but are not exercised by the tests.

    Every rank computes the full :func:`~elastic_slurm.mpi_runtime.distribution.transfer_plan`
    (``O(src_parts + dst_parts)`` integers); when ``src_parts == dst_parts`` nothing is sent and
    each block is copied locally.

    Examples
    --------
    Growing from 2 to 3 ranks (run under ``mpirun -n 3``)::

        shape = (10, 4)
        old = BlockRows(10, 2)
        local = None
        if comm.rank < 2:
            start, stop = old.rows_of(comm.rank)
            local = np.arange(40.0).reshape(shape)[start:stop]
        new = redistribute_rows(comm, local, shape, np.float64, src_parts=2, dst_parts=3)
        # rank 0: rows 0..3, rank 1: rows 4..6, rank 2: rows 7..9; each shape (rows, 4)
    """
    return _redistribute(comm, local, global_shape, dtype, src_parts, dst_parts, api=_ROWS_API)


def redistribute(
    comm: MPI.Intracomm,
    local: np.ndarray | None,
    global_shape: Sequence[int],
    dtype: DTypeLike,
    src: RowDistribution | int,
    dst: RowDistribution | int,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Redistribute a global array split along axis 0 from distribution ``src`` to ``dst``.

    Collective over ``comm``: every rank of ``comm`` must call it, with the same
    ``global_shape``, ``dtype``, ``src`` and ``dst`` (this is checked). The global array has
    shape ``global_shape == (global_rows, *trailing)`` and dtype ``dtype``; it is split along
    axis 0 only. Rank ``r`` holds part ``r`` of a distribution: the global rows
    ``dist.indices(r)``, in increasing order, as an array of shape ``(dist.count(r),
    *trailing)``. Ranks ``r >= dist.parts`` hold nothing. Any pair of distributions works:
    :class:`~.distribution.BlockRows` (rows that do not divide evenly: the first
    ``global_rows % parts`` parts get one extra row), :class:`~.distribution.BlockCyclicRows`
    (blocks of ``block`` rows dealt round-robin; the last block may be short), or any class that
    follows the :class:`~.distribution.RowDistribution` protocol. A 1-D array is the case
    ``trailing == ()``; a 2-D row-block array ``(n, m)`` is ``BlockRows(n, parts)``.

    Parameters
    ----------
    comm
        An intracommunicator with ``comm.size >= max(src.parts, dst.parts)``. Ranks beyond both
        distributions take part in the call but send and receive nothing.
    local
        On rank ``r < src.parts``: its old part, an ndarray of shape ``(src.count(r),
        *trailing)`` and dtype ``dtype``, C-contiguous (otherwise a contiguous copy is made
        first). On ranks ``r >= src.parts``: ``None`` or an array with 0 rows. It is only read.
    global_shape
        Shape of the global array, at least 1-D; entries are ``>= 0``.
    dtype
        NumPy dtype of the data (anything ``numpy.dtype()`` accepts, except object dtypes); see
        :func:`redistribute_rows` for how each kind travels (exact bytes in every case).
    src, dst
        The distributions before and after; ``global_rows`` of each must equal
        ``global_shape[0]``. An int ``p`` is short for ``BlockRows(global_rows, p)``. They are
        compared between ranks by ``repr`` (dataclasses) or by type, size and ``counts()``.
    out
        Optional destination, to avoid allocating (and page-faulting) a new array: on rank
        ``r < dst.parts`` a writeable C-contiguous ndarray of shape ``(dst.count(r),
        *trailing)`` and dtype ``dtype`` that does not overlap ``local``; on other ranks
        ``None`` or such an array of shape ``(0, *trailing)``. Ranks may mix ``None`` and
        arrays.

    Returns
    -------
    numpy.ndarray
        On rank ``r < dst.parts``: its new part, shape ``(dst.count(r), *trailing)``, holding
        the global rows ``dst.indices(r)`` in increasing order; on other ranks shape
        ``(0, *trailing)``. Always dtype ``dtype`` and C-contiguous: ``out`` itself if given,
        else newly allocated (never a view of ``local``).

    Raises
    ------
    ValueError
        On *all* ranks, before any data moves, when any rank finds a problem: a distribution
        whose ``global_rows`` is not ``global_shape[0]`` or that is not a
        :class:`~.distribution.RowDistribution`, ``comm.size < max(src.parts, dst.parts)``, an
        invalid ``global_shape`` or ``dtype``, a ``local`` array whose shape or dtype does not
        match its part, an unusable ``out``, arguments that differ between ranks, or a size
        beyond the MPI count limit (see :func:`redistribute_rows`). The message names every
        culprit rank.
    MemoryError
        On all ranks, before any data moves, when a rank cannot allocate its buffers.
    TypeError
        If ``comm`` is an intercommunicator (raised locally on all ranks, which all see it).

    Notes
    -----
    Algorithm. If ``src == dst`` each rank copies its part. If both are ``BlockRows``, the
    transfers are the overlaps of the two block partitions
    (:func:`~.distribution.transfer_plan`, ``O(src.parts + dst.parts)``) and one ``Alltoallv``
    sends slices of ``local`` as they are. Otherwise each rank computes its
    :func:`~.distribution.exchange_plan` without communication: as a sender, the destination
    part of each of its rows (``dst.owners(src.indices(r))``) and a stable sort by it; as a
    receiver, the source part of each of its new rows and a stable sort by that; and the
    *pieces*, maximal runs of consecutive global rows with one source and one destination,
    which are contiguous in both local arrays. When every owner boundary of both
    distributions is a multiple of ``g`` rows (block-cyclic blocks with a common divisor that
    also divides ``global_rows``, or ``BlockRows`` whose parts divide ``global_rows``), the
    plan works on groups of ``g`` rows, ``g`` times fewer indices. Then, agreed by all ranks
    in the verdict exchange:

    * *by pieces*, when every rank's pieces average at least 32 KiB (for example block-cyclic
      blocks of 32 KiB or more): every piece is one ``Isend``/``Irecv`` on a private duplicate
      of ``comm``, straight from ``local`` into the result (a single copy where MPI copies
      between processes directly, as Open MPI's shared-memory transport does with CMA);
      pieces that stay on the rank are copied locally. At most 32768 pieces per rank and
      direction; more means smaller pieces, which are packed.
    * *packed*, otherwise: the rows are packed destination by destination (one
      ``numpy.take``), sent with one ``Alltoallv``, and placed with one indexed assignment. A
      sort that is already in order is skipped and the buffer used as it is: block to
      block-cyclic packs on the sender only, block-cyclic to block unpacks on the receiver
      only. The pack and receive buffers are allocated after the verdict exchange and agreed
      on in a second one, so an allocation failure still raises on every rank.

    Cost on rank ``r``, with ``n_s = src.count(r)``, ``n_d = dst.count(r)``, ``b`` bytes per
    row, ``g`` the grain above, and ``k`` pieces:

    * time: ``O((n_s + n_d) / g)`` for the plan, plus the transfer of the bytes that leave or
      reach the rank; packed adds one copy of ``n_s * b`` bytes (pack, when needed) and one of
      ``n_d * b`` bytes (unpack, when needed). Messages: block to block and packed, one
      ``Alltoallv`` in which only pairs that share rows exchange data (at most ``src.parts *
      dst.parts`` pairs; block to block at most ``src.parts + dst.parts - 1``); by pieces,
      ``k`` messages of at least 32 KiB on average, plus one ``Comm.Dup``.
    * memory beyond ``local`` and the result (``n_d * b`` bytes, unless ``out`` is given; a
      new result is also written once by the kernel, which zeroes its pages on first touch,
      about one more copy's worth of time): ``8 * (n_s + n_d) / g`` bytes of plan indices
      (about three times that while the plan is built) and ``24 * k`` bytes of pieces. Packed
      adds ``n_s * b`` bytes for the send buffer when the sender must reorder and ``n_d * b``
      bytes for the receive buffer when the receiver must reorder. Block to block and
      ``src == dst`` need no extra buffers. A non-contiguous ``local`` adds a copy of
      ``n_s * b`` bytes.

    Examples
    --------
    From a 2-way block to a 3-way block-cyclic distribution (blocks of 2 rows), under
    ``mpirun -n 3``::

        g = np.arange(20.0).reshape(10, 2)
        src, dst = BlockRows(10, 2), BlockCyclicRows(10, 3, block=2)
        local = g[src.indices(comm.rank)] if comm.rank < 2 else None
        new = redistribute(comm, local, g.shape, np.float64, src, dst)
        # rank 0: rows 0,1,6,7; rank 1: rows 2,3,8,9; rank 2: rows 4,5; each (rows, 2)
    """
    return _redistribute(comm, local, global_shape, dtype, src, dst, api=_GENERAL_API, out=out)


_ROWS_API = ("redistribute_rows", "global_shape, dtype, src_parts, dst_parts")
_GENERAL_API = ("redistribute", "global_shape, dtype, src, dst")

_MIN_PIECE_BYTES = 32 * 1024
"""Pieces (runs of rows with one source and one destination) travel as separate messages only
if every rank's pieces average at least this many bytes; otherwise rows are packed."""
_MAX_PIECES = 1 << 15
"""At most this many piece messages per rank and direction (outstanding MPI requests)."""


@dataclasses.dataclass
class _Moves:
    """How one rank moves its rows: the buffers (``uint8``, ``(units, unit bytes)``) and plan.

    ``counts``/``displs`` (per rank of the communicator, in units), ``send_order`` and
    ``recv_order`` describe the packed ``Alltoallv``; ``send_pieces``/``recv_pieces``, when not
    None, the piece-by-piece transfer. ``packed`` is True once the ``Alltoallv`` buffers are
    ready (from the start for block to block, which needs none).
    """

    send: np.ndarray  # this rank's source units (packed by destination once ``packed``)
    recv: np.ndarray  # the result's units, or a staging buffer when ``recv_order`` is set
    result: np.ndarray  # the result's units
    unit_rows: int
    send_counts: list[int]
    send_displs: list[int]
    recv_counts: list[int]
    recv_displs: list[int]
    send_order: np.ndarray | None = None
    recv_order: np.ndarray | None = None
    send_pieces: np.ndarray | None = None
    recv_pieces: np.ndarray | None = None
    packed: bool = False

    def pack(self) -> None:
        """Allocate the buffers of the packed ``Alltoallv`` and fill the send buffer."""
        if self.send_order is not None:
            self.send = np.take(self.send, self.send_order, axis=0)  # grouped by destination
        if self.recv_order is not None:
            self.recv = np.empty((len(self.recv_order), self.recv.shape[1]), dtype=np.uint8)
        self.packed = True

    @property
    def pieces_ok(self) -> bool:
        """Whether this rank can take part in a piece-by-piece transfer."""
        return not self.packed and self.send_pieces is not None and self.recv_pieces is not None


def _redistribute(
    comm: MPI.Intracomm,
    local: np.ndarray | None,
    global_shape: Sequence[int],
    dtype: DTypeLike,
    src_arg: RowDistribution | int,
    dst_arg: RowDistribution | int,
    api: tuple[str, str],
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Shared body of :func:`redistribute` and :func:`redistribute_rows`."""
    if comm.Is_inter():
        raise TypeError(f"{api[0]} needs an intracommunicator, got an intercommunicator")
    rank, size = comm.Get_rank(), comm.Get_size()

    problem: tuple[type[Exception], str] | None = None
    signature: tuple[object, ...] = (
        repr(global_shape),
        repr(dtype),
        _describe(src_arg),
        _describe(dst_arg),
    )
    moves: _Moves | None = None
    try:
        shape, dt, src, dst = _check_arguments(global_shape, dtype, src_arg, dst_arg, size)
        if api == _ROWS_API:
            signature = (shape, str(dt), src.parts, dst.parts)
        else:
            signature = (shape, str(dt), _describe(src), _describe(dst))
        send = _check_local(local, rank, shape, dt, src)
        # Allocate the result and build the plan before the verdicts are exchanged: a
        # MemoryError on one rank must not leave the others waiting in a transfer.
        recv = _check_out(out, local, rank, shape, dt, dst)
        moves = _plan_moves(send, recv, shape, dt, src, dst, rank, size)
    except Exception as exc:  # every local failure must reach the other ranks
        problem = _problem_of(exc)
    pieces_ok = moves is not None and moves.pieces_ok
    verdicts = _raise_if_any_rank_failed(comm, problem, signature, api=api, payload=pieces_ok)
    if moves is None:
        return recv  # filled locally (same distribution) or nothing to move (on every rank)

    by_pieces = all(verdicts)  # the same answer on every rank
    if not by_pieces and not moves.packed:
        try:  # the packed path needs buffers: agree again so no rank waits for a failed one
            moves.pack()
        except Exception as exc:
            problem = _problem_of(exc)
        _raise_if_any_rank_failed(comm, problem, signature, api=api)
    element, per_element, owned = _mpi_element_type(dt)
    unit_type = element.Create_contiguous(moves.unit_rows * math.prod(shape[1:]) * per_element)
    try:
        unit_type.Commit()
        if by_pieces:
            _send_pieces(comm, moves, unit_type)
        else:
            # Hand MPI flat byte views: the explicit unit type says what they hold, and NumPy
            # cannot export some dtypes (datetime64) through the buffer protocol.
            comm.Alltoallv(
                [moves.send.reshape(-1), (moves.send_counts, moves.send_displs), unit_type],
                [moves.recv.reshape(-1), (moves.recv_counts, moves.recv_displs), unit_type],
            )
    finally:
        unit_type.Free()
        if owned:
            element.Free()
    if not by_pieces and moves.recv_order is not None:
        moves.result[moves.recv_order] = moves.recv
    return recv


def _problem_of(exc: Exception) -> tuple[type[Exception], str]:
    """Classify a local failure for the collective error (ValueError, MemoryError, other)."""
    if isinstance(exc, ValueError | TypeError):
        return (ValueError, str(exc))
    if isinstance(exc, MemoryError):
        return (MemoryError, f"out of memory for the buffers: {exc}")
    return (RuntimeError, f"{type(exc).__name__}: {exc}")


def _send_pieces(comm: MPI.Intracomm, moves: _Moves, unit_type: MPI.Datatype) -> None:
    """Move every piece as one message, straight from the source into the result.

    Runs on a private duplicate of ``comm`` (so no message can match the caller's); pieces
    of a pair are matched in order, which MPI keeps for one sender, receiver, tag and
    communicator. Pieces that stay on this rank are copied directly.
    """
    from mpi4py import MPI

    assert moves.send_pieces is not None and moves.recv_pieces is not None
    rank = comm.Get_rank()
    private = comm.Dup()
    try:
        requests = []
        kept_recv = []
        for peer, start, n in moves.recv_pieces.tolist():
            if peer == rank:
                kept_recv.append((start, n))
            else:
                buf = moves.result[start : start + n].reshape(-1)
                requests.append(private.Irecv([buf, n, unit_type], peer, 0))
        kept_send = []
        for peer, start, n in moves.send_pieces.tolist():
            if peer == rank:
                kept_send.append(start)
            else:
                buf = moves.send[start : start + n].reshape(-1)
                requests.append(private.Isend([buf, n, unit_type], peer, 0))
        for (to, n), start in zip(kept_recv, kept_send, strict=True):
            moves.result[to : to + n] = moves.send[start : start + n]
        MPI.Request.Waitall(requests)
    finally:
        private.Free()


def _check_out(
    out: np.ndarray | None,
    local: np.ndarray | None,
    rank: int,
    shape: tuple[int, ...],
    dt: np.dtype,
    dst: RowDistribution,
) -> np.ndarray:
    """Return the array to receive into: ``out`` after checking it, or a new one."""
    expected = (dst.count(rank) if rank < dst.parts else 0, *shape[1:])
    if out is None:
        return np.empty(expected, dtype=dt)
    if not isinstance(out, np.ndarray):
        raise ValueError(f"out must be None or an ndarray, got {type(out).__name__}")
    if out.shape != expected or out.dtype != dt:
        raise ValueError(
            f"out has shape {out.shape} and dtype {out.dtype}, expected {expected} and {dt} "
            f"for part {rank} of {dst!r}"
        )
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise ValueError("out must be C-contiguous and writeable")
    if local is not None and np.may_share_memory(out, local):
        raise ValueError("out overlaps local; redistribution cannot work in place")
    return out


def _plan_moves(
    send: np.ndarray,
    recv: np.ndarray,
    shape: tuple[int, ...],
    dt: np.dtype,
    src: RowDistribution,
    dst: RowDistribution,
    rank: int,
    size: int,
) -> _Moves | None:
    """Return this rank's moves, or None after doing the work locally (nothing to send)."""
    if _same(src, dst):
        if rank < src.parts:
            recv[...] = send  # each rank keeps its own part
        return None
    row_bytes = math.prod(shape[1:]) * dt.itemsize
    if row_bytes == 0 or shape[0] == 0:
        return None  # nothing to move: every row is empty
    send_counts, send_displs = [0] * size, [0] * size
    recv_counts, recv_displs = [0] * size, [0] * size
    if type(src) is BlockRows and type(dst) is BlockRows:
        # Fast path: each transfer is a contiguous slice of both blocks.
        src_start = src.rows_of(rank)[0] if rank < src.parts else 0
        recv_start = dst.rows_of(rank)[0] if rank < dst.parts else 0
        for move in transfer_plan(shape[0], src.parts, dst.parts):
            if move.src == rank:
                send_counts[move.dst] = move.rows
                send_displs[move.dst] = move.start - src_start
            if move.dst == rank:
                recv_counts[move.src] = move.rows
                recv_displs[move.src] = move.start - recv_start
        result = _units(recv, row_bytes)
        return _Moves(
            _units(send, row_bytes),
            result,
            result,
            1,
            send_counts,
            send_displs,
            recv_counts,
            recv_displs,
            packed=True,
        )
    _, per_element, _ = _element_info(dt)
    row_count = math.prod(shape[1:]) * per_element  # MPI elements per row
    limits = tuple(min(_MAX_PIECES, a.nbytes // max(_MIN_PIECE_BYTES, 1)) for a in (send, recv))
    plan = exchange_plan(
        src,
        dst,
        rank,
        max_grain=MPI_INT_MAX // row_count,
        max_pieces=limits,  # type: ignore[arg-type]
    )
    unit_bytes = plan.grain * row_bytes
    for counts, displs, per_peer in (
        (send_counts, send_displs, plan.send_counts),
        (recv_counts, recv_displs, plan.recv_counts),
    ):
        offset = 0
        for peer, n in enumerate(per_peer.tolist()):
            counts[peer], displs[peer] = n, offset
            offset += n
    result = _units(recv, unit_bytes)
    return _Moves(
        _units(send, unit_bytes),
        result,
        result,
        plan.grain,
        send_counts,
        send_displs,
        recv_counts,
        recv_displs,
        send_order=plan.send_order,
        recv_order=plan.recv_order,
        send_pieces=plan.send_pieces,
        recv_pieces=plan.recv_pieces,
    )


def _units(array: np.ndarray, unit_bytes: int) -> np.ndarray:
    """Return a C-contiguous array as ``uint8`` of shape ``(nbytes // unit_bytes, unit_bytes)``."""
    return _as_bytes(array).reshape(-1, unit_bytes)


def _same(src: RowDistribution, dst: RowDistribution) -> bool:
    """Whether both distributions give every part the same rows (cheaply decidable cases)."""
    if type(src) is BlockRows and type(dst) is BlockRows:
        return src.parts == dst.parts
    try:
        return type(src) is type(dst) and bool(src == dst)
    except (TypeError, ValueError):  # an __eq__ that cannot answer (e.g. element-wise arrays)
        return False


def _describe(dist: object) -> object:
    """Return what must agree between ranks about a distribution argument."""
    if dataclasses.is_dataclass(dist):
        return repr(dist)
    try:
        return operator.index(dist)  # type: ignore[call-overload]
    except TypeError:
        pass
    try:
        d: RowDistribution = dist  # type: ignore[assignment]
        return (type(d).__qualname__, d.global_rows, d.parts, tuple(d.counts()))
    except Exception:
        return type(dist).__qualname__


def _as_distribution(value: object, rows: int, name: str) -> RowDistribution:
    """Return ``value`` as a distribution of ``rows`` rows (an int is a block count)."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return BlockRows(rows, value)
    if not isinstance(value, RowDistribution):
        raise ValueError(
            f"{name} must be a RowDistribution (BlockRows, BlockCyclicRows, ...) or a number "
            f"of block parts, got {type(value).__name__} {value!r}"
        )
    if value.global_rows != rows:
        raise ValueError(
            f"{name} distributes {value.global_rows} rows but global_shape[0] is {rows}"
        )
    if not isinstance(value.parts, int) or value.parts < 1:
        raise ValueError(f"{name}.parts must be an int >= 1, got {value.parts!r}")
    return value


def _check_arguments(
    global_shape: Sequence[int],
    dtype: DTypeLike,
    src_arg: RowDistribution | int,
    dst_arg: RowDistribution | int,
    comm_size: int,
) -> tuple[tuple[int, ...], np.dtype, RowDistribution, RowDistribution]:
    """Validate the rank-independent arguments; raise ValueError or TypeError with the reason."""
    shape, dt = _normalise_layout(global_shape, dtype)
    src = _as_distribution(src_arg, shape[0], "src")
    dst = _as_distribution(dst_arg, shape[0], "dst")
    if comm_size < max(src.parts, dst.parts):
        raise ValueError(
            f"the communicator has {comm_size} ranks but src_parts={src.parts} and "
            f"dst_parts={dst.parts} need {max(src.parts, dst.parts)}; grow (spawn and merge) "
            "the communicator before growing the data"
        )
    if type(src) is BlockRows and type(dst) is BlockRows:
        largest_part = -(-shape[0] // min(src.parts, dst.parts))  # ceil: the first part's rows
    else:
        largest_part = max(*src.counts(), *dst.counts())
    if largest_part > MPI_INT_MAX:
        raise ValueError(
            f"a part of {largest_part} rows exceeds the MPI count limit of {MPI_INT_MAX} rows; "
            "reshape so that axis 0 has fewer, longer rows"
        )
    element, per_element, as_bytes = _element_info(dt)
    row_count = math.prod(shape[1:]) * per_element
    if row_count > MPI_INT_MAX:
        unit = "bytes (sent as MPI.BYTE)" if as_bytes else "MPI elements"
        raise ValueError(
            f"one row of shape {shape[1:]} is {row_count} {unit}, beyond the MPI count "
            f"limit of {MPI_INT_MAX}; reshape so that axis 0 has more, shorter rows"
        )
    return shape, dt, src, dst


def _element_info(dt: np.dtype) -> tuple[str, int, bool]:
    """Return (MPI type name, MPI elements per NumPy element, whether it travels as bytes)."""
    from mpi4py import MPI

    element, per_element, owned = _mpi_element_type(dt)
    try:
        return element.Get_name(), per_element, element == MPI.BYTE
    finally:
        if owned:
            element.Free()


def _normalise_layout(
    global_shape: Sequence[int], dtype: DTypeLike
) -> tuple[tuple[int, ...], np.dtype]:
    """Return ``(shape, dtype)`` as a tuple of ints and a ``numpy.dtype``, or raise why not."""
    try:
        shape = tuple(operator.index(n) for n in global_shape)
    except TypeError as exc:
        raise TypeError(f"global_shape must be a sequence of ints, got {global_shape!r}") from exc
    if not shape:
        raise ValueError("global_shape must have at least one axis (rows are split along axis 0)")
    if min(shape) < 0:
        raise ValueError(f"global_shape entries must be >= 0, got {shape}")
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype {dtype!r} is not a NumPy dtype: {exc}") from exc
    if dt.hasobject:
        raise ValueError(f"dtype {dt} holds Python objects, which cannot be sent as a buffer")
    return shape, dt


def _check_local(
    local: np.ndarray | None,
    rank: int,
    shape: tuple[int, ...],
    dt: np.dtype,
    src: RowDistribution,
) -> np.ndarray:
    """Check this rank's part against ``src``; return a C-contiguous array to send."""
    trailing = shape[1:]
    if rank >= src.parts:
        if local is not None and (np.ndim(local) == 0 or np.shape(local)[0] != 0):
            raise ValueError(
                f"this rank holds no part of the {src.parts}-way distribution and must "
                f"pass None or a 0-row array, got an array of shape {np.shape(local)}"
            )
        return np.empty((0, *trailing), dtype=dt)
    if type(src) is BlockRows:
        start, stop = src.rows_of(rank)
        expected = (stop - start, *trailing)
        which = f"part {rank} (global rows [{start}, {stop}), shape {expected})"
        where = (
            f"part {rank} (global rows [{start}, {stop})) of the {src.parts}-way distribution "
            f"of {shape[0]} rows"
        )
    else:
        expected = (src.count(rank), *trailing)
        which = f"part {rank} (shape {expected}) of {src!r}"
        where = f"part {rank} of {src!r}"
    if not isinstance(local, np.ndarray):
        raise ValueError(
            f"this rank owns {which} of the {src.parts}-way distribution but passed "
            f"{type(local).__name__}, not an ndarray"
        )
    if local.shape != expected:
        raise ValueError(f"local block has shape {local.shape}, expected {expected} for {where}")
    if local.dtype != dt:
        raise ValueError(
            f"local block has dtype {local.dtype}, expected {dt} "
            "(convert it with .astype() first; nothing is cast implicitly)"
        )
    return np.ascontiguousarray(local)


def _raise_if_any_rank_failed(
    comm: MPI.Intracomm,
    problem: tuple[type[Exception], str] | None,
    signature: tuple[object, ...],
    *,
    api: tuple[str, str] = _ROWS_API,
    payload: object = None,
) -> list[object]:
    """Exchange every rank's verdict; raise the same error on all ranks if any failed.

    ``problem`` is ``(exception class, message)`` or None; the first culprit's class is raised
    (ValueError for bad input, MemoryError, or RuntimeError for anything unexpected).
    ``signature`` holds the arguments that must agree between ranks; a difference is a
    ValueError. ``api`` is ``(function name, argument names)`` for the message. Returns every
    rank's ``payload``, in rank order, when no rank failed.
    """
    return raise_together(
        comm,
        problem,
        api[0],
        signature=signature,
        arguments=api[1],
        payload=payload,
        outcome="rejected the call; no data was moved and",
    )


def _mpi_element_type(dt: np.dtype) -> tuple[MPI.Datatype, int, bool]:
    """Map a dtype to (MPI type, MPI elements per NumPy element, whether to ``Free`` the type).

    Native numeric, boolean and datetime dtypes that mpi4py maps to an MPI type of the same size
    use that type; everything else travels as ``dt.itemsize`` elements of ``MPI.BYTE``.
    """
    from mpi4py import MPI
    from mpi4py.util import dtlib

    simple = dt.isnative and dt.fields is None and dt.subdtype is None and dt.kind in "biufcmM"
    if simple:
        try:
            mpi_type = dtlib.from_numpy_dtype(dt)
        except (ValueError, TypeError, MPI.Exception):
            mpi_type = None
        if mpi_type is not None:
            owned = not mpi_type.is_predefined
            if mpi_type.Get_size() == dt.itemsize and mpi_type.Get_extent()[1] == dt.itemsize:
                return mpi_type, 1, owned
            if owned:
                mpi_type.Free()
    return MPI.BYTE, dt.itemsize, False


def _as_bytes(array: np.ndarray) -> np.ndarray:
    """Return a flat ``uint8`` view of a C-contiguous array (no copy)."""
    return array.reshape(-1).view(np.uint8)


# ----------------------------------------------------------------------------------------------
# Two-dimensional distributions (process grids) and the runtime's entry point

_GRID_API = ("redistribute_grid", "global_shape, dtype, src, dst")
_ROWS_BY_ALLTOALLV = True
"""Rows to rows through :func:`redistribute`; False sends them through the grid engine (the
benchmark compares both)."""
_MAX_SELF_SLICES = 256
"""Up to this many (row piece x column piece) tiles that stay on a rank are copied by NumPy
slice assignments; more go through MPI's datatype engine (one call, no Python loop)."""


def redistribute_grid(
    comm: MPI.Intracomm,
    local: np.ndarray | None,
    global_shape: Sequence[int],
    dtype: DTypeLike,
    src: Grid2D | RowDistribution | int,
    dst: Grid2D | RowDistribution | int,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Redistribute an array between 2-D process grids, or between a grid and rows.

    Collective over ``comm``, with the same arguments on every rank (this is checked). The
    global array has shape ``(M, N, *trailing)``. A :class:`~.distribution.Grid2D` ``g`` gives
    rank ``r = p * Q + q`` the elements ``g.rows.indices(p) x g.cols.indices(q)``, a local
    array of shape ``(*g.local_shape(r), *trailing)``, as ScaLAPACK does (ScaLAPACK Users'
    Guide, section 4.3, "The Two-dimensional Block Cyclic Distribution"); a row distribution
    (:class:`~.distribution.RowDistribution`, or an int ``p`` for ``BlockRows(M, p)``) is the
    grid ``p x 1``, local shape ``(count(r), N, *trailing)``. Any pair works: grid to grid of
    another shape (``2 x 2`` to ``2 x 3``, ``2 x 2`` to ``1 x 3``), other block sizes, grid to
    rows and back (a checkpoint file holds block rows). Two row distributions go to
    :func:`redistribute` (one ``MPI_Alltoallv``).

    Parameters
    ----------
    comm
        An intracommunicator with ``comm.size >= max(src.parts, dst.parts)``.
    local
        On rank ``r < src.parts``: its part, shape as above, dtype ``dtype`` (a non-contiguous
        array is copied first). On other ranks ``None`` or an empty array. Only read.
    global_shape
        ``(M, N, *trailing)``, at least 2-D when either side is a grid; entries ``>= 0``.
    dtype
        NumPy dtype (not object); see :func:`redistribute_rows` for how each kind travels.
    src, dst
        The distributions before and after; a grid must cover ``(M, N)``, rows ``M``.
    out
        Optional preallocated result on ranks ``r < dst.parts``: writeable, C-contiguous, the
        destination local shape, not overlapping ``local``.

    Returns
    -------
    numpy.ndarray
        This rank's part of ``dst`` (``out`` if given, else new; C-contiguous); on ranks
        ``r >= dst.parts`` an array with no elements.

    Raises
    ------
    ValueError
        On all ranks, before any data moves, if any rank finds a problem (shapes, dtypes,
        distributions that do not cover the array, too few ranks, arguments that differ
        between ranks); the message names every culprit rank.
    MemoryError
        On all ranks, before any data moves, if a rank cannot allocate its result.
    TypeError
        If ``comm`` is an intercommunicator.

    Notes
    -----
    Algorithm: every rank computes, without communication, the *pieces* of each axis
    (:func:`~.distribution.axis_pieces`: maximal runs of indices with one source and one
    destination process row, or column, contiguous in both local arrays). What part ``s``
    sends to part ``d`` is a *tile*, the product of the row pieces ``s -> d`` and the column
    pieces ``s -> d``. The tile that stays on a rank is copied with NumPy slice assignments;
    every other tile travels as one MPI message on a duplicate of ``comm`` (made at the first
    call, cached on ``comm`` and freed with it): straight from (into) the local array when the
    tile is one run of whole local rows, else described by an MPI derived datatype over the
    local array (MPI packs and unpacks it); a tile of more than ``MPI_INT_MAX`` bytes that is
    not whole rows is packed (unpacked) with NumPy instead.

    With ``ELASTIC_SLURM_DIRECT_COPY=1``, the verdict exchange also tells every rank where its
    peers run (boot id, PID and mount namespaces, process id, buffer addresses), and a tile
    between two processes of one machine whose runs are long enough (:func:`.cma.plan`: at
    least 2 KiB per run, a run of the side that does not copy counting twice) is copied in one
    step from the source array into the result with ``process_vm_readv`` (the receiver pulls)
    or ``process_vm_writev`` (the sender pushes): Linux's cross-memory attach, which Open
    MPI's shared-memory transport uses for large messages. The side whose array holds the tile
    in more runs does the copy (its runs are the cheap ones for the kernel); a tie goes to the
    side with more ranks. The messages are started first and travel meanwhile. Then the side
    that copied sends the other a word (done, or failed); the other side waits for it before
    returning, sleeping between looks rather than polling MPI (with more ranks than cores,
    polling ranks take the cores from the ranks that copy). A failed copy (no permission to
    attach, another PID namespace: logged once as a warning, and direct copies off for that
    process afterwards) sends that tile by message between the same two ranks. It is off by
    default: on the shared 2-core test machine it used about as much CPU time as the messages
    and was not reliably faster (see :data:`.cma.ENABLED`).

    Cost on a rank: ``O(r log r)`` for the plan (``r`` owner runs of both axes), then each
    byte that changes rank is copied once when both sides are whole rows or with a direct
    copy, else by MPI's own packing (twice on one machine) or three times for a packed tile
    (pack, transfer, unpack); one small collective (plus one word per direct tile, and a
    ``Comm.Dup`` at the first call on a communicator). Extra memory: MPI's buffers, and the
    packed tiles of more than ``MPI_INT_MAX`` bytes.
    """
    if comm.Is_inter():
        raise TypeError("redistribute_grid needs an intracommunicator, got an intercommunicator")
    if _ROWS_BY_ALLTOALLV and not isinstance(src, Grid2D) and not isinstance(dst, Grid2D):
        # rows to rows: one MPI_Alltoallv (single copy through CMA on one machine), which
        # measured faster than direct copies here (bench/redistribute.py --compare-direct)
        return redistribute(comm, local, global_shape, dtype, src, dst, out=out)
    rank, size = comm.Get_rank(), comm.Get_size()
    problem: tuple[type[Exception], str] | None = None
    signature: tuple[object, ...] = (
        repr(global_shape),
        repr(dtype),
        _describe(src),
        _describe(dst),
    )
    plan: _GridPlan | None = None
    result: np.ndarray | None = None
    me: tuple[object, ...] | None = None
    try:
        shape, dt = _normalise_layout(global_shape, dtype)
        signature = (shape, str(dt), _describe(src), _describe(dst))
        both_rows = not isinstance(src, Grid2D) and not isinstance(dst, Grid2D)
        s_axes = _grid_axes(src, shape, "src", both_rows)
        d_axes = _grid_axes(dst, shape, "dst", both_rows)
        parts = max(_parts(s_axes), _parts(d_axes))
        if size < parts:
            raise ValueError(
                f"the communicator has {size} ranks but the distributions need {parts}; grow "
                "(spawn and merge) the communicator before growing the data"
            )
        send = _check_grid_local(local, rank, shape, dt, s_axes, src)
        result = _check_grid_out(out, local, rank, shape, dt, d_axes, dst)
        trailing = shape[1:] if both_rows else shape[2:]
        cell_bytes = math.prod(trailing) * dt.itemsize
        plan = _grid_plan(send, result, cell_bytes, s_axes, d_axes, rank)
        me = plan.whoami()
    except Exception as exc:  # every local failure must reach the other ranks
        problem = _problem_of(exc)
    peers = _raise_if_any_rank_failed(comm, problem, signature, api=_GRID_API, payload=me)
    assert plan is not None and result is not None
    plan.run(comm, peers)  # type: ignore[arg-type]
    return result


def move_array(
    comm: MPI.Intracomm,
    local: np.ndarray | None,
    meta: dict[str, object],
    src_parts: int,
    dst_parts: int,
    src_dist: object | None = None,
    dst_dist: object | None = None,
) -> np.ndarray:
    """Redistribute one registered array over ``comm`` (collective), for a resize or a restart.

    The contract of the runtime's ``move_rows``, for every distribution of
    :mod:`~elastic_slurm.mpi_runtime.data`: rows (:class:`~.data.Block`,
    :class:`~.data.BlockCyclic`) and 2-D grids (:class:`~.data.Block2D`,
    :class:`~.data.BlockCyclic2D`), including grid to rows and back (checkpoint files hold
    block rows).

    Parameters
    ----------
    comm
        The intracommunicator that holds both distributions (``size >= max(src_parts,
        dst_parts)``).
    local
        This rank's part under ``src_dist`` over ``src_parts`` ranks (``None`` beyond them).
    meta
        :meth:`~.data.DistArray.meta`: ``global_shape``, ``dtype`` and ``dist``.
    src_parts, dst_parts
        Ranks holding the array before and after.
    src_dist, dst_dist
        Distributions (:mod:`~.data` objects) before and after; each defaults to
        ``meta["dist"]``.

    Returns
    -------
    numpy.ndarray
        This rank's new part (newly allocated).

    Raises
    ------
    ValueError
        On all ranks, before any data moves (see :func:`redistribute_grid`), or locally for a
        ``meta`` that names no known distribution.
    """
    from elastic_slurm.mpi_runtime.data import distribution_from_json

    shape = tuple(int(n) for n in meta["global_shape"])  # type: ignore[attr-defined]
    dtype = np.dtype(meta["dtype"])  # type: ignore[call-overload]
    dist = distribution_from_json(meta["dist"])  # type: ignore[arg-type]
    src = (src_dist or dist).layout_of(shape, src_parts)  # type: ignore[attr-defined]
    dst = (dst_dist or dist).layout_of(shape, dst_parts)  # type: ignore[attr-defined]
    if type(src) is BlockRows and type(dst) is BlockRows:
        return redistribute_rows(comm, local, shape, dtype, src_parts, dst_parts)
    return redistribute_grid(comm, local, shape, dtype, src, dst)


def _grid_axes(
    dist: Grid2D | RowDistribution | int, shape: tuple[int, ...], name: str, whole_rows: bool
) -> tuple[RowDistribution, RowDistribution]:
    """Return ``(rows, cols)``: the distributions of axes 0 and 1 (rows: ``cols`` over 1)."""
    if isinstance(dist, Grid2D):
        if len(shape) < 2:
            raise ValueError(f"{name} is a 2-D grid but global_shape {shape} has one axis")
        if dist.global_shape != shape[:2]:
            raise ValueError(
                f"{name} distributes a {dist.global_shape[0]} x {dist.global_shape[1]} "
                f"array but global_shape is {shape}"
            )
        return dist.rows, dist.cols
    rows = _as_distribution(dist, shape[0], name)
    if whole_rows or len(shape) < 2:
        return rows, BlockRows(1, 1)  # rows to rows: a whole row is one "element"
    return rows, BlockRows(shape[1], 1)


def _parts(axes: tuple[RowDistribution, RowDistribution]) -> int:
    return axes[0].parts * axes[1].parts


def _grid_local_shape(
    axes: tuple[RowDistribution, RowDistribution], rank: int, shape: tuple[int, ...]
) -> tuple[int, ...]:
    """The local shape of part ``rank``: ``(rows, cols, *shape[2:])`` on a grid, else rows."""
    rows, cols = axes
    if rank >= _parts(axes):
        return (0, *shape[1:])
    p, q = divmod(rank, cols.parts)
    if len(shape) < 2 or (cols.parts == 1 and cols.global_rows != shape[1]):
        return (rows.count(p), *shape[1:])  # whole rows (the "column" axis is the row)
    return (rows.count(p), cols.count(q), *shape[2:])


def _check_grid_local(
    local: np.ndarray | None,
    rank: int,
    shape: tuple[int, ...],
    dt: np.dtype,
    axes: tuple[RowDistribution, RowDistribution],
    dist: object,
) -> np.ndarray:
    """Check this rank's part; return it C-contiguous (an empty array beyond ``src``)."""
    if rank >= _parts(axes):
        if local is not None and np.size(local) != 0:
            raise ValueError(
                f"this rank holds no part of {dist!r} and must pass None or an empty array, "
                f"got an array of shape {np.shape(local)}"
            )
        return np.empty(_grid_local_shape(axes, rank, shape), dtype=dt)
    expected = _grid_local_shape(axes, rank, shape)
    if not isinstance(local, np.ndarray):
        raise ValueError(
            f"this rank owns part {rank} (shape {expected}) of {dist!r} but passed "
            f"{type(local).__name__}, not an ndarray"
        )
    if local.shape != expected:
        raise ValueError(
            f"local part has shape {local.shape}, expected {expected} for part {rank} of {dist!r}"
        )
    if local.dtype != dt:
        raise ValueError(
            f"local part has dtype {local.dtype}, expected {dt} "
            "(convert it with .astype() first; nothing is cast implicitly)"
        )
    return np.ascontiguousarray(local)


def _check_grid_out(
    out: np.ndarray | None,
    local: np.ndarray | None,
    rank: int,
    shape: tuple[int, ...],
    dt: np.dtype,
    axes: tuple[RowDistribution, RowDistribution],
    dist: object,
) -> np.ndarray:
    """Return the array to receive into: ``out`` after checking it, or a new one."""
    expected = _grid_local_shape(axes, rank, shape)
    if out is None:
        return np.empty(expected, dtype=dt)
    if not isinstance(out, np.ndarray):
        raise ValueError(f"out must be None or an ndarray, got {type(out).__name__}")
    if out.shape != expected or out.dtype != dt:
        raise ValueError(
            f"out has shape {out.shape} and dtype {out.dtype}, expected {expected} and {dt} "
            f"for part {rank} of {dist!r}"
        )
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise ValueError("out must be C-contiguous and writeable")
    if local is not None and np.may_share_memory(out, local):
        raise ValueError("out overlaps local; redistribution cannot work in place")
    return out


@dataclasses.dataclass
class _GridPlan:
    """One rank's side of a grid redistribution: what it sends to and receives from each peer.

    ``send``/``recv`` are the local arrays as ``uint8`` of shape ``(rows, row bytes)``.
    ``sends``/``recvs`` map a peer to the tile that goes there (comes from there): ``(row
    pieces, column pieces, the peer's row bytes)``, pieces ``[src start, dst start, length]``
    in local rows and in bytes. The tile that stays on the rank is copied by NumPy; with a
    peer on the same machine the tile may be copied straight between the two processes'
    arrays (:func:`.cma.copy`); every other tile travels as one MPI message: a view of the
    local array when it is whole local rows, else a derived datatype or a packed buffer.
    ``pull`` (the destination has at least as many ranks) breaks a tie between pulling and
    pushing a direct tile; ``direct`` maps ``(side, peer)`` (side 0: this rank sends, 1: it
    receives) to whether the receiver pulls, for the tiles chosen for direct copies.
    """

    send: np.ndarray
    recv: np.ndarray
    cell_bytes: int
    rank: int
    pull: bool
    sends: dict[int, tuple[np.ndarray, np.ndarray, int]]
    recvs: dict[int, tuple[np.ndarray, np.ndarray, int]]
    direct: dict[tuple[int, int], bool] = dataclasses.field(default_factory=dict)

    def whoami(self) -> tuple[object, ...]:
        """What the peers need to copy directly.

        ``(machine, pid, source address, result address, busy, direct on)``: busy when a tile
        crosses ranks. With direct copies on, this also decides which tiles would go directly
        (:meth:`_choose_direct`), before the verdicts are exchanged.
        """
        enabled = cma.ENABLED and not cma.warned
        if enabled:
            self._choose_direct()
        return (
            cma.machine(),
            os.getpid(),
            self.send.ctypes.data if self.send.size else 0,
            self.recv.ctypes.data if self.recv.size else 0,
            bool(set(self.sends) - {self.rank}) or bool(set(self.recvs) - {self.rank}),
            enabled,
        )

    def _choose_direct(self) -> None:
        """Fill :attr:`direct`: the same decision on both sides of a tile (same tile, rows)."""
        row_bytes = (self.send.shape[1], self.recv.shape[1])
        for r, tile in self.sends.items():
            if r != self.rank:
                ok, pull = cma.plan(tile, row_bytes[0], tile[2], self.pull)
                if ok:
                    self.direct[(0, r)] = pull
        for r, tile in self.recvs.items():
            if r != self.rank:
                ok, pull = cma.plan(tile, tile[2], row_bytes[1], self.pull)
                if ok:
                    self.direct[(1, r)] = pull

    def run(self, comm: MPI.Intracomm, peers: list[tuple[object, ...]]) -> None:
        """Move every tile; direct copies where possible, MPI messages for the rest."""
        rank = comm.Get_rank()
        own = self.sends.pop(rank, None)
        self.recvs.pop(rank, None)  # the same tile, seen from the receiving side
        if not any(p[4] for p in peers):
            if own is not None:
                tiles.copy_local(self.send, own, self.recv)
            return  # nothing crosses ranks: no collective needed
        mine = peers[rank]
        # A tile goes directly when both of its ranks run on one machine with direct copies
        # on and both chose it (:meth:`_choose_direct`, the same decision on both sides).
        near = {
            r
            for r, p in enumerate(peers)
            if r != rank and mine[0] is not None and p[0] == mine[0] and p[5] and mine[5]
        }
        direct = {key: pull for key, pull in self.direct.items() if key[1] in near}
        direct_to = {r for side, r in direct if side == 0}
        direct_from = {r for side, r in direct if side == 1}
        private = _private(comm)  # no message of ours can match the caller's
        # The messages go first, so that they travel while this rank copies directly.
        pending = self._post(private, set(self.sends) - direct_to, set(self.recvs) - direct_from)
        # Pull: the receiver (side 1) reads the tile; push: the sender (side 0) writes it. The
        # side that does not copy waits for the other's word (ok or failed) before returning.
        mine_to_copy = sorted(
            ((side, r) for (side, r), pull in direct.items() if pull == (side == 1)),
            key=lambda key: (key[1] - rank) % len(peers),
        )
        words = {key: np.zeros(1, dtype=np.intc) for key in direct if key not in mine_to_copy}
        # a word's tag names the copier's side of its tile (this rank's side is the other
        # one): two tiles between the same two ranks, both copied by one of them, are told apart
        waiting = [private.Irecv(words[key], key[1], _WORD_TAG + 1 - key[0]) for key in words]
        said, failed = [], {}
        for side, peer in mine_to_copy:
            info = peers[peer]
            try:
                if side == 1:
                    cma.copy(self.recv, int(info[1]), int(info[2]), self.recvs[peer], read=True)
                else:
                    cma.copy(self.send, int(info[1]), int(info[3]), self.sends[peer], read=False)
                word = np.zeros(1, dtype=np.intc)
            except Exception as exc:  # noqa: BLE001 (any failure: this tile goes by message)
                failed[(side, peer)] = f"rank {rank}: {type(exc).__name__}: {exc}"
                word = np.ones(1, dtype=np.intc)
            said.append((word, private.Isend(word, peer, _WORD_TAG + side)))
        if own is not None:
            tiles.copy_local(self.send, own, self.recv)
        self._finish(pending)
        _wait_idle(waiting)  # the peers' copies of this rank's tiles are done (or failed)
        for key, word in words.items():
            if word[0]:
                failed[key] = f"rank {key[1]}: a direct copy with rank {rank} failed"
        if failed:  # those tiles go by message, between the two ranks of each
            cma.warn_failed(next(iter(failed.values())))
            to = {r for side, r in failed if side == 0}
            self._finish(self._post(private, to, {r for side, r in failed if side == 1}))
        _wait_idle([request for _, request in said])

    def _post(self, private: MPI.Intracomm, to: set[int], frm: set[int]) -> _Messages:
        """Start the messages of the given tiles (receives first).

        A tile that is one run of whole local rows goes straight from (into) the local array
        as contiguous cells (Open MPI's shared-memory transport then copies it once, through
        cross-memory attach). Any other tile up to ``_DATATYPE_MAX_BYTES`` is described by an
        MPI derived datatype over the local array (:func:`.tiles.datatype`), so that MPI packs
        and unpacks it in C with no buffer of ours: measured 1.4-1.8x faster here than packing
        with NumPy into new pages. A larger tile is packed into a buffer (each send just
        before it starts, each receive unpacked by :meth:`_finish`).
        """
        from mpi4py import MPI

        rank, size = private.Get_rank(), private.Get_size()
        cell = MPI.BYTE.Create_contiguous(self.cell_bytes)
        cell.Commit()
        done = _Messages([], [], [cell])
        for peer in sorted(frm, key=lambda r: (r - rank) % size):
            tile = self.recvs[peer]
            spec, packed = self._message(self.recv, tile, 1, done.types)
            done.unpack.append((packed, tile) if packed is not None else None)
            done.requests.append(private.Irecv(spec, peer, 7))
        for peer in sorted(to, key=lambda r: (r - rank) % size):
            spec, _ = self._message(self.send, self.sends[peer], 0, done.types)
            done.requests.append(private.Isend(spec, peer, 7))
        return done

    def _message(
        self, a: np.ndarray, tile: tiles.Tile, side: int, types: list[MPI.Datatype]
    ) -> tuple[list[object], np.ndarray | None]:
        """One tile of ``a`` (side 0 send, 1 receive) as an mpi4py message.

        Returns ``(buffer spec, packed buffer to unpack after a receive or None)``; a new
        datatype goes to ``types`` (whose first entry is the cell type).
        """
        cell = types[0]
        view = tiles.whole_rows(a, tile, side)
        if view is not None:
            return [view, _cells(view, self.cell_bytes), cell], None
        if math.prod(tiles.packed_shape(tile)) <= _DATATYPE_MAX_BYTES:
            datatype = tiles.datatype(a, tile, side)
            types.append(datatype)
            return [a, 1, datatype], None
        buf = tiles.gather(a, tile, 0) if side == 0 else tiles.new_buffer(tile)
        return [buf, _cells(buf, self.cell_bytes), cell], (buf if side == 1 else None)

    def _finish(self, messages: _Messages) -> None:
        """Wait for the messages, unpack each packed tile as it arrives, free the datatypes."""
        from mpi4py import MPI

        requests, unpack = messages.requests, messages.unpack
        try:
            n_recv = len(unpack)
            for _ in range(n_recv):
                index = MPI.Request.Waitany(requests[:n_recv])
                staged = unpack[index]
                if staged is not None:
                    tiles.scatter(self.recv, staged[1], staged[0], 1)
                    unpack[index] = None
            MPI.Request.Waitall(requests[n_recv:])
        finally:
            for datatype in messages.types:
                datatype.Free()


@dataclasses.dataclass
class _Messages:
    """The messages :meth:`_GridPlan._post` started.

    Requests (receives first), the packed receive buffers to unpack (one per receive, None for
    those received in place), and the datatypes to free at the end (the cell type first).
    """

    requests: list[MPI.Request]
    unpack: list[tuple[np.ndarray, tiles.Tile] | None]
    types: list[MPI.Datatype]


_DATATYPE_MAX_BYTES = min(
    int(os.environ.get("ELASTIC_SLURM_DATATYPE_MAX_BYTES", MPI_INT_MAX)), MPI_INT_MAX
)
"""The largest tile sent with an MPI derived datatype (bytes); a larger one that is not whole
rows is packed into a buffer. At most ``MPI_INT_MAX``; ``ELASTIC_SLURM_DATATYPE_MAX_BYTES``
lowers it (the tests set 0 and 64 to check the packing path)."""

_KEYVAL: list[int] = []


def _free_private(_comm: object, _keyval: int, dup: MPI.Intracomm) -> None:
    """Free the cached duplicate with its communicator (an attribute delete callback)."""
    from mpi4py import MPI

    try:
        if dup != MPI.COMM_NULL:
            dup.Free()
    except MPI.Exception:  # at MPI_Finalize: nothing left to free
        pass


def _private(comm: MPI.Intracomm) -> MPI.Intracomm:
    """A duplicate of ``comm`` for our messages, made once and cached on ``comm`` (collective).

    The duplicate is an attribute of ``comm``: freeing ``comm`` frees it.
    """
    from mpi4py import MPI

    if not _KEYVAL:
        _KEYVAL.append(MPI.Comm.Create_keyval(delete_fn=_free_private))
    dup = comm.Get_attr(_KEYVAL[0])
    if dup is None:
        dup = comm.Dup()
        comm.Set_attr(_KEYVAL[0], dup)
    return dup


_IDLE_S = 0.0002
"""How long a rank that waits for its peers' direct copies sleeps between two looks (s)."""
_WORD_TAG = 8
"""The tags of the word (ok or failed) that ends a direct copy, on the private communicator:
``_WORD_TAG + side``, ``side`` the copier's (0: it sends the tile, 1: it receives it)."""


def _wait_idle(requests: list[MPI.Request]) -> None:
    """Wait for the requests without spinning: sleep between tests.

    With more ranks than cores (a resize on a shared node), ranks polling MPI in a loop take
    the cores from the ranks that still copy; these requests are small words whose senders
    may still be copying for a while.
    """
    from mpi4py import MPI

    while requests and not MPI.Request.Testall(requests):
        time.sleep(_IDLE_S)


def _cells(buf: np.ndarray, cell_bytes: int) -> int:
    cells = buf.nbytes // cell_bytes
    if cells > MPI_INT_MAX:  # pragma: no cover (above 2**31 cells in one message)
        raise ValueError(f"a message of {cells} elements exceeds the MPI count limit")
    return cells


def _grid_plan(
    send: np.ndarray,
    recv: np.ndarray,
    cell_bytes: int,
    s_axes: tuple[RowDistribution, RowDistribution],
    d_axes: tuple[RowDistribution, RowDistribution],
    rank: int,
) -> _GridPlan:
    """Build this rank's tiles (no communication); ``cell_bytes`` per element ``(i, j)``."""
    as2d = [
        _as_bytes(a).reshape(a.shape[0], -1) if a.size else np.empty((0, 0), np.uint8)
        for a in (send, recv)
    ]
    pull = _parts(d_axes) >= _parts(s_axes)  # in a tie, the side with more ranks copies
    plan = _GridPlan(as2d[0], as2d[1], max(cell_bytes, 1), rank, pull, {}, {})
    if cell_bytes == 0 or s_axes[0].global_rows * s_axes[1].global_rows == 0:
        return plan
    row_pieces = axis_pieces(s_axes[0], d_axes[0])
    col_pieces = axis_pieces(s_axes[1], d_axes[1])
    col_pieces[:, 2:] *= cell_bytes
    s_q, d_q = s_axes[1].parts, d_axes[1].parts
    if rank < _parts(s_axes):
        ps, qs = divmod(rank, s_q)
        rows_by, cols_by = _group(row_pieces, ps, True), _group(col_pieces, qs, True)
        for pd, rr in rows_by.items():
            for qd, cc in cols_by.items():
                row_there = d_axes[1].count(qd) * cell_bytes
                plan.sends[pd * d_q + qd] = (rr[:, 2:], cc[:, 2:], row_there)
    if rank < _parts(d_axes):
        pd, qd = divmod(rank, d_q)
        rows_by, cols_by = _group(row_pieces, pd, False), _group(col_pieces, qd, False)
        for ps, rr in rows_by.items():
            for qs, cc in cols_by.items():
                row_there = s_axes[1].count(qs) * cell_bytes
                plan.recvs[ps * s_q + qs] = (rr[:, 2:], cc[:, 2:], row_there)
    return plan


def _group(pieces: np.ndarray, me: int, by_src: bool) -> dict[int, np.ndarray]:
    """The pieces of ``me`` (as source when ``by_src``, else as destination), by peer."""
    mine = pieces[pieces[:, 0 if by_src else 1] == me]
    peer_col = 1 if by_src else 0
    return {
        int(peer): mine[mine[:, peer_col] == peer] for peer in np.unique(mine[:, peer_col]).tolist()
    }
