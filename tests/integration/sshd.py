"""A real OpenSSH server on loopback, with its own host key and one authorized client key."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class SSHServer:
    """A running sshd: where to connect, the client key, and a known_hosts file for it."""

    host: str
    port: int
    user: str
    key_file: Path
    known_hosts: Path
    log: Path
    proc: subprocess.Popen[bytes]
    workdir: Path

    def accepted_logins(self) -> int:
        """How many logins sshd accepted so far (from its log)."""
        return self.log.read_text(errors="replace").count("Accepted publickey")

    def stop(self) -> None:
        """Stop this sshd (by its PID) and remove its files."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_sshd() -> SSHServer:
    """Start sshd on 127.0.0.1 (as root, logging in as root with a fresh key).

    Raises
    ------
    RuntimeError
        sshd is not installed or did not start; the message quotes its log.
    """
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not Path(sshd).exists():
        raise RuntimeError("sshd is not installed (apt-get install openssh-server)")
    workdir = Path(tempfile.mkdtemp(prefix="es-sshd-"))
    os.chmod(workdir, 0o700)
    for name in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(workdir / name)], check=True
        )
    (workdir / "authorized_keys").write_text((workdir / "client_key.pub").read_text())
    os.chmod(workdir / "authorized_keys", 0o600)
    port = _free_port()
    config = workdir / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {workdir / 'host_key'}",
                f"AuthorizedKeysFile {workdir / 'authorized_keys'}",
                f"PidFile {workdir / 'sshd.pid'}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "UsePAM no",
                "StrictModes no",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory
    log = workdir / "sshd.log"
    proc = subprocess.Popen(
        [sshd, "-D", "-e", "-f", str(config)], stdout=open(log, "wb"), stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        raise RuntimeError(f"sshd did not listen on port {port}:\n{log.read_text()}")
    host_pub = (workdir / "host_key.pub").read_text().split()
    known_hosts = workdir / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    return SSHServer(
        "127.0.0.1", port, "root", workdir / "client_key", known_hosts, log, proc, workdir
    )


def host_block(server: SSHServer, alias: str, **options: object) -> str:
    """A ``Host`` block of an OpenSSH client config that reaches ``server`` as ``alias``.

    ``options`` are more keywords (``ProxyJump="jump"``); ``None`` leaves a default one out.
    """
    opts: dict[str, object] = {
        "HostName": server.host,
        "Port": server.port,
        "User": server.user,
        "IdentityFile": server.key_file,
        "UserKnownHostsFile": server.known_hosts,
        **options,
    }
    body = "".join(f"    {k} {v}\n" for k, v in opts.items() if v is not None)
    return f"Host {alias}\n{body}"
