"""Direct copies between two processes of one machine: Linux cross-memory attach (CMA).

``process_vm_readv`` and ``process_vm_writev`` copy between this process's memory and
another's in one step, the mechanism Open MPI's shared-memory transport uses for large
messages. A grid redistribution (:func:`~elastic_slurm.mpi_runtime.redistribute.redistribute_grid`)
uses them, when :data:`ENABLED`, for a tile (:mod:`.tiles`) between two processes of one
machine whose runs are long enough (:func:`plan`): the receiver reads the tile from the
sender's array, or the sender writes it into the receiver's result (:func:`copy`), whichever
leaves the other process fewer runs (:func:`segments`: each side's contiguous runs, joined on
their own), up to 1024 runs of each side per system call. :func:`machine` tells which
processes can do so; the caller falls back to MPI messages when a copy fails
(:func:`warn_failed` says so once).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from elastic_slurm.mpi_runtime import strided, tiles
from elastic_slurm.mpi_runtime.tiles import Tile

__all__ = [
    "ENABLED",
    "MIN_RUN",
    "Segments",
    "copy",
    "machine",
    "plan",
    "segments",
    "warn_failed",
    "warned",
]

ENABLED = os.environ.get("ELASTIC_SLURM_DIRECT_COPY", "0") == "1"
"""Copy between processes of one machine with ``process_vm_readv``/``process_vm_writev``
(Linux cross-memory attach, the mechanism Open MPI's shared-memory transport uses for large
messages) when ``ELASTIC_SLURM_DIRECT_COPY=1``. Off by default: on the shared 2-core test
machine (64 MiB, 4 <-> 6 and 4 -> 3 ranks, other jobs' load 4-7) it used about as much CPU
time as the messages and was not reliably faster: a run that is contiguous on one side only
costs the kernel about 0.35 us per run of the other side, which is what MPI's packing costs
for runs of a few KiB."""

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


Segments = tuple[np.ndarray, np.ndarray]
"""``(byte offsets, byte lengths)`` of a tile's contiguous runs in one local array (int64)."""


def segments(tile: Tile, side: int, row_bytes: int) -> Segments:
    """The tile's contiguous runs in one side's array, adjacent ones joined, in tile order.

    ``side`` is 0 for the source array, 1 for the destination; ``row_bytes`` is that array's
    row length. Each side is joined on its own: a tile that is whole rows of the destination
    is one run there, however many it has in the source.
    """
    rows, cols = (strided.merged(r) for r in tiles.runs_of(tile, side))
    if len(cols) == 1 and cols[0, 0] == 0 and cols[0, 1] == row_bytes:  # whole rows
        return rows[:, 0] * row_bytes, rows[:, 1] * row_bytes
    starts = tiles.flat_index(rows) * row_bytes
    offsets = (starts[:, None] + cols[None, :, 0]).reshape(-1)
    lengths = np.broadcast_to(cols[:, 1], (len(starts), len(cols))).reshape(-1)
    if len(offsets) > 1:
        first = np.flatnonzero(np.concatenate([[True], offsets[1:] != offsets[:-1] + lengths[:-1]]))
        if len(first) < len(offsets):
            return offsets[first], np.add.reduceat(lengths, first)
    return offsets, lengths


def _count(tile: Tile, side: int, row_bytes: int) -> int:
    """How many runs :func:`segments` gives, without listing them."""
    rows, cols = (strided.merged(r) for r in tiles.runs_of(tile, side))
    if len(cols) == 1 and cols[0, 0] == 0 and cols[0, 1] == row_bytes:  # whole rows
        return len(rows)
    n_rows = int(rows[:, 1].sum())
    # the last run of a row joins the first of the next when they touch the row's two ends
    wraps = cols[0, 0] == 0 and cols[-1, 0] + cols[-1, 1] == row_bytes
    return n_rows * len(cols) - (n_rows - len(rows) if wraps else 0)


def plan(tile: Tile, row_src: int, row_dst: int, default_pull: bool) -> tuple[bool, bool]:
    """``(direct, pull)``: whether to copy the tile directly, and which side does it.

    The same answer on both sides of the tile (it depends only on the tile and the two row
    lengths). The side with more runs makes the system call (its runs are the cheap, local
    ones); the other side's runs are the remote ones, each pinned on its own: measured here,
    about 0.35 us per local run and 0.7-1 us per remote run, on top of the bytes at about the
    speed of a plain copy. So the receiver pulls (``process_vm_readv``) when the source has
    fewer runs, the sender pushes (``process_vm_writev``) when the destination has fewer, and
    ``default_pull`` decides a tie. Direct when the bytes are at least :data:`MIN_RUN` per
    weighted run (a local run counts once, a remote one twice).
    """
    n_src, n_dst = _count(tile, 0, row_src), _count(tile, 1, row_dst)
    n_rows, width = tiles.packed_shape(tile)
    local, remote = max(n_src, n_dst), min(n_src, n_dst)
    direct = n_rows * width >= MIN_RUN * (local + 2 * remote)
    pull = n_src < n_dst or (n_src == n_dst and default_pull)
    return direct, pull


def copy(
    here: np.ndarray,
    pid: int,
    there: int,
    tile: Tile,
    *,
    read: bool,
) -> None:
    """Copy one tile between this process and process ``pid``, up to 1024 runs per call.

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
        The tile, as seen from this process (:mod:`.tiles`; ``tile[2]`` is the peer's row
        bytes).
    read
        This process receives and reads the peer's source array (``process_vm_readv``);
        else it sends and writes into the peer's result (``process_vm_writev``).

    Raises
    ------
    OSError
        If the kernel refuses (no permission, no such process) or copies less than asked.

    Notes
    -----
    Each side's runs are joined on their own (:func:`segments`), so one long run on one side
    faces many short ones on the other. A call takes at most 1024 runs of each side (Linux's
    ``IOV_MAX``) and the same bytes of both: a run that crosses the end of a call is cut.
    """
    import ctypes

    global _LIBC
    if _LIBC is None:
        _LIBC = _libc()
    mine = 1 if read else 0  # the tile's piece column of this process
    call = _LIBC.process_vm_readv if read else _LIBC.process_vm_writev  # type: ignore[attr-defined]
    sides = []
    here_side = (mine, here.ctypes.data, here.shape[1])
    for side, base, row_bytes in (here_side, (1 - mine, there, tile[2])):
        offsets, lengths = segments(tile, side, row_bytes)
        iov = np.empty(len(lengths), dtype=_IOVEC)
        iov["base"] = base + offsets
        iov["len"] = lengths
        sides.append((iov, np.concatenate([[0], np.cumsum(lengths)])))
    total = int(sides[0][1][-1])
    pos = 0
    while pos < total:
        # The runs holding byte ``pos`` on each side; the call ends where either side has
        # used up IOV_MAX runs.
        first = [int(np.searchsorted(ends, pos, "right")) - 1 for _, ends in sides]
        stop = min(
            int(ends[min(i + _IOV_MAX, len(ends) - 1)])
            for i, (_, ends) in zip(first, sides, strict=True)
        )
        args = []
        saved = []
        for i, (iov, ends) in zip(first, sides, strict=True):
            last = int(np.searchsorted(ends, stop, "left")) - 1  # the run holding byte stop - 1
            saved.append((iov, i, last, iov[i].copy(), iov[last].copy()))
            cut = pos - int(ends[i])
            iov["base"][i] += cut
            iov["len"][i] -= cut
            iov["len"][last] -= int(ends[last + 1]) - stop
            args.append((iov.ctypes.data + i * _IOVEC.itemsize, last + 1 - i))
        try:
            done = call(pid, args[0][0], args[0][1], args[1][0], args[1][1], 0)
        finally:
            for iov, i, last, head, tail in reversed(saved):
                iov[last] = tail
                iov[i] = head
        if done != stop - pos:
            err = ctypes.get_errno()
            raise OSError(
                err,
                f"process_vm_{'readv' if read else 'writev'} with pid {pid} "
                f"moved {done} of {stop - pos} bytes: {os.strerror(err)}",
            )
        pos = stop


MIN_RUN = int(os.environ.get("ELASTIC_SLURM_DIRECT_MIN_RUN", 2048))
"""A tile is copied directly between processes only if it holds at least this many bytes per
weighted run (:func:`plan`); otherwise it travels as an MPI message. Measured here with one
side contiguous: 3 KiB runs on the other side went at about half the speed of a plain copy,
512-byte runs at a third (local side) or a tenth (remote side); lowered to 256 (1.3 KiB runs
on both sides copied directly) a 64 MiB grid move was slower than by MPI datatypes, and to 128
(512-byte runs) about 2.5 times slower. ``ELASTIC_SLURM_DIRECT_MIN_RUN`` overrides it (the
tests set 0 to copy every tile directly)."""
