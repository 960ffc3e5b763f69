"""Helpers of the unit tests: outputs recorded from Slurm 22.05, and golden files.

Recorded outputs (``tests/golden/22.05/*.json``, ``*.txt``, ``*.stderr``) come from the real
cluster and are only ever read. Golden files (``render_*.txt``, ``slurmconf_*``) hold what our
own renderers must produce; a test compares with them and rewrites them only when run with
``ELASTIC_SLURM_REGEN_GOLDEN=1``, and then it says so (the test is skipped with the path), so a
changed golden file never goes unnoticed.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "22.05"
REGEN_VAR = "ELASTIC_SLURM_REGEN_GOLDEN"
#: Only files with these prefixes are ours to regenerate; everything else was recorded.
GENERATED_PREFIXES = ("render_", "slurmconf_")


@dataclass(frozen=True)
class Golden:
    """Read recorded outputs and compare rendered text with golden files in ``directory``."""

    directory: Path
    regen: bool

    def recorded(self, name: str) -> str:
        """The text of a recorded Slurm output."""
        return (self.directory / name).read_text()

    def check(self, name: str, actual: str) -> None:
        """Fail unless ``actual`` equals golden file ``name``; rewrite it only in regen mode."""
        if not name.startswith(GENERATED_PREFIXES):
            raise ValueError(f"{name} is a recorded output, not a golden file of ours")
        path = self.directory / name
        expected = path.read_text() if path.exists() else None
        if actual == expected:
            return
        if self.regen:
            path.write_text(actual)
            pytest.skip(f"rewrote golden file {path} ({REGEN_VAR}=1): review `git diff` first")
        if expected is None:
            pytest.fail(
                f"golden file {path} is missing: create it with {REGEN_VAR}=1 and review it"
            )
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=str(path),
                tofile="rendered now",
            )
        )
        pytest.fail(f"output differs from {path} (accept with {REGEN_VAR}=1):\n{diff}")


@pytest.fixture
def golden() -> Golden:
    """The 22.05 directory of recorded outputs and golden files."""
    return Golden(GOLDEN_DIR, os.environ.get(REGEN_VAR) == "1")


@pytest.fixture
def fictional_users(monkeypatch: pytest.MonkeyPatch) -> None:
    """Users of the tests' job records (alice, bob, u) own files as this process's user.

    The controller's side of a job directory checks that every file belongs to the job's user,
    looked up by name; the protocol's tests name users who do not exist on this host.
    """
    from elastic_slurm.protocol import jobdir

    real = jobdir._lookup_user

    def lookup(user: str, job_id: int) -> tuple[int, int | None]:
        if user in ("alice", "bob", "u"):
            return os.geteuid(), os.getegid()
        return real(user, job_id)

    monkeypatch.setattr(jobdir, "_lookup_user", lookup)
