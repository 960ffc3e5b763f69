"""``elastic-slurm report JOURNAL``: draw a controller journal's jobs, resizes and utilisation.

The figure (:func:`elastic_slurm.controller.report.draw_report`) is a Gantt chart of the jobs
with their resizes over the cluster's utilisation, as PNG or SVG (by the output's suffix).
Prints where it was written and a one-line summary; with ``--json``, one JSON object instead
(:func:`elastic_slurm.controller.report.summary` plus ``figure``, the path written).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``report`` subcommand."""
    p = sub.add_parser(
        "report",
        help="draw a controller journal: jobs with their resizes, and utilisation (PNG/SVG)",
        description="Draw the jobs a controller journal saw (a Gantt chart with their resizes) "
        "over the cluster's utilisation, and print a summary.",
    )
    p.add_argument("journal", type=Path, metavar="JOURNAL", help="the controller's journal file")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="figure to write, .png or .svg (default: JOURNAL with the suffix .png)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Draw the report and print its summary.

    Returns 2 if the journal is missing, unreadable or has nothing to draw; 1 (after the
    summary) if matplotlib is not installed, with a one-line hint naming the extra.
    """
    from elastic_slurm.controller.journal import Journal
    from elastic_slurm.controller.report import draw_report, summary, summary_line

    path: Path = args.journal
    if not path.is_file():
        # a clear message rather than sqlite's "unable to open database file"
        print(f"elastic-slurm: error: no journal at {path}", file=sys.stderr)
        return 2
    output: Path = args.output if args.output is not None else path.with_suffix(".png")
    try:
        journal = Journal(path, readonly=True)
        try:
            records = journal.records
        finally:
            journal.close()
    except sqlite3.DatabaseError as exc:
        print(f"elastic-slurm: error: {path} is not a journal: {exc}", file=sys.stderr)
        return 2
    info = summary(records)
    try:
        written: Path | None = draw_report(records, output)
    except ValueError as exc:
        print(f"elastic-slurm: error: {path}: {exc}", file=sys.stderr)
        return 2
    except ImportError:  # the summary needs no matplotlib; the figure does
        written = None
    if args.json:
        print(json.dumps({**info, "figure": None if written is None else str(written)}))
    else:
        if written is not None:
            print(f"wrote {written}")
        print(summary_line(info))
    if written is None:
        print(
            "elastic-slurm: error: no figure drawn: report needs matplotlib, which is not "
            "installed: pip install 'elastic-slurm[sim]'",
            file=sys.stderr,
        )
        return 1
    return 0
