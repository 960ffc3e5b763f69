"""``elastic-slurm queue``: like ``squeue``, with each job's kind, size range and resize."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from elastic_slurm import jobs
from elastic_slurm.adapter.hostlist import compress
from elastic_slurm.config import load_site


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``queue`` subcommand."""
    p = sub.add_parser("queue", help="list jobs like squeue, with kind, size range and resize")
    p.add_argument("-u", "--user", help="only this user's jobs")
    p.add_argument("--all", action="store_true", help="also jobs that ended recently")
    p.add_argument("--json", action="store_true", help="print one JSON list")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the queue."""
    found = jobs.queue(jobs.site_backend(load_site(args.site)), user=args.user, all_states=args.all)
    if args.json:
        print(json.dumps([j.to_json() for j in found]))
        return 0
    table = Table(box=None, pad_edge=False)
    for col in (
        "JOBID",
        "NAME",
        "USER",
        "STATE",
        "KIND",
        "NODES",
        "MIN",
        "MAX",
        "RESIZE",
        "NODELIST",
    ):
        table.add_column(col, no_wrap=True)
    for j in found:
        table.add_row(
            str(j.job_id),
            j.name,
            j.user,
            j.state,
            j.kind,
            str(j.size),
            str(j.nodes_min),
            str(j.nodes_max),
            j.resize or "-",
            compress(j.nodes) if j.nodes else "",
        )
    Console(width=200).print(table)
    return 0
