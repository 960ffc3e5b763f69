"""The command line of a base install: no numpy, mpi4py or matplotlib (``cli/main.py``).

Each run is a fresh interpreter with those packages blocked by a meta-path hook, as in an
install without the ``sim`` and ``mpi`` extras.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from elastic_slurm.cli import main as cli_main

SRC = Path(__file__).resolve().parents[2] / "src"

#: Run main() with the optional packages blocked, then print which heavy modules were loaded.
BLOCKED_MAIN = """
import importlib.abc, json, sys
BLOCK = {"numpy", "mpi4py", "matplotlib"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCK:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
if sys.argv[1] == "block":
    sys.meta_path.insert(0, Block())
from elastic_slurm.cli.main import main
try:
    rc = main(sys.argv[2:])
except SystemExit as exc:
    rc = exc.code or 0
HEAVY = ("numpy", "mpi4py", "matplotlib", "flask", "pydantic")
loaded = sorted(m for m in HEAVY if m in sys.modules)
print("LOADED " + json.dumps(loaded), file=sys.stderr)
sys.exit(rc)
"""


def run_cli(*words: str, block: bool = True, cwd: Path | None = None):
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_MAIN, "block" if block else "open", *words],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=cwd,
    )


def loaded(res: subprocess.CompletedProcess[str]) -> list[str]:
    line = [ln for ln in res.stderr.splitlines() if ln.startswith("LOADED ")][-1]
    return json.loads(line.removeprefix("LOADED "))


def test_help_imports_no_heavy_package() -> None:
    res = run_cli("--help", block=False)
    assert res.returncode == 0, res.stderr
    assert "submit" in res.stdout and "simulate" in res.stdout
    # nothing optional, and not even the validation or web stacks, for the list of commands
    assert loaded(res) == []


def test_version_without_the_extras() -> None:
    res = run_cli("--version")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().startswith("elastic-slurm 0.")


BASE_COMMANDS = [
    "submit",
    "queue",
    "show",
    "resize",
    "cancel",
    "controller",
    "doctor",
    "status",
    "policies",
]


@pytest.mark.parametrize("command", BASE_COMMANDS)
def test_base_commands_load_without_the_extras(command: str) -> None:
    res = run_cli(command, "--help")
    assert res.returncode == 0, res.stderr
    assert f"elastic-slurm {command}" in res.stdout
    assert "numpy" not in loaded(res)


def test_policies_runs_without_the_extras() -> None:
    res = run_cli("policies")
    assert res.returncode == 0, res.stderr
    assert "fcfs" in res.stdout
    assert "numpy" not in loaded(res)


def test_a_missing_extra_is_one_line_naming_it() -> None:
    res = run_cli("demo")
    assert res.returncode == 1
    errors = [ln for ln in res.stderr.splitlines() if not ln.startswith("LOADED ")]
    assert errors == [
        "elastic-slurm: error: demo needs numpy, which is not installed: "
        "pip install 'elastic-slurm[mpi]'"
    ]


def test_missing_extra_names_the_sim_extra_for_the_simulator() -> None:
    exc = ModuleNotFoundError("No module named 'numpy'", name="numpy")
    assert "elastic-slurm[sim]" in (cli_main.missing_extra(exc, "simulate") or "")
    assert cli_main.missing_extra(ModuleNotFoundError("x", name="yaml"), "simulate") is None


def test_report_without_matplotlib_prints_its_summary(tmp_path: Path) -> None:
    from elastic_slurm.controller.journal import Journal

    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    nodes = ["n1", "n2"]
    one = {"job_id": 7, "state": "running", "nodes": nodes, "name": "heat", "kind": "malleable"}
    journal.write("sizes", nodes_total=4, jobs=[one])
    journal.write("outcome", job_id=7, seq=1, action="expand", ok=True, seconds=0.1, nodes=nodes)
    journal.write("sizes", nodes_total=4, jobs=[one])
    journal.close()
    res = run_cli("report", str(path))
    assert res.returncode == 1
    assert res.stdout.startswith("1 job(s), 1 resize(s) done")
    errors = [ln for ln in res.stderr.splitlines() if not ln.startswith("LOADED ")]
    assert len(errors) == 1 and "pip install 'elastic-slurm[sim]'" in errors[0]
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "j.png").exists()


@pytest.mark.parametrize(
    "words",
    [
        ["--site", "a", "queue", "--site", "b"],
        ["queue", "--site", "b"],
        ["queue", "--site=b"],
        ["--site=b", "queue"],
        ["controller", "run", "--site", "b"],
        ["cluster", "up", "--site=b"],
        ["--site", "a", "controller", "run", "--site", "b"],
    ],
)
def test_site_before_or_after_the_command(words: list[str]) -> None:
    command = words[cli_main.find_command(words) or 0]
    args = cli_main.build_parser(command).parse_args(words)
    assert args.site == "b"


def test_site_defaults_to_none_after_the_command() -> None:
    args = cli_main.build_parser("status").parse_args(["status"])
    assert args.site is None


@pytest.mark.parametrize("command", sorted(cli_main.COMMANDS))
def test_the_list_of_commands_says_what_each_command_says(command: str) -> None:
    """``--help`` lists the commands without importing them: its summaries must not drift."""
    parser = cli_main.build_parser(command)
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    (own,) = [a.help for a in sub._choices_actions if a.dest == command]
    assert cli_main.COMMANDS[command] == own


def test_a_reader_that_leaves_early_is_no_error() -> None:
    """``elastic-slurm policies --json | head -c 0``: a closed pipe ends the command quietly
    (status 141, as a program killed by SIGPIPE), with nothing on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has left before anything is written
    try:
        res = subprocess.run(
            [sys.executable, "-m", "elastic_slurm", "policies", "--json"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (res.returncode, res.stderr) == (141, "")
