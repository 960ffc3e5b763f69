"""The documentation builds with one command, and a reference to nothing fails it.

The command (``docs/conf.py``): ``python -m sphinx -n -W --keep-going -b html docs OUT``. Here
the ``dummy`` builder runs it (every page read and every reference resolved, no HTML written).
Sphinx and myst-parser come with the ``docs`` extra (in ``test`` too).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def sphinx(src: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-q", "-E"]
    return subprocess.run(
        [*argv, "-b", "dummy", *extra, str(src), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_docs_build_without_a_warning(tmp_path: Path):
    res = sphinx(DOCS, tmp_path / "out")
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_reference_to_nothing_fails_the_build(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "index.rst").write_text(
        "Probe\n=====\n\n"
        ".. automodule:: elastic_slurm.waiting\n\n"
        "Resolved: :func:`~elastic_slurm.waiting.wait_for`, :class:`DeadlineExceeded`.\n"
        "Real, with no page here: :class:`pathlib.Path`, :func:`elastic_slurm.jobs.cancel`.\n"
        "Broken: :class:`elastic_slurm.job.NoSuchJob` and :func:`submit_everything`.\n"
    )
    res = sphinx(src, tmp_path / "out", "-c", str(DOCS))
    assert res.returncode != 0
    broken = [ln for ln in res.stderr.splitlines() if "reference target not found" in ln]
    assert len(broken) == 2, res.stderr
    assert "elastic_slurm.job.NoSuchJob" in broken[0] and "submit_everything" in broken[1]


def test_every_page_of_the_api_reference_is_in_the_toctree():
    pages = {p.stem for p in (DOCS / "api").glob("*.rst")} - {"index"}
    index = (DOCS / "api" / "index.rst").read_text()
    assert pages and all(f"   {page}\n" in index for page in pages)
