"""Time to observe N jobs with each Slurm backend (CLI and pyslurm), in one run.

For each N (10, 100, 1000 by default) the benchmark brings the queue to N held jobs of its own
(``sbatch --hold``: they stay pending and use no node), then times ``backend.jobs()`` (one
observation of every job slurmctld knows, as the controller's poll does) with the
command-line backend (``squeue --json`` and its parser) and the pyslurm backend
(``slurm_load_jobs`` and the mapping), the two taking turns, several repetitions each, and
prints the medians and the pyslurm/CLI ratio. Both backends must report the same N jobs,
field by field, or the run fails. All the jobs are cancelled at the end, also on errors.

Ended jobs stay in slurmctld's memory for ``MinJobAge`` seconds (600 on the local cluster),
and every observation returns them too: the ``records`` column says how many jobs each
observation returned (N plus what the queue held before; a second run within ``MinJobAge``
also sees the first run's jobs).

Usage::

    ELASTIC_SLURM_SITE=site.yaml .venv/bin/python bench/observe.py [--sizes 10,100,1000]
        [--repeat 7]

Needs a running cluster for the site and pyslurm installed; run it on a cluster no one else
is using at the time (it queues up to N jobs).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.config import load_site

JOB_NAME = "bench-observe"
SCRIPT = "#!/bin/sh\nexit 0\n"


def submit_held(cli: SlurmCLI, count: int, into: list[int], workers: int = 8) -> None:
    """Submit ``count`` held one-node jobs with ``sbatch``, appending their ids to ``into``.

    Ids are appended as they come, so that jobs queued before a failure are still cancelled.
    """

    def one(_: int) -> None:
        res = cli.run(
            [
                "sbatch",
                "--parsable",
                "--hold",
                "--nodes=1",
                "--time=5",
                f"--job-name={JOB_NAME}",
                "--output=/dev/null",
                "--chdir=/tmp",
            ],
            input_text=SCRIPT,
            retry=False,  # a retried sbatch could queue a job twice, one never cancelled
        )
        into.append(int(res.stdout.strip().split(";")[0]))  # list.append is thread-safe

    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(one, range(count)):
            pass


def cancel_all(cli: SlurmCLI, ids: list[int], chunk: int = 200) -> None:
    """Cancel ``ids`` with ``scancel``, ``chunk`` ids per command."""
    for i in range(0, len(ids), chunk):
        cli.cancel(*ids[i : i + chunk])


def observe(
    backends: dict[str, SlurmBackend], ids: list[int], repeat: int
) -> dict[str, tuple[float, int]]:
    """Median time (seconds) and record count of ``jobs()`` per backend.

    Each backend is called once to warm up, then ``repeat`` timed times, the backends taking
    turns so that drift in the machine's load hits both alike. Both must report every job of
    ``ids``, with equal fields.
    """
    wanted = set(ids)
    seen = {name: {j.job_id: j for j in backend.jobs()} for name, backend in backends.items()}
    times: dict[str, list[float]] = {name: [] for name in backends}
    for _ in range(repeat):
        for name, backend in backends.items():
            t0 = time.perf_counter()
            jobs = backend.jobs()
            times[name].append(time.perf_counter() - t0)
            seen[name] = {j.job_id: j for j in jobs}
    for name in backends:
        missing = wanted - set(seen[name])
        if missing:
            raise SystemExit(f"{name} missed {len(missing)} of the {len(wanted)} submitted jobs")
    ref, other = (seen[name] for name in backends)
    differ = sorted(j for j in wanted if ref[j] != other[j])
    if differ:
        raise SystemExit(f"the backends disagree on {len(differ)} job(s), e.g. job {differ[0]}")
    return {name: (statistics.median(times[name]), len(seen[name])) for name in backends}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", help="site config (default: $ELASTIC_SLURM_SITE, else local)")
    ap.add_argument("--sizes", default="10,100,1000", help="numbers of jobs, comma-separated")
    ap.add_argument("--repeat", type=int, default=7, help="timed observations per backend")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    site = load_site(args.site)
    cli = slurm_for(site.model_copy(update={"backend": "cli"}))
    assert isinstance(cli, SlurmCLI)
    ps = slurm_for(site.model_copy(update={"backend": "pyslurm"}))
    backends: dict[str, SlurmBackend] = {"cli": cli, "pyslurm": ps}
    v = cli.version()
    print(
        f"site {site.name} (cluster {site.cluster_name}, SLURM_CONF={site.slurm_conf}), "
        f"Slurm {v[0]}.{v[1]:02d}.{v[2]}, {args.repeat} observations per backend "
        "and size, medians"
    )
    rows = []
    ids: list[int] = []
    try:
        for n in sorted(sizes):  # the queue grows to each N; all are cancelled at the end
            t0 = time.perf_counter()
            submit_held(cli, n - len(ids), ids)
            submit_s = time.perf_counter() - t0
            res = observe(backends, ids, args.repeat)
            (cli_s, cli_n), (ps_s, ps_n) = res["cli"], res["pyslurm"]
            rows.append((n, cli_n, ps_n, cli_s, ps_s))
            print(f"  N={n}: done ({submit_s:.1f} s to submit)", file=sys.stderr)
    finally:
        cancel_all(cli, ids)

    print()
    print(f"{'N':>6} {'records':>9} {'CLI ms':>10} {'pyslurm ms':>11} {'pyslurm/CLI':>12}")
    for n, cli_n, ps_n, cli_s, ps_s in rows:
        records = str(cli_n) if cli_n == ps_n else f"{cli_n}/{ps_n}"
        print(f"{n:>6} {records:>9} {cli_s * 1e3:>10.1f} {ps_s * 1e3:>11.1f} {ps_s / cli_s:>12.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
