"""Unprivileged users on the local cluster: their accounts, and what their jobs must reach.

The local cluster's nodes are namespaces of this machine (network and hostname only), so they
share its ``/etc/passwd``, its filesystems and its munge socket: an account created here exists
on every node, MUNGE vouches for it, and its home directory is a job working directory the
nodes see. What still stops such a user's job is a file it must run or read behind a directory
closed to others, typically the Python a venv was made from: pyenv's under ``/root`` (mode
0700) makes every job of another user fail with "bad interpreter: Permission denied".
:func:`closed_to_others` finds that directory before a job does.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
import subprocess
from pathlib import Path

from elastic_slurm.errors import ClusterError, NotRootError

#: Permission bits of "others": search a directory (or execute a file), and read.
SEARCH = stat.S_IXOTH
READ = stat.S_IROTH

_USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,30}")


def closed_to_others(path: str | os.PathLike[str], need: int = SEARCH) -> Path | None:
    """The first place on the way to ``path`` that users other than its owners cannot pass.

    Every directory on the way (of ``path`` as given and of its resolved target, since the
    kernel walks both when it follows a symbolic link) must be searchable by others, and the
    target itself must have the permission bits ``need`` for others (:data:`SEARCH` to execute
    a program, :data:`READ` to read a file, both for a directory to import from). Only the
    "others" bits count: a directory open to a group is closed to users outside it.

    Parameters
    ----------
    path
        An absolute or relative path (relative to the current directory).
    need
        The "others" bits ``path``'s target must have.

    Returns
    -------
    pathlib.Path or None
        The first directory (or the target) that is closed, or a path that does not exist;
        ``None`` when every user can reach the target.

    Examples
    --------
    >>> closed_to_others("/") is None
    True
    """
    given = Path(os.path.abspath(path))
    target = Path(os.path.realpath(given))
    for place in (*reversed(given.parents), *reversed(target.parents)):
        blocked = _lacks(place, SEARCH)
        if blocked:
            return place
    return target if _lacks(target, need) else None


def _lacks(place: Path, bits: int) -> bool:
    try:
        mode = place.stat().st_mode
    except OSError:  # missing, or closed to us too
        return True
    return mode & bits != bits


def job_python_problem(python: str) -> str | None:
    """Why jobs of users other than root cannot run ``python``, in one line; ``None`` if they can.

    ``python`` is the interpreter written into the batch scripts (the site's ``python:``, by
    default the one running elastic-slurm). A bare name is looked up on ``PATH``; a name not
    found here says nothing (it may exist only on the nodes) and gives ``None``.

    Examples
    --------
    >>> job_python_problem("/bin/sh") is None
    True
    """
    found = shutil.which(python) if os.sep not in python else python
    if found is None:
        return None
    blocked = closed_to_others(found, SEARCH)
    if blocked is None:
        return None
    return (
        f"jobs of users other than root cannot run {found} ({blocked} is closed to them: "
        "'bad interpreter: Permission denied'); make the venv from /usr/bin/python3 "
        "(scripts/bootstrap.sh does), or set `python:` in the site config to an interpreter "
        "every user can run"
    )


def ensure_user(name: str) -> pwd.struct_passwd:
    """The account ``name``, created with a home directory (``useradd --create-home``) if missing.

    Raises
    ------
    ValueError
        ``name`` is not a plain lower-case user name.
    NotRootError
        The account is missing and this process cannot create it.
    ClusterError
        ``useradd`` failed; the message quotes its error.
    """
    if not _USER_NAME.fullmatch(name):
        raise ValueError(f"not a plain user name: {name!r} (lower case, digits, _ and -)")
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    if os.geteuid() != 0:
        raise NotRootError(f"creating the user {name} needs root")
    res = subprocess.run(
        ["useradd", "--create-home", "--shell", "/bin/bash", name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if res.returncode != 0:
        raise ClusterError(f"useradd {name} failed: {res.stderr.strip()}")
    return pwd.getpwnam(name)
