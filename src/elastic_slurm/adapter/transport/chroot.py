"""A transport that runs commands inside a flavour's chroot (its own Slurm, MPI and Python).

Every command becomes ``chroot ROOT /usr/bin/env -i VAR=VALUE... argv``: the host's
environment is not passed in (its ``PATH`` names the host venv, whose Python does not exist in
the chroot, and ``sbatch`` would export it into jobs); the chroot gets a clean one, the
variables of :attr:`ChrootTransport.env` (``SLURM_CONF`` and so on) and those of each call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.adapter.transport.local import LocalTransport

#: The environment every command in a chroot starts from.
BASE_ENV: dict[str, str] = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
}


def chroot_argv(root: Path, argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """The host command that runs ``argv`` inside the chroot at ``root`` with exactly ``env``.

    Raises
    ------
    ValueError
        A variable name is empty or holds ``=``.
    """
    for name in env:
        if not name or "=" in name:
            raise ValueError(f"environment variable name {name!r} cannot be passed to env(1)")
    return [
        "chroot",
        str(root),
        "/usr/bin/env",
        "-i",
        *(f"{k}={v}" for k, v in env.items()),
        *(str(a) for a in argv),
    ]


class ChrootTransport(Transport):
    """Runs commands inside the chroot at ``root`` (as root, on this machine).

    Parameters
    ----------
    root
        The chroot's root directory.
    env
        Variables every command gets on top of :data:`BASE_ENV` (e.g. ``SLURM_CONF``).
    default_timeout_s
        Seconds before a command is killed when a call gives none.
    """

    #: Commands run on this machine (in the chroot): local checks can be made.
    is_local = True

    def __init__(
        self,
        root: Path,
        env: Mapping[str, str] | None = None,
        default_timeout_s: float = 30.0,
    ) -> None:
        self.root = root
        self.env = {**BASE_ENV, **(env or {})}
        self._local = LocalTransport(default_timeout_s=default_timeout_s)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> Completed:
        """Run ``argv`` inside the chroot; see :meth:`Transport.run`.

        The result's ``argv`` is the command as given (without the chroot prefix).
        """
        full = chroot_argv(self.root, argv, {**self.env, **(env or {})})
        res = self._local.run(full, timeout_s=timeout_s, input_text=input_text)
        return Completed(
            tuple(str(a) for a in argv), res.returncode, res.stdout, res.stderr, res.elapsed_s
        )
