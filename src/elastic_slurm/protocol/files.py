"""Hostile-input file primitives: how anything reads or writes a job's directory.

A job's directory (``<workdir>/.elastic-slurm/job-<id>/``) is written by the job's user, and
read and written by the controller, which runs as root today. Everything found there is
treated as hostile:

* every component below the anchor (the job's working directory) is opened relative to the
  descriptor of its parent with ``O_NOFOLLOW`` (directories also ``O_DIRECTORY``): no symlink
  is ever followed, on any component, so a symlinked ``orders/`` or file sends nothing
  anywhere;
* every directory and file must belong to the job's user (:class:`Owner`), or to root where
  root cannot have been tricked into it (a directory, or a file with one link), and must not
  be writable by others (nor by its group, unless that is the job's group);
* only regular files are read, opened ``O_NONBLOCK`` (a FIFO never blocks the reader), and
  at most ``cap`` bytes: a larger file is refused, not read;
* a file is written to a temporary name nobody can predict (``secrets.token_hex``), created
  ``O_CREAT|O_EXCL|O_NOFOLLOW``, ``fsync``-ed, then renamed in the same directory; a root
  writer hands every file and directory it creates to the job's user (``fchown``);
* a listing parses names strictly, refuses numbers above :data:`MAX_SEQ` and stops after
  :data:`MAX_ENTRIES` entries: nothing ever loops up to a number a user wrote.

Every refusal is a :class:`~elastic_slurm.errors.JobInputError` naming the file and reason.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import secrets
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic_slurm.errors import JobInputError

MAX_SEQ = 1_000_000
"""The highest sequence number (order, offer, request) a listing accepts."""

MAX_ENTRIES = 4096
"""The most directory entries one listing looks at; a fuller directory is refused."""

MESSAGE_CAP = 256 * 1024
"""Bytes: the largest message file read (an order lists at most :data:`MAX_NODES` nodes)."""

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NUMBERED = re.compile(r"^(\d+)((?:\.[a-z]+)?)\.json$")


@dataclass(frozen=True)
class Owner:
    """Who a job's files must belong to.

    Parameters
    ----------
    uid, gid
        The job's user and group. ``uid=None``: the process's own user when it is not root;
        for root, the owner of the first directory below the anchor (``.elastic-slurm``), or of
        the anchor when that does not exist yet, so every component must at least agree.
    """

    uid: int | None = None
    gid: int | None = None


class _Resolved:
    """The owner a walk checks against, fixed by the first directory it sees."""

    def __init__(self, owner: Owner) -> None:
        self.uid, self.gid = owner.uid, owner.gid
        if self.uid is None and os.geteuid() != 0:
            self.uid, self.gid = os.geteuid(), os.getegid()
        self.given = owner.uid is not None

    def adopt(self, st: os.stat_result) -> None:
        if self.uid is None:
            self.uid, self.gid = st.st_uid, st.st_gid


class JobFiles:
    """Safe access to one job's directory, walked from ``anchor`` through ``parts``.

    Every call opens the chain afresh from the anchor (nothing stays open between calls).

    Parameters
    ----------
    anchor
        The directory the walk starts from (the job's working directory), opened as named:
        its path is the job's (or the site's) choice, not something found inside it.
    parts
        The components below it (``(".elastic-slurm", "job-12")``), each opened without
        following a symlink.
    job_id
        Named in every :class:`~elastic_slurm.errors.JobInputError`.
    owner
        Whom every component must belong to (:class:`Owner`).
    """

    def __init__(
        self,
        anchor: Path,
        parts: Sequence[str],
        *,
        job_id: int | None = None,
        owner: Owner | None = None,
    ) -> None:
        self.anchor = Path(anchor)
        self.parts = tuple(parts)
        self.job_id = job_id
        self.owner = owner or Owner()
        for name in self.parts:
            _check_name(name)

    # ------------------------------------------------------------------ helpers
    def _err(self, where: str, reason: str) -> JobInputError:
        return JobInputError(self.job_id, f"{where}: {reason}")

    def _where(self, sub: Sequence[str], name: str = "") -> str:
        return "/".join([*sub, *([name] if name else [])]) or "/".join(self.parts)

    def _check(self, st: os.stat_result, who: _Resolved, where: str, *, is_dir: bool) -> None:
        if is_dir and not stat.S_ISDIR(st.st_mode):
            raise self._err(where, "not a directory")
        if not is_dir and not stat.S_ISREG(st.st_mode):
            raise self._err(where, "not a regular file (a FIFO, device or socket is never read)")
        # root's own entries are safe: no user can create one, nor link one in (one link)
        rooted = st.st_uid == 0 and (is_dir or st.st_nlink == 1)
        if st.st_uid != who.uid and not rooted:
            raise self._err(where, f"owned by uid {st.st_uid}, not the job's user {who.uid}")
        if st.st_mode & stat.S_IWOTH:
            raise self._err(where, "writable by other users")
        if st.st_mode & stat.S_IWGRP and (who.gid is None or st.st_gid != who.gid):
            raise self._err(where, f"writable by group {st.st_gid}, not the job's group")

    def _chown(self, fd: int, who: _Resolved) -> None:
        if os.geteuid() == 0 and who.uid is not None and who.uid != 0:
            os.fchown(fd, who.uid, -1 if who.gid is None else who.gid)

    @contextlib.contextmanager
    def _dir(self, sub: Sequence[str], *, create: bool) -> Iterator[tuple[int, _Resolved] | None]:
        """The descriptor of ``parts + sub`` (``None`` when missing and not ``create``)."""
        who = _Resolved(self.owner)
        for name in sub:
            _check_name(name)
        fd = self._open_anchor(who, create)
        if fd is None:
            yield None
            return
        try:
            anchor_st = os.fstat(fd)
            chain = [*self.parts, *sub]
            for depth, name in enumerate(chain):
                where = "/".join(chain[: depth + 1])
                nfd = self._step(fd, name, where, who, anchor_st if depth == 0 else None, create)
                if nfd is None:
                    yield None
                    return
                os.close(fd)
                fd = nfd
                st = os.fstat(fd)
                if depth == 0:
                    who.adopt(st)
                self._check(st, who, where, is_dir=True)
                if create and st.st_uid != who.uid and os.geteuid() == 0:
                    # root's own directory (left by an older controller, or renamed into
                    # place): read, but root writes for a user only into that user's
                    raise self._err(where, f"owned by uid {st.st_uid}: not written for the job")
            yield fd, who
        finally:
            os.close(fd)

    def _open_anchor(self, who: _Resolved, create: bool) -> int | None:
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
        try:
            return os.open(self.anchor, flags)
        except FileNotFoundError:
            if not create:
                return None
            if who.given and who.uid != os.geteuid():
                raise self._err(str(self.anchor), "does not exist (not made for a job)") from None
        except OSError as exc:
            raise self._err(str(self.anchor), exc.strerror or str(exc)) from None
        try:  # the process's own directory, as its own user
            self.anchor.mkdir(parents=True, exist_ok=True)
            return os.open(self.anchor, flags)
        except OSError as exc:
            raise self._err(str(self.anchor), exc.strerror or str(exc)) from None

    def _step(
        self,
        fd: int,
        name: str,
        where: str,
        who: _Resolved,
        anchor_st: os.stat_result | None,
        create: bool,
    ) -> int | None:
        """Open directory ``name`` below ``fd`` (never a symlink), creating it if asked."""
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                return None
        except OSError as exc:
            raise self._os_err(where, exc) from None
        if anchor_st is not None:  # creating the first component, in the job's working dir
            if who.given and os.geteuid() == 0 and anchor_st.st_uid != who.uid:
                raise self._err(
                    str(self.anchor),
                    f"owned by uid {anchor_st.st_uid}, not the job's user {who.uid}: "
                    f"{name} is not created there",
                )
            who.adopt(anchor_st)
        made = False
        try:
            os.mkdir(name, 0o755, dir_fd=fd)
            made = True
        except FileExistsError:  # made at the same time by someone else: checked below
            pass
        except OSError as exc:
            raise self._os_err(where, exc) from None
        try:
            nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise self._os_err(where, exc) from None
        if made:
            self._chown(nfd, who)
        return nfd

    def _os_err(self, where: str, exc: OSError) -> JobInputError:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return self._err(where, "a symlink or not a directory (never followed)")
        return self._err(where, exc.strerror or str(exc))

    # ------------------------------------------------------------------ reading
    def read_bytes(self, sub: Sequence[str], name: str, cap: int = MESSAGE_CAP) -> bytes | None:
        """The content of regular file ``sub/name`` (``None`` if it or a directory is missing).

        Parameters
        ----------
        sub
            Directories below the job's directory (``("orders",)``, or ``()``).
        name
            The file's name (no ``/``).
        cap
            Bytes: the largest size accepted.

        Raises
        ------
        JobInputError
            A symlink on the way, not a regular file, the wrong owner or mode, larger than
            ``cap``, or an error of the filesystem.
        """
        _check_name(name)
        where = self._where(sub, name)
        with self._dir(sub, create=False) as found:
            if found is None:
                return None
            dfd, who = found
            try:
                fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise self._err(where, "a symlink (never followed)") from None
                raise self._os_err(where, exc) from None
            try:
                self._check(os.fstat(fd), who, where, is_dir=False)
                chunks, size = [], 0
                while size <= cap:
                    try:
                        chunk = os.read(fd, cap + 1 - size)
                    except BlockingIOError:
                        raise self._err(where, "would block") from None
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                if size > cap:
                    raise self._err(where, f"larger than {cap} bytes")
                return b"".join(chunks)
            finally:
                os.close(fd)

    def read_json(self, sub: Sequence[str], name: str, cap: int = MESSAGE_CAP) -> Any | None:
        """The JSON value in ``sub/name`` (``None`` if missing); see :meth:`read_bytes`.

        Raises
        ------
        JobInputError
            As :meth:`read_bytes`, or not JSON (including ``NaN``/``Infinity``, invalid
            UTF-8, nesting too deep for the parser).
        """
        data = self.read_bytes(sub, name, cap)
        return None if data is None else decode_json(data, self.job_id, self._where(sub, name))

    def exists(self, sub: Sequence[str], name: str) -> bool:
        """Whether ``sub/name`` exists (any kind of entry, never followed)."""
        _check_name(name)
        with self._dir(sub, create=False) as found:
            if found is None:
                return False
            try:
                os.stat(name, dir_fd=found[0], follow_symlinks=False)
            except FileNotFoundError:
                return False
            return True

    def list_numbered(self, sub: Sequence[str], suffix: str = "") -> list[int]:
        """The numbers ``N`` of the files named ``NNNNNN<suffix>.json`` in ``sub``, sorted.

        Other names are ignored (temporary files, other suffixes). A name of that shape that is
        not the canonical ``%06d`` form of a number from 1 to :data:`MAX_SEQ` is refused.

        Raises
        ------
        JobInputError
            A refused name, or more than :data:`MAX_ENTRIES` entries in the directory.
        """
        with self._dir(sub, create=False) as found:
            if found is None:
                return []
            numbers = []
            with os.scandir(found[0]) as it:
                for count, entry in enumerate(it, start=1):
                    if count > MAX_ENTRIES:
                        raise self._err(self._where(sub), f"more than {MAX_ENTRIES} entries")
                    match = _NUMBERED.match(entry.name)
                    if match is None or match.group(2) != suffix:
                        continue
                    digits = match.group(1)
                    if len(digits) > 7 or not 1 <= int(digits) <= MAX_SEQ:
                        raise self._err(
                            self._where(sub, entry.name), f"number beyond {MAX_SEQ} refused"
                        )
                    if digits != f"{int(digits):06d}":
                        raise self._err(self._where(sub, entry.name), "not a canonical number")
                    numbers.append(int(digits))
            return sorted(numbers)

    # ------------------------------------------------------------------ writing
    def makedirs(self, sub: Sequence[str] = ()) -> None:
        """Create the job's directory and ``sub`` below it (given to the job's user)."""
        with self._dir(sub, create=True):
            pass

    def write_bytes(self, sub: Sequence[str], name: str, data: bytes, mode: int = 0o644) -> None:
        """Replace ``sub/name`` with ``data`` atomically (directories created as needed).

        The data goes to an exclusive, unpredictable temporary name, is ``fsync``-ed, and is
        renamed over ``name`` in the same directory: a reader never sees half a file, and a
        symlink at ``name`` is replaced, never followed.

        Raises
        ------
        JobInputError
            A symlink or foreign entry on the way, or an error of the filesystem.
        """
        _check_name(name)
        where = self._where(sub, name)
        with self._dir(sub, create=True) as found:
            assert found is not None
            dfd, who = found
            tmp = f".{name}.{secrets.token_hex(8)}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(tmp, flags, mode, dir_fd=dfd)
            except OSError as exc:
                raise self._os_err(where, exc) from None
            try:
                try:
                    self._chown(fd, who)
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException as exc:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                if isinstance(exc, OSError):
                    raise self._os_err(where, exc) from None
                raise

    def write_json(self, sub: Sequence[str], name: str, value: Any, mode: int = 0o644) -> None:
        """Write ``value`` as JSON to ``sub/name``; see :meth:`write_bytes`."""
        self.write_bytes(sub, name, json.dumps(value, indent=1).encode(), mode)

    def append_bytes(self, sub: Sequence[str], name: str, data: bytes) -> None:
        """Append ``data`` to regular file ``sub/name`` (created, for the job's user, if missing).

        Raises
        ------
        JobInputError
            A symlink, not a regular file, the wrong owner or mode.
        """
        _check_name(name)
        where = self._where(sub, name)
        with self._dir(sub, create=True) as found:
            assert found is not None
            dfd, who = found
            base = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            try:
                try:
                    fd = os.open(name, base | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dfd)
                    self._chown(fd, who)
                except FileExistsError:
                    fd = os.open(name, base, dir_fd=dfd)
            except OSError as exc:
                raise self._os_err(where, exc) from None
            try:
                self._check(os.fstat(fd), who, where, is_dir=False)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)

    def move_aside(self, prefix: str, tries: int = 1000) -> str | None:
        """Rename the last directory of ``parts`` to ``<prefix><k>`` beside it, first free ``k``.

        Everything goes through the parent's descriptor: the entry itself is renamed (a
        symlink is never followed) after the same checks as every directory on the way (the
        job's user's, not writable by others), and a name is free only if no entry of any
        kind has it. Returns the new name, or None if the directory is missing.

        Raises
        ------
        JobInputError
            A component is a symlink, not a directory, or not the job's user's; or the
            ``tries`` names are all taken.
        """
        parent = JobFiles(self.anchor, self.parts[:-1], job_id=self.job_id, owner=self.owner)
        with parent._dir((), create=False) as found:
            if found is None:
                return None
            fd, who = found
            try:
                st = os.stat(self.parts[-1], dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return None
            self._check(st, who, self._where(()), is_dir=True)
            for k in range(1, tries + 1):
                new = f"{prefix}{k}"
                _check_name(new)
                try:
                    os.stat(new, dir_fd=fd, follow_symlinks=False)
                    continue  # taken
                except FileNotFoundError:
                    pass
                try:
                    os.rename(self.parts[-1], new, src_dir_fd=fd, dst_dir_fd=fd)
                except OSError as exc:
                    raise self._os_err(self._where(()), exc) from None
                return new
        raise self._err(self._where(()), f"{tries} names {prefix}<k> beside it are taken")

    def unlink(self, sub: Sequence[str], name: str) -> None:
        """Remove ``sub/name`` if it exists (the entry itself, never what it points to)."""
        _check_name(name)
        with self._dir(sub, create=False) as found:
            if found is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=found[0])


def _check_name(name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a plain file name: {name!r}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range")
    return value


def decode_json(data: bytes, job_id: int | None, where: str) -> Any:
    """Decode JSON from a job, strictly.

    Raises
    ------
    JobInputError
        Not UTF-8, not JSON, ``NaN``/``Infinity``, or nested too deep.
    """
    try:
        text = data.decode("utf-8")
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise JobInputError(job_id, f"{where}: nested too deep") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise JobInputError(job_id, f"{where}: not JSON ({exc})") from None


def finite(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
