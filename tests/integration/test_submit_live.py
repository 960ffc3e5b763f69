"""``elastic-slurm submit`` in sbatch's language, on the real cluster (issue 16, item 2).

An ``#SBATCH`` script with options overridden on the command line, sbatch options passed
through (checked in ``scontrol show job``), and a rigid MPI program run with its ranks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import all_idle, job_state, scontrol_job, wait

pytestmark = pytest.mark.slurm

ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


def cli(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [sys.executable, "-m", "elastic_slurm", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


def ended(job: int) -> str | None:
    state = job_state(job)
    return state if state in ENDED else None


SCRIPT = """\
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --job-name=es-script --time=10
#SBATCH --mem=200M
#SBATCH --export=ALL,ES_GREETING=hello
#SBATCH --mail-type=END --nice=7
#SBATCH --output=script-%j.out
echo "greeting=$ES_GREETING args=$#:$1:$2"
srun hostname | sort
"""

MPI_APP = """\
from mpi4py import MPI
comm = MPI.COMM_WORLD
print(f"rank {comm.rank} of {comm.size} on {MPI.Get_processor_name()}", flush=True)
"""


def test_an_sbatch_script_and_passed_options_reach_slurm(local_cluster, shared_tmp):
    wait(all_idle, 60, "all nodes idle before the test")
    (shared_tmp / "job.sh").write_text(SCRIPT)
    # held (-H) until the dependency of the second job is seen
    out = cli("submit", "--parsable", "-H", "-t", "3", "job.sh", "one two", "3", cwd=shared_tmp)
    first = int(out.stdout)
    # a second job, passed a dependency on the first (and options with separate values)
    (shared_tmp / "app.py").write_text(MPI_APP)
    second = int(
        cli(
            "submit",
            "--parsable",
            "--dependency",
            f"afterok:{first}",
            "--mem",
            "100M",
            "-N",
            "2",
            "-o",
            "mpi-%j.out",
            "app.py",
            cwd=shared_tmp,
        ).stdout
    )
    try:
        fields = scontrol_job(first)
        assert fields["JobName"] == "es-script" and fields["NumNodes"] in ("2", "2-2")
        assert fields["TimeLimit"] == "00:03:00"  # the command line's, not the script's 10
        assert fields["MinMemoryNode"] == "200M"
        assert fields["MailType"] == "END" and fields["Nice"] == "7"
        assert fields["Comment"] == "elastic-slurm:kind=rigid;min=2;max=2"
        dep = scontrol_job(second)
        assert dep["Dependency"].startswith(f"afterok:{first}"), dep["Dependency"]
        assert dep["MinMemoryNode"] == "100M"
        subprocess.run(["scontrol", "release", str(first)], check=True)
        assert wait(lambda: ended(first), 90, "the script job to end") == "COMPLETED"
        text = (shared_tmp / f"script-{first}.out").read_text()
        assert "greeting=hello args=2:one two:3" in text, text
        assert sorted(ln for ln in text.splitlines() if ln.startswith("n")) == sorted(
            set(ln for ln in text.splitlines() if ln.startswith("n"))
        )
        assert wait(lambda: ended(second), 90, "the MPI job to end") == "COMPLETED"
        lines = sorted((shared_tmp / f"mpi-{second}.out").read_text().splitlines())
        ranks = [ln for ln in lines if ln.startswith("rank ")]
        assert [ln.split(" on ")[0] for ln in ranks] == ["rank 0 of 2", "rank 1 of 2"], lines
        assert len({ln.split(" on ")[1] for ln in ranks}) == 2  # one rank on each node
    finally:
        subprocess.run(["scancel", str(first), str(second)], check=False)
    wait(all_idle, 60, "all nodes idle after the test")


def test_exit_statuses_as_sbatch_s(local_cluster, shared_tmp):
    wait(all_idle, 60, "all nodes idle before the test")
    # sbatch refuses a passed-through value: its usage status, its own message
    res = cli("submit", "--mem=lots", "--", "/bin/true", cwd=shared_tmp, check=False)
    assert res.returncode == 255 and "Invalid --mem specification" in res.stderr, res.stderr
    # Slurm refuses the job: 1
    res = cli("submit", "-p", "nosuch", "--", "/bin/true", cwd=shared_tmp, check=False)
    assert res.returncode == 1 and "invalid partition" in res.stderr.lower(), res.stderr
    # an option elastic-slurm reads, with a bad value: 255, nothing submitted
    res = cli("submit", "-N", "x", "--", "/bin/true", cwd=shared_tmp, check=False)
    assert res.returncode == 255 and res.stderr.count("\n") == 1, res.stderr
