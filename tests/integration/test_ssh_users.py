"""SSH as users have it, against the real sshd on loopback: ~/.ssh/config aliases, ProxyJump,
ssh-agent keys, hashed known_hosts, and failures that are one line at once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import elastic_slurm
from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.ssh import SSHTransport
from elastic_slurm.config.schema import SSHTransportConfig
from elastic_slurm.errors import ConfigError, SlurmCommandError

from .sshd import host_block

#: where the package under test was imported from (the subprocesses use the same)
SRC = Path(elastic_slurm.__file__).resolve().parents[1]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty home directory (no ~/.ssh keys, config or known_hosts) and no ssh-agent."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home


def by_name(host: str, **fields) -> SSHTransportConfig:
    """A site's transport section naming only ``host`` (and ``fields``): the rest from ssh."""
    given = {"user": "x", "key_file": Path("x"), "known_hosts": Path("x"), **fields}
    cfg = SSHTransportConfig(kind="ssh", host=host, **given)
    # until the schema makes them optional, leave user, key file and known_hosts unset
    unset = {k: None for k in ("user", "key_file", "known_hosts") if k not in fields}
    return cfg.model_copy(update=unset)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _our_ports_to(port: int) -> set[int]:
    """Local ports of this process's TCP connections to ``port`` (from ``ss -tnp``)."""
    out = subprocess.run(
        ["ss", "-tnpH", "state", "established", f"( dport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        int(line.split()[2].rsplit(":", 1)[1])
        for line in out.splitlines()
        if f"pid={os.getpid()}," in line
    }


def test_a_host_alias_of_ssh_config_gives_host_port_user_key_and_known_hosts(sshd, home):
    (home / ".ssh" / "config").write_text(host_block(sshd, "es-login"))
    t = SSHTransport(by_name("es-login"))
    try:
        res = t.run(["sh", "-c", 'echo "$(id -un) ${SSH_CONNECTION##* }"'])
        assert res.stdout == f"root {sshd.port}\n"
        assert t.target().label == f"root@127.0.0.1:{sshd.port} (Host es-login)"
    finally:
        t.close()


def test_the_site_config_wins_over_ssh_config_and_another_config_file_can_be_named(
    sshd, home, tmp_path
):
    conf = tmp_path / "my-ssh-config"
    conf.write_text(host_block(sshd, "es-login", User="nobody-such", Port=1))
    cfg = by_name("es-login", user="root", port=sshd.port)
    t = SSHTransport(cfg, ssh_config=conf)
    try:
        assert t.run(["id", "-un"]).stdout == "root\n"
    finally:
        t.close()
    # without the site's port, the file's Port 1 is used: refused at once
    with pytest.raises(SlurmCommandError, match="connection refused"):
        SSHTransport(by_name("es-login", user="root"), ssh_config=conf).run(["true"])


def test_proxyjump_through_the_same_sshd_to_itself(sshd, home):
    (home / ".ssh" / "config").write_text(
        host_block(sshd, "es-jump") + host_block(sshd, "es-behind", ProxyJump="es-jump")
    )
    t = SSHTransport(by_name("es-behind"))
    before = sshd.accepted_logins()
    try:
        for _ in range(3):
            assert t.run(["echo", "behind"]).stdout == "behind\n"
        # the target's sshd saw the login come out of the jump host's sshd (a forwarded
        # connection), not from this client's socket
        res = t.run(["sh", "-c", 'echo "$SSH_CONNECTION"'])
        client_port = int(res.stdout.split()[1])
        assert (t.connections, t.jump_logins) == (1, 1)
        assert sshd.accepted_logins() - before == 2
        ours = _our_ports_to(sshd.port)
        assert client_port not in ours and len(ours) == 1  # one socket: to the jump host
    finally:
        t.close()


def test_proxyjump_written_as_user_host_port(sshd, home):
    (home / ".ssh" / "config").write_text(
        host_block(sshd, "es-behind", ProxyJump=f"root@127.0.0.1:{sshd.port}")
        + f"Host 127.0.0.1\n    IdentityFile {sshd.key_file}\n"
        f"    UserKnownHostsFile {sshd.known_hosts}\n"
    )
    t = SSHTransport(by_name("es-behind"))
    try:
        assert t.run(["echo", "ok"]).stdout == "ok\n"
        assert t.jump_logins == 1
    finally:
        t.close()


@pytest.fixture
def agent(sshd, tmp_path, monkeypatch):
    """An ssh-agent of this test (stopped by its PID) holding the server's client key."""
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(["ssh-add", "-q", str(sshd.key_file)], env=env, check=True, timeout=10)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        yield sock
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def test_an_ssh_agent_key_logs_in(sshd, home, agent):
    # no key file anywhere: only the agent holds the key
    t = SSHTransport(by_name(sshd.host, port=sshd.port, known_hosts=sshd.known_hosts))
    try:
        assert t.run(["id", "-un"]).stdout == "root\n"
    finally:
        t.close()


def test_without_the_agent_the_login_is_refused_in_one_line(sshd, home):
    t = SSHTransport(by_name(sshd.host, port=sshd.port, known_hosts=sshd.known_hosts))
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="no key to log in to .* start ssh-agent") as err:
        SlurmCLI(t, retry_s=20).run(["true"])
    assert time.monotonic() - t0 < 5  # not retried
    assert "\n" not in str(err.value)


def test_a_wrong_key_is_refused_in_one_line(sshd, home, tmp_path):
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "wrong")], check=True
    )
    wrong = by_name(sshd.host, port=sshd.port, key_file=tmp_path / "wrong")
    t = SSHTransport(wrong.model_copy(update={"known_hosts": sshd.known_hosts}))
    with pytest.raises(ConfigError, match=f"refused the login.*{tmp_path / 'wrong'}"):
        t.run(["true"])


def test_hashed_known_hosts_in_the_default_place(sshd, home):
    known = home / ".ssh" / "known_hosts"
    known.write_text(sshd.known_hosts.read_text())
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known)], check=True, capture_output=True)
    assert known.read_text().startswith("|1|")
    (home / ".ssh" / "config").write_text(host_block(sshd, "es-login", UserKnownHostsFile=None))
    t = SSHTransport(by_name("es-login"))
    try:
        assert t.run(["echo", "ok"]).stdout == "ok\n"
    finally:
        t.close()
    known.write_text("")  # and without the entry: refused, with the name it looked for
    with pytest.raises(ConfigError, match=r"not in .*known_hosts \(looked up as \[127.0.0.1\]"):
        SSHTransport(by_name("es-login")).run(["true"])


def test_a_refused_port_fails_at_once_without_retries(sshd, home):
    port = _free_port()
    t = SSHTransport(by_name("127.0.0.1", port=port, user="root", key_file=sshd.key_file))
    t0 = time.monotonic()
    with pytest.raises(SlurmCommandError) as err:
        SlurmCLI(t, retry_s=20).run(["true"])
    assert time.monotonic() - t0 < 3
    assert not err.value.transient
    assert f"connection refused by 127.0.0.1 port {port}" in str(err.value)
    assert "is sshd running on 127.0.0.1" in str(err.value)


def test_an_unknown_host_name_fails_at_once_without_retries(sshd, home):
    t = SSHTransport(by_name("no-such-host.invalid", user="root", key_file=sshd.key_file))
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="unknown host name 'no-such-host.invalid'"):
        SlurmCLI(t, retry_s=20).run(["true"])
    assert time.monotonic() - t0 < 10


@pytest.mark.parametrize(
    ("host", "status", "said"),
    [
        ("127.0.0.1", 1, "connection refused"),
        ("no-such-host.invalid", 2, "unknown host name 'no-such-host.invalid'"),
    ],
)
def test_the_cli_prints_one_line_at_once(sshd, home, tmp_path, host, status, said):
    site = tmp_path / "site.yaml"
    transport = {"kind": "ssh", "host": host, "port": _free_port(), "user": "root"}
    transport |= {"key_file": str(sshd.key_file), "known_hosts": str(sshd.known_hosts)}
    site.write_text(yaml.safe_dump({"name": "unreachable", "transport": transport}))
    env = {**os.environ, "PYTHONPATH": str(SRC), "HOME": str(home)}
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "elastic_slurm", "--site", str(site), "-v", "-v", "queue"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    elapsed = time.monotonic() - t0
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("elastic-slurm:")]
    assert res.returncode == status, res.stderr
    assert len(errors) == 1 and said in errors[0], res.stderr
    assert "Traceback" not in res.stderr and "retrying" not in res.stderr
    assert elapsed < 15  # was 22 s of retries


def test_paramiko_logs_no_tracebacks(sshd, tmp_path):
    """A port that accepts and hangs up (no SSH there): paramiko logs its failure with a
    traceback at ERROR; with logging on, nothing of it reaches stderr."""
    script = f"""
import logging, socket, threading
from pathlib import Path
logging.basicConfig(level=logging.DEBUG)
from elastic_slurm.adapter.transport.ssh import SSHTransport
from elastic_slurm.config.schema import SSHTransportConfig
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
def serve():
    while True:
        c, _ = srv.accept(); c.sendall(b"HTTP/1.0 400 no\\r\\n\\r\\n"); c.close()
threading.Thread(target=serve, daemon=True).start()
cfg = SSHTransportConfig(kind="ssh", host="127.0.0.1", port=srv.getsockname()[1], user="root",
    key_file=Path({str(sshd.key_file)!r}), known_hosts=Path({str(sshd.known_hosts)!r}),
    connect_timeout_s=3)
try:
    SSHTransport(cfg).run(["true"])
except Exception as exc:
    print(type(exc).__name__, exc.transient, str(exc).splitlines()[0])
"""
    res = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC), "HOME": str(tmp_path)},
        timeout=60,
        check=False,
    )
    assert "Traceback" not in res.stderr and "paramiko" not in res.stderr, res.stderr
    assert res.stdout.startswith("SlurmCommandError True"), res.stdout + res.stderr
    assert "SSH handshake" in res.stdout


def test_a_proxycommand_of_ssh_config(sshd, home):
    proxy = (
        f"ssh -q -i {sshd.key_file} -o BatchMode=yes -o UserKnownHostsFile={sshd.known_hosts} "
        f"-p {sshd.port} -W %h:%p root@127.0.0.1"
    )
    (home / ".ssh" / "config").write_text(host_block(sshd, "es-proxied", ProxyCommand=proxy))
    t = SSHTransport(by_name("es-proxied"))
    before = sshd.accepted_logins()
    try:
        assert t.run(["echo", "proxied"]).stdout == "proxied\n"
        assert sshd.accepted_logins() - before == 2  # the proxy's ssh, then ours through it
        assert t.jump_logins == 0
    finally:
        t.close()


@pytest.mark.parametrize(
    ("command", "error", "said"),
    [
        ("sh -c 'echo no route to the gateway >&2; exit 3'", SlurmCommandError, "no route"),
        ("/nonexistent/proxy %h", ConfigError, "cannot be started"),
    ],
)
def test_a_failing_proxycommand_is_one_line_at_once(sshd, home, command, error, said):
    (home / ".ssh" / "config").write_text(host_block(sshd, "es-proxied", ProxyCommand=command))
    t0 = time.monotonic()
    with pytest.raises(error, match=said) as err:
        SlurmCLI(SSHTransport(by_name("es-proxied")), retry_s=20).run(["true"])
    assert time.monotonic() - t0 < 10
    assert not getattr(err.value, "transient", False)
