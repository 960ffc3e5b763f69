"""Run commands on a login node over SSH, with paramiko, reached the way ``ssh`` reaches it.

Where to connect and how to log in (:func:`~.openssh.resolve_target`)
    The site config's ``transport`` section names the host; the OpenSSH client configuration
    (``~/.ssh/config`` then ``/etc/ssh/ssh_config``, or only the file the site names, as with
    ``ssh -F``; ``Include`` lines followed; parsed by :class:`paramiko.SSHConfig`) is applied to
    that name as ``ssh`` applies it: a ``Host`` alias gives ``HostName``, ``User``, ``Port``,
    ``IdentityFile``, ``IdentitiesOnly``, ``IdentityAgent none``, ``UserKnownHostsFile``,
    ``GlobalKnownHostsFile``, ``HostKeyAlias``, ``ProxyJump`` and ``ProxyCommand`` (``ProxyJump``
    wins when a host has both). A value the site config gives wins over the file, as an
    ``ssh`` command-line option does (``port`` only when the site config writes it: its
    default 22 does not hide the file's ``Port``).

Login
    The site's ``key_file`` (it must exist), then the config's ``IdentityFile`` entries that
    exist, then the keys of the running ``ssh-agent`` (``SSH_AUTH_SOCK``, :class:`paramiko.Agent`;
    not with ``IdentitiesOnly yes`` or ``IdentityAgent none``); when no key file is named at
    all, ``~/.ssh/id_*`` as ``ssh`` does. No password and no keyboard-interactive login.

Jump hosts
    ``ProxyJump host1,host2`` (each ``[user@]host[:port]``, each looked up in the same config):
    the transport logs in to each hop and opens a ``direct-tcpip`` channel from it to the next,
    as ``ssh -J`` does; a hop's own ``ProxyJump`` is followed for the first hop only (as ``ssh``
    does), at most :data:`~.openssh.MAX_HOPS` deep. Without ``ProxyJump``, a ``ProxyCommand``
    (for example ``ssh -W %h:%p gateway``) is started with :class:`paramiko.ProxyCommand` (split
    into words, no shell) and the connection runs over its standard input and output; one that
    exits
    before the login is a one-line error quoting the last lines it printed, not retried.

Host keys (:class:`~.openssh.KnownHosts`)
    Every hop's host key must be in a known_hosts file as OpenSSH reads it: the site's
    ``known_hosts`` (it must be readable) or else the config's ``UserKnownHostsFile``
    (default ``~/.ssh/known_hosts``, ``~/.ssh/known_hosts2``), plus the global files
    (``/etc/ssh/ssh_known_hosts``); hashed names (``|1|...``), patterns (``*``, ``?``,
    negation with ``!``), ``[host]:port`` for other ports than 22, and ``@revoked`` lines are
    honoured (``@cert-authority`` lines are skipped: paramiko checks no host certificates). An
    unknown, changed or revoked key is refused, never added.

Failures are one line and only the passing ones are retried
    A refused connection, an unreachable host or network, a host name DNS does not know,
    refused keys or host keys raise at once, without a retry: :class:`~elastic_slurm.errors.
    ConfigError` when the site or SSH config must change (unknown host name, authentication,
    host keys, missing files), :class:`~elastic_slurm.errors.SlurmCommandError` with
    ``transient=False`` when the login node refused or cannot be routed to. A connection that
    times out, a handshake the server cut and a temporary DNS failure (``EAI_AGAIN``) are
    ``transient=True`` (the backend retries them within the site's ``slurm_retry_s``). paramiko
    logs its own failures with tracebacks: its ``paramiko`` logger is set to ``CRITICAL`` unless
    the program set its level itself.

Commands
    One connection is opened on first use and reused for every command (each command is a new
    channel on it); it is reopened if the server dropped it. The remote side runs commands
    through the login shell of the account, as ``ssh`` does; every word of the argument list is
    quoted with :func:`shlex.join`, so job names, paths and arguments holding quotes,
    semicolons, ``$()``, spaces or newlines reach the command unchanged and cannot inject
    anything. Environment variables are passed with ``env NAME=VALUE ...``, quoted the same way
    (servers usually refuse ``SendEnv`` variables).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import paramiko

from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.adapter.transport.openssh import (
    MAX_HOPS,
    KnownHosts,
    SSHTarget,
    host_matches,
    resolve_target,
)
from elastic_slurm.config.schema import SSHTransportConfig
from elastic_slurm.errors import ConfigError, SlurmCommandError

__all__ = [
    "MAX_HOPS",
    "KnownHosts",
    "SSHTarget",
    "SSHTransport",
    "host_matches",
    "remote_command",
    "resolve_target",
]

log = logging.getLogger(__name__)

_PARAMIKO_LOG = logging.getLogger("paramiko")
if _PARAMIKO_LOG.level == logging.NOTSET:
    # paramiko logs every failure it raises, one record per traceback line, at ERROR: the
    # caller gets it as one error of ours instead
    _PARAMIKO_LOG.setLevel(logging.CRITICAL)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: errno values of a connection that the host refused or cannot be routed to: not retried.
_REFUSED = {
    errno.ECONNREFUSED: "connection refused",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
}


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


# ---------------------------------------------------------------------------- transport
class _CheckKnownHosts(paramiko.MissingHostKeyPolicy):
    """Accept a server key only when known_hosts has it for the target and does not revoke it.

    paramiko's client is given no host keys of its own, so every key comes here.
    """

    def __init__(self, target: SSHTarget, known: KnownHosts, files: str) -> None:
        self.target, self.known, self.files = target, known, files

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: Any) -> None:
        name = self.target.host_key_name
        if self.known.is_revoked(key):
            raise ConfigError(
                f"the host key of {self.target.label} is marked @revoked in {self.files}: "
                "refusing to connect"
            )
        known = self.known.lookup(name)
        if any(k.asbytes() == key.asbytes() for k in known):
            return
        if known:
            raise ConfigError(
                f"the host key of {self.target.label} does not match the one for {name} in "
                f"{self.files}: refusing to connect (if the login node's key really changed, "
                "update that file)"
            )
        scan = f"ssh-keyscan -p {self.target.port} {self.target.hostname}"
        raise ConfigError(
            f"the host key of {self.target.label} is not in {self.files} (looked up as "
            f"{name}): refusing to connect; check the key and add it ({scan})"
        )


def _prefer_known_key_types(known: list[paramiko.PKey]) -> Callable[..., paramiko.Transport]:
    """A transport factory that asks first for the host key types known_hosts holds.

    As ``ssh`` does: a server with several host keys then shows the one that can be checked.
    """
    wanted: list[str] = []
    for key in known:
        name = key.get_name()
        wanted += ["rsa-sha2-512", "rsa-sha2-256", name] if name == "ssh-rsa" else [name]

    def factory(sock: Any, **kwargs: Any) -> paramiko.Transport:
        t = paramiko.Transport(sock, **kwargs)
        opts = t.get_security_options()
        types = list(opts.key_types)
        first = [k for k in wanted if k in types]
        if first:
            opts.key_types = first + [k for k in types if k not in first]
        return t

    return factory


class _ProxyCommand(paramiko.ProxyCommand):
    """paramiko's ProxyCommand, whose ``recv`` says end of file as a socket does.

    paramiko's own ``recv`` loops on an output that has ended until its timeout (the banner
    timeout: 10 s by default), so a ProxyCommand that exits at once looked like a slow login
    node. Returning what was read (``b""`` at the end) lets paramiko see the end at once.
    """

    def recv(self, size: int) -> bytes:
        """Up to ``size`` bytes of the command's output; ``b""`` once it has ended.

        Raises
        ------
        TimeoutError
            Nothing arrived within ``self.timeout`` seconds (``socket.timeout``).
        paramiko.ProxyCommandFailure
            Reading the command's output failed.
        """
        fd = self.process.stdout.fileno()
        try:
            ready, _, _ = select.select([fd], [], [], self.timeout)
            if not ready:
                raise TimeoutError(f"no output from the ProxyCommand in {self.timeout} s")
            return os.read(fd, size)  # b"" at the end of its output
        except OSError as exc:
            if isinstance(exc, TimeoutError):
                raise
            raise paramiko.ProxyCommandFailure(" ".join(self.cmd), exc.strerror) from exc


class SSHTransport(Transport):
    """Commands on a login node over one reused SSH connection (see the module docstring).

    Parameters
    ----------
    cfg
        Host (a name, an address or a ``Host`` alias of the SSH config), port, user, key file,
        known_hosts file and timeouts (seconds). ``user``, ``key_file`` and ``known_hosts`` may
        be ``None`` (then ``~/.ssh/config`` and OpenSSH's defaults decide).
    env
        Variables set for every command, in addition to ``cfg.remote_env``.
    ssh_config
        The OpenSSH client config to apply (default: ``cfg.ssh_config`` if the schema has it,
        else ``~/.ssh/config`` when it exists).

    Raises
    ------
    ConfigError
        At first use: a named key file, known_hosts file or SSH config cannot be read, the
        host name is unknown to DNS, no key is accepted, or a host key is unknown, changed or
        revoked (the message says how to fix it). Not retried.
    SlurmCommandError
        At first use: the connection was refused or cannot be routed (``transient=False``),
        or timed out or was cut during the handshake (``transient=True``).
    """

    is_local = False

    def __init__(
        self,
        cfg: SSHTransportConfig,
        env: Mapping[str, str] | None = None,
        *,
        ssh_config: Path | str | None = None,
    ) -> None:
        self.cfg = cfg
        self.env = {**cfg.remote_env, **(env or {})}
        self.ssh_config = ssh_config if ssh_config is not None else getattr(cfg, "ssh_config", None)
        self._client: paramiko.SSHClient | None = None
        self._jump_clients: list[paramiko.SSHClient] = []
        self._lock = threading.Lock()
        self.connections = 0  # how many times a connection was opened (tests check reuse)
        self.jump_logins = 0  # how many logins to jump hosts were made

    def target(self) -> SSHTarget:
        """Where the commands go and how to log in there (:func:`resolve_target`).

        Raises
        ------
        ConfigError
            See :func:`resolve_target`.
        """
        explicit_port = "port" in getattr(self.cfg, "model_fields_set", {"port"})
        return resolve_target(
            self.cfg.host,
            port=self.cfg.port if explicit_port else None,
            user=getattr(self.cfg, "user", None),
            key_file=getattr(self.cfg, "key_file", None),
            known_hosts=getattr(self.cfg, "known_hosts", None),
            ssh_config=self.ssh_config,
        )

    # ------------------------------------------------------------------ connecting
    def _connect(self) -> paramiko.SSHClient:
        target = self.target()
        first = target.jumps[0] if target.jumps else target
        sock: Any = self._proxy(first) if first.proxy_command else None
        try:
            for i, hop in enumerate(target.jumps):
                client = self._login(hop, sock)
                self._jump_clients.append(client)
                self.jump_logins += 1
                nxt = target.jumps[i + 1] if i + 1 < len(target.jumps) else target
                sock = self._tunnel(client, hop, nxt)
            client = self._login(target, sock)
        except BaseException:
            self._close_jumps()
            raise
        self.connections += 1
        via = " via " + ", ".join(h.label for h in target.jumps) if target.jumps else ""
        log.debug("connected to %s%s", target.label, via)
        return client

    @staticmethod
    def _proxy(target: SSHTarget) -> paramiko.ProxyCommand:
        """Start ``target``'s ``ProxyCommand`` (its argument list, no shell)."""
        try:
            return _ProxyCommand(target.proxy_command)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"the ProxyCommand of {target.label} ({target.proxy_command!r}) cannot be "
                f"started: {exc}"
            ) from exc

    def _tunnel(self, client: paramiko.SSHClient, hop: SSHTarget, nxt: SSHTarget) -> Any:
        transport = client.get_transport()
        assert transport is not None
        try:
            return transport.open_channel(
                "direct-tcpip",
                (nxt.hostname, nxt.port),
                ("127.0.0.1", 0),
                timeout=self.cfg.connect_timeout_s,
            )
        except paramiko.ChannelException as exc:
            raise SlurmCommandError(
                ["ssh", "-J", hop.label, nxt.label],
                None,
                "",
                f"{exc.text} (code {exc.code})",
                reason=f"jump host {hop.label} could not connect to {nxt.label}",
            ) from exc
        except paramiko.SSHException as exc:
            raise self._error(nxt, exc, via=hop) from exc

    def _known_hosts(self, target: SSHTarget) -> tuple[KnownHosts, str]:
        known = KnownHosts()
        read = []
        if target.required_known_hosts is not None:
            try:
                known.load(target.required_known_hosts)
            except OSError as exc:
                raise ConfigError(
                    f"cannot read known_hosts file {target.required_known_hosts}: {exc}"
                ) from exc
            read.append(target.required_known_hosts)
        for path in (*target.user_known_hosts, *target.global_known_hosts):
            if path == target.required_known_hosts:
                continue
            try:
                known.load(path)
                read.append(path)
            except OSError:
                continue  # OpenSSH reads the files that exist
        return known, (", ".join(map(str, read)) or "no known_hosts file")

    def _login(self, target: SSHTarget, sock: Any) -> paramiko.SSHClient:
        if target.required_identity is not None and not target.required_identity.is_file():
            raise ConfigError(f"SSH key file {target.required_identity} does not exist")
        known, files = self._known_hosts(target)
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(_CheckKnownHosts(target, known, files))
        keys = [str(p) for p in target.identity_files if p.is_file()]
        try:
            client.connect(
                target.hostname,
                port=target.port,
                username=target.user,
                key_filename=keys,
                timeout=self.cfg.connect_timeout_s,
                banner_timeout=self.cfg.connect_timeout_s,
                auth_timeout=self.cfg.connect_timeout_s,
                allow_agent=target.agent,
                look_for_keys=target.look_for_keys,
                sock=sock,
                transport_factory=_prefer_known_key_types(known.lookup(target.host_key_name)),
            )
        except BaseException as exc:
            client.close()
            if isinstance(exc, ConfigError | KeyboardInterrupt | SystemExit):
                raise
            if isinstance(exc, paramiko.AuthenticationException):
                raise self._error(target, exc, keys=keys) from exc
            if isinstance(sock, paramiko.ProxyCommand):
                try:  # its output ended: give it a moment to be reaped
                    sock.process.wait(timeout=1.0)
                except Exception:  # noqa: BLE001 - still running: not its failure
                    pass
            if isinstance(sock, paramiko.ProxyCommand) and sock.process.poll() is not None:
                said = (sock.process.stderr.read() or b"").decode(errors="replace").strip()
                raise SlurmCommandError(
                    ["ssh", "-o", f"ProxyCommand={target.proxy_command}", target.label],
                    sock.process.returncode,
                    "",
                    "; ".join(said.splitlines()[-3:]) or "(no output)",
                    reason=f"its ProxyCommand exited with status {sock.process.returncode}",
                ) from exc
            if isinstance(exc, Exception):
                raise self._error(target, exc, keys=keys) from exc
            raise
        return client

    def _error(
        self,
        target: SSHTarget,
        exc: Exception,
        *,
        keys: Sequence[str] = (),
        via: SSHTarget | None = None,
    ) -> Exception:
        """The one-line error of ours for a failed login to ``target``."""
        argv = ["ssh", target.label] if via is None else ["ssh", "-J", via.label, target.label]
        said = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, socket.gaierror):
            if exc.errno == socket.EAI_AGAIN:
                return SlurmCommandError(
                    argv, None, "", said, transient=True, reason="DNS did not answer for now"
                )
            return ConfigError(
                f"unknown host name {target.hostname!r} for {target.label}: {exc.strerror} "
                "(check the host in the site config or HostName in ~/.ssh/config)"
            )
        if isinstance(exc, paramiko.AuthenticationException):
            tried = [*keys]
            if target.agent:
                tried.append(_agent_keys())
            if target.look_for_keys:
                tried.append("~/.ssh/id_*")
            hint = (
                " (the key is encrypted: load it into ssh-agent with ssh-add)"
                if isinstance(exc, paramiko.PasswordRequiredException)
                else ""
            )
            return ConfigError(
                f"{target.label} refused the login: no key was accepted (tried "
                f"{', '.join(tried) or 'no key'}){hint}: {said}"
            )
        if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
            codes = {e.errno for e in exc.errors.values()}
            what = next((_REFUSED[c] for c in codes if c in _REFUSED), "connection failed")
            return SlurmCommandError(
                argv,
                None,
                "",
                f"is sshd running on {target.hostname}, and does it listen on port {target.port}?",
                reason=f"{what} by {target.hostname} port {target.port}",
            )
        if isinstance(exc, OSError) and exc.errno in _REFUSED:
            return SlurmCommandError(argv, None, "", said, reason=_REFUSED[exc.errno])
        if isinstance(exc, paramiko.SSHException) and "No authentication methods" in said:
            return ConfigError(
                f"no key to log in to {target.label} with: name one (key_file in the site "
                "config, IdentityFile in ~/.ssh/config) or start ssh-agent and ssh-add it"
            )
        if isinstance(exc, TimeoutError | socket.timeout):
            reason = (
                f"connecting to {target.label} timed out after {self.cfg.connect_timeout_s:g} s"
            )
        elif isinstance(exc, paramiko.SSHException):
            reason = f"the SSH handshake with {target.label} failed"
        elif isinstance(exc, OSError):
            reason = f"cannot reach {target.label}"
        else:
            reason = f"the SSH connection to {target.label} failed ({type(exc).__name__})"
        return SlurmCommandError(argv, None, "", said, transient=True, reason=reason)

    def _close_jumps(self) -> None:
        for client in reversed(self._jump_clients):
            client.close()
        self._jump_clients.clear()

    def _session(self) -> paramiko.Channel:
        with self._lock:
            transport = self._client.get_transport() if self._client else None
            if transport is None or not transport.is_active():
                if self._client is not None:
                    self._client.close()
                    self._client = None
                self._close_jumps()
                self._client = self._connect()
                transport = self._client.get_transport()
            assert transport is not None
            return transport.open_session(timeout=self.cfg.connect_timeout_s)

    # ------------------------------------------------------------------ running
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
        """Close the connection and those to jump hosts (reopened on the next command)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
            self._close_jumps()


def _agent_keys() -> str:
    """What the ssh-agent offered, for messages: ``the ssh-agent's 2 key(s)``."""
    try:
        agent = paramiko.Agent()
    except paramiko.SSHException as exc:
        return f"no ssh-agent ({exc})"
    try:
        n = len(agent.get_keys())
    finally:
        agent.close()
    return f"the ssh-agent's {n} key(s)" if n else "no ssh-agent key (SSH_AUTH_SOCK unset or empty)"
