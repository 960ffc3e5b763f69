"""The soak's command line: ``python -m elastic_slurm.soak`` (``docs/soak.md``).

Exit status 0 when nothing was lost or leaked and every fault was injected and survived, 1
otherwise, 2 when the soak could not run (bad arguments, the cluster or the controller did not
start). :func:`add_arguments` and :func:`run` let another command line host it (an
``elastic-slurm soak`` subcommand).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from elastic_slurm.errors import ElasticSlurmError

DESCRIPTION = (
    "Replay a trace slice live on a soak cluster of its own with the controller running, inject "
    "faults on a schedule, and print jobs and resizes lost, allocations leaked, cycle time, "
    "peak memory and idle CPU. Exit 1 if anything was lost or leaked."
)


def add_arguments(p: argparse.ArgumentParser, *, site: bool = True) -> None:
    """Add the soak's options to ``p``.

    ``site``: with its own ``--site``; a host command that has a global ``--site`` passes
    ``False`` (an unset one then means the soak's own site config).
    """
    from elastic_slurm.soak.schedule import FAULTS

    p.add_argument("--nodes", type=int, default=32, help="slurmd nodes (default 32)")
    p.add_argument("--minutes", type=float, default=30.0, help="window of arrivals (default 30)")
    p.add_argument("--jobs", type=int, help="trace jobs (default: 10 a minute)")
    if site:
        p.add_argument("--site", type=Path, help="site config (default: soak/site.yaml)")
    p.add_argument("--trace", type=Path, help="SWF trace (default: SDSC-SP2, shared workloads)")
    p.add_argument("--policy", help="policy (default: the site config's, pending_first)")
    p.add_argument("--out", type=Path, help="output directory (journal, logs, soak.json)")
    p.add_argument("--drain-minutes", type=float, help="wait for the jobs after the window")
    p.add_argument("--idle-seconds", type=float, help="idle CPU window (default 60, 20 if short)")
    p.add_argument(
        "--faults",
        help=f"comma-separated faults to inject (default all: {','.join(FAULTS)})",
    )
    p.add_argument("--keep-cluster", action="store_true", help="leave the soak cluster up")
    p.add_argument(
        "--service-user",
        metavar="USER",
        help="run the controller as this unprivileged user, no capability "
        "(controller.privilege: service; made if missing); default: as root",
    )
    p.add_argument("--json", action="store_true", help="print soak.json instead of the table")


def parser() -> argparse.ArgumentParser:
    """The arguments of ``python -m elastic_slurm.soak``."""
    p = argparse.ArgumentParser(prog="python -m elastic_slurm.soak", description=DESCRIPTION)
    add_arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Run the soak of parsed ``args``; its exit status (see the module docstring)."""
    from elastic_slurm.soak.report import failures, table
    from elastic_slurm.soak.run import SOAK_SITE, default_out_dir, soak
    from elastic_slurm.soak.schedule import FAULTS
    from elastic_slurm.soak.workload import default_trace

    only = None
    if args.faults:
        only = tuple(f.strip() for f in args.faults.split(",") if f.strip())
        unknown = sorted(set(only) - set(FAULTS))
        if unknown:
            print(f"soak: unknown fault(s) {unknown}; known: {', '.join(FAULTS)}", file=sys.stderr)
            return 2
    out = args.out or default_out_dir()
    short = args.minutes < 30
    try:
        result = soak(
            site_file=Path(args.site) if args.site else SOAK_SITE,
            nodes=args.nodes,
            window_s=60.0 * args.minutes,
            jobs=args.jobs or max(10, round(10 * args.minutes)),
            out_dir=out,
            trace=args.trace or default_trace(),
            policy=args.policy,
            drain_s=None if args.drain_minutes is None else 60.0 * args.drain_minutes,
            idle_window_s=args.idle_seconds or (20.0 if short else 60.0),
            only=only,
            keep_cluster=args.keep_cluster,
            service_user=args.service_user,
            say=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except ElasticSlurmError as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_json(), indent=1, default=str))
    else:
        print(table(result))
        print(f"\n(journal, logs and soak.json in {out})")
    bad = failures(result)
    for line in bad:
        print(f"FAIL: {line}", file=sys.stderr)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the soak; its exit status."""
    return run(parser().parse_args(argv))
