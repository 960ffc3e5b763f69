"""``elastic-slurm policies``: the scheduling policies, and any that failed to load."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from elastic_slurm.plugins.registry import available


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``policies`` subcommand."""
    p = sub.add_parser("policies", help="list the scheduling policies and load errors")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List every registered policy with its origin and its load error, if any."""
    infos = available()
    if args.json:
        print(
            json.dumps(
                [
                    {"name": i.name, "target": i.target, "error": str(i.error) if i.error else None}
                    for i in infos
                ]
            )
        )
    else:
        table = Table(title="policies (entry points: elastic_slurm.policies)")
        for col in ("name", "target", "status"):
            table.add_column(col)
        for i in infos:
            table.add_row(i.name, i.target, f"FAILED: {i.error}" if i.error else "ok")
        Console().print(table)
    return 1 if any(i.error for i in infos) else 0
