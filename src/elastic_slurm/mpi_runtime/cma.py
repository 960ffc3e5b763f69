"""Direct copies between two processes of one machine: Linux cross-memory attach (CMA).

``process_vm_readv`` and ``process_vm_writev`` copy between this process's memory and
another's in one step, the mechanism Open MPI's shared-memory transport uses for large
messages. A grid redistribution (:func:`~elastic_slurm.mpi_runtime.redistribute.redistribute_grid`)
uses them, when :data:`ENABLED`, for a tile (:mod:`.tiles`) between two processes of one
machine whose contiguous runs are long (:func:`long_runs`): the receiver reads the tile from
the sender's array, or the sender writes it into the receiver's result (:func:`copy`), one
system call per 1024 runs. :func:`machine` tells which processes can do so; the caller falls
back to MPI messages when a copy fails (:func:`warn_failed` says so once).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from elastic_slurm.mpi_runtime import tiles
from elastic_slurm.mpi_runtime.tiles import Tile

__all__ = ["ENABLED", "MIN_RUN", "copy", "long_runs", "machine", "warn_failed", "warned"]

ENABLED = os.environ.get("ELASTIC_SLURM_DIRECT_COPY", "0") == "1"
"""Copy between processes of one machine with ``process_vm_readv``/``process_vm_writev``
(Linux cross-memory attach, the mechanism Open MPI's shared-memory transport uses for large
messages) when ``ELASTIC_SLURM_DIRECT_COPY=1``. Off by default: on the 2-core test machine
under load it was not faster than the messages (``bench/redistribute.py --compare-direct``)."""

_IOV_MAX = 1024  # Linux's limit on iovecs per process_vm_* call
_IOVEC = np.dtype([("base", np.uint64), ("len", np.uint64)])
warned: list[str] = []
"""The reason of the first failed direct copy in this process (logged once), if any."""
_LIBC: object = None  # libc with the two calls' signatures, loaded at the first copy


def machine() -> tuple[str, int, int] | None:
    """Return the machine and namespaces: equal exactly for processes that can share CMA.

    ``(boot id, pid namespace, mount namespace)``; None where there is no ``/proc`` (no
    direct copies then).
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return boot, os.stat("/proc/self/ns/pid").st_ino, os.stat("/proc/self/ns/mnt").st_ino
    except OSError:
        return None


def warn_failed(reason: str) -> None:
    """Log, once per process, that a direct copy failed (``reason``) and messages are used."""
    import logging

    if not warned:
        warned.append(reason)
        logging.getLogger(__name__).warning(
            "direct copies between processes failed (%s); moving data by MPI messages", reason
        )


def _libc() -> object:
    import ctypes

    lib = ctypes.CDLL(None, use_errno=True)
    for name in ("process_vm_readv", "process_vm_writev"):
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p]
        fn.argtypes += [ctypes.c_ulong, ctypes.c_ulong]
        fn.restype = ctypes.c_ssize_t
    return lib


def _segments(
    tile: Tile, here: int, there: int, row_here: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Byte offsets (here, there) and lengths of the contiguous runs of a tile, merged.

    ``here``/``there`` pick the piece column (0 source, 1 destination) of this process and of
    the peer; ``row_here`` is this process's row bytes, ``tile[2]`` the peer's.
    """
    rows, cols, row_there = tile
    r_here = tiles.flat_index(rows[:, [here, 2]])
    r_there = tiles.flat_index(rows[:, [there, 2]])
    c_here, c_there, c_len = cols[:, here], cols[:, there], cols[:, 2]
    off_here = (r_here[:, None] * row_here + c_here[None, :]).reshape(-1)
    off_there = (r_there[:, None] * row_there + c_there[None, :]).reshape(-1)
    lengths = np.broadcast_to(c_len, (len(r_here), len(c_len))).reshape(-1)
    if len(lengths) > 1:
        joins = (off_here[1:] == off_here[:-1] + lengths[:-1]) & (
            off_there[1:] == off_there[:-1] + lengths[:-1]
        )
        first = np.flatnonzero(np.concatenate([[True], ~joins]))
        return off_here[first], off_there[first], np.add.reduceat(lengths, first)
    return off_here, off_there, lengths


def copy(
    here: np.ndarray,
    pid: int,
    there: int,
    tile: Tile,
    *,
    read: bool,
) -> None:
    """Copy one tile between this process and process ``pid``, one system call per 1024 runs.

    Parameters
    ----------
    here
        This process's local array as ``uint8`` ``(rows, row bytes)``: its result when
        ``read``, else its source.
    pid
        The peer's process id.
    there
        The address of the peer's array: its source when ``read``, else its result.
    tile
        The tile, as seen from this process (:mod:`.tiles`).
    read
        This process receives and reads the peer's source array (``process_vm_readv``);
        else it sends and writes into the peer's result (``process_vm_writev``).

    Raises
    ------
    OSError
        If the kernel refuses (no permission, no such process) or copies less than asked.
    """
    import ctypes

    global _LIBC
    if _LIBC is None:
        _LIBC = _libc()
    mine = 1 if read else 0  # the tile's piece column of this process
    call = _LIBC.process_vm_readv if read else _LIBC.process_vm_writev  # type: ignore[attr-defined]
    off_here, off_there, lengths = _segments(tile, mine, 1 - mine, here.shape[1])
    local = np.empty(len(lengths), dtype=_IOVEC)
    remote = np.empty(len(lengths), dtype=_IOVEC)
    local["base"] = here.ctypes.data + off_here
    remote["base"] = there + off_there
    local["len"] = remote["len"] = lengths
    for start in range(0, len(lengths), _IOV_MAX):
        n = min(_IOV_MAX, len(lengths) - start)
        want = int(lengths[start : start + n].sum())
        done = call(
            pid,
            local.ctypes.data + start * _IOVEC.itemsize,
            n,
            remote.ctypes.data + start * _IOVEC.itemsize,
            n,
            0,
        )
        if done != want:
            err = ctypes.get_errno()
            raise OSError(
                err,
                f"process_vm_{'readv' if read else 'writev'} with pid {pid} "
                f"moved {done} of {want} bytes: {os.strerror(err)}",
            )


MIN_RUN = int(os.environ.get("ELASTIC_SLURM_DIRECT_MIN_RUN", 2048))
"""A tile is copied directly between processes only if its contiguous runs average at least
this many bytes; otherwise it is packed and sent as one message. ``process_vm_readv`` pays
about a page pin per run: measured here, 32 MiB in 512-byte runs went at 1.5 GB/s, in 4 KiB
runs at 8 GB/s, in 32 KiB runs at 16 GB/s, while packing costs two more copies.
``ELASTIC_SLURM_DIRECT_MIN_RUN`` overrides it (the tests set 0 to copy every tile directly)."""


def long_runs(tile: Tile, row_here: int) -> bool:
    """Whether the tile's runs average ``MIN_RUN`` bytes (the same on both sides)."""
    rows, cols, row_there = tile
    n_rows, row_bytes = tiles.packed_shape(tile)
    nbytes = n_rows * row_bytes
    whole = len(cols) == 1 and cols[0, 0] == cols[0, 1] == 0 and cols[0, 2] == row_here
    runs = len(rows) if whole and row_here == row_there else n_rows * len(cols)
    return nbytes >= MIN_RUN * max(runs, 1)
