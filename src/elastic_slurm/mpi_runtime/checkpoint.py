"""Save and load row-distributed arrays and small state dicts on a shared filesystem.

This is the data store of the *restart* resize path: the job saves its distributed arrays, the
MPI step ends, and a new step at the new size loads them with a different number of parts.

Files, in ``directory`` (which every rank must see at the same contents, e.g. NFS, Lustre, GPFS):

* ``<name>.npy`` -- one distributed array as a standard NumPy ``.npy`` file (format 1.0 or 2.0,
  C order), readable by ``numpy.load`` anywhere. Rank 0 writes the header, each owner writes its
  own rows at their offset, and nothing is gathered on one rank. The number of parts is not
  stored: any ``parts`` can load it.
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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
from numpy.lib import format as npy_format
from numpy.typing import DTypeLike

from elastic_slurm.errors import ElasticSlurmError
from elastic_slurm.mpi_runtime.distribution import BlockRows
from elastic_slurm.mpi_runtime.redistribute import _check_local, _culprit_lines, _normalise_layout

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "STATE_FORMAT",
    "CheckpointError",
    "Scalar",
    "load_rows",
    "load_state",
    "save_rows",
    "save_state",
]

Scalar = None | bool | int | float | str
"""A value ``save_state`` accepts (NumPy scalars are converted with ``.item()``)."""

STATE_FORMAT = "elastic-slurm-state"
_STATE_VERSION = 1
_WRITE_CHUNK = 1 << 30  # bytes per pwrite call (Linux writes at most ~2 GiB per call)


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


def _raise_collective(
    what: str, size: int, failures: Sequence[tuple[int, _Failure]], cause: Exception | None
) -> NoReturn:
    """Raise one error naming every culprit rank; its class comes from the first culprit."""
    lines = _culprit_lines([(r, f.message) for r, f in failures])
    exc_type = _KINDS[failures[0][1].kind]
    message = (
        f"{what}: {len(failures)} of {size} ranks failed; every rank raises this error:\n  "
        + "\n  ".join(lines)
    )
    raise exc_type(message) from cause


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
    way without a second collective).
    """
    reports: list[tuple[_Failure | None, object, object]] = comm.allgather(
        (failure, signature, payload)
    )
    failures = [(r, f) for r, (f, _, _) in enumerate(reports) if f is not None]
    if not failures:
        reference = reports[0][1]
        failures = [
            (r, _Failure("value", f"arguments {sig!r} differ from rank 0's {reference!r}"))
            for r, (_, sig, _) in enumerate(reports)
            if sig != reference
        ]
    if failures:
        _raise_collective(what, len(reports), failures, cause)
    return [p for _, _, p in reports]


def _bcast_outcome(
    comm: MPI.Intracomm,
    what: str,
    outcome: object,
    failure: _Failure | None,
    cause: Exception | None,
) -> object:
    """Broadcast rank 0's ``(failure, outcome)``; raise the same error everywhere on failure."""
    failure, outcome = comm.bcast((failure, outcome), root=0)
    if failure is not None:
        _raise_collective(what, comm.Get_size(), [(0, failure)], cause)
    return outcome


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


def _write_at(path: Path, offset: int, data: np.ndarray, *, fsync: bool) -> None:
    """Write the bytes of C-contiguous ``data`` into ``path`` at ``offset`` (no truncation)."""
    view = memoryview(data.reshape(-1).view(np.uint8))  # datetime64 has no buffer export
    fd = os.open(path, os.O_WRONLY)
    try:
        done = 0
        while done < len(view):
            done += os.pwrite(fd, view[done : done + _WRITE_CHUNK], offset + done)
        if fsync:
            os.fsync(fd)
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
    ``global_rows % parts`` parts hold one extra row). Rank 0 creates the file with its ``.npy``
    header (:func:`numpy.lib.format.open_memmap`, C order, sparse until written); after a
    broadcast, each owner writes its own rows at their byte offset with ``pwrite`` (so a full disk
    is an :class:`OSError`, not the ``SIGBUS`` a memory map would give) and, when ``fsync``,
    flushes them; after a final agreement step rank 0 renames the file into place. The file is
    complete and visible on every rank when this returns.

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
    what = "save_rows"
    rank, size = comm.Get_rank(), comm.Get_size()
    root = Path(directory)
    failure: _Failure | None = None
    cause: Exception | None = None
    signature: object = (name, repr(global_shape), repr(dtype), parts)
    try:
        _check_name(name)
        shape, dt = _normalise_layout(global_shape, dtype)
        layout = BlockRows(shape[0], parts)
        if size < layout.parts:
            raise ValueError(f"the communicator has {size} ranks, fewer than parts={parts}")
        signature = (name, shape, str(dt), layout.parts)
        block = _check_local(local, rank, shape, dt, layout)
    except Exception as exc:  # every local failure must reach the other ranks
        failure, cause = _failure_of(exc), exc
    _agree(comm, what, failure, cause, signature)

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

    # Step 2: each owner writes its rows; the allgather is the barrier after all writes.
    failure = cause = None
    start, stop = layout.rows_of(rank) if rank < layout.parts else (0, 0)
    if block.nbytes:
        row_bytes = block.nbytes // (stop - start)
        try:
            _write_at(tmp, data_offset + start * row_bytes, block, fsync=fsync)
        except Exception as exc:
            context = f"cannot write global rows [{start}, {stop}) into {tmp} (shared filesystem?)"
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
    shares the result; then each rank ``r < parts`` memory-maps only its own rows,
    ``BlockRows(global_rows, parts).rows_of(r)``, and copies them. ``parts`` need not equal the
    ``parts`` used by :func:`save_rows`.

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
    what = "load_rows"
    rank, size = comm.Get_rank(), comm.Get_size()
    path = Path(directory) / f"{name}.npy"
    failure: _Failure | None = None
    cause: Exception | None = None
    signature: object = (name, parts, repr(global_shape), repr(dtype))
    header: tuple[tuple[int, ...], np.dtype, int] | None = None
    try:
        _check_name(name)
        layout_parts = BlockRows(0, parts).parts
        if size < layout_parts:
            raise ValueError(f"the communicator has {size} ranks, fewer than parts={parts}")
        want_shape = None if global_shape is None else _normalise_layout(global_shape, None)[0]
        want_dtype = None if dtype is None else _normalise_layout((0,), dtype)[1]
        signature = (
            name,
            layout_parts,
            want_shape,
            None if want_dtype is None else str(want_dtype),
        )
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
    except Exception as exc:  # every local failure must reach the other ranks
        failure, cause = _failure_of(exc), exc
    payloads = _agree(comm, what, failure, cause, signature, header)
    shape, dt, offset = payloads[0]  # type: ignore[misc]

    # Each rank maps and copies only its own rows.
    failure = cause = None
    layout = BlockRows(shape[0], parts)
    start, stop = layout.rows_of(rank) if rank < layout.parts else (0, 0)
    block = np.empty((0, *shape[1:]), dtype=dt)
    try:
        block = np.empty((stop - start, *shape[1:]), dtype=dt)
        if block.nbytes:
            row_bytes = block.nbytes // (stop - start)
            mapped = np.memmap(
                path, dtype=dt, mode="r", offset=offset + start * row_bytes, shape=block.shape
            )
            try:
                block[...] = mapped
            finally:
                del mapped
    except Exception as exc:  # a ValueError here means the file shrank since rank 0 looked
        failure = _failure_of(exc, f"cannot read global rows [{start}, {stop}) of {path}")
        if failure.kind == "value":
            failure = _Failure("format", failure.message)
        cause = exc
    _agree(comm, what, failure, cause)
    return block


def _check_state(state: Mapping[str, Any]) -> dict[str, Scalar]:
    """Return ``state`` as a plain dict of JSON scalars, or raise ValueError naming the key."""
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
                "str are stored (save arrays with save_rows)"
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
