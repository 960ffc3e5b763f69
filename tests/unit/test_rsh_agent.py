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


class _Slurm:
    """Stands in for the job's Slurm commands: counts the listings asked of it."""

    def __init__(self, held: dict[str, int]) -> None:
        self.held = held
        self.asked = 0

    def elastic_nodes(self, job_id: int) -> dict[str, int]:
        self.asked += 1
        return dict(self.held)


@pytest.mark.parametrize(
    ("holders", "host", "expected", "asked"),
    [
        ("n1=4,n3=9", "n3", 9, 0),  # the launcher's map names a sibling: Slurm not asked
        ("n1=4,n3=9", "n1", None, 0),  # the job's own node
        ("n1=4", "n3", 7, 1),  # a node added while mpirun runs: asked
        ("n1=4,n3", "n3", 7, 1),  # a malformed map is no map
        ("n1=4,n3=0", "n3", 7, 1),
        ("n1=4,n3=99999999999", "n3", 7, 1),
        ("n1=4,n$(x)=9", "n3", 7, 1),
        ("", "n3", 7, 1),
    ],
)
def test_the_holder_comes_from_the_launchers_map_and_else_from_slurm(
    monkeypatch: pytest.MonkeyPatch, holders: str, host: str, expected: int | None, asked: int
) -> None:
    slurm = _Slurm({"n1": 4, "n3": 7})
    monkeypatch.setattr(rsh_agent, "job_slurm", lambda: slurm)
    monkeypatch.setenv("SLURM_JOB_ID", "4")
    monkeypatch.setenv("ELASTIC_SLURM_NODE_HOLDERS", holders)
    assert rsh_agent._holder(host) == expected
    assert slurm.asked == asked
