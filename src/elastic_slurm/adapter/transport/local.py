"""Run commands on this machine with :mod:`subprocess` (no shell)."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Mapping, Sequence

from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.errors import SlurmCommandError

log = logging.getLogger(__name__)


class LocalTransport(Transport):
    """Run commands as subprocesses of this process.

    Parameters
    ----------
    env
        Variables added to this process's environment for every command (for example
        ``SLURM_CONF``).
    default_timeout_s
        Timeout (seconds) of commands that do not give their own.
    """

    def __init__(
        self, env: Mapping[str, str] | None = None, default_timeout_s: float = 30.0
    ) -> None:
        self.env = dict(env or {})
        self.default_timeout_s = default_timeout_s

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> Completed:
        """Run ``argv`` locally; see :meth:`Transport.run`."""
        argv = tuple(str(a) for a in argv)
        full_env = {**os.environ, **self.env, **(env or {})}
        timeout = self.default_timeout_s if timeout_s is None else timeout_s
        log.debug("run %s", argv)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                env=full_env,
                timeout=timeout,
                input=input_text,
                check=False,
            )
        except FileNotFoundError as exc:
            raise SlurmCommandError(
                argv, None, "", str(exc), reason=f"{argv[0]} is not installed or not on PATH"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout if isinstance(exc.stdout, str) else ""
            err = exc.stderr if isinstance(exc.stderr, str) else ""
            raise SlurmCommandError(
                argv, None, out, err, transient=True, reason=f"timed out after {timeout:g} s"
            ) from exc
        return Completed(argv, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)
