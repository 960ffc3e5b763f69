"""Save and load row-distributed arrays and small state dicts on a shared filesystem.

This is the data store of the *restart* resize path: the job saves its distributed arrays, the
MPI step ends, and a new step at the new size loads them with a different number of parts, or
a different distribution.

Files, in ``directory`` (which every rank must see at the same contents, e.g. NFS, Lustre, GPFS):

* ``<name>.npy`` -- one distributed array as a standard NumPy ``.npy`` file (format 1.0 or 2.0,
  C order) holding the *global* array in row order, whatever distribution it was saved from;
  readable by ``numpy.load`` anywhere. Rank 0 writes the header, each rank writes the rows its
  distribution gives it at their offsets (:func:`save_array`: one ``pwrite`` per run of
  consecutive rows, i.e. per rank for ``BlockRows``, per block for ``BlockCyclicRows``; tiny
  runs are first regrouped into blocks in memory), and nothing is gathered on one rank. Neither
  the number of parts nor the distribution is stored: any distribution can load it
  (:func:`load_array`, :func:`load_rows`).
* ``<name>.json`` -- a small dict of scalars (iteration counter, time step, ...) in a JSON
  envelope ``{"format": "elastic-slurm-state", "version": 1, "state": {...}}``.

Both are written under a hidden temporary name (``.<name>.npy.tmp-<pid>-<hex>``) and renamed
into place by rank 0 only after every rank has finished writing, so a reader sees either the
previous complete file or the new complete file, never a partial one. A job killed during a
save leaves its temporary file behind; it is never read and may be deleted.

How it degrades: every function is collective over ``comm``. When a check or an I/O call fails
on any rank, the ranks exchange verdicts before going on and *every* rank raises the same error
(listing the culprit ranks), so nobody is left waiting in a later collective:

* :class:`FileNotFoundError` -- the file to load does not exist (never saved, or saved under
  another name or directory, or the directory is not shared with that rank);
* :class:`CheckpointError` (a :class:`ValueError`) -- the file exists but is not usable:
  truncated or longer than its header says, not a ``.npy``/state file, Fortran order, or not the
  shape/dtype the caller expects;
* :class:`ValueError` -- bad arguments or a local block that does not match its part;
* :class:`OSError` -- the filesystem refused (permissions, disk full, I/O error). On a failed
  save the temporary file is removed and an existing file under the final name is untouched.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.lib import format as npy_format
from numpy.typing import DTypeLike

from elastic_slurm.errors import ElasticSlurmError
from elastic_slurm.mpi_runtime.collective import raise_culprits, raise_together
from elastic_slurm.mpi_runtime.distribution import BlockRows, RowDistribution
from elastic_slurm.mpi_runtime.redistribute import (
    _as_distribution,
    _check_local,
    _describe,
    _normalise_layout,
    redistribute,
)

if TYPE_CHECKING:
    from mpi4py import MPI

_T = TypeVar("_T")

__all__ = [
    "MIN_DIRECT_RUN_BYTES",
    "STATE_FORMAT",
    "CheckpointError",
    "Scalar",
    "load_array",
    "load_rows",
    "load_state",
    "on_rank0",
    "save_array",
    "save_rows",
    "save_state",
]

Scalar = None | bool | int | float | str
"""A value ``save_state`` accepts (NumPy scalars are converted with ``.item()``)."""

STATE_FORMAT = "elastic-slurm-state"
_STATE_VERSION = 1
_WRITE_CHUNK = 1 << 30  # bytes per pwrite call (Linux writes at most ~2 GiB per call)
_ROWS = ("save_rows", "load_rows")  # names for messages: (save, load)
_ARRAY = ("save_array", "load_array")
_IO_MODES = ("auto", "direct", "staged")

MIN_DIRECT_RUN_BYTES = 64 * 1024
"""With ``io="auto"``, runs of consecutive rows averaging fewer bytes than this are staged.

About the crossover on a local page cache: writing 64 MiB as 64 KiB ``pwrite`` calls took 1.6
times as long as one call, as 8 KiB calls 5 times, as 1 KiB calls 40 times, while staging
costs one in-memory redistribution (about one to two copies of the data). Small runs from
many nodes would also share filesystem pages.
"""


class CheckpointError(ElasticSlurmError, ValueError):
    """A checkpoint file exists but cannot be used; the message names the file and the reason.

    Truncated or over-long data, a damaged header, an unsupported ``.npy`` variant, or a shape or
    dtype other than the caller expects. Save the data again, or load the right file.
    """


@dataclass(frozen=True)
class _Failure:
    """Why one rank cannot go on: ``kind`` picks the exception class raised on all ranks."""

    kind: str  # a key of _KINDS
    message: str


_KINDS: dict[str, type[Exception]] = {
    "value": ValueError,
    "missing": FileNotFoundError,
    "format": CheckpointError,
    "os": OSError,
    "memory": MemoryError,
    "internal": RuntimeError,
}


def _failure_of(exc: Exception, context: str = "") -> _Failure:
    """Classify an exception caught on one rank; ``context`` prefixes its message."""
    prefix = f"{context}: " if context else ""
    if isinstance(exc, CheckpointError):
        return _Failure("format", f"{prefix}{exc}")
    if isinstance(exc, FileNotFoundError):
        return _Failure("missing", f"{prefix}{exc}")
    if isinstance(exc, OSError):
        return _Failure("os", f"{prefix}{exc}")
    if isinstance(exc, ValueError | TypeError):
        return _Failure("value", f"{prefix}{exc}")
    if isinstance(exc, MemoryError):
        return _Failure("memory", f"{prefix}out of memory: {exc}")
    return _Failure("internal", f"{prefix}{type(exc).__name__}: {exc}")


def _problem(failure: _Failure | None) -> tuple[type[Exception], str] | None:
    """A failure as :mod:`.collective` takes it: the class every rank raises, the message."""
    return None if failure is None else (_KINDS[failure.kind], failure.message)


def _agree(
    comm: MPI.Intracomm,
    what: str,
    failure: _Failure | None,
    cause: Exception | None = None,
    signature: object = None,
    payload: object = None,
) -> list[object]:
    """Allgather every rank's verdict; raise the same error on all ranks if any rank failed.

    ``signature`` holds arguments that must be equal on all ranks (a difference is a failure);
    ``payload`` is any small picklable value, returned per rank (rank 0 hands out results this
    way without a second collective). See :func:`.collective.raise_together`.
    """
    return raise_together(
        comm, _problem(failure), what, signature=signature, payload=payload, cause=cause
    )


def _bcast_outcome(
    comm: MPI.Intracomm,
    what: str,
    outcome: object,
    failure: _Failure | None,
    cause: Exception | None,
) -> object:
    """Broadcast rank 0's ``(failure, outcome)``; raise the same error everywhere on failure."""
    failure, outcome = comm.bcast((failure, outcome), root=0)
    problem = _problem(failure)
    if problem is not None:
        raise_culprits(what, comm.Get_size(), [(0, problem)], cause=cause)
    return outcome


def on_rank0(comm: MPI.Intracomm, what: str, work: Callable[[], _T]) -> _T:
    """Run ``work()`` on rank 0 only; its result on every rank (collective: one broadcast).

    For a step only rank 0 does between collectives (a manifest to write or read): if it
    raises, every rank raises the same error, as the checkpoint functions do (a
    :class:`CheckpointError`, ``FileNotFoundError``, ``OSError``, ``ValueError``,
    ``MemoryError``, else ``RuntimeError``), its message starting with ``what`` and naming
    rank 0; the other ranks never wait for a rank 0 that is gone. The result is pickled.
    """
    outcome: Any = None
    failure: _Failure | None = None
    cause: Exception | None = None
    if comm.Get_rank() == 0:
        try:
            outcome = work()
        except Exception as exc:
            failure, cause = _failure_of(exc), exc
    return _bcast_outcome(comm, what, outcome, failure, cause)  # type: ignore[return-value]


def _check_name(name: str) -> str:
    """Return ``name`` if it is usable as a file stem in ``directory``, else raise ValueError."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if "/" in name or "\0" in name or os.sep in name or name.startswith("."):
        raise ValueError(
            f"name {name!r} must be a plain file stem: no path separators or NUL, and no "
            "leading '.' (hidden names are used for temporary files)"
        )
    return name


def _remove_quietly(path: Path) -> None:
    """Remove a temporary file if possible; cleanup must never raise on an error path."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # e.g. the "directory" is a file; nothing was created then


def _fsync_path(path: Path, *, directory: bool = False) -> None:
    """Flush ``path`` (a file, or a directory entry list) to stable storage."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if directory else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
        # Some network filesystems refuse fsync on a directory; the rename is still atomic.
    finally:
        os.close(fd)


def _write_runs(
    path: Path, offset: int, row_bytes: int, data: np.ndarray, runs: np.ndarray, *, fsync: bool
) -> None:
    """Write C-contiguous ``data`` (the rows of ``runs``, in order) at their global rows.

    Global row ``i`` is at byte ``offset + i * row_bytes`` of ``path``; one ``pwrite`` per run
    (more for runs above 1 GiB). The file is not truncated.
    """
    view = memoryview(data.reshape(-1).view(np.uint8))  # datetime64 has no buffer export
    fd = os.open(path, os.O_WRONLY)
    try:
        at = 0  # byte position in data
        for start, stop in runs.tolist():
            nbytes = (stop - start) * row_bytes
            base = offset + start * row_bytes
            done = 0
            while done < nbytes:
                chunk = view[at + done : at + min(nbytes, done + _WRITE_CHUNK)]
                done += os.pwrite(fd, chunk, base + done)
            at += nbytes
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _read_runs(path: Path, offset: int, row_bytes: int, out: np.ndarray, runs: np.ndarray) -> None:
    """Fill C-contiguous ``out`` with the global rows of ``runs`` (one ``preadv`` per run).

    Raises CheckpointError if the file ends early (it shrank after its header was checked).
    """
    view = memoryview(out.reshape(-1).view(np.uint8))
    fd = os.open(path, os.O_RDONLY)
    try:
        at = 0
        for start, stop in runs.tolist():
            nbytes = (stop - start) * row_bytes
            base = offset + start * row_bytes
            done = 0
            while done < nbytes:
                chunk = view[at + done : at + min(nbytes, done + _WRITE_CHUNK)]
                got = os.preadv(fd, [chunk], base + done)
                if got == 0:
                    raise CheckpointError(
                        f"checkpoint {path} ends at byte {base + done}, before global row "
                        f"{stop - 1} (it shrank after its header was checked)"
                    )
                done += got
            at += nbytes
    finally:
        os.close(fd)


def _atomic_write_text(path: Path, text: str, *, fsync: bool) -> None:
    """Write ``text`` to a temporary name beside ``path`` and rename it into place."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise
    if fsync:
        _fsync_path(path.parent, directory=True)


def save_rows(
    directory: str | os.PathLike[str],
    name: str,
    comm: MPI.Intracomm,
    local: np.ndarray | None,
    global_shape: Sequence[int],
    dtype: DTypeLike,
    parts: int,
    *,
    fsync: bool = True,
) -> Path:
    """Write an array distributed by rows over ``parts`` ranks to ``directory/<name>.npy``.

    Collective over ``comm``. The global array has shape ``global_shape == (global_rows,
    *trailing)`` and is split along axis 0 as ``BlockRows(global_rows, parts)`` says (the first
    ``global_rows % parts`` parts hold one extra row). This is
    ``save_array(..., BlockRows(global_rows, parts))``: see :func:`save_array` for the steps.

    Parameters
    ----------
    directory
        Directory on a filesystem shared by all ranks; rank 0 creates it (with parents) if it
        is missing. Ranks may spell it differently (for instance different mount points).
    name
        File stem: the file is ``<name>.npy``. No path separators and no leading ``.``.
    comm
        Intracommunicator with ``comm.size >= parts``.
    local
        On rank ``r < parts``: its block, shape ``(BlockRows(global_rows, parts).counts()[r],
        *trailing)``, dtype ``dtype`` (a non-contiguous block is copied first). On other ranks:
        ``None`` or a 0-row array.
    global_shape
        Shape of the global array, at least 1-D.
    dtype
        Its NumPy dtype (not an object dtype).
    parts
        Number of ranks holding rows, ``>= 1``. Not stored in the file.
    fsync
        Flush data, header and directory entry to stable storage before returning (default).
        ``False`` is faster and still atomic with respect to other readers, but a node crash
        right after the call may lose the data.

    Returns
    -------
    pathlib.Path
        ``directory/<name>.npy`` (as this rank spells ``directory``).

    Raises
    ------
    ValueError
        On all ranks, before anything is written: bad arguments, arguments that differ between
        ranks, or a ``local`` block whose shape or dtype does not match its part.
    OSError
        On all ranks when creating, writing or renaming failed on any rank; the temporary file
        is removed and a previous ``<name>.npy`` is left as it was.
    """
    return _save(directory, name, comm, local, global_shape, dtype, parts, fsync, "auto", _ROWS)


def save_array(
    directory: str | os.PathLike[str],
    name: str,
    comm: MPI.Intracomm,
    local: np.ndarray | None,
    global_shape: Sequence[int],
    dtype: DTypeLike,
    dist: RowDistribution | int,
    *,
    fsync: bool = True,
    io: str = "auto",
) -> Path:
    """Write an array with any row distribution to ``directory/<name>.npy``.

    Collective over ``comm``. The file always holds the *global* array in row order, as a
    standard C-order ``.npy`` file, whatever ``dist`` was: it can be loaded with any other
    distribution and any number of parts (:func:`load_array`), or with ``numpy.load``. Steps:
    every rank checks its arguments and its part, and the verdicts are exchanged; rank 0 creates
    the file with its ``.npy`` header (:func:`numpy.lib.format.open_memmap`, sparse until
    written) under a temporary name; each rank writes the rows it owns at their byte offsets
    with ``pwrite`` (so a full disk is an :class:`OSError`, not the ``SIGBUS`` a memory map
    would give) and, when ``fsync``, flushes them; after an agreement step rank 0 renames the
    file into place. The file is complete and visible on every rank when this returns.

    Parameters
    ----------
    directory, name, comm, fsync
        As for :func:`save_rows`; ``comm.size >= dist.parts``.
    local
        On rank ``r < dist.parts``: its part, shape ``(dist.count(r), *trailing)`` holding the
        global rows ``dist.indices(r)`` in increasing order, dtype ``dtype``. On other ranks:
        ``None`` or a 0-row array.
    global_shape
        Shape of the global array, at least 1-D; ``global_shape[0] == dist.global_rows``.
    dtype
        Its NumPy dtype (not an object dtype).
    dist
        How the rows are spread: a :class:`~.distribution.RowDistribution` (``BlockRows``,
        ``BlockCyclicRows``, ...) or an int ``p``, short for ``BlockRows(global_rows, p)``. Not
        stored in the file.
    io
        How the rows reach the file:

        * ``"direct"``: each rank writes each of its runs of consecutive rows
          (``dist.runs(r)``) with one ``pwrite``: one per block for ``BlockCyclicRows``, one
          per rank for ``BlockRows``. No extra memory; many small writes when blocks are small.
        * ``"staged"``: first :func:`~.redistribute.redistribute` to
          ``BlockRows(global_rows, comm.size)`` in memory (one ``Alltoallv``), then one
          ``pwrite`` per rank. Extra memory about twice the local part; few large writes, and
          no filesystem page is written by several nodes.
        * ``"auto"`` (default): ``"staged"`` when the runs average below
          :data:`MIN_DIRECT_RUN_BYTES` (64 KiB), else ``"direct"``. ``BlockRows`` is always
          written directly (one run per rank).

    Returns
    -------
    pathlib.Path
        ``directory/<name>.npy`` (as this rank spells ``directory``).

    Raises
    ------
    ValueError
        On all ranks, before anything is written: bad arguments (a ``dist`` whose
        ``global_rows`` is not ``global_shape[0]``, an unknown ``io``), arguments that differ
        between ranks, or a ``local`` part whose shape or dtype does not match ``dist``.
    OSError
        On all ranks when creating, writing or renaming failed on any rank; the temporary file
        is removed and a previous ``<name>.npy`` is left as it was.
    MemoryError
        On all ranks when staging needs more memory than a rank has (nothing is written).
    """
    return _save(directory, name, comm, local, global_shape, dtype, dist, fsync, io, _ARRAY)


def _check_io(io: str) -> str:
    """Return ``io`` if it is a known I/O mode, else raise ValueError."""
    if io not in _IO_MODES:
        raise ValueError(f"io must be one of {', '.join(map(repr, _IO_MODES))}; got {io!r}")
    return io


def _staged(io: str, dist: RowDistribution, runs_per_rank: Sequence[int], nbytes: int) -> bool:
    """Whether to go through ``BlockRows(rows, comm.size)``; the same answer on every rank."""
    if type(dist) is BlockRows or io == "direct":
        return False
    total_runs = sum(runs_per_rank)
    return io == "staged" or (total_runs > 0 and nbytes / total_runs < MIN_DIRECT_RUN_BYTES)


def _save(
    directory: str | os.PathLike[str],
    name: str,
    comm: MPI.Intracomm,
    local: np.ndarray | None,
    global_shape: Sequence[int],
    dtype: DTypeLike,
    dist_arg: RowDistribution | int,
    fsync: bool,
    io: str,
    api: tuple[str, str],
) -> Path:
    """Shared body of :func:`save_rows` and :func:`save_array`."""
    what = api[0]
    rank, size = comm.Get_rank(), comm.Get_size()
    root = Path(directory)
    failure: _Failure | None = None
    cause: Exception | None = None
    signature: object = (name, repr(global_shape), repr(dtype), _describe(dist_arg), io)
    runs = np.zeros((0, 2), dtype=np.int64)
    try:
        _check_name(name)
        _check_io(io)
        shape, dt = _normalise_layout(global_shape, dtype)
        dist = _as_distribution(dist_arg, shape[0], "dist")
        if size < dist.parts:
            raise ValueError(f"the communicator has {size} ranks, fewer than parts={dist.parts}")
        signature = (name, shape, str(dt), _describe(dist), io)
        block = _check_local(local, rank, shape, dt, dist)
        if rank < dist.parts:
            runs = np.asarray(dist.runs(rank), dtype=np.int64).reshape(-1, 2)
    except Exception as exc:  # every local failure must reach the other ranks
        failure, cause = _failure_of(exc), exc
    runs_per_rank = _agree(comm, what, failure, cause, signature, len(runs))
    row_bytes = math.prod(shape[1:]) * dt.itemsize
    if _staged(io, dist, runs_per_rank, shape[0] * row_bytes):  # type: ignore[arg-type]
        # Collective, and it raises on every rank if any rank fails (nothing written yet).
        staged = BlockRows(shape[0], size)
        block = redistribute(comm, block, shape, dt, dist, staged)
        runs = staged.runs(rank)

    # Step 1: rank 0 creates the temporary file (header, full length); the bcast is the barrier.
    created: tuple[str, int] | None = None
    if rank == 0:
        tmp_name = f".{name}.npy.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            root.mkdir(parents=True, exist_ok=True)
            header = npy_format.open_memmap(root / tmp_name, mode="w+", dtype=dt, shape=shape)
            created = (tmp_name, int(header.offset))
            del header  # unmaps; the file keeps its header and its (sparse) full length
            if fsync:
                _fsync_path(root / tmp_name)
        except Exception as exc:
            _remove_quietly(root / tmp_name)
            failure, cause = _failure_of(exc, f"cannot create {root / tmp_name}"), exc
    outcome = _bcast_outcome(comm, what, created, failure, cause)
    tmp_name, data_offset = outcome  # type: ignore[misc]
    tmp = root / tmp_name

    # Step 2: each rank writes its rows; the allgather is the barrier after all writes.
    failure = cause = None
    if block.nbytes:
        try:
            _write_runs(tmp, data_offset, row_bytes, block, runs, fsync=fsync)
        except Exception as exc:
            span = _span(runs)
            context = f"cannot write global rows {span} into {tmp} (shared filesystem?)"
            failure, cause = _failure_of(exc, context), exc
    try:
        _agree(comm, what, failure, cause)
    except Exception:
        if rank == 0:
            _remove_quietly(tmp)
        raise

    # Step 3: rank 0 publishes the file; the bcast tells everyone it is in place.
    failure = cause = None
    final = root / f"{name}.npy"
    if rank == 0:
        try:
            os.replace(tmp, final)
            if fsync:
                _fsync_path(root, directory=True)
        except Exception as exc:
            _remove_quietly(tmp)
            failure, cause = _failure_of(exc, f"cannot rename {tmp} to {final}"), exc
    _bcast_outcome(comm, what, None, failure, cause)
    return final


def _span(runs: np.ndarray) -> str:
    """Describe a set of runs for an error message: ``[a, b)`` or ``[a, b) ... in n runs``."""
    if len(runs) == 0:
        return "(none)"
    if len(runs) == 1:
        return f"[{runs[0, 0]}, {runs[0, 1]})"
    return f"[{runs[0, 0]}, {runs[-1, 1]}) in {len(runs)} runs"


def _read_npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """Return ``(shape, dtype, data_offset)`` of a C-order ``.npy`` file whose size matches.

    Raises FileNotFoundError if it is missing and CheckpointError if it is not a complete,
    C-order ``.npy`` file.
    """
    try:
        f = open(path, "rb")
    except FileNotFoundError as exc:
        raise FileNotFoundError(
            f"checkpoint {path} does not exist (never saved, a different name or directory, "
            "or the directory is not shared with this node)"
        ) from exc
    with f:
        try:
            version = npy_format.read_magic(f)
            if version == (1, 0):
                shape, fortran_order, dt = npy_format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran_order, dt = npy_format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy format version {version} (need 1.0 or 2.0)")
        except ValueError as exc:
            raise CheckpointError(f"checkpoint {path} has no valid .npy header: {exc}") from exc
        offset = f.tell()
        actual = os.fstat(f.fileno()).st_size
    if fortran_order:
        raise CheckpointError(
            f"checkpoint {path} is in Fortran order; save_rows writes C order, so rows are not "
            "contiguous and cannot be read per rank"
        )
    if dt.hasobject:
        raise CheckpointError(f"checkpoint {path} holds Python objects (dtype {dt})")
    expected = offset + math.prod(shape) * dt.itemsize
    if actual != expected:
        state = "truncated" if actual < expected else "longer than its header says"
        raise CheckpointError(
            f"checkpoint {path} is {state}: {actual} bytes on disk, {expected} expected "
            f"({offset} header bytes + shape {shape} x {dt.itemsize}-byte {dt})"
        )
    return tuple(shape), dt, offset


def load_rows(
    directory: str | os.PathLike[str],
    name: str,
    comm: MPI.Intracomm,
    parts: int,
    *,
    global_shape: Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
) -> np.ndarray:
    """Read this rank's block of ``directory/<name>.npy`` for a ``parts``-way row distribution.

    Collective over ``comm``. Rank 0 reads and checks the header (file size included) and
    shares the result; then each rank ``r < parts`` reads only its own rows,
    ``BlockRows(global_rows, parts).rows_of(r)``, with one ``preadv``. ``parts`` need not equal
    the ``parts`` used by :func:`save_rows`, and the file may have been written by
    :func:`save_array` with any distribution.

    Parameters
    ----------
    directory
        Directory holding the file, shared by all ranks.
    name
        File stem, as given to :func:`save_rows`.
    comm
        Intracommunicator with ``comm.size >= parts``.
    parts
        Number of ranks to spread the rows over, ``>= 1``.
    global_shape, dtype
        If given, the shape and dtype the file must hold; a difference is a
        :class:`CheckpointError`.

    Returns
    -------
    numpy.ndarray
        On rank ``r < parts``: shape ``(BlockRows(global_rows, parts).counts()[r], *trailing)``;
        on other ranks ``(0, *trailing)``. The file's dtype, C-contiguous, in memory (not a
        view of the file).

    Raises
    ------
    FileNotFoundError
        On all ranks when the file is missing (on rank 0, or on any rank that reads rows).
    CheckpointError
        On all ranks when the file is truncated, over-long, not a C-order ``.npy`` file, or not
        of the expected shape or dtype.
    ValueError
        On all ranks for bad arguments (``parts < 1``, ``parts > comm.size``, a bad ``name``)
        or arguments that differ between ranks.
    OSError
        On all ranks for other read errors.
    """
    return _load(directory, name, comm, parts, global_shape, dtype, "auto", _ROWS)


def load_array(
    directory: str | os.PathLike[str],
    name: str,
    comm: MPI.Intracomm,
    dist: RowDistribution,
    *,
    global_shape: Sequence[int] | None = None,
    dtype: DTypeLike | None = None,
    io: str = "auto",
) -> np.ndarray:
    """Read this rank's part of ``directory/<name>.npy`` for the row distribution ``dist``.

    Collective over ``comm``. Rank 0 reads and checks the header (file size included; the file
    must hold ``dist.global_rows`` rows) and shares it; then rank ``r < dist.parts`` reads the
    global rows ``dist.indices(r)``. Any ``.npy`` file in C order works: one written by
    :func:`save_array` or :func:`save_rows` with any distribution or number of parts, or by
    ``numpy.save``.

    Parameters
    ----------
    directory, name, global_shape, dtype
        As for :func:`load_rows`.
    comm
        Intracommunicator with ``comm.size >= dist.parts``.
    dist
        The distribution to load into, a :class:`~.distribution.RowDistribution` (an int
        ``p`` is rejected here because the row count comes from the file: pass
        ``BlockRows(rows, p)`` or use :func:`load_rows`).
    io
        ``"direct"``: each rank reads each of its runs of consecutive rows with one ``preadv``
        (one per block for ``BlockCyclicRows``). ``"staged"``: read
        ``BlockRows(global_rows, comm.size)`` (one read per rank), then
        :func:`~.redistribute.redistribute` to ``dist`` (one ``Alltoallv``; extra memory about
        twice the local part). ``"auto"`` (default): staged when the runs average below
        :data:`MIN_DIRECT_RUN_BYTES`, else direct; ``BlockRows`` is always read directly.

    Returns
    -------
    numpy.ndarray
        On rank ``r < dist.parts``: shape ``(dist.count(r), *trailing)``, the rows
        ``dist.indices(r)`` in increasing order; on other ranks ``(0, *trailing)``. The file's
        dtype, C-contiguous, in memory (not a view of the file).

    Raises
    ------
    FileNotFoundError
        On all ranks when the file is missing.
    CheckpointError
        On all ranks when the file is truncated, over-long, not a C-order ``.npy`` file, not
        of the expected shape or dtype, or does not hold ``dist.global_rows`` rows.
    ValueError
        On all ranks for bad arguments (``dist.parts > comm.size``, a bad ``name`` or ``io``)
        or arguments that differ between ranks.
    OSError
        On all ranks for other read errors.
    MemoryError
        On all ranks when a rank cannot allocate its part (or, staged, its buffers).
    """
    return _load(directory, name, comm, dist, global_shape, dtype, io, _ARRAY)


def _load(
    directory: str | os.PathLike[str],
    name: str,
    comm: MPI.Intracomm,
    dist_arg: RowDistribution | int,
    global_shape: Sequence[int] | None,
    dtype: DTypeLike | None,
    io: str,
    api: tuple[str, str],
) -> np.ndarray:
    """Shared body of :func:`load_rows` (``dist_arg`` an int) and :func:`load_array`."""
    what = api[1]
    rank, size = comm.Get_rank(), comm.Get_size()
    path = Path(directory) / f"{name}.npy"
    failure: _Failure | None = None
    cause: Exception | None = None
    signature: object = (name, _describe(dist_arg), repr(global_shape), repr(dtype), io)
    header: tuple[tuple[int, ...], np.dtype, int] | None = None
    n_runs = 0
    try:
        _check_name(name)
        _check_io(io)
        if isinstance(dist_arg, RowDistribution):
            dist_rows, parts = dist_arg.global_rows, dist_arg.parts
            _as_distribution(dist_arg, dist_rows, "dist")
        elif api == _ROWS:
            dist_rows, parts = None, BlockRows(0, dist_arg).parts
        else:
            raise ValueError(
                f"dist must be a RowDistribution (BlockRows, BlockCyclicRows, ...), got "
                f"{type(dist_arg).__name__} {dist_arg!r}"
            )
        if size < parts:
            raise ValueError(f"the communicator has {size} ranks, fewer than parts={parts}")
        want_shape = None if global_shape is None else _normalise_layout(global_shape, None)[0]
        want_dtype = None if dtype is None else _normalise_layout((0,), dtype)[1]
        signature = (
            name,
            _describe(dist_arg),
            want_shape,
            None if want_dtype is None else str(want_dtype),
            io,
        )
        if dist_rows is not None and rank < parts:
            n_runs = len(dist_arg.runs(rank))  # type: ignore[union-attr]
        if rank == 0:
            header = _read_npy_header(path)
            if want_shape is not None and header[0] != want_shape:
                raise CheckpointError(
                    f"checkpoint {path} holds shape {header[0]}, expected {want_shape}"
                )
            if want_dtype is not None and header[1] != want_dtype:
                raise CheckpointError(
                    f"checkpoint {path} holds dtype {header[1]}, expected {want_dtype}"
                )
            if dist_rows is not None and header[0][0] != dist_rows:
                raise CheckpointError(
                    f"checkpoint {path} holds {header[0][0]} rows (shape {header[0]}), but the "
                    f"distribution covers {dist_rows}"
                )
    except Exception as exc:  # every local failure must reach the other ranks
        failure, cause = _failure_of(exc), exc
    payloads = _agree(comm, what, failure, cause, signature, (header, n_runs))
    shape, dt, offset = payloads[0][0]  # type: ignore[index]
    dist: RowDistribution = (
        dist_arg if isinstance(dist_arg, RowDistribution) else BlockRows(shape[0], dist_arg)
    )
    row_bytes = math.prod(shape[1:]) * dt.itemsize
    runs_per_rank = [n for _, n in payloads]  # type: ignore[misc]
    target = dist
    if _staged(io, dist, runs_per_rank, shape[0] * row_bytes):
        dist = BlockRows(shape[0], size)

    # Each rank reads only its own rows.
    failure = cause = None
    runs = np.zeros((0, 2), dtype=np.int64)
    block = np.empty((0, *shape[1:]), dtype=dt)
    try:
        if rank < dist.parts:
            runs = np.asarray(dist.runs(rank), dtype=np.int64).reshape(-1, 2)
            block = np.empty((dist.count(rank), *shape[1:]), dtype=dt)
        if block.nbytes:
            _read_runs(path, offset, row_bytes, block, runs)
    except Exception as exc:
        failure = _failure_of(exc, f"cannot read global rows {_span(runs)} of {path}")
        if failure.kind == "value":
            failure = _Failure("format", failure.message)
        cause = exc
    _agree(comm, what, failure, cause)
    if dist is not target:
        block = redistribute(comm, block, shape, dt, dist, target)
    return block


def _check_state(
    state: Mapping[str, Any], instead: str = "save arrays with save_rows"
) -> dict[str, Scalar]:
    """Return ``state`` as a plain dict of JSON scalars, or raise ValueError naming the key.

    For a value that is not a scalar the message says what to use ``instead``.
    """
    if not isinstance(state, Mapping):
        raise ValueError(f"state must be a mapping of str to scalars, got {type(state).__name__}")
    plain: dict[str, Scalar] = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise ValueError(f"state keys must be str, got {key!r} ({type(key).__name__})")
        if isinstance(value, np.generic):
            value = value.item()
        if value is not None and not isinstance(value, bool | int | float | str):
            raise ValueError(
                f"state[{key!r}] is a {type(value).__name__}; only None, bool, int, float and "
                f"str are stored ({instead})"
            )
        plain[key] = value
    return plain


def save_state(
    directory: str | os.PathLike[str],
    name: str,
    comm: MPI.Intracomm,
    state: Mapping[str, Any] | None,
    *,
    fsync: bool = True,
) -> Path:
    """Write rank 0's small dict of scalars to ``directory/<name>.json``, atomically.

    Collective over ``comm``: rank 0 validates ``state``, writes it to a temporary file, flushes
    it (when ``fsync``) and renames it into place; then all ranks learn the outcome. Only rank
    0's ``state`` is used; other ranks may pass the same dict or ``None``.

    Parameters
    ----------
    directory
        Directory shared by all ranks; rank 0 creates it if missing.
    name
        File stem: the file is ``<name>.json``.
    comm
        Intracommunicator.
    state
        On rank 0: a mapping of ``str`` to ``None``, ``bool``, ``int``, ``float`` or ``str``
        (NumPy scalars are converted). Non-finite floats are written as JSON's common
        ``NaN``/``Infinity`` extension, which :func:`load_state` reads back.
    fsync
        Flush file and directory entry to stable storage before returning (default).

    Returns
    -------
    pathlib.Path
        ``directory/<name>.json``.

    Raises
    ------
    ValueError
        On all ranks for a bad ``name`` or a ``state`` that is not a flat dict of scalars.
    OSError
        On all ranks when rank 0 could not write or rename the file; a previous file is kept.
    """
    what = "save_state"
    root = Path(directory)
    path = root / f"{name}.json"
    failure: _Failure | None = None
    cause: Exception | None = None
    try:
        _check_name(name)
    except Exception as exc:
        failure, cause = _failure_of(exc), exc
    _agree(comm, what, failure, cause, name)
    if comm.Get_rank() == 0:
        try:
            plain = _check_state(state if state is not None else {})
            text = json.dumps(
                {"format": STATE_FORMAT, "version": _STATE_VERSION, "state": plain},
                indent=1,
                sort_keys=True,
            )
            root.mkdir(parents=True, exist_ok=True)
            _atomic_write_text(path, text + "\n", fsync=fsync)
        except Exception as exc:
            failure, cause = _failure_of(exc), exc
            if failure.kind != "value":
                failure = _failure_of(exc, f"cannot write {path}")
    _bcast_outcome(comm, what, None, failure, cause)
    return path


def load_state(directory: str | os.PathLike[str], name: str, comm: MPI.Intracomm) -> dict[str, Any]:
    """Read ``directory/<name>.json`` on rank 0 and return its dict on every rank.

    Parameters
    ----------
    directory
        Directory holding the file.
    name
        File stem, as given to :func:`save_state`.
    comm
        Intracommunicator; collective over it.

    Returns
    -------
    dict
        The saved mapping of ``str`` to ``None``, ``bool``, ``int``, ``float`` or ``str``; a new
        dict on each rank.

    Raises
    ------
    FileNotFoundError
        On all ranks when the file does not exist.
    CheckpointError
        On all ranks when it is not valid JSON (for example truncated) or not a state file of
        this format version.
    ValueError
        On all ranks for a bad ``name``.
    OSError
        On all ranks for other read errors.
    """
    what = "load_state"
    path = Path(directory) / f"{name}.json"
    failure: _Failure | None = None
    cause: Exception | None = None
    try:
        _check_name(name)
    except Exception as exc:
        failure, cause = _failure_of(exc), exc
    _agree(comm, what, failure, cause, name)
    state: dict[str, Any] | None = None
    if comm.Get_rank() == 0:
        try:
            state = _read_state(path)
        except Exception as exc:
            failure, cause = _failure_of(exc), exc
    result = _bcast_outcome(comm, what, state, failure, cause)
    return dict(result)  # type: ignore[call-overload]


def _read_state(path: Path) -> dict[str, Any]:
    """Parse and check one state file; raise FileNotFoundError or CheckpointError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise FileNotFoundError(
            f"state file {path} does not exist (never saved, or a different name or directory)"
        ) from exc
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"state file {path} is not valid JSON (truncated?): {exc}") from exc
    if (
        not isinstance(doc, dict)
        or doc.get("format") != STATE_FORMAT
        or not isinstance(doc.get("state"), dict)
    ):
        raise CheckpointError(
            f"{path} is not an elastic-slurm state file (no {STATE_FORMAT!r} envelope)"
        )
    if doc.get("version") != _STATE_VERSION:
        raise CheckpointError(
            f"state file {path} has format version {doc.get('version')!r}; this code reads "
            f"version {_STATE_VERSION}"
        )
    return doc["state"]
