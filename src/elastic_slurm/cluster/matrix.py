"""A small integration set run against each cluster flavour: a flavour x test table.

Each check drives the flavour's real Slurm through its transport (for a chroot flavour, inside
the chroot) with the commands elastic-slurm's adapter uses, and reports pass or fail, its wall
time and a detail line:

- ``probe``: ``scontrol --version`` and the dialect chosen from it;
- ``submit``: a 2-node mpi4py job (``srun --mpi=pmix``) whose ranks see each other;
- ``shrink``: a 4-node job shrunk twice (``NumNodes=3``, then ``NodeList=`` of 2 nodes);
- ``grow``: a 1-node job grown twice by merge (expander ``salloc --no-shell
  --dependency=expand:J``, ``NumNodes=0``, ``NumNodes=ALL``); it also records whether the job
  id stayed the same;
- ``array``: ``sbatch --array=0-3%2``, every task completes.

Jobs are submitted to the flavour's own cluster and cancelled afterwards; files go to
``<state_dir>/matrix``, visible at the same path inside the chroot.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elastic_slurm.adapter.dialect import probe_dialect
from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.cluster.local import LocalCluster
from elastic_slurm.errors import ElasticSlurmError

CHECKS = ("probe", "submit", "shrink", "grow", "array")

_MPI_PROGRAM = (
    "from mpi4py import MPI; import socket; c = MPI.COMM_WORLD; "
    "print('rank', c.rank, 'of', c.size, socket.gethostname(), 'sum', c.allreduce(1))"
)


class CheckFailed(Exception):
    """A check saw Slurm do something else than expected (the message says what)."""


@dataclass
class CheckResult:
    """One cell of the table."""

    flavour: str
    check: str
    ok: bool | None  # None: skipped
    seconds: float
    detail: str = ""
    timings: dict[str, float] = field(default_factory=dict)


class _Slurm:
    """Slurm commands of one cluster, raising :class:`CheckFailed` on a failed command."""

    def __init__(self, transport: Transport, env: dict[str, str], workdir: Path) -> None:
        self.transport, self.env, self.workdir = transport, env, workdir
        self.jobs: list[int] = []

    def run(self, *argv: str, timeout_s: float = 60, ok: bool = True) -> Completed:
        res = self.transport.run(argv, timeout_s=timeout_s, env=self.env)
        if ok and res.returncode != 0:
            raise CheckFailed(f"`{' '.join(argv)}` failed: {(res.stderr or res.stdout).strip()}")
        return res

    def sbatch(self, *args: str) -> int:
        out = self.run("sbatch", "--parsable", "-D", str(self.workdir), *args).stdout
        job = int(out.strip().split(";")[0])
        self.jobs.append(job)
        return job

    def job(self, job: int) -> tuple[str, int, str]:
        """State, node count and node list (``("", 0, "")`` once squeue forgets the job)."""
        out = self.run("squeue", "-h", "-j", str(job), "-o", "%T|%D|%N", ok=False).stdout
        line = out.strip().splitlines()[0] if out.strip() else ""
        if not line:
            return "", 0, ""
        state, count, nodes = line.split("|")
        return state, int(count), nodes

    def wait(self, what: str, pred: Callable[[], bool], timeout_s: float = 60) -> float:
        t0 = time.monotonic()
        while not pred():
            if time.monotonic() - t0 > timeout_s:
                raise CheckFailed(f"timed out after {timeout_s:.0f} s waiting for {what}")
            time.sleep(0.2)
        return time.monotonic() - t0

    def wait_running(self, job: int) -> None:
        self.wait(f"job {job} to run", lambda: self.job(job)[0] == "RUNNING")

    def cancel_all(self) -> None:
        for job in self.jobs:
            self.run("scancel", str(job), ok=False)


def _submit(s: _Slurm, timings: dict[str, float]) -> str:
    # Slurm's pmix plugin when the build has one (forky's 26.05.5 has none), else mpirun
    listed = s.run("srun", "--mpi=list", ok=False)
    plugins = listed.stdout + listed.stderr
    launcher = "srun --mpi=pmix" if "pmix" in plugins else "mpirun -n 2 --map-by node"
    job = s.sbatch(
        "-N2", "-o", "submit-%j.out", "--wrap", f'{launcher} python3 -c "{_MPI_PROGRAM}"'
    )
    timings["run"] = s.wait(f"job {job} to finish", lambda: s.job(job)[0] == "", timeout_s=60)
    text = (s.workdir / f"submit-{job}.out").read_text(errors="replace")
    ranks = re.findall(r"rank (\d) of 2 (\S+) sum 2", text)
    if len(ranks) != 2 or len({h for _, h in ranks}) != 2:
        raise CheckFailed(
            f"{launcher}: expected 2 ranks on 2 hosts summing to 2, output ends:\n{text[-600:]}"
        )
    return f"{launcher}: 2 ranks on {', '.join(sorted(h for _, h in ranks))}"


def _shrink(s: _Slurm, timings: dict[str, float]) -> str:
    job = s.sbatch("-N4", "-o", "/dev/null", "--wrap", "sleep 120")
    s.wait_running(job)
    t = time.monotonic()
    s.run("scontrol", "update", f"JobId={job}", "NumNodes=3")
    timings["to3"] = time.monotonic() - t
    s.wait("3 nodes", lambda: s.job(job)[1] == 3, 20)
    keep = s.run("scontrol", "show", "hostnames", s.job(job)[2]).stdout.split()[:2]
    t = time.monotonic()
    s.run("scontrol", "update", f"JobId={job}", f"NodeList={','.join(keep)}")
    timings["to2"] = time.monotonic() - t
    s.wait("2 nodes", lambda: s.job(job)[1] == 2, 20)
    s.run("scancel", str(job))
    return f"4 -> 3 -> 2 nodes ({'+'.join(keep)})"


def _grow(s: _Slurm, timings: dict[str, float]) -> str:
    job = s.sbatch("-N1", "-o", "/dev/null", "--wrap", "sleep 120")
    s.wait_running(job)
    for size in (2, 3):
        t = time.monotonic()
        res = s.run(
            "salloc",
            "--no-shell",
            "-N1",
            "--exclusive",
            f"--dependency=expand:{job}",
            "--immediate=30",
            timeout_s=60,
        )
        m = re.search(r"Granted job allocation (\d+)", res.stderr + res.stdout)
        if not m:
            raise CheckFailed(f"salloc granted no allocation: {res.stderr.strip()}")
        expander = int(m.group(1))
        s.jobs.append(expander)
        s.run("scontrol", "update", f"JobId={expander}", "NumNodes=0")
        s.run("scontrol", "update", f"JobId={job}", "NumNodes=ALL")
        s.wait(f"{size} nodes", lambda n=size: s.job(job)[1] == n, 20)
        timings[f"to{size}"] = time.monotonic() - t
        s.run("scancel", str(expander), ok=False)
    same = s.job(job)[0] == "RUNNING"
    s.run("scancel", str(job))
    return f"1 -> 2 -> 3 nodes by merge; job id {job} {'kept' if same else 'LOST'}"


def _array(s: _Slurm, timings: dict[str, float]) -> str:
    job = s.sbatch("--array=0-3%2", "-N1", "-o", "array-%A_%a.out", "--wrap", "hostname")
    timings["run"] = s.wait(f"array {job} to finish", lambda: s.job(job)[0] == "", 90)
    outs = sorted(s.workdir.glob(f"array-{job}_*.out"))
    if len(outs) != 4:
        raise CheckFailed(f"expected 4 task outputs, found {len(outs)}")
    return "4 tasks, throttle 2"


_RUNNERS: dict[str, Callable[[_Slurm, dict[str, float]], str]] = {
    "submit": _submit,
    "shrink": _shrink,
    "grow": _grow,
    "array": _array,
}


def run_checks(
    flavour: str,
    cluster: LocalCluster,
    checks: Sequence[str] = CHECKS,
    progress: Callable[[str], None] = print,
) -> list[CheckResult]:
    """Run ``checks`` against ``cluster`` (which must be up); one result per check.

    A check that raises is a failure with the error as its detail; the other checks still run.
    """
    workdir = cluster.cfg.state_dir / "matrix"
    workdir.mkdir(parents=True, exist_ok=True)
    s = _Slurm(cluster.transport, cluster.slurm_env, workdir)
    results = []
    for check in checks:
        timings: dict[str, float] = {}
        t0 = time.monotonic()
        try:
            if check == "probe":
                dialect = probe_dialect(cluster.transport)
                detail = f"Slurm {dialect.release}, dialect {dialect.series}"
            else:
                detail = _RUNNERS[check](s, timings)
            ok = True
        except (CheckFailed, ElasticSlurmError, ValueError, OSError) as exc:
            ok, detail = False, str(exc)
        finally:
            s.cancel_all()
            s.jobs.clear()
        res = CheckResult(flavour, check, ok, time.monotonic() - t0, detail, timings)
        progress(
            f"{flavour:<9} {check:<7} {'PASS' if ok else 'FAIL'} {res.seconds:6.1f} s  {detail}"
            + (f"  {_fmt(timings)}" if timings else "")
        )
        results.append(res)
    return results


def _fmt(timings: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.2f}s" for k, v in timings.items())


def table(results: Sequence[CheckResult]) -> str:
    """A flavour x check table: ``PASS 1.2s``, ``FAIL 3.0s`` or ``skip`` per cell."""
    flavours = list(dict.fromkeys(r.flavour for r in results))
    checks = list(dict.fromkeys(r.check for r in results))
    cell = {(r.flavour, r.check): r for r in results}
    width = 12
    lines = ["flavour   " + "".join(f"{c:<{width}}" for c in checks)]
    for fl in flavours:
        row = f"{fl:<10}"
        for c in checks:
            r = cell.get((fl, c))
            if r is None or r.ok is None:
                text = "skip"
            else:
                text = f"{'PASS' if r.ok else 'FAIL'} {r.seconds:.1f}s"
            row += f"{text:<{width}}"
        lines.append(row)
    return "\n".join(lines)
