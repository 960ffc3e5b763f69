"""Who sends a message: the job's secret and the sender's Unix user, proven with MUNGE.

Every Slurm cluster runs MUNGE, the service Slurm itself uses to prove a user's identity from
one host to another: ``munge`` makes a credential that carries the caller's UID and a payload,
and only the cluster's ``unmunge`` (same key) can decode it, once (a replayed credential is
refused) and for five minutes. A message that changes something carries a fresh credential
whose payload is the digest of that very message (:func:`request_digest`: method, path, job
and body), so a credential captured from one message cannot authenticate another; the
controller decodes it, compares the payload with the message it came with, and the user with
Slurm's record of the job's user.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pwd
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from elastic_slurm.errors import ElasticSlurmError

#: Overrides the MUNGE socket (else: ``AuthInfo=socket=`` of slurm.conf, else MUNGE's default).
SOCKET_ENV = "ELASTIC_SLURM_MUNGE_SOCKET"
#: Prefix of every request digest (a credential made for something else never matches).
DIGEST_DOMAIN = "elastic-slurm/v1"


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


def request_digest(method: str, path: str, job_id: int, body: bytes) -> str:
    """The digest a message's credential carries: SHA-256 of method, path, job and body.

    Parameters
    ----------
    method
        The HTTP method (``POST``).
    path
        The URL path, without the query (``/v1/jobs/12/register``).
    job_id
        The job the message is about.
    body
        The body's bytes exactly as sent.

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    body_hash = hashlib.sha256(body).hexdigest()
    text = f"{DIGEST_DOMAIN}\n{method.upper()}\n{path}\n{int(job_id)}\n{body_hash}"
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Credential:
    """A decoded MUNGE credential: who made it (``user``) and the ``payload`` it carries."""

    user: str
    payload: str


def make_credential(socket: str | None = None, timeout_s: float = 10.0, payload: str = "") -> str:
    """A fresh MUNGE credential of the calling user, carrying ``payload`` (``munge``).

    Parameters
    ----------
    socket
        The MUNGE socket (``None``: :func:`munge_socket`).
    timeout_s
        Seconds ``munge`` may take.
    payload
        What the credential carries (a :func:`request_digest`); empty: none (``munge -n``).

    Raises
    ------
    IdentityError
        ``munge`` is missing or failed (the message has its error).
    """
    argv = ["munge"] if payload else ["munge", "-n"]
    return _run(argv, socket or munge_socket(), timeout_s, stdin=payload or None).strip()


def decode_credential(
    credential: str, socket: str | None = None, timeout_s: float = 10.0
) -> Credential:
    """Decode a MUNGE credential (``unmunge``): the user who made it and its payload.

    Raises
    ------
    IdentityError
        The credential is invalid, expired, replayed, or from another MUNGE key, or its UID
        has no user name here.
    """
    out = _run(["unmunge", "--keys=STATUS,UID"], socket, timeout_s, stdin=credential)
    metadata, _, payload = out.partition("\n\n")  # metadata lines, a blank line, the payload
    m = re.search(r"^UID:.*\((\d+)\)\s*$", metadata, re.MULTILINE)  # "UID: alice (1000)"
    if m is None:
        raise IdentityError(f"unmunge gave no UID: {metadata[:200]!r}")
    uid = int(m.group(1))
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError as exc:
        raise IdentityError(f"UID {uid} of the credential has no user name here") from exc
    return Credential(user, payload)


def same_secret(given: str | None, stored: str | None) -> bool:
    """Compare secrets in constant time; a missing one never matches."""
    if not given or not stored:
        return False
    return hmac.compare_digest(given.encode(), stored.encode())
