#!/usr/bin/env python3
# ruff: noqa: E402 (the imports below need this checkout on sys.path first)
"""Fuzz every input surface of elastic-slurm with many cases and print what happened.

The suite (``tests/fuzz/``) runs a few hundred cases per surface; this command runs the same
hypothesis strategies (``tests/fuzz/surfaces.py``) with 10,000 per surface by default, each
under a time bound, and prints one row per surface: cases, accepted, refused with a clear
error, uncaught (another exception, or an invalid accepted value), hung (past the bound).
The first uncaught or hung case of each kind (exception type) is printed under the table.

Usage::

    scripts/fuzz.py [--cases N] [--surface S ...] [--bound-s SECONDS] [--seed SEED]

Exit status: 0 when no case was uncaught or hung, 1 otherwise.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]  # this checkout's code and strategies

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from fuzz.surfaces import _PROTOCOL, BOUND_S, SURFACES, Surface, classify

KINDS = ("accepted", "refused", "uncaught", "hung")
SHOWN = 4  # uncaught or hung cases printed per surface (one per exception type)


def fuzz_surface(
    surface: Surface,
    cases: int,
    bound_s: float,
    progress: Progress,
    seed: int | None,
) -> tuple[Counter[str], list[tuple[str, str, str]], float]:
    """Run ``cases`` cases of ``surface``; return the counts, the first findings, seconds."""
    counts: Counter[str] = Counter()
    findings: list[tuple[str, str, str]] = []
    task = progress.add_task(surface.name, total=cases)

    @settings(
        max_examples=cases,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(surface.strategy)
    def one(case: object) -> None:
        outcome = classify(surface, case, bound_s)
        counts[outcome.kind] += 1
        what = outcome.detail.split(":", 1)[0]  # one example per kind of finding
        if outcome.kind in ("uncaught", "hung") and len(findings) < SHOWN:
            if all(f[1].split(":", 1)[0] != what for f in findings):
                findings.append((outcome.kind, outcome.detail, repr(case)[:300]))
        progress.update(task, advance=1, description=f"{surface.name} ({_brief(counts)})")

    if seed is not None:
        one = hypothesis_seed(seed)(one)
    started = time.monotonic()
    one()
    progress.update(task, total=sum(counts.values()))
    return counts, findings, time.monotonic() - started


def _brief(counts: Counter[str]) -> str:
    return ", ".join(f"{k} {counts[k]}" for k in KINDS if counts[k])


def main(argv: list[str] | None = None) -> int:
    """Parse the options, fuzz each surface, print the table; the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases per surface")
    parser.add_argument(
        "--surface",
        action="append",
        choices=sorted(SURFACES),
        help="only this surface (repeatable; default: all)",
    )
    parser.add_argument("--bound-s", type=float, default=BOUND_S, help="time bound of a case")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (reproducible)")
    args = parser.parse_args(argv)
    if args.cases < 1 or not 0 < args.bound_s < 600:
        parser.error("--cases must be at least 1 and --bound-s between 0 and 600")
    logging.disable(logging.WARNING)  # readers warn about what they refuse or skip
    console = Console(width=None if sys.stdout.isatty() else 110)
    rows = []
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    try:
        with Progress(*columns, console=console) as progress:
            for name in args.surface or list(SURFACES):
                found = fuzz_surface(SURFACES[name], args.cases, args.bound_s, progress, args.seed)
                rows.append((name, *found))
    finally:
        for proto in _PROTOCOL:  # the protocol surface's temporary job directory
            proto.close()
    table = Table(title=f"fuzz: up to {args.cases} cases per surface, {args.bound_s:g} s bound")
    table.add_column("surface")
    table.add_column("cases", justify="right")
    for kind, label in zip(
        KINDS, ("accepted", "refused (clear error)", "uncaught", "hung"), strict=True
    ):
        table.add_column(
            label, justify="right", style="red" if kind in ("uncaught", "hung") else None
        )
    table.add_column("seconds", justify="right")
    bad = 0
    for name, counts, _findings, seconds in rows:
        bad += counts["uncaught"] + counts["hung"]
        table.add_row(
            name, str(sum(counts.values())), *(str(counts[k]) for k in KINDS), f"{seconds:.0f}"
        )
    console.print(table)
    for name, _counts, findings, _seconds in rows:
        for kind, detail, case in findings:
            console.print(f"{name} {kind}: {detail}", markup=False, style="bold")
            console.print(f"    case: {case}", markup=False, highlight=False)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
