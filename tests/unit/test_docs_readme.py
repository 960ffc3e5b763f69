"""The README's researcher quick start runs as written, and its two set-up commands stay.

The shell block's ``elastic-slurm`` lines run on the SDSC-SP2 trace of the shared workloads
(the file the block downloads from the Parallel Workloads Archive); the Python block runs as
it is and must print what the README shows.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
TRACE = "SDSC-SP2-1998-4.2-cln.swf.gz"


def block(marker: str, lang: str) -> str:
    found = re.findall(rf"<!-- {marker} -->\n```{lang}\n(.*?)```", README, re.S)
    assert len(found) == 1, f"the README lost its {marker} block"
    return found[0]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def test_the_two_set_up_commands_are_unchanged():
    assert (
        "bash scripts/demo.sh     # the main job: an elastic MPI job grows and shrinks on a local "
        "Slurm cluster\n"
        "bash scripts/test.sh     # the whole test suite, integration tests on the real cluster "
        "included\n"
    ) in README


def test_the_quick_start_commands_run_as_written(tmp_path: Path):
    shared = Path(os.environ.get("ELASTIC_SLURM_WORKLOADS", ROOT.parent / "shared" / "workloads"))
    if not (shared / TRACE).is_file():
        pytest.skip(f"no {TRACE} in {shared} (the shared workloads)")
    (tmp_path / TRACE).symlink_to(shared / TRACE)
    text = block("quickstart", "sh")
    assert f"workload/l_sdsc_sp2/{TRACE}" in text  # where it says the trace comes from
    outputs = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] != ["elastic-slurm"]:
            continue  # the venv, pip and the download
        res = subprocess.run(
            [sys.executable, "-m", "elastic_slurm", *words[1:]],
            cwd=tmp_path,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert res.returncode == 0 and "Traceback" not in res.stderr, line + res.stderr
        outputs.append(res.stdout)
    easy, elastic, policies = outputs
    claimed = re.search(
        r"`average wait ([\d,.]+) s` against EASY backfilling's `([\d,.]+) s`", README
    )
    assert claimed is not None
    assert claimed.group(1) in elastic and claimed.group(2) in easy
    assert "lina_elastic" in policies and "easy_backfill" in policies


def test_the_quick_start_python_prints_what_the_readme_shows(tmp_path: Path):
    code = block("quickstart-python", "python")
    shown = re.search(re.escape(code) + r"```\n```\n(.*?)```", README, re.S)
    assert shown is not None, "the README shows no output after the Python block"
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout == shown.group(1)
