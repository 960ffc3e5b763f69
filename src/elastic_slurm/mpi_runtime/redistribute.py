"""Move a row-distributed NumPy array from one block distribution to another over MPI.

At a resize point the data of an elastic job is split along axis 0 over ``src_parts`` ranks and
must end up split over ``dst_parts`` ranks (see :mod:`elastic_slurm.mpi_runtime.distribution`
for the block rule: the first ``global_rows % parts`` parts get one extra row).
:func:`redistribute_rows` does this with a single ``MPI_Alltoallv`` on the NumPy buffers; no
data is pickled.

How it degrades:

* Every argument and every rank's local block is checked *before* any data moves, and the
  verdicts are exchanged with one small ``allgather``; if any rank found a problem, every rank
  raises the same :class:`ValueError`, which lists each culprit rank and what was wrong. So a
  shape mismatch on one rank never leaves the others blocked in the ``Alltoallv``, and the
  communicator stays usable afterwards.
* A failure inside MPI itself (a lost process, a broken network) is not collective; it behaves
  as the communicator's error handler says (mpi4py's default raises ``MPI.Exception`` on the
  rank that saw it, usually followed by an abort).

Importing this module does not start MPI: ``mpi4py.MPI`` is imported on the first call (by
then the caller's communicator exists, so MPI is already initialised).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import DTypeLike

from elastic_slurm.mpi_runtime.distribution import BlockRows, transfer_plan

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["MPI_INT_MAX", "redistribute_rows"]

MPI_INT_MAX = 2**31 - 1
"""Largest count or displacement an MPI-3 call takes (a C ``int``); Open MPI 4.1 is MPI-3.1."""

_MAX_LISTED = 8  # distinct problems (and ranks per problem) quoted in a collective error


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
    if comm.Is_inter():
        raise TypeError("redistribute_rows needs an intracommunicator, got an intercommunicator")
    rank, size = comm.Get_rank(), comm.Get_size()

    problem: tuple[type[Exception], str] | None = None
    signature: tuple[object, ...] = (repr(global_shape), repr(dtype), src_parts, dst_parts)
    try:
        shape, dt, src, dst = _check_arguments(global_shape, dtype, src_parts, dst_parts, size)
        signature = (shape, str(dt), src.parts, dst.parts)
        send = _check_local(local, rank, shape, dt, src)
        # Allocate before the verdicts are exchanged: a MemoryError on one rank must not leave
        # the others waiting in the Alltoallv.
        recv_start, recv_stop = dst.rows_of(rank) if rank < dst.parts else (0, 0)
        recv = np.empty((recv_stop - recv_start, *shape[1:]), dtype=dt)
    except (ValueError, TypeError) as exc:
        problem = (ValueError, str(exc))
    except MemoryError as exc:
        problem = (MemoryError, f"out of memory for the result block: {exc}")
    except Exception as exc:  # anything else must still reach the other ranks
        problem = (RuntimeError, f"{type(exc).__name__}: {exc}")
    _raise_if_any_rank_failed(comm, problem, signature)

    row_elems = math.prod(shape[1:])
    if src.parts == dst.parts:
        if rank < src.parts:
            recv[...] = send  # each rank keeps its own block
        return recv
    if row_elems == 0 or shape[0] == 0:
        return recv  # nothing to move: every row is empty

    send_counts, send_displs = [0] * size, [0] * size
    recv_counts, recv_displs = [0] * size, [0] * size
    src_start = src.rows_of(rank)[0] if rank < src.parts else 0
    for move in transfer_plan(shape[0], src.parts, dst.parts):
        if move.src == rank:
            send_counts[move.dst] = move.rows
            send_displs[move.dst] = move.start - src_start
        if move.dst == rank:
            recv_counts[move.src] = move.rows
            recv_displs[move.src] = move.start - recv_start

    element, per_element, owned = _mpi_element_type(dt)
    row_type = element.Create_contiguous(row_elems * per_element)
    try:
        row_type.Commit()
        # Hand MPI flat byte views: the explicit row type says what they hold, and NumPy cannot
        # export some dtypes (datetime64) through the buffer protocol.
        comm.Alltoallv(
            [_as_bytes(send), (send_counts, send_displs), row_type],
            [_as_bytes(recv), (recv_counts, recv_displs), row_type],
        )
    finally:
        row_type.Free()
        if owned:
            element.Free()
    return recv


def _check_arguments(
    global_shape: Sequence[int],
    dtype: DTypeLike,
    src_parts: int,
    dst_parts: int,
    comm_size: int,
) -> tuple[tuple[int, ...], np.dtype, BlockRows, BlockRows]:
    """Validate the rank-independent arguments; raise ValueError or TypeError with the reason."""
    shape, dt = _normalise_layout(global_shape, dtype)
    src = BlockRows(shape[0], src_parts)
    dst = BlockRows(shape[0], dst_parts)
    if comm_size < max(src.parts, dst.parts):
        raise ValueError(
            f"the communicator has {comm_size} ranks but src_parts={src.parts} and "
            f"dst_parts={dst.parts} need {max(src.parts, dst.parts)}; grow (spawn and merge) "
            "the communicator before growing the data"
        )
    largest_block = -(-shape[0] // min(src.parts, dst.parts))  # ceil: the first part's rows
    if largest_block > MPI_INT_MAX:
        raise ValueError(
            f"a part of {largest_block} rows exceeds the MPI count limit of {MPI_INT_MAX} rows; "
            "reshape so that axis 0 has fewer, longer rows"
        )
    from mpi4py import MPI

    element, per_element, owned = _mpi_element_type(dt)
    as_bytes = element == MPI.BYTE
    if owned:
        element.Free()
    row_count = math.prod(shape[1:]) * per_element
    if row_count > MPI_INT_MAX:
        unit = "bytes (sent as MPI.BYTE)" if as_bytes else "MPI elements"
        raise ValueError(
            f"one row of shape {shape[1:]} is {row_count} {unit}, beyond the MPI count "
            f"limit of {MPI_INT_MAX}; reshape so that axis 0 has more, shorter rows"
        )
    return shape, dt, src, dst


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
    src: BlockRows,
) -> np.ndarray:
    """Check this rank's block against its part; return a C-contiguous array to send."""
    trailing = shape[1:]
    if rank >= src.parts:
        if local is not None and (np.ndim(local) == 0 or np.shape(local)[0] != 0):
            raise ValueError(
                f"this rank holds no part of the {src.parts}-way distribution and must "
                f"pass None or a 0-row array, got an array of shape {np.shape(local)}"
            )
        return np.empty((0, *trailing), dtype=dt)
    start, stop = src.rows_of(rank)
    expected = (stop - start, *trailing)
    if not isinstance(local, np.ndarray):
        raise ValueError(
            f"this rank owns part {rank} (global rows [{start}, {stop}), shape {expected}) of the "
            f"{src.parts}-way distribution but passed {type(local).__name__}, "
            "not an ndarray"
        )
    if local.shape != expected:
        raise ValueError(
            f"local block has shape {local.shape}, expected {expected} for part "
            f"{rank} (global rows [{start}, {stop})) of the {src.parts}-way distribution of "
            f"{shape[0]} rows"
        )
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
) -> None:
    """Exchange every rank's verdict; raise the same error on all ranks if any failed.

    ``problem`` is ``(exception class, message)`` or None; the first culprit's class is raised
    (ValueError for bad input, MemoryError, or RuntimeError for anything unexpected).
    ``signature`` holds the arguments that must agree between ranks; a difference is a
    ValueError.
    """
    reports: list[tuple[tuple[type[Exception], str] | None, tuple[object, ...]]]
    reports = comm.allgather((problem, signature))
    culprits = [(r, p) for r, (p, _) in enumerate(reports) if p is not None]
    if not culprits:
        reference = reports[0][1]
        what = "arguments (global_shape, dtype, src_parts, dst_parts)"
        culprits = [
            (r, (ValueError, f"{what} = {sig} differ from rank 0's {reference}"))
            for r, (_, sig) in enumerate(reports)
            if sig != reference
        ]
    if not culprits:
        return
    lines = _culprit_lines([(r, message) for r, (_, message) in culprits])
    raise culprits[0][1][0](
        f"redistribute_rows: {len(culprits)} of {len(reports)} ranks rejected the call; no data "
        "was moved and every rank raises this error:\n  " + "\n  ".join(lines)
    )


def _culprit_lines(culprits: Sequence[tuple[int, str]]) -> list[str]:
    """Format ``(rank, message)`` pairs, one line per distinct message, ranks grouped."""
    by_message: dict[str, list[int]] = {}
    for rank, message in culprits:
        by_message.setdefault(message, []).append(rank)
    lines = []
    for message, ranks in list(by_message.items())[:_MAX_LISTED]:
        shown = ", ".join(map(str, ranks[:_MAX_LISTED])) + (
            ", ..." if len(ranks) > _MAX_LISTED else ""
        )
        lines.append(f"rank{'s' if len(ranks) > 1 else ''} {shown}: {message}")
    if len(by_message) > _MAX_LISTED:
        lines.append(f"... and {len(by_message) - _MAX_LISTED} more distinct problems")
    return lines


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
