"""``elastic-slurm policies``: the scheduling policies, what each does, and any that failed to load.

For each policy: its summary, paper and section, the job kinds it sizes or resizes, whether it
ever resizes running jobs, and its options with their defaults. The module imports only the
registry at start-up (no numpy, no simulator); the table library loads when a table is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from elastic_slurm.plugins.registry import PolicyInfo, available


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``policies`` subcommand."""
    p = sub.add_parser(
        "policies",
        help="list the scheduling policies, what each does, and load errors",
        description="List the installed scheduling policies (entry points of group "
        "elastic_slurm.policies): summary, paper and section, the job kinds each sizes or "
        "resizes, whether it resizes running jobs, and its options with their defaults. "
        "Exits 1 when a policy failed to load.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON list, one object a policy")
    p.set_defaults(func=run)


def describe(info: PolicyInfo) -> dict[str, Any]:
    """One policy as ``--json`` prints it: registry name, target, error, and its metadata.

    A policy that failed to load has only ``name``, ``target`` and ``error``.
    """
    row: dict[str, Any] = {
        "name": info.name,
        "target": info.target,
        "error": str(info.error) if info.error else None,
    }
    if info.policy_class is not None:
        row.update({k: v for k, v in info.policy_class.describe().items() if k != "name"})
    return row


def _kinds(row: dict[str, Any]) -> str:
    kinds = ", ".join(row.get("job_kinds", ()))
    if not row.get("resizes", False):
        kinds += "\n(never resizes running jobs)"
    return kinds


def _source(row: dict[str, Any]) -> str:
    return "\n".join(x for x in (row.get("paper", ""), row.get("section", "")) if x)


def _options(row: dict[str, Any]) -> str:
    options = row.get("options", {})
    return "\n".join(f"{k} ({v})" for k, v in options.items()) or "none"


def run(args: argparse.Namespace) -> int:
    """List every registered policy with its metadata and its load error, if any.

    Returns
    -------
    int
        0, or 1 when a policy failed to load.
    """
    infos = available()
    rows = [describe(i) for i in infos]
    if args.json:
        print(json.dumps(rows))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="policies (entry points: elastic_slurm.policies)", show_lines=True)
        table.add_column("name", no_wrap=True)
        for col in ("what it does", "paper, section", "job kinds it sizes", "options"):
            table.add_column(col)
        for row in rows:
            if row["error"]:
                table.add_row(row["name"], f"FAILED: {row['error']}", row["target"], "", "")
            else:
                what = row.get("summary", "")
                table.add_row(row["name"], what, _source(row), _kinds(row), _options(row))
        # a terminal's width when printing to one; piped, wide enough to keep words whole
        Console(width=None if sys.stdout.isatty() else 160).print(table)
    return 1 if any(i.error for i in infos) else 0
