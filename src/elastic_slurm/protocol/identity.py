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


def _socket_args(socket: str | None) -> list[str]:
    return ["--socket", socket] if socket else []


def make_credential(socket: str | None = None, timeout_s: float = 10.0) -> str:
    """A fresh MUNGE credential of the calling user (``munge -n``).

    Raises
    ------
    IdentityError
        ``munge`` is missing or failed (the message has its error).
    """
    socket = socket or munge_socket()
    try:
        out = subprocess.run(
            ["munge", "-n", *_socket_args(socket)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IdentityError(f"cannot make a MUNGE credential: {exc}") from exc
    if out.returncode != 0:
        raise IdentityError(f"munge -n failed: {out.stderr.strip()}")
    return out.stdout.strip()


def credential_user(credential: str, socket: str | None = None, timeout_s: float = 10.0) -> str:
    """Decode a MUNGE credential; return the name of the user who made it.

    Raises
    ------
    IdentityError
        The credential is invalid, expired, replayed, or from another MUNGE key, or its UID
        has no user name here.
    """
    try:
        out = subprocess.run(
            ["unmunge", "--numeric", "--keys=UID", "--output=/dev/null", *_socket_args(socket)],
            input=credential,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IdentityError(f"cannot check the MUNGE credential: {exc}") from exc
    if out.returncode != 0:
        raise IdentityError(f"MUNGE credential refused: {out.stderr.strip() or out.stdout}")
    m = re.search(r"UID:\s*(\d+)", out.stdout)
    if m is None:
        raise IdentityError(f"unmunge gave no UID: {out.stdout!r}")
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
