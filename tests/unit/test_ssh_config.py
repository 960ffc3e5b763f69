"""How the SSH transport reads ~/.ssh/config and known_hosts (``transport/openssh.py``: files,
no connection)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

paramiko = pytest.importorskip("paramiko")

from elastic_slurm.adapter.transport import openssh  # noqa: E402
from elastic_slurm.adapter.transport.openssh import (  # noqa: E402
    KnownHosts,
    host_matches,
    resolve_target,
)
from elastic_slurm.errors import ConfigError  # noqa: E402


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USER", "me")
    monkeypatch.setattr(openssh, "SYSTEM_SSH_CONFIG", str(tmp_path / "etc" / "ssh_config"))
    return home


def write_config(home: Path, text: str) -> Path:
    path = home / ".ssh" / "config"
    path.write_text(text)
    return path


def test_an_alias_gives_hostname_port_user_identity_and_known_hosts(home):
    write_config(
        home,
        "Host hpc\n  HostName login.hpc.example.org\n  Port 2222\n  User alice\n"
        "  IdentityFile ~/.ssh/id_hpc\n  UserKnownHostsFile ~/.ssh/hpc_hosts\n",
    )
    t = resolve_target("hpc")
    assert (t.hostname, t.port, t.user) == ("login.hpc.example.org", 2222, "alice")
    assert t.identity_files == (home / ".ssh" / "id_hpc",)
    assert t.user_known_hosts == (home / ".ssh" / "hpc_hosts",)
    assert t.host_key_name == "[login.hpc.example.org]:2222"
    assert (t.agent, t.look_for_keys, t.jumps) == (True, False, ())


def test_site_values_win_and_defaults_are_openssh_s(home):
    write_config(home, "Host hpc\n  User alice\n  Port 2222\n")
    t = resolve_target("hpc", port=22, user="bob", key_file="~/k", known_hosts="/kh")
    assert (t.hostname, t.port, t.user) == ("hpc", 22, "bob")
    assert t.required_identity == home / "k" and t.identity_files == (home / "k",)
    assert t.user_known_hosts == (Path("/kh"),) and t.required_known_hosts == Path("/kh")
    plain = resolve_target("elsewhere")
    assert (plain.port, plain.user, plain.look_for_keys) == (22, "me", True)
    assert plain.user_known_hosts == (home / ".ssh/known_hosts", home / ".ssh/known_hosts2")
    assert plain.global_known_hosts[0] == Path("/etc/ssh/ssh_known_hosts")


def test_identitiesonly_and_identityagent_none_turn_the_agent_off(home):
    write_config(home, "Host a\n  IdentitiesOnly yes\nHost b\n  IdentityAgent none\n")
    assert not resolve_target("a").agent and not resolve_target("b").agent
    assert resolve_target("c").agent


def test_proxyjump_chains_resolve_each_hop_in_the_config(home):
    write_config(
        home,
        "Host inner\n  HostName 10.0.0.5\n  ProxyJump gw1,carol@gw2:2200\n"
        "Host gw1\n  HostName gw1.example.org\n  User dave\n  ProxyJump edge\n"
        "Host gw2\n  ProxyJump ignored\n",
    )
    t = resolve_target("inner")
    hops = [(h.hostname, h.user, h.port) for h in t.jumps]
    # the first hop's own ProxyJump comes first; a later hop's is not followed (as ssh -J)
    assert hops == [("edge", "me", 22), ("gw1.example.org", "dave", 22), ("gw2", "carol", 2200)]
    assert all(not h.jumps for h in t.jumps)


def test_a_proxyjump_loop_and_bad_entries_are_config_errors(home):
    write_config(home, "Host loop\n  ProxyJump loop\nHost bad\n  ProxyJump a:notaport\n")
    with pytest.raises(ConfigError, match="deeper than"):
        resolve_target("loop")
    with pytest.raises(ConfigError, match="ProxyJump entry 'a:notaport'"):
        resolve_target("bad")


def test_a_named_ssh_config_must_exist_and_a_bad_port_is_named(home, tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_target("x", ssh_config=tmp_path / "nope")
    write_config(home, "Host x\n  Port twenty\n")
    with pytest.raises(ConfigError, match="Port of Host 'x' is not a number"):
        resolve_target("x")


def test_host_patterns_match_as_openssh_matches_them():
    assert host_matches("login1.hpc.org", ["*.hpc.org"])
    assert host_matches("LOGIN1.hpc.org", ["login?.hpc.org"])
    assert not host_matches("login9.hpc.org", ["*.hpc.org", "!login9.hpc.org"])
    assert host_matches("[10.0.0.1]:2222", ["[10.0.0.1]:2222"])
    assert not host_matches("[10.0.0.1]:2222", ["10.0.0.1"])
    assert not host_matches("10.0.0.10", ["10.0.0.1"])
    hashed = paramiko.HostKeys.hash_host("[gw]:2200")
    assert host_matches("[gw]:2200", [hashed]) and not host_matches("gw", [hashed])


def _key(tmp_path: Path, name: str) -> tuple[str, paramiko.PKey]:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name)], check=True
    )
    kind, b64 = (tmp_path / f"{name}.pub").read_text().split()[:2]
    return f"{kind} {b64}", paramiko.PKey.from_path(tmp_path / name)


def test_known_hosts_lines_markers_and_garbage(tmp_path):
    a_line, a = _key(tmp_path, "a")
    b_line, b = _key(tmp_path, "b")
    c_line, c = _key(tmp_path, "c")
    hashed = paramiko.HostKeys.hash_host("[login]:2222")
    path = tmp_path / "known_hosts"
    path.write_text(
        "# comment\n\n"
        f"{hashed} {a_line}\n"
        f"*.hpc.org,!bad.hpc.org {b_line} a comment\n"
        f"@revoked * {c_line}\n"
        f"@cert-authority *.hpc.org {a_line}\n"
        "garbage line\n"
        "host ssh-ed25519 not-base64!!\n"
    )
    known = KnownHosts()
    known.load(path)
    assert [k.asbytes() for k in known.lookup("[login]:2222")] == [a.asbytes()]
    assert [k.asbytes() for k in known.lookup("n1.hpc.org")] == [b.asbytes()]
    assert known.lookup("bad.hpc.org") == [] and known.lookup("login") == []
    assert known.is_revoked(c) and not known.is_revoked(a)


def test_proxycommand_tokens_and_proxyjump_precedence(home):
    write_config(
        home,
        "Host viacmd\n  HostName 10.0.0.7\n  Port 2200\n  ProxyCommand ssh -W %h:%p gw\n"
        "Host both\n  ProxyJump gw\n  ProxyCommand nc %h %p\n"
        "Host gw\n  ProxyCommand connect-proxy %h\n"
        "Host off\n  ProxyCommand none\n",
    )
    assert resolve_target("viacmd").proxy_command == "ssh -W 10.0.0.7:2200 gw"
    both = resolve_target("both")
    assert both.proxy_command is None  # ProxyJump wins
    assert [(h.hostname, h.proxy_command) for h in both.jumps] == [("gw", "connect-proxy gw")]
    assert resolve_target("off").proxy_command is None


def test_include_lines_and_the_system_config_are_read_as_ssh_reads_them(home, tmp_path):
    (home / ".ssh" / "config.d").mkdir()
    (home / ".ssh" / "config.d" / "10-hpc.conf").write_text("Host hpc\n  HostName login.hpc\n")
    (home / ".ssh" / "config.d" / "20-gw.conf").write_text("Host gw\n  Port 2200\n")
    write_config(
        home,
        "Include config.d/*.conf\n"  # relative to ~/.ssh
        "Host hpc\n  Include ~/.ssh/none-such\n  User alice\n",  # the block goes on after it
    )
    system = tmp_path / "etc" / "ssh_config"
    system.parent.mkdir()
    system.write_text("Host *\n  User fallback\n  Port 2022\n")
    t = resolve_target("hpc")
    assert (t.hostname, t.user, t.port) == ("login.hpc", "alice", 2022)  # port: the system's
    assert (resolve_target("gw").port, resolve_target("gw").user) == (2200, "fallback")
    # a file given by name is read alone, as with ssh -F
    alone = tmp_path / "alone"
    alone.write_text("Host hpc\n  User bob\n")
    assert (
        resolve_target("hpc", ssh_config=alone).user,
        resolve_target("x", ssh_config=alone).port,
    ) == ("bob", 22)


def test_an_include_loop_is_a_config_error(home):
    write_config(home, "Include config\n")
    with pytest.raises(ConfigError, match="Include nests deeper than 16"):
        resolve_target("x")
