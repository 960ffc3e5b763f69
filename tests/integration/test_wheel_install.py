"""The wheel as users get it: built from this tree, installed in a fresh venv outside it.

``pip install elastic-slurm`` (the base install) must run every command that needs neither
numpy nor MPI, say which extra a part needs instead of a traceback, and import the Python API;
``pip install elastic-slurm[sim]`` adds the simulator. Nothing here may see the source tree:
the commands run in a directory of their own, without ``PYTHONPATH``. The registry is reached
through pip's cache (the first run on a machine downloads the dependencies).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTRA = "sim"


def _env() -> dict[str, str]:
    """This process's environment without what would let the source tree leak in."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    res = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)], out
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (built,) = out.glob("elastic_slurm-*.whl")
    return built


class Venv:
    """A fresh virtual environment and a working directory beside it (not the source tree)."""

    def __init__(self, where: Path) -> None:
        self.dir = where / "venv"
        self.cwd = where / "cwd"
        self.cwd.mkdir()
        venv.EnvBuilder(with_pip=True, symlinks=True).create(self.dir)
        self.python = self.dir / "bin" / "python"
        self.tool = self.dir / "bin" / "elastic-slurm"

    def pip_install(self, requirement: str) -> None:
        res = _run([str(self.python), "-m", "pip", "install", "-q", requirement], self.cwd)
        assert res.returncode == 0, res.stdout + res.stderr

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run([str(self.tool), *args], self.cwd, timeout=300)

    def py(self, code: str) -> subprocess.CompletedProcess[str]:
        return _run([str(self.python), "-c", code], self.cwd, timeout=120)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    env = Venv(tmp_path_factory.mktemp("fresh"))
    env.pip_install(str(wheel))
    yield env


def _clean(res: subprocess.CompletedProcess[str]) -> str:
    """What it printed, asserting that no traceback is in it."""
    text = res.stdout + res.stderr
    assert "Traceback" not in text, text
    return text


def tiny_swf(path: Path, jobs: int = 12, nodes: int = 8, seed: int = 3) -> Path:
    """A small valid SWF trace (18 fields a line, a MaxNodes header), made here."""
    rng = random.Random(seed)
    lines = ["; Version: 2.2", f"; MaxNodes: {nodes}", f"; MaxProcs: {nodes}"]
    t = 0
    for i in range(1, jobs + 1):
        t += rng.randint(0, 60)
        size, run = rng.randint(1, nodes), rng.randint(30, 600)
        fields = [i, t, -1, run, size, -1, -1, size, run * 2, -1, 1, 1, 1, 1, 1, 1, -1, -1]
        lines.append(" ".join(map(str, fields)))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_wheel_is_installed_outside_the_source_tree(installed: Venv):
    res = installed.py("import elastic_slurm, pathlib; print(pathlib.Path(elastic_slurm.__file__))")
    assert res.returncode == 0, res.stderr
    where = Path(res.stdout.strip())
    assert installed.dir in where.parents and ROOT not in where.parents


def test_the_wheel_carries_its_license(wheel: Path):
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = whl.read(metadata).decode()
        (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert "BSD 3-Clause License" in whl.read(license_file).decode()
    assert "License: BSD-3-Clause" in text


def test_version_and_help_on_the_base_install(installed: Venv, wheel: Path):
    version = wheel.name.split("-")[1]
    res = installed.cli("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"elastic-slurm {version}", _clean(res)
    res = installed.cli("--help")
    assert res.returncode == 0, _clean(res)
    for command in ("submit", "queue", "show", "resize", "cancel", "simulate", "policies"):
        assert command in res.stdout
    for command in ("submit", "queue", "show", "resize", "cancel", "controller", "doctor"):
        res = installed.cli(command, "--help")
        assert res.returncode == 0, f"{command} --help: {_clean(res)}"


def test_policies_on_the_base_install(installed: Venv):
    res = installed.cli("policies")
    assert res.returncode == 0, _clean(res)
    for name in ("pending_first", "easy_backfill", "conservative_backfill", "lina_elastic"):
        assert name in res.stdout


def test_the_python_api_imports_without_numpy(installed: Venv):
    res = installed.py(
        "import sys, elastic_slurm\n"
        "from elastic_slurm import Job, submit\n"
        "from elastic_slurm.config import load_site\n"
        "print(load_site('local').name, 'numpy' in sys.modules)\n"
    )
    assert res.returncode == 0, _clean(res)
    assert res.stdout.split() == ["local", "False"]


@pytest.mark.slurm
def test_the_python_api_of_the_wheel_runs_a_job(installed: Venv, local_cluster, tmp_path: Path):
    """The base install submits a job on the local cluster and waits for it (no checkout)."""
    workdir = tmp_path / "job"
    workdir.mkdir()
    workdir.chmod(0o755)
    res = installed.py(
        "import elastic_slurm\n"
        "job = elastic_slurm.submit(program='/bin/echo from-the-wheel', "
        f"workdir={str(workdir)!r})\n"
        "print(job.wait(timeout=120, interval_s=0.2))\n"
        "print(job.stdout.read_text().strip())\n"
    )
    assert res.returncode == 0, _clean(res)
    assert res.stdout.split() == ["COMPLETED", "from-the-wheel"]


def test_the_simulator_runs_on_the_base_install_and_its_plots_name_the_extra(installed: Venv):
    trace = tiny_swf(installed.cwd / "tiny.swf")
    res = installed.cli("simulate", str(trace), "--json")  # the simulator needs no numpy
    assert res.returncode == 0 and json.loads(res.stdout.splitlines()[-1])["jobs"] > 0, _clean(res)
    res = installed.cli("simulate", str(trace), "--plot", str(installed.cwd / "p.png"))
    text = _clean(res)
    assert res.returncode != 0 and f"[{EXTRA}]" in res.stderr, text
    assert len(res.stderr.strip().splitlines()) == 1, text


def test_simulate_a_tiny_workload_with_the_sim_extra(installed: Venv, wheel: Path):
    installed.pip_install(f"{wheel}[{EXTRA}]")
    trace = tiny_swf(installed.cwd / "tiny.swf", jobs=12)
    res = installed.cli("simulate", str(trace), "--policy", "easy_backfill", "--json")
    assert res.returncode == 0, _clean(res)

    metrics = json.loads(res.stdout.strip().splitlines()[-1])
    assert metrics["jobs"] == 12 and metrics["policy"] == "easy_backfill"
    assert 0 < metrics["utilization"] <= 1 and metrics["makespan_s"] > 0


SCRIPT = """\
#!/bin/bash
#SBATCH --nodes=1
#SBATCH --job-name=wheel-script --time=5
#SBATCH --export=ALL,ES_WHEEL=yes
echo "wheel=$ES_WHEEL arg=$1"
"""


@pytest.mark.slurm
def test_an_sbatch_script_is_submitted_by_the_wheel(installed: Venv, local_cluster, tmp_path):
    """Issue 16, item 2 from the base install: ``#SBATCH`` lines, a passed-through option
    (``--export``), an argument to the script and ``--parsable``, on the local cluster."""
    workdir = tmp_path / "job"
    workdir.mkdir()
    workdir.chmod(0o755)
    (workdir / "job.sh").write_text(SCRIPT)
    res = _run(
        [str(installed.tool), "submit", "--parsable", "-o", "s-%j.out", "job.sh", "first"],
        workdir,
        timeout=120,
    )
    assert res.returncode == 0, _clean(res)
    job = int(res.stdout.strip())
    res = installed.py(
        "import elastic_slurm\n"
        f"job = elastic_slurm.Job.from_id({job})\n"
        "print(job.wait(timeout=120, interval_s=0.2))\n"
    )
    assert res.returncode == 0 and res.stdout.split() == ["COMPLETED"], _clean(res)
    assert (workdir / f"s-{job}.out").read_text().strip() == "wheel=yes arg=first"


def test_per_job_output_percentiles_and_seeds_with_the_sim_extra(installed: Venv, wheel: Path):
    """Issue 16, item 4 from the installed wheel: SWF and Batsim-style per-job files, the
    percentiles, several seeds with intervals, and the policies' descriptions."""
    installed.pip_install(f"{wheel}[{EXTRA}]")
    trace = tiny_swf(installed.cwd / "tiny.swf", jobs=20)
    out_swf, out_csv = installed.cwd / "jobs.swf", installed.cwd / "jobs.csv"
    res = installed.cli(
        "simulate",
        str(trace),
        "--policy",
        "lina_elastic",
        "--elastic-fraction",
        "0.5",
        "--seeds",
        "3",
        "--jobs-out",
        str(out_swf),
        "--jobs-csv",
        str(out_csv),
        "--json",
    )
    assert res.returncode == 0, _clean(res)
    metrics = json.loads(res.stdout.strip().splitlines()[-1])
    text = json.dumps(metrics)
    for key in ("p50", "p95", "p99"):
        assert key in text, text
    for seed in (0, 1, 2):  # one file of each per seed
        swf = out_swf.with_name(f"jobs-seed{seed}.swf").read_text()
        records = [ln for ln in swf.splitlines() if not ln.startswith(";")]
        assert len(records) == 20 and all(len(ln.split()) == 18 for ln in records)
        header, *rows = out_csv.with_name(f"jobs-seed{seed}.csv").read_text().splitlines()
        assert {"job_id", "starting_time", "finish_time"} <= set(header.split(","))
        assert len(rows) == 20
    res = installed.cli("policies", "--json")
    assert res.returncode == 0, _clean(res)
    policies = {p["name"]: p for p in json.loads(res.stdout)}
    assert policies["lina_elastic"]["paper"] and policies["easy_backfill"]["summary"]


WORKLOADS = ROOT.parent / "shared" / "workloads"


@pytest.mark.skipif(not WORKLOADS.is_dir(), reason="the shared traces are not beside the checkout")
def test_reproduce_from_the_wheel_writes_only_where_it_is_told(installed: Venv, wheel: Path):
    """Issue 16, item 5 from the installed wheel: the traces' folder as an option, the report in
    the folder given, and a missing traces folder a one-line error."""
    installed.pip_install(f"{wheel}[{EXTRA}]")
    res = installed.cli("reproduce", "--quick", "--paper", "huang")
    assert res.returncode == 2 and "--traces DIR" in res.stderr, _clean(res)
    assert len(res.stderr.strip().splitlines()) == 1
    out = installed.cwd / "report"
    res = installed.cli(
        "reproduce", "--quick", "--paper", "huang", "--traces", str(WORKLOADS), "--out", str(out)
    )
    assert res.returncode == 0, _clean(res)
    report = (out / "reproduction.md").read_text()
    assert "Huang" in report and "Traceback" not in report


def test_an_unreachable_login_node_is_one_line_from_the_wheel(installed: Venv, wheel: Path):
    """Issue 16, item 6 from the installed wheel with the ``ssh`` extra: a refused connection is
    one line at once, not retried as a transient failure."""
    installed.pip_install(f"{wheel}[ssh]")
    site = installed.cwd / "ssh-site.yaml"
    site.write_text(
        "name: refused\ncluster_name: hpc\npartition: batch\n"
        "transport:\n  kind: ssh\n  host: 127.0.0.1\n  port: 9\n  connect_timeout_s: 5\n"
    )
    res = installed.cli("queue", "--site", str(site))
    text = _clean(res)
    assert res.returncode == 1, text
    assert len(res.stderr.strip().splitlines()) == 1 and "refused" in res.stderr.lower(), text
