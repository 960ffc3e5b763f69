"""What ``sbatch`` receives for an elastic request: ``adapter/render.py``, with golden files.

The golden files ``tests/golden/22.05/render_<kind>_{script,sbatch_argv}.txt`` are compared
byte for byte; run with ``ELASTIC_SLURM_REGEN_GOLDEN=1`` to rewrite them after a deliberate
change (the affected tests then skip, naming each rewritten file). The scripts are also run
with bash, to show that hostile values reach the program as the very same arguments.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from elastic_slurm.adapter import render
from elastic_slurm.adapter.tags import decode
from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.request import ElasticRequest, JobKind

if TYPE_CHECKING:
    from conftest import Golden

PYTHON = "/opt/elastic/venv/bin/python3"
HOSTILE_ARGS = (
    "data set/it's here.txt",
    "$(touch pwned-by-substitution)",
    'say "hi"; touch pwned-by-semicolon',
    "`touch pwned-by-backticks`",
    "new\nline",
    "*",
    "",
    "--",
)

REQUESTS = {
    "rigid": ElasticRequest(
        program=("/opt/solver/bin/solve", "--input", *HOSTILE_ARGS),
        kind=JobKind.RIGID,
        nodes_min=2,
        nodes_max=2,
        walltime=timedelta(hours=1, minutes=30),
        ntasks_per_node=4,
        job_name='rigid "solver"; $(id)',
        partition="debug",
    ),
    "moldable": ElasticRequest(
        program=("hostname", "-f"),
        kind=JobKind.MOLDABLE,
        nodes_min=2,
        nodes_max=4,
        walltime=timedelta(hours=25, minutes=3, seconds=7),
        job_name="moldable",
        extra_env=(("OMP_NUM_THREADS", "2"), ("GREETING", "hello world; $(id) `id` 'q'")),
    ),
    "malleable": ElasticRequest(
        program=("examples/heat2d.py", "--n", "2048", "--label", 'it\'s a "test"\nline 2'),
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=4,
        nodes_start=2,
        walltime=timedelta(minutes=15),
        ntasks_per_node=2,
        job_name="heat2d-malleable",
        extra_env=(("B_VAR", "from the request"), ("A_VAR", "a")),
    ),
}
ENV = {"ELASTIC_SLURM_RESIZE_TIMEOUT_S": "60", "B_VAR": "from env (wins)"}


def _argv_text(argv: list[str]) -> str:
    return json.dumps(argv, indent=1, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("kind", sorted(REQUESTS))
def test_batch_script_golden(golden: Golden, kind: str) -> None:
    script = render.batch_script(REQUESTS[kind], python=PYTHON, env=ENV)
    golden.check(f"render_{kind}_script.txt", script)


@pytest.mark.parametrize("kind", sorted(REQUESTS))
def test_sbatch_argv_golden(golden: Golden, kind: str) -> None:
    argv = render.sbatch_argv(REQUESTS[kind], output="/work/out/%x-%j.out", chdir="/work/run dir")
    golden.check(f"render_{kind}_sbatch_argv.txt", _argv_text(argv))


@pytest.mark.parametrize(
    ("req", "nodes"),
    [
        (ElasticRequest(program=("a",), nodes_min=3, nodes_max=3), "3"),
        (ElasticRequest(program=("a",), kind=JobKind.MOLDABLE, nodes_min=2, nodes_max=4), "2-4"),
        (ElasticRequest(program=("a",), kind=JobKind.MOLDABLE, nodes_min=2, nodes_max=2), "2"),
        # a moldable job asks for its range even when given a start size
        (
            ElasticRequest(
                program=("a",), kind=JobKind.MOLDABLE, nodes_min=1, nodes_max=4, nodes_start=3
            ),
            "1-4",
        ),
        (ElasticRequest(program=("a",), kind=JobKind.MALLEABLE, nodes_min=2, nodes_max=4), "2"),
        (
            ElasticRequest(
                program=("a",), kind=JobKind.MALLEABLE, nodes_min=2, nodes_max=4, nodes_start=4
            ),
            "4",
        ),
        (ElasticRequest(program=("a",), kind=JobKind.EVOLVING, nodes_min=1, nodes_max=8), "1"),
    ],
)
def test_sbatch_argv_nodes_and_tag(req: ElasticRequest, nodes: str) -> None:
    argv = render.sbatch_argv(req)
    assert argv[2] == f"--nodes={nodes}"
    comments = [a for a in argv if a.startswith("--comment=")]
    assert len(comments) == 1
    tag = decode(comments[0].removeprefix("--comment="))
    assert tag is not None
    assert (tag.kind, tag.nodes_min, tag.nodes_max) == (req.kind, req.nodes_min, req.nodes_max)
    assert not any(a.startswith(("--output=", "--chdir=", "--partition=")) for a in argv)


@pytest.mark.parametrize(
    ("kind", "header"),
    [
        (JobKind.RIGID, "# elastic-slurm: rigid job, nodes 3"),
        (JobKind.MOLDABLE, "# elastic-slurm: moldable job, nodes 3"),
        (JobKind.EVOLVING, "# elastic-slurm: evolving job, nodes 3"),
    ],
)
def test_batch_script_minimal(kind: JobKind, header: str) -> None:
    req = ElasticRequest(program=("app",), kind=kind, nodes_min=3, nodes_max=3)
    run = (
        f"exec {PYTHON} -m elastic_slurm run --ntasks-per-node=1 -- app"
        if kind.resizable
        else "exec app"  # once, as given: the request does not ask for its ranks
    )
    assert render.batch_script(req, python=PYTHON) == f"#!/bin/bash\n{header}\n{run}\n"


def _fake_program(path: Path) -> Path:
    """An executable that prints its arguments and two variables as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "names = ('GREETING', 'B_VAR', 'ELASTIC_SLURM_RESIZE_TIMEOUT_S')\n"
        "print(json.dumps({'argv': sys.argv[1:], 'env': {k: os.environ.get(k) for k in names}}))\n"
    )
    path.chmod(0o755)
    return path


def _fake_srun(bindir: Path) -> Path:
    """An ``srun`` that runs its command once, here: the script is run outside Slurm."""
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / "srun"
    path.write_text('#!/bin/sh\nexec "$@"\n')
    path.chmod(0o755)
    return bindir


def _run_script(script: str, cwd: Path, args: tuple[str, ...] = ()) -> dict[str, object]:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    path = cwd / "job.sh"
    path.write_text(script)
    fake = _fake_srun(cwd.parent / f"{cwd.name}-fake-bin")
    env = {"PATH": f"{fake}:{os.environ.get('PATH', '/usr/bin:/bin')}", "LC_ALL": "C"}
    done = subprocess.run(
        [bash, str(path), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_rigid_script_passes_hostile_arguments_verbatim(tmp_path: Path) -> None:
    prog = _fake_program(tmp_path / "bin dir" / "it's prog")
    req = ElasticRequest(
        program=(str(prog), *HOSTILE_ARGS),
        extra_env=(("GREETING", "$(touch pwned-by-env) 'x' \"y\""),),
    )
    out = _run_script(render.batch_script(req, python=PYTHON), tmp_path)
    assert out["argv"] == list(HOSTILE_ARGS)
    assert out["env"] == {
        "GREETING": "$(touch pwned-by-env) 'x' \"y\"",
        "B_VAR": None,
        "ELASTIC_SLURM_RESIZE_TIMEOUT_S": None,
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin dir", "job.sh"]


def test_malleable_script_runs_the_launcher_with_hostile_arguments(tmp_path: Path) -> None:
    python = _fake_program(tmp_path / "py $(dir)" / "python")
    req = REQUESTS["malleable"]
    out = _run_script(render.batch_script(req, python=str(python), env=ENV), tmp_path)
    assert out["argv"] == ["-m", "elastic_slurm", "run", "--ntasks-per-node=2", "--", *req.program]
    assert out["env"] == {
        "GREETING": None,
        "B_VAR": "from env (wins)",
        "ELASTIC_SLURM_RESIZE_TIMEOUT_S": "60",
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.sh", "py $(dir)"]


@pytest.mark.parametrize("name", ["X=1; touch pwned; Y", "A B", ""])
def test_hostile_variable_names_are_refused(name: str) -> None:
    with pytest.raises((InvalidRequest, ValueError)):
        req = ElasticRequest(program=("app",), extra_env=((name, "v"),))
        render.batch_script(req, python=PYTHON)


# ---------------------------------------------------------------------------------- the helper


def test_golden_check_fails_on_difference_and_leaves_the_file(
    golden: Golden, tmp_path: Path
) -> None:
    GoldenHelper = type(golden)
    path = tmp_path / "render_x.txt"
    path.write_text("expected\n")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)output differs.*-expected.*\+actual"):
        GoldenHelper(tmp_path, regen=False).check("render_x.txt", "actual\n")
    assert path.read_text() == "expected\n"
    with pytest.raises(pytest.fail.Exception, match="golden file .* is missing"):
        GoldenHelper(tmp_path, regen=False).check("render_new.txt", "x")
    assert not (tmp_path / "render_new.txt").exists()


def test_golden_check_rewrites_only_in_regen_mode_and_says_so(
    golden: Golden, tmp_path: Path
) -> None:
    GoldenHelper = type(golden)
    path = tmp_path / "render_x.txt"
    path.write_text("old\n")
    with pytest.raises(pytest.skip.Exception, match="rewrote golden file"):
        GoldenHelper(tmp_path, regen=True).check("render_x.txt", "new\n")
    assert path.read_text() == "new\n"
    GoldenHelper(tmp_path, regen=True).check("render_x.txt", "new\n")  # equal: passes quietly
    with pytest.raises(ValueError, match="is a recorded output"):
        GoldenHelper(tmp_path, regen=True).check("sinfo_nodes.txt", "x")
