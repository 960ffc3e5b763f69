"""``elastic-slurm reproduce``: regenerate docs/reproduction.md from the simulator."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from elastic_slurm.simulator.repro import PAPERS, build_report


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``reproduce`` subcommand."""
    p = sub.add_parser("reproduce", help="reproduce the papers' results (docs/reproduction.md)")
    p.add_argument("--out", type=Path, default=Path("docs/reproduction.md"))
    p.add_argument("--quick", action="store_true", help="a reduced run that takes seconds")
    p.add_argument("--paper", action="append", choices=PAPERS, help="only these (repeat)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the report; exit 1 if a paper's reproduction failed to run."""
    sections = build_report(
        args.out,
        quick=args.quick,
        papers=args.paper or PAPERS,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    for s in sections:
        agreed = sum(c.agrees for c in s.checks)
        print(f"{s.title}: {agreed}/{len(s.checks)} results reproduced ({s.seconds:.0f} s)")
    print(f"wrote {args.out}")
    return 1 if any(s.markdown.startswith("The reproduction of") for s in sections) else 0
