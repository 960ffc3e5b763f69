"""The launch agent mpirun calls like ssh: ``mpi_runtime/rsh_agent.py`` (srun is never run)."""

from __future__ import annotations

import pytest

from elastic_slurm.mpi_runtime import rsh_agent


@pytest.mark.parametrize(
    ("host", "command", "shell_line"),
    [
        ("n2", ["orted", "-mca", "ess", '"env"'], 'orted -mca ess "env"'),
        ("n10", ["echo"], "echo"),
        ("n1", ["a b", "c"], "a b c"),  # words are joined as ssh would: ORTE quotes them itself
    ],
)
def test_srun_argv(host: str, command: list[str], shell_line: str) -> None:
    assert rsh_agent.srun_argv(host, command) == [
        "srun",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={host}",
        "--mpi=none",
        "--kill-on-bad-exit=0",
        "/bin/sh",
        "-c",
        shell_line,
    ]


@pytest.fixture
def no_exec(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str], dict[str, str]]]:
    """Replace os.execvpe: record the call instead of replacing the test process."""
    calls: list[tuple[str, list[str], dict[str, str]]] = []

    def fake(file: str, args: list[str], env: dict[str, str]) -> None:
        calls.append((file, list(args), dict(env)))

    monkeypatch.setattr(rsh_agent.os, "execvpe", fake)
    return calls


@pytest.mark.parametrize("argv", [[], ["n1"], ["-x"], ["-x", "-T", "n1"]])
def test_usage_error(
    argv: list[str],
    no_exec: list[tuple[str, list[str], dict[str, str]]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert rsh_agent.main(argv) == 2
    assert capsys.readouterr().err == "usage: rsh_agent HOST COMMAND...\n"
    assert no_exec == []


def test_main_execs_srun_without_size_variables(
    monkeypatch: pytest.MonkeyPatch, no_exec: list[tuple[str, list[str], dict[str, str]]]
) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "4")
    monkeypatch.setenv("SLURM_NNODES", "2")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[1-2]")
    monkeypatch.setattr(rsh_agent, "_holder", lambda host: None)  # no sibling: Slurm not asked
    assert rsh_agent.main(["-x", "-T", "n3", "orted", "-mca", "x"]) == 127
    ((file, args, env),) = no_exec
    assert (file, args) == ("srun", rsh_agent.srun_argv("n3", ["orted", "-mca", "x"]))
    assert env["SLURM_JOB_ID"] == "4"
    assert "SLURM_NNODES" not in env and "SLURM_JOB_NODELIST" not in env
