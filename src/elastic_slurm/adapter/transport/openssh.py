"""The OpenSSH client's own files, read as ``ssh`` reads them: its configuration and known_hosts.

* :func:`resolve_target`: where a host name or ``Host`` alias leads and how to log in there,
  from ``~/.ssh/config`` then ``/etc/ssh/ssh_config`` (or one named file, as ``ssh -F``), with
  ``Include`` lines followed (paramiko's :class:`paramiko.SSHConfig` parses the rest but
  ignores them) and ``ProxyJump`` chains resolved hop by hop.
* :class:`KnownHosts`: host keys matched as OpenSSH matches them (hashed names, patterns,
  negation, ``[host]:port``, ``@revoked``).

Pure file reading, no connection: :mod:`.ssh` connects with what these return.
"""

from __future__ import annotations

import getpass
import glob
import hmac
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import paramiko
from paramiko.hostkeys import HostKeyEntry, InvalidHostKey

from elastic_slurm.errors import ConfigError

#: The OpenSSH client configuration read when the site config names none.
DEFAULT_SSH_CONFIG = "~/.ssh/config"
#: The system-wide one, read after it (as ``ssh`` does unless given ``-F``).
SYSTEM_SSH_CONFIG = "/etc/ssh/ssh_config"
#: ``UserKnownHostsFile`` and ``GlobalKnownHostsFile`` defaults of OpenSSH.
USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
#: How many jump hosts a chain may have (a ``ProxyJump`` loop in a config is refused).
MAX_HOPS = 8


# ---------------------------------------------------------------------------- known hosts
def _pattern(pattern: str) -> re.Pattern[str]:
    """An OpenSSH host pattern (``*`` any run, ``?`` one character) as a regex."""
    return re.compile(
        "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern),
        re.IGNORECASE,
    )


def host_matches(name: str, patterns: Sequence[str]) -> bool:
    """Whether a known_hosts line's host field (split at commas) names ``name``.

    ``name`` is ``host`` for port 22, else ``[host]:port``, as OpenSSH looks it up. A hashed
    entry (``|1|salt|hash``) matches when ``name`` hashes to it; a negated pattern (``!p``)
    that matches rules the line out.

    >>> host_matches("login1.hpc.org", ["*.hpc.org", "!login9.hpc.org"])
    True
    >>> host_matches("[10.0.0.1]:2222", ["10.0.0.1"])
    False
    """
    hit = False
    for p in patterns:
        if p.startswith("|1|"):
            hashed = paramiko.HostKeys.hash_host(name, p)
            hit = hit or hmac.compare_digest(hashed.encode(), p.encode())
            continue
        negated = p.startswith("!")
        if _pattern(p[1:] if negated else p).fullmatch(name):
            if negated:
                return False
            hit = True
    return hit


class KnownHosts:
    """Host keys from OpenSSH ``known_hosts`` files, matched as OpenSSH matches them.

    Lines are parsed by :meth:`paramiko.hostkeys.HostKeyEntry.from_line`; lines it cannot read
    (unknown key types, garbage) are skipped, as OpenSSH skips them. ``@revoked`` keys are
    refused for every host; ``@cert-authority`` lines are skipped.
    """

    def __init__(self) -> None:
        self._entries: list[tuple[list[str], paramiko.PKey]] = []
        self._revoked: list[paramiko.PKey] = []

    def load(self, path: Path) -> None:
        """Add the keys of one file.

        Raises
        ------
        OSError
            The file cannot be read.
        """
        for line in path.read_text(errors="replace").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            marker = ""
            if line.startswith("@"):
                marker, _, line = line.partition(" ")
                line = line.strip()
            try:
                entry = HostKeyEntry.from_line(line)
            except (paramiko.SSHException, InvalidHostKey, ValueError):
                continue
            if entry is None or entry.key is None:
                continue
            if marker == "@revoked":
                self._revoked.append(entry.key)
            elif not marker:
                self._entries.append((list(entry.hostnames), entry.key))

    def lookup(self, name: str) -> list[paramiko.PKey]:
        """The keys known for ``name`` (``host``, or ``[host]:port`` for another port than 22)."""
        return [key for names, key in self._entries if host_matches(name, names)]

    def is_revoked(self, key: paramiko.PKey) -> bool:
        """Whether ``key`` is marked ``@revoked``."""
        return any(key.asbytes() == r.asbytes() for r in self._revoked)


# ---------------------------------------------------------------------------- targets
@dataclass(frozen=True)
class SSHTarget:
    """One SSH server to log in to, after the site config and ``~/.ssh/config`` were applied.

    ``jumps`` are the hosts to pass through first, in order (``ProxyJump``); without them,
    ``proxy_command`` is the command whose standard input and output reach the server
    (``ProxyCommand``, tokens already expanded).
    """

    name: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[Path, ...] = ()
    required_identity: Path | None = None
    user_known_hosts: tuple[Path, ...] = ()
    required_known_hosts: Path | None = None
    global_known_hosts: tuple[Path, ...] = ()
    host_key_alias: str | None = None
    agent: bool = True
    look_for_keys: bool = False
    jumps: tuple[SSHTarget, ...] = field(default=())
    proxy_command: str | None = None

    @property
    def label(self) -> str:
        """``user@host:port`` (and the alias it came from), for messages."""
        alias = f" (Host {self.name})" if self.name != self.hostname else ""
        return f"{self.user}@{self.hostname}:{self.port}{alias}"

    @property
    def host_key_name(self) -> str:
        """The name its host key is looked up under in known_hosts."""
        name = self.host_key_alias or self.hostname
        return name if self.port == 22 else f"[{name}]:{self.port}"


def _split_hop(spec: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` or ``ssh://[user@]host[:port]`` of a ``ProxyJump`` entry.

    >>> _split_hop("alice@gw.example.org:2222")
    ('alice', 'gw.example.org', 2222)

    Raises
    ------
    ConfigError
        The entry cannot be read.
    """
    try:
        parts = urlsplit(spec if "://" in spec else f"ssh://{spec}")
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"ProxyJump entry {spec!r} cannot be read: {exc}") from exc
    if parts.scheme != "ssh" or not parts.hostname:
        raise ConfigError(f"ProxyJump entry {spec!r} is not [user@]host[:port]")
    return parts.username, parts.hostname, port


_INCLUDE = re.compile(r"\s*include[\s=]+(.+)", re.IGNORECASE)
_BLOCK = re.compile(r"\s*(host|match)[\s=]", re.IGNORECASE)
#: How deep ``Include`` may nest (OpenSSH's limit).
MAX_INCLUDE_DEPTH = 16


def _inline_includes(path: Path, base: Path, depth: int = 0) -> str:
    """The text of an OpenSSH config with its ``Include`` lines replaced by the files named.

    paramiko's parser ignores ``Include``. As OpenSSH does: relative names are taken in
    ``base`` (``~/.ssh`` for the user's config, ``/etc/ssh`` for the system's), globs are
    expanded in sorted order, missing files are skipped, and the ``Host``/``Match`` block the
    ``Include`` stood in goes on after the included text.

    Raises
    ------
    ConfigError
        Includes nest deeper than :data:`MAX_INCLUDE_DEPTH`.
    OSError
        ``path`` cannot be read.
    """
    if depth > MAX_INCLUDE_DEPTH:
        raise ConfigError(f"SSH config Include nests deeper than {MAX_INCLUDE_DEPTH} at {path}")
    out, block = [], ""
    for line in path.read_text(errors="replace").splitlines():
        m = _INCLUDE.match(line)
        if m is None:
            if _BLOCK.match(line):
                block = line
            out.append(line)
            continue
        for word in shlex.split(m.group(1), comments=True):
            pattern = Path(word).expanduser()
            pattern = pattern if pattern.is_absolute() else base / pattern
            for name in sorted(glob.glob(str(pattern))):
                if Path(name).is_file():
                    out.append(_inline_includes(Path(name), base, depth + 1))
                    out.append(block or "Host *")
    return "\n".join(out)


def _read_ssh_config(path: Path | None) -> paramiko.SSHConfig:
    """The given OpenSSH client config (``ssh -F``), or the user's then the system's.

    Raises
    ------
    ConfigError
        The given file does not exist, or a file cannot be read or parsed.
    """
    if path is not None:
        if not path.is_file():
            raise ConfigError(f"SSH client config {path} does not exist")
        files = [(path, path.parent)]
    else:
        user = Path(DEFAULT_SSH_CONFIG).expanduser()
        files = [(user, user.parent), (Path(SYSTEM_SSH_CONFIG), Path(SYSTEM_SSH_CONFIG).parent)]
    texts = []
    for file, base in files:
        if not file.is_file():
            continue
        try:
            texts.append(_inline_includes(file, base))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read SSH client config {file}: {exc}") from exc
    try:
        # each file starts with settings for every host, as if it were read alone
        return paramiko.SSHConfig.from_text("\nHost *\n".join(texts))
    except paramiko.SSHException as exc:
        raise ConfigError(f"cannot read SSH client config {files[0][0]}: {exc}") from exc


def _paths(value: str | list[str] | None, default: Sequence[str]) -> tuple[Path, ...]:
    words = (" ".join(value) if isinstance(value, list) else value or "").split()
    if [w.lower() for w in words] == ["none"]:
        return ()
    return tuple(Path(w).expanduser() for w in (words or default))


def resolve_target(
    host: str,
    *,
    port: int | None = None,
    user: str | None = None,
    key_file: Path | str | None = None,
    known_hosts: Path | str | None = None,
    ssh_config: Path | str | None = None,
    _depth: int = 0,
) -> SSHTarget:
    """Where ``host`` is and how to log in there, as ``ssh`` would find it.

    Parameters
    ----------
    host
        A host name, an address or a ``Host`` alias of the SSH config.
    port, user, key_file, known_hosts
        Values of the site config; each wins over the SSH config's (``None``: not given).
    ssh_config
        The OpenSSH client config to read alone (as ``ssh -F``); ``None`` for
        ``~/.ssh/config`` then ``/etc/ssh/ssh_config``, those that exist.

    Raises
    ------
    ConfigError
        The given SSH config does not exist or cannot be parsed, its ``Port`` is not a number,
        a ``ProxyJump`` entry cannot be read, or jump hosts nest deeper than :data:`MAX_HOPS`.
    """
    if _depth > MAX_HOPS:
        raise ConfigError(f"ProxyJump chain to {host!r} is deeper than {MAX_HOPS} hops (a loop?)")
    path = Path(ssh_config if ssh_config is not None else DEFAULT_SSH_CONFIG).expanduser()
    conf = _read_ssh_config(path if ssh_config is not None else None)
    found: dict[str, Any] = dict(conf.lookup(host))
    try:
        port = port if port is not None else int(found.get("port", 22))
    except ValueError as exc:
        raise ConfigError(f"{path}: Port of Host {host!r} is not a number") from exc
    user = user or found.get("user") or getpass.getuser()
    identities = tuple(Path(p).expanduser() for p in found.get("identityfile", []))
    required = Path(key_file).expanduser() if key_file else None
    if required is not None:
        identities = (required, *[p for p in identities if p != required])
    only = str(found.get("identitiesonly", "no")).lower() == "yes"
    agent = not only and str(found.get("identityagent", "")).lower() != "none"
    user_known = (
        (Path(known_hosts).expanduser(),)
        if known_hosts
        else _paths(found.get("userknownhostsfile"), USER_KNOWN_HOSTS)
    )
    target = SSHTarget(
        name=host,
        hostname=found.get("hostname", host),
        port=port,
        user=user,
        identity_files=identities,
        required_identity=required,
        user_known_hosts=user_known,
        required_known_hosts=Path(known_hosts).expanduser() if known_hosts else None,
        global_known_hosts=_paths(found.get("globalknownhostsfile"), GLOBAL_KNOWN_HOSTS),
        host_key_alias=found.get("hostkeyalias"),
        agent=agent,
        look_for_keys=not identities,
    )
    jump = str(found.get("proxyjump", "")).strip()
    if not jump or jump.lower() == "none":
        command = str(found.get("proxycommand", "")).strip()
        if command and command.lower() != "none":
            return replace(target, proxy_command=command)
        return target
    hops = []
    for i, spec in enumerate(s.strip() for s in jump.split(",")):
        hop_user, hop_host, hop_port = _split_hop(spec)
        hop = resolve_target(
            hop_host, port=hop_port, user=hop_user, ssh_config=ssh_config, _depth=_depth + 1
        )
        # a later hop's own ProxyJump or ProxyCommand is not used: it is reached through the
        # hop before it
        hops.extend(hop.jumps if i == 0 else ())
        hops.append(replace(hop, jumps=(), proxy_command=hop.proxy_command if i == 0 else None))
    if len(hops) > MAX_HOPS:
        raise ConfigError(f"ProxyJump chain to {host!r} has more than {MAX_HOPS} hops")
    return replace(target, jumps=tuple(hops))
