"""Run commands on a login node over SSH, with paramiko.

One connection is opened on first use and reused for every command (each command is a new
channel on it); it is reopened if the server dropped it. The server's host key must be in the
``known_hosts`` file of the site config: unknown and changed keys are refused. Login is by key
only (no agent, no password, no keys searched for).

The remote side runs commands through the login shell of the account, as ``ssh`` does; every
word of the argument list is quoted with :func:`shlex.join`, so job names, paths and arguments
holding quotes, semicolons, ``$()``, spaces or newlines reach the command unchanged and cannot
inject anything. Environment variables are passed with ``env NAME=VALUE ...``, quoted the same
way (servers usually refuse ``SendEnv`` variables).
"""

from __future__ import annotations

import logging
import re
import select
import shlex
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import paramiko

from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.config.schema import SSHTransportConfig
from elastic_slurm.errors import ConfigError, SlurmCommandError

log = logging.getLogger(__name__)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def remote_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The command line the remote shell receives for ``argv`` (and ``env``).

    >>> remote_command(["squeue", "--name", "a b; rm -rf /"])
    "squeue --name 'a b; rm -rf /'"
    >>> remote_command(["sinfo"], {"SLURM_CONF": "/etc/x y"})
    "env 'SLURM_CONF=/etc/x y' sinfo"

    Raises
    ------
    ValueError
        An environment variable name that is not a shell identifier.
    """
    words = [str(a) for a in argv]
    if env:
        for name in env:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"environment variable name {name!r} is not valid")
        words = ["env", *(f"{k}={v}" for k, v in env.items()), *words]
    return shlex.join(words)


class SSHTransport(Transport):
    """Commands on a login node over one reused SSH connection.

    Parameters
    ----------
    cfg
        Host, port, user, key file, known_hosts file and timeouts (seconds).
    env
        Variables set for every command, in addition to ``cfg.remote_env``.

    Raises
    ------
    ConfigError
        At first use: the key file or known_hosts file cannot be read, or the host key is
        unknown or changed (the message says how to add it).
    """

    is_local = False

    def __init__(self, cfg: SSHTransportConfig, env: Mapping[str, str] | None = None) -> None:
        self.cfg = cfg
        self.env = {**cfg.remote_env, **(env or {})}
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()
        self.connections = 0  # how many times a connection was opened (tests check reuse)

    def _connect(self) -> paramiko.SSHClient:
        known_hosts = Path(self.cfg.known_hosts).expanduser()
        key_file = Path(self.cfg.key_file).expanduser()
        client = paramiko.SSHClient()
        try:
            client.load_host_keys(str(known_hosts))
        except OSError as exc:
            raise ConfigError(f"cannot read known_hosts file {known_hosts}: {exc}") from exc
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        target = f"{self.cfg.user}@{self.cfg.host}:{self.cfg.port}"
        try:
            client.connect(
                self.cfg.host,
                port=self.cfg.port,
                username=self.cfg.user,
                key_filename=str(key_file),
                timeout=self.cfg.connect_timeout_s,
                banner_timeout=self.cfg.connect_timeout_s,
                auth_timeout=self.cfg.connect_timeout_s,
                allow_agent=False,
                look_for_keys=False,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise ConfigError(
                f"the host key of {target} does not match the one in {known_hosts}: refusing "
                "to connect (if the login node's key really changed, update that file)"
            ) from exc
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                raise ConfigError(
                    f"the host key of {target} is not in {known_hosts}: refusing to connect; "
                    f"check the key and add it (ssh-keyscan -p {self.cfg.port} {self.cfg.host})"
                ) from exc
            raise SlurmCommandError(
                ["ssh", target],
                None,
                "",
                str(exc),
                transient=True,
                reason="the SSH connection failed",
            ) from exc
        except FileNotFoundError as exc:
            client.close()
            raise ConfigError(f"SSH key file {key_file} does not exist") from exc
        except OSError as exc:
            client.close()
            raise SlurmCommandError(
                ["ssh", target],
                None,
                "",
                str(exc),
                transient=True,
                reason="cannot reach the login node",
            ) from exc
        self.connections += 1
        log.debug("connected to %s", target)
        return client

    def _session(self) -> paramiko.Channel:
        with self._lock:
            transport = self._client.get_transport() if self._client else None
            if transport is None or not transport.is_active():
                if self._client is not None:
                    self._client.close()
                self._client = self._connect()
                transport = self._client.get_transport()
            assert transport is not None
            return transport.open_session(timeout=self.cfg.connect_timeout_s)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> Completed:
        """Run ``argv`` on the login node; see :meth:`Transport.run`."""
        argv = tuple(str(a) for a in argv)
        timeout = self.cfg.command_timeout_s if timeout_s is None else timeout_s
        command = remote_command(argv, {**self.env, **(env or {})})
        log.debug("ssh %s: %s", self.cfg.host, command)
        t0 = time.monotonic()
        chan = self._session()
        try:
            chan.exec_command(command)
            if input_text is not None:
                chan.sendall(input_text.encode())
            chan.shutdown_write()
            out, err = self._collect(chan, argv, t0 + timeout, timeout)
            code = chan.recv_exit_status()
        finally:
            chan.close()
        return Completed(argv, code, out, err, time.monotonic() - t0)

    @staticmethod
    def _collect(
        chan: paramiko.Channel, argv: tuple[str, ...], deadline: float, timeout: float
    ) -> tuple[str, str]:
        out, err = bytearray(), bytearray()
        while True:
            got = False
            while chan.recv_ready():
                out += chan.recv(65536)
                got = True
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
                got = True
            # the server may report the exit status before all output has arrived: the
            # output is complete only at end of file
            if chan.eof_received and not chan.recv_ready() and not chan.recv_stderr_ready():
                return out.decode(errors="replace"), err.decode(errors="replace")
            if got:
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SlurmCommandError(
                    argv,
                    None,
                    out.decode(errors="replace"),
                    err.decode(errors="replace"),
                    transient=True,
                    reason=f"timed out after {timeout:g} s over SSH",
                )
            select.select([chan], [], [], min(remaining, 0.05))

    def close(self) -> None:
        """Close the connection (it is reopened on the next command)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
