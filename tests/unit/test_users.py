"""What keeps an unprivileged user's job from a file: directories closed to others."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic_slurm.cluster.users import (
    READ,
    SEARCH,
    closed_to_others,
    ensure_user,
    job_python_problem,
)


@pytest.fixture()
def open_tmp() -> Iterator[Path]:
    """A directory every user can reach (pytest's own ``tmp_path`` is under a 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="es-users-", dir="/tmp"))
    path.chmod(0o755)
    assert closed_to_others(path) is None, f"{path} is not reachable by others"
    yield path
    for place in path.rglob("*"):  # let rmtree into directories the tests closed
        if place.is_dir() and not place.is_symlink():
            place.chmod(0o755)
    shutil.rmtree(path)


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_a_program_behind_a_private_directory_is_closed_at_that_directory(open_tmp):
    home = open_tmp / "root"
    python = _program(home / ".pyenv" / "bin" / "python3")
    home.chmod(0o700)
    assert closed_to_others(python) == home


def test_a_venv_link_into_a_private_directory_is_closed_there(open_tmp):
    # the pyenv case: .venv/bin/python is an open symlink to an interpreter under /root
    home = open_tmp / "root"
    real = _program(home / "python3.11")
    home.chmod(0o700)
    link = open_tmp / "project" / ".venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert closed_to_others(link) == home
    assert "root is closed to them" in job_python_problem(str(link))


def test_an_open_program_and_a_group_only_directory(open_tmp):
    python = _program(open_tmp / "venv" / "bin" / "python")
    assert closed_to_others(python) is None
    assert job_python_problem(str(python)) is None
    (open_tmp / "venv").chmod(0o750)  # open to its group only: closed to everyone else
    assert closed_to_others(python) == open_tmp / "venv"


def test_the_target_needs_the_bits_asked_for(open_tmp):
    data = open_tmp / "data.txt"
    data.write_text("x")
    data.chmod(0o640)
    assert closed_to_others(data, READ) == data
    data.chmod(0o644)
    assert closed_to_others(data, READ) is None
    assert closed_to_others(data, SEARCH) == data  # not executable
    package = open_tmp / "pkg"
    package.mkdir(mode=0o711)
    package.chmod(0o711)  # searchable but not listable: imports from it fail
    assert closed_to_others(package, READ | SEARCH) == package


def test_a_missing_path_is_reported(open_tmp):
    assert closed_to_others(open_tmp / "nope" / "python") == open_tmp / "nope"


def test_a_name_not_found_on_path_says_nothing(monkeypatch, open_tmp):
    monkeypatch.setenv("PATH", str(open_tmp))
    assert job_python_problem("python-that-is-nowhere") is None


@pytest.mark.parametrize("name", ["", "Root", "a b", "-x", "x" * 40, "../etc"])
def test_only_plain_user_names_are_created(name):
    with pytest.raises(ValueError, match="not a plain user name"):
        ensure_user(name)


def test_an_existing_user_is_returned_as_is():
    assert ensure_user("root").pw_uid == 0


def test_cluster_up_notes_a_job_python_other_users_cannot_run(open_tmp):
    from elastic_slurm.cluster.local import LocalCluster
    from elastic_slurm.config.schema import LocalClusterConfig, SiteConfig

    home = open_tmp / "root"
    python = _program(home / ".pyenv" / "bin" / "python3")
    home.chmod(0o700)
    lines: list[str] = []
    site = SiteConfig(name="t", local_cluster=LocalClusterConfig(), python=str(python))
    LocalCluster(site, progress=lines.append)._note_job_python()
    assert len(lines) == 1 and lines[0].startswith("note: jobs of users other than root")
    assert f"{home} is closed to them" in lines[0]
    home.chmod(0o755)
    lines.clear()
    LocalCluster(site, progress=lines.append)._note_job_python()
    assert lines == []
