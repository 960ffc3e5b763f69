"""The wheel in a fresh virtual environment, base install only (issue 16, item 1).

Builds the wheel, installs it with its base dependencies (no ``sim``, ``mpi`` or ``ssh``
extra: no numpy, mpi4py, matplotlib or paramiko) into a new venv outside the source tree,
and runs the commands a user without the extras runs. Needs the package index (or a pip
configured with a local one); skipped when pip cannot install the dependencies. About a
minute.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("fresh-install")
    wheels = where / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0:
        pytest.skip(f"cannot build the wheel here: {built.stderr.strip()[-300:]}")
    (wheel,) = wheels.glob("elastic_slurm-*.whl")
    env_dir = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120)
    pip = env_dir / "bin" / "pip"
    installed = subprocess.run(
        [str(pip), "install", "-q", str(wheel)], capture_output=True, text=True, timeout=600
    )
    if installed.returncode != 0:
        pytest.skip(f"pip cannot install the base dependencies: {installed.stderr[-300:]}")
    return env_dir


def run(venv: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "elastic-slurm"), *words],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=venv.parent,  # outside the source tree
    )


def test_the_base_install_has_none_of_the_extras(venv: Path) -> None:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {p["name"].lower() for p in json.loads(out)}
    assert "elastic-slurm" in names
    assert not names & {"numpy", "mpi4py", "matplotlib", "paramiko"}


def test_help_version_and_the_base_commands(venv: Path) -> None:
    assert run(venv, "--version").stdout.startswith("elastic-slurm 0.")
    assert "COMMAND" in run(venv, "--help").stdout
    for command in ("submit", "queue", "show", "resize", "cancel", "controller", "doctor"):
        res = run(venv, command, "--help")
        assert res.returncode == 0, (command, res.stderr)
    for command in ("status", "policies"):
        res = run(venv, command, "--help")
        assert res.returncode == 0, (command, res.stderr)
    res = run(venv, "policies")
    assert res.returncode == 0 and "fcfs" in res.stdout, res.stderr


def test_the_extras_are_named_when_missing(venv: Path) -> None:
    res = run(venv, "demo")
    assert res.returncode == 1
    assert res.stderr == (
        "elastic-slurm: error: demo needs numpy, which is not installed: "
        "pip install 'elastic-slurm[mpi]'\n"
    )


def test_help_imports_no_numpy_in_the_fresh_venv(venv: Path) -> None:
    probe = (
        "import sys\n"
        "from elastic_slurm.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'yaml', 'rich')))"
    )
    res = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=venv.parent,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[]"
