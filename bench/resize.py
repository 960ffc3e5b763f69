"""Phase breakdown of grows and shrinks on the local cluster (a command, not a test).

Runs heat2d as a malleable job and resizes it back and forth through the same path as the
controller (``elastic_slurm.jobs.resize``), several times, for:

* **grow by spawn**: 1 -> 3 nodes (every rank on mpirun's node, so new ranks are spawned);
* **grow by restart**: 2 -> 4 nodes (ranks on two nodes: checkpoint and restart);
* **shrink**: back down (always checkpoint and restart with Open MPI 4.1).

Prints, per kind of resize, the median and the spread (min-max) of each phase in seconds:
``grant`` (Slurm's grow), ``spawn``/``merge``/``redistribute`` or ``checkpoint``/``relaunch``/
``restore`` (the application), ``release`` (Slurm's shrink) and the total as the user sees it.

Usage: ``.venv/bin/python bench/resize.py [--reps 5] [--n 1024]`` (the cluster must be up).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from elastic_slurm import api, jobs
from elastic_slurm.adapter.capabilities import cached_probe
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.config import load_site
from elastic_slurm.model import ElasticRequest, JobKind
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.resources import example


def wait(check, timeout_s: float, what: str):  # noqa: ANN001, ANN201 - a tiny poller
    """Poll ``check`` until it is truthy; exit with ``what`` after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def run_case(
    slurm,
    path: str,
    workdir: Path,
    start: int,
    top: int,
    reps: int,
    n: int,
    samples: dict[str, list[dict[str, float]]],
) -> None:
    """Resize heat2d between ``start`` and ``top`` nodes ``reps`` times; record the phases."""
    req = ElasticRequest(
        program=(
            str(example("heat2d.py")),
            "--n",
            str(n),
            "--iterations",
            "1000000",
            "--pace-s",
            "0.01",
            "--report-every",
            "1000000000",
        ),
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=4,
        nodes_start=start,
        walltime=timedelta(minutes=30),
        job_name="bench-resize",
    )
    job = api.submit(req, slurm, workdir=workdir, output=str(workdir / "bench-%j.out"))
    jobdir = JobDir.for_job(workdir, job)
    try:
        wait(lambda: any(e["event"] == "launch" for e in jobdir.events()), 60, "the job")
        for i in range(reps):
            for target, kind in ((top, f"grow {start}->{top}"), (start, f"shrink {top}->{start}")):
                time.sleep(2.1)  # accounting keeps one record per second; let the job run
                out = jobs.resize(slurm, job, target, grow_path=path, timeout_s=120)
                if not out.ok:
                    raise SystemExit(f"resize {kind} failed: {out.message}")
                strategy = out.strategy
                samples.setdefault(f"{kind} ({strategy})", []).append(
                    {**out.phases_s, "total": out.seconds}
                )
                print(
                    f"  rep {i + 1}: {kind} via {strategy} in {out.seconds:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        slurm.cancel_job(job)
        wait(
            lambda: all(nd.model_state.value == "idle" for nd in slurm.nodes()),
            60,
            "the nodes to be idle",
        )


def main() -> int:
    """Run both cases and print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--n", type=int, default=1024, help="heat2d grid size (n x n doubles)")
    args = p.parse_args()
    site = load_site()
    slurm = slurm_for(site)
    path = cached_probe(slurm.transport, site.name, preference=site.grow_path).grow_path
    samples: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-resize-", dir="/var/tmp") as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)
        run_case(slurm, path, workdir, 1, 3, args.reps, args.n, samples)
        run_case(slurm, path, workdir, 2, 4, args.reps, args.n, samples)
    print(
        f"heat2d {args.n}x{args.n} doubles ({args.n * args.n * 8 / 2**20:.0f} MiB), "
        f"grow path {path}, {args.reps} repetitions; seconds: median [min-max]"
    )
    for kind, rows in samples.items():
        phases = sorted({k for r in rows for k in r}, key=lambda k: (k == "total", k))
        cells = []
        for ph in phases:
            vals = [r[ph] for r in rows if ph in r]
            cells.append(f"{ph} {statistics.median(vals):.2f} [{min(vals):.2f}-{max(vals):.2f}]")
        print(f"{kind:<28} " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
