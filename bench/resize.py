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
On a newer flavour, bring its cluster up and name its site::

    elastic-slurm cluster up --flavour trixie
    ELASTIC_SLURM_SITE=local-trixie SLURM_CONF=/var/lib/elastic-slurm/trixie/etc/slurm.conf \
        .venv/bin/python bench/resize.py --reps 3 --n 2048

(the jobs then run the chroot's ``python3`` in a directory below the cluster's state directory,
which the chroot sees).

``--micro`` measures instead what one ``resize_point()`` with no order pending costs (no
cluster needed: ``mpirun`` on this machine, a real protocol server in this process): without a
job directory (a fixed-size run), and with a controller through the overlapped path (the
watcher thread and the pre-posted vote) and through the sequential path (an HTTP request per
call, ``ELASTIC_SLURM_RESIZE_PATH=sequential``).
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
from elastic_slurm.adapter.factory import job_python, slurm_for
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


#: The resize paths ``--paths`` may name.
PATHS = ("overlap", "overlap-nonice", "sequential")


def run_case(
    slurm,
    path: str,
    workdir: Path,
    start: int,
    top: int,
    reps: int,
    n: int,
    samples: dict[tuple[str, str], list[dict[str, float]]],
    resize_path: str,
    python: str,
    mpi_env: dict[str, str],
) -> None:
    """Resize heat2d between ``start`` and ``top`` nodes ``reps`` times; record the phases.

    ``resize_path``: ``overlap`` (the runtime's default), ``overlap-nonice`` (the same, but the
    old generation keeps its priority while its successor starts: ``SUCCESSOR_NICE=0``) or
    ``sequential`` (the old path); ``mpi_env``: the site's MPI parameters.
    """
    if resize_path not in PATHS:
        raise SystemExit(f"unknown resize path {resize_path!r}: use {', '.join(PATHS)}")
    extra_env = [("ELASTIC_SLURM_RESIZE_PATH", resize_path.split("-")[0])]
    if resize_path == "overlap-nonice":
        extra_env.append(("ELASTIC_SLURM_SUCCESSOR_NICE", "0"))
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
        extra_env=tuple(extra_env),
    )
    job = api.submit(
        req,
        slurm,
        workdir=workdir,
        output=str(workdir / "bench-%j.out"),
        python=python,
        mpi_env=mpi_env,
    )
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
                samples.setdefault((f"{kind} ({strategy})", resize_path), []).append(
                    {**out.phases_s, "total": out.seconds}
                )
                pause = out.phases_s.get("pause", float("nan"))
                print(
                    f"  {resize_path} rep {i + 1}: {kind} via {strategy} in {out.seconds:.2f} s"
                    f", pause {pause:.2f} s",
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


def micro_worker(calls: int) -> None:
    """In each rank of ``--micro``: time ``calls`` resize points; rank 0 prints microseconds.

    Each iteration first does a little work, as an application would (a halo exchange with
    the neighbours and 1 ms of computing), and only the ``resize_point()`` call is timed.
    """
    import json

    import numpy as np

    from elastic_slurm.mpi_runtime import init

    ec = init()
    comm = ec.comm
    halo, got = np.ones(1024), np.empty(1024)
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    spent = np.empty(calls)
    for i in range(calls + 20):  # the first 20: warming up (the vote, the watcher's start)
        comm.Sendrecv(halo, dest=right, recvbuf=got, source=left)
        t_work = time.perf_counter() + 0.001
        while time.perf_counter() < t_work:
            pass
        t0 = time.perf_counter()
        ec.resize_point()
        if i >= 20:
            spent[i - 20] = time.perf_counter() - t0
    means = comm.gather(float(spent.mean() * 1e6), root=0)
    medians = comm.gather(float(np.median(spent) * 1e6), root=0)
    if ec.rank == 0:
        print(
            json.dumps(
                {
                    "mean_us": max(means),
                    "median_us": max(medians),
                    "per_rank_mean_us": means,
                    "per_rank_median_us": medians,
                }
            ),
            flush=True,
        )


def micro(calls: int, ranks: int) -> int:
    """Print the cost of a resize point with no order pending, per path (microseconds)."""
    import json
    import os
    import subprocess

    from elastic_slurm.protocol.gateway import Gateway, JobRecord
    from elastic_slurm.protocol.identity import IdentityError, make_credential
    from elastic_slurm.protocol.server import ProtocolServer

    try:  # rank 0 signs its messages with MUNGE: without it, the ranks would go on offline
        make_credential(None, payload="bench")
    except IdentityError as exc:
        raise SystemExit(f"--micro needs munged running (elastic-slurm cluster up): {exc}") from exc

    def refuse(credential: str, socket: str | None):  # noqa: ANN202 - registration refused
        raise IdentityError("the benchmark registers no job")

    with tempfile.TemporaryDirectory(prefix="bench-micro-") as tmp:
        job = 4242
        record = JobRecord(job, "root", tmp, True)
        gateway = Gateway(lambda j: record if j == job else None, verify=refuse)
        server = ProtocolServer(gateway, "127.0.0.1:0").start()
        jobdir = JobDir.for_job(tmp, job)
        jobdir.create()
        jobdir.write_secret("bench-secret")
        base = {
            **os.environ,
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        }
        with_controller = {
            "ELASTIC_SLURM_JOB_DIR": str(jobdir.path),
            "ELASTIC_SLURM_CONTROLLER": server.url,
            "ELASTIC_SLURM_JOB_SECRET": "bench-secret",
            "ELASTIC_SLURM_JOB_ID": str(job),
        }
        cases = {
            "no job directory (fixed size)": {},
            "controller, overlapped path": with_controller,
            "controller, sequential path": {
                **with_controller,
                "ELASTIC_SLURM_RESIZE_PATH": "sequential",
            },
        }
        results = {}
        try:
            for name, extra in cases.items():
                argv = ["mpirun", "-n", str(ranks), "--oversubscribe", "--bind-to", "none"]
                argv += [sys.executable, __file__, "--micro-worker", "--calls", str(calls)]
                env = {k: v for k, v in base.items() if not k.startswith("ELASTIC_SLURM_")}
                out = subprocess.run(
                    argv, env={**env, **extra}, capture_output=True, text=True, check=False
                )
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                if out.returncode != 0 or not lines:
                    raise SystemExit(f"{name}: mpirun failed: {out.stderr[-500:]}")
                results[name] = json.loads(lines[-1])
        finally:
            server.stop()
    print(
        f"resize_point() with no order pending, {ranks} ranks, {calls} calls "
        "(slowest rank; microseconds per call)"
    )
    print(f"{'':<34} {'mean':>10} {'median':>10}")
    for name, r in results.items():
        per_rank = ", ".join(
            f"{a:.1f}/{b:.1f}"
            for a, b in zip(r["per_rank_mean_us"], r["per_rank_median_us"], strict=True)
        )
        print(
            f"{name:<34} {r['mean_us']:10.1f} {r['median_us']:10.1f}   per rank mean/median: "
            f"{per_rank}"
        )
    seq, ovl = results["controller, sequential path"], results["controller, overlapped path"]
    print(
        f"{'sequential / overlapped':<34} {seq['mean_us'] / ovl['mean_us']:9.0f}x "
        f"{seq['median_us'] / ovl['median_us']:9.0f}x"
    )
    return 0


def main() -> int:
    """Run both cases and print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--n", type=int, default=1024, help="heat2d grid size (n x n doubles)")
    p.add_argument("--micro", action="store_true", help="the cost of an idle resize point")
    p.add_argument(
        "--paths",
        default="overlap,sequential",
        help="resize paths to compare, comma-separated: overlap (new), sequential (old), "
        "overlap-nonice (new, the old ranks keeping their priority while the successor starts)",
    )
    p.add_argument("--micro-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--calls", type=int, default=1000, help="resize points timed (--micro)")
    p.add_argument("--ranks", type=int, default=2, help="ranks (--micro)")
    args = p.parse_args()
    if args.micro_worker:
        micro_worker(args.calls)
        return 0
    if args.micro:
        return micro(args.calls, args.ranks)
    site = load_site()
    slurm = slurm_for(site)
    path = cached_probe(slurm.transport, site.name, preference=site.grow_path).grow_path
    samples: dict[tuple[str, str], list[dict[str, float]]] = {}
    py = job_python(site)  # a flavour's jobs run the chroot's python3
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    for unknown in sorted(set(paths) - set(PATHS)):
        p.error(f"unknown resize path {unknown!r}: use {', '.join(PATHS)}")
    # a flavour's chroot sees only the cluster's own directories (and the source tree)
    scratch = site.local_cluster.state_dir if site.local_cluster is not None else Path("/var/tmp")
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-resize-", dir=scratch) as tmp:
        workdir = Path(tmp)
        workdir.chmod(0o755)
        for resize_path in paths:
            for start, top in ((1, 3), (2, 4)):
                run_case(
                    slurm,
                    path,
                    workdir,
                    start,
                    top,
                    args.reps,
                    args.n,
                    samples,
                    resize_path,
                    py,
                    site.mpi_env,
                )
    print(
        f"heat2d {args.n}x{args.n} doubles ({args.n * args.n * 8 / 2**20:.0f} MiB), "
        f"grow path {path}, {args.reps} repetitions; seconds: median [min-max]"
    )

    def cell(rows: list[dict[str, float]], ph: str) -> str:
        vals = [r[ph] for r in rows if ph in r]
        if not vals:
            return "-"
        return f"{statistics.median(vals):.2f} [{min(vals):.2f}-{max(vals):.2f}]"

    print(f"{'resize':<24} {'path':<14} {'pause':<18} {'total':<18} phases (medians)")
    for (kind, resize_path), rows in sorted(samples.items()):
        phases = sorted({k for r in rows for k in r} - {"total", "pause"})
        detail = ", ".join(
            f"{ph} {statistics.median(r[ph] for r in rows if ph in r):.2f}" for ph in phases
        )
        print(
            f"{kind:<24} {resize_path:<14} {cell(rows, 'pause'):<18} {cell(rows, 'total'):<18} "
            f"{detail}"
        )
    for base, other in (("sequential", "overlap"), ("overlap-nonice", "overlap")):
        if not {base, other} <= set(paths):
            continue
        print(f"{base} / {other} (medians):")
        kinds = sorted({k for k, _p in samples})
        for kind in kinds:
            new, old = samples.get((kind, other)), samples.get((kind, base))
            if not new or not old:
                continue
            ratios = []
            for ph in ("pause", "total"):
                a = [r[ph] for r in old if ph in r]
                b = [r[ph] for r in new if ph in r]
                if a and b and statistics.median(b) > 0:
                    ratios.append(f"{ph} {statistics.median(a) / statistics.median(b):.2f}x")
            print(f"  {kind:<24} " + ", ".join(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
