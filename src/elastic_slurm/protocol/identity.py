"""Who sends a message: the job's secret and the sender's Unix user, proven with MUNGE.

Every Slurm cluster runs MUNGE, the service Slurm itself uses to prove a user's identity from
one host to another: ``munge -n`` makes a credential that carries the caller's UID, and only
the cluster's ``unmunge`` (same key) can decode it, once (a replayed credential is refused)
and for five minutes. A message that changes something carries a fresh credential; the
controller decodes it and compares the user with Slurm's record of the job's user.
"""

from __future__ import annotations

import hmac
import os
import pwd
import re
import subprocess
from pathlib import Path

from elastic_slurm.errors import ElasticSlurmError

#: Overrides the MUNGE socket (else: ``AuthInfo=socket=`` of slurm.conf, else MUNGE's default).
SOCKET_ENV = "ELASTIC_SLURM_MUNGE_SOCKET"


class IdentityError(ElasticSlurmError):
    """A credential could not be made or was refused (the message says why)."""


def munge_socket() -> str | None:
    """The MUNGE socket Slurm uses here, or ``None`` for MUNGE's default.

    Looked up in :data:`SOCKET_ENV`, then in the ``AuthInfo`` line of the slurm.conf that
    ``SLURM_CONF`` names (default ``/etc/slurm/slurm.conf``).
    """
    if os.environ.get(SOCKET_ENV):
        return os.environ[SOCKET_ENV]
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    try:
        text = conf.read_text()
    except OSError:
        return None
    m = re.search(r"^\s*AuthInfo\s*=\s*\S*?socket=([^,\s]+)", text, re.MULTILINE | re.IGNORECASE)
    return m.group(1) if m else None


def _run(argv: list[str], socket: str | None, timeout_s: float, stdin: str | None = None) -> str:
    """Run a MUNGE command on ``socket``; its stdout, or :class:`IdentityError` with why."""
    argv = [*argv, *(["--socket", socket] if socket else [])]
    try:
        out = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IdentityError(f"cannot run {argv[0]}: {exc}") from exc
    if out.returncode != 0:
        what = "MUNGE credential refused" if argv[0] == "unmunge" else f"{argv[0]} failed"
        status = re.search(r"STATUS:\s*(.+)", out.stdout)  # e.g. "Replayed credential (15)"
        why = status.group(1).strip() if status else out.stderr.strip() or out.stdout.strip()
        raise IdentityError(f"{what}: {why}")
    return out.stdout


def make_credential(socket: str | None = None, timeout_s: float = 10.0) -> str:
    """A fresh MUNGE credential of the calling user (``munge -n``).

    Raises
    ------
    IdentityError
        ``munge`` is missing or failed (the message has its error).
    """
    return _run(["munge", "-n"], socket or munge_socket(), timeout_s).strip()


def credential_user(credential: str, socket: str | None = None, timeout_s: float = 10.0) -> str:
    """Decode a MUNGE credential; return the name of the user who made it.

    Raises
    ------
    IdentityError
        The credential is invalid, expired, replayed, or from another MUNGE key, or its UID
        has no user name here.
    """
    argv = ["unmunge", "--keys=STATUS,UID", "--output=/dev/null"]
    out = _run(argv, socket, timeout_s, stdin=credential)
    m = re.search(r"UID:.*\((\d+)\)", out)  # "UID: alice (1000)"
    if m is None:
        raise IdentityError(f"unmunge gave no UID: {out!r}")
    uid = int(m.group(1))
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError as exc:
        raise IdentityError(f"UID {uid} of the credential has no user name here") from exc


def same_secret(given: str | None, stored: str | None) -> bool:
    """Compare secrets in constant time; a missing one never matches."""
    if not given or not stored:
        return False
    return hmac.compare_digest(given.encode(), stored.encode())
