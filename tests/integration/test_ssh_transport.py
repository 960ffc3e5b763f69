"""The SSH transport against a real OpenSSH server on loopback, and the local one side by side."""

from __future__ import annotations

import os

import pytest

from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.adapter.transport.ssh import SSHTransport
from elastic_slurm.errors import ConfigError, SlurmCommandError

from .conftest import ssh_config

HOSTILE = [
    "plain",
    "two words",
    "it's",
    'say "hi"',
    "a; touch /tmp/es-pwned-1",
    "$(touch /tmp/es-pwned-2)",
    "`touch /tmp/es-pwned-3`",
    "line\nbreak",
    "glob *",
    "back\\slash",
    "",
    "--option=x y",
    "| cat /etc/shadow",
]


@pytest.fixture(params=["local", "ssh"])
def transport(request, sshd):
    if request.param == "local":
        yield LocalTransport()
    else:
        t = SSHTransport(ssh_config(sshd))
        yield t
        t.close()


def test_arguments_arrive_unchanged_and_inject_nothing(transport):
    res = transport.run(["printf", "%s\\0", *HOSTILE])
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\0")[:-1] == HOSTILE
    for i in (1, 2, 3):
        assert not os.path.exists(f"/tmp/es-pwned-{i}")


def test_environment_values_are_quoted_too(transport):
    res = transport.run(["sh", "-c", 'printf %s "$X"'], env={"X": 'a\'b; $(id) "c"'})
    assert res.stdout == 'a\'b; $(id) "c"'


def test_ssh_refuses_environment_names_a_shell_would_run(sshd):
    t = SSHTransport(ssh_config(sshd))
    with pytest.raises(ValueError, match="not valid"):
        t.run(["true"], env={"X; id": "1"})


def test_stdin_exit_status_and_stderr(transport):
    res = transport.run(["sh", "-c", "cat; echo oops >&2; exit 3"], input_text="a\nb $(x)\n")
    assert (res.returncode, res.stdout, res.stderr) == (3, "a\nb $(x)\n", "oops\n")


def test_timeout_is_transient_and_the_transport_still_works(transport):
    with pytest.raises(SlurmCommandError) as err:
        transport.run(["sleep", "5"], timeout_s=0.5)
    assert err.value.transient and err.value.returncode is None
    assert transport.run(["echo", "ok"]).stdout == "ok\n"


def test_one_connection_is_reused(sshd):
    t = SSHTransport(ssh_config(sshd))
    try:
        before = sshd.accepted_logins()
        for i in range(5):
            assert t.run(["echo", str(i)]).stdout == f"{i}\n"
        assert t.connections == 1
        assert sshd.accepted_logins() - before == 1
    finally:
        t.close()


def test_unknown_host_key_is_refused(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = SSHTransport(ssh_config(sshd).model_copy(update={"known_hosts": empty}))
    with pytest.raises(ConfigError, match="is not in .*known_hosts.*ssh-keyscan"):
        t.run(["true"])


def test_changed_host_key_is_refused(sshd, tmp_path):
    import subprocess

    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True
    )
    kind, key = (tmp_path / "other.pub").read_text().split()[:2]
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[{sshd.host}]:{sshd.port} {kind} {key}\n")
    t = SSHTransport(ssh_config(sshd).model_copy(update={"known_hosts": wrong}))
    with pytest.raises(ConfigError, match="does not match"):
        t.run(["true"])


def test_missing_key_file_is_a_config_error(sshd, tmp_path):
    t = SSHTransport(ssh_config(sshd).model_copy(update={"key_file": tmp_path / "nope"}))
    with pytest.raises(ConfigError, match="does not exist"):
        t.run(["true"])


def test_large_output_arrives_whole(transport):
    res = transport.run(["sh", "-c", "yes x | head -c 3000000; echo end >&2"])
    assert (len(res.stdout), set(res.stdout), res.stderr) == (3_000_000, {"x", "\n"}, "end\n")
