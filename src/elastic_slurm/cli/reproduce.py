"""``elastic-slurm reproduce``: rerun the papers' experiments in the simulator, write a report.

The report (``reproduction.md``, figures in ``reproduction/`` beside it) goes to ``--out``
(a folder, or a ``.md`` file), by default the current folder: nothing in the source tree is
written unless asked with ``--update-docs``, which regenerates the checkout's
``docs/reproduction.md`` and its figures. The traces are read from ``--traces DIR``, else
``ELASTIC_SLURM_WORKLOADS``, else ``shared/workloads`` beside a source checkout; they are the
Parallel Workloads Archive's SDSC-SP2 and KTH-SP2 logs and a Lublin-model trace (see
``docs/reproduction.md``). A paper whose reproduction fails is a failed check in the report
(its traceback on stderr) and the exit status is 1.

The simulator is imported inside :func:`run`, so that ``elastic-slurm --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from elastic_slurm.errors import InvalidRequest

#: The papers, in the report's order (the modules of ``elastic_slurm.simulator.repro``).
PAPERS = ("klein_perez", "ghafoor", "huang", "lina")
REPORT = "reproduction.md"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``reproduce`` subcommand."""
    p = sub.add_parser(
        "reproduce",
        help="reproduce the papers' results in the simulator and write a report",
        description="Rerun the papers' experiments (Klein & Perez, Ghafoor, Huang et al., "
        "Lina et al.) in the simulator and write reproduction.md with every number beside "
        "the paper's, and its figures.",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR|FILE.md",
        help=f"where to write the report: a folder (then {REPORT} in it) or a .md file "
        "(default: the current folder); figures go to reproduction/ beside it",
    )
    p.add_argument(
        "--update-docs",
        action="store_true",
        help="regenerate the source checkout's docs/reproduction.md and its figures",
    )
    p.add_argument(
        "--traces",
        type=Path,
        default=None,
        metavar="DIR",
        help="the folder of the SWF traces (default: $ELASTIC_SLURM_WORKLOADS, else "
        "shared/workloads beside the source checkout)",
    )
    p.add_argument("--quick", action="store_true", help="a reduced run that takes seconds")
    p.add_argument("--paper", action="append", choices=PAPERS, help="only these (repeat)")
    p.set_defaults(func=run)


def checkout_docs() -> Path:
    """The source checkout's ``docs`` folder (this file is ``src/elastic_slurm/cli/...``).

    Raises
    ------
    InvalidRequest
        The package does not run from a source checkout (an installed wheel).
    """
    root = Path(__file__).resolve().parents[3]
    docs = root / "docs"
    if not (root / "pyproject.toml").is_file() or not docs.is_dir():
        raise InvalidRequest(
            "--update-docs regenerates a source checkout's docs/, and this elastic-slurm runs "
            f"from {root}, not a checkout: give the report a place with --out instead"
        )
    return docs


def report_path(out: Path | None, update_docs: bool) -> Path:
    """Where the report goes: ``--out`` (folder or ``.md``), the docs, or the current folder.

    Raises
    ------
    InvalidRequest
        For ``--out`` with ``--update-docs``, or ``--update-docs`` outside a checkout.
    """
    if update_docs:
        if out is not None:
            raise InvalidRequest("give either --out or --update-docs, not both")
        return checkout_docs() / REPORT
    if out is None:
        return Path.cwd() / REPORT
    return out if out.suffix.lower() == ".md" else out / REPORT


def run(args: argparse.Namespace) -> int:
    """Build the report; exit 1 if a paper's reproduction failed to run.

    Raises
    ------
    InvalidRequest
        For a traces folder that does not exist (the message names ``--traces``), or a bad
        combination of ``--out`` and ``--update-docs``.
    """
    from elastic_slurm.simulator.repro import NEEDS_TRACES, build_report, find_traces

    papers = args.paper or list(PAPERS)
    if args.quick and args.update_docs:
        raise InvalidRequest(
            "--update-docs writes the committed report: run it without --quick (or give --out)"
        )
    out = report_path(args.out, args.update_docs)
    traces = args.traces
    if NEEDS_TRACES & set(papers):
        try:
            traces = find_traces(args.traces)
        except FileNotFoundError as exc:
            raise InvalidRequest(str(exc)) from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    sections = build_report(
        out,
        quick=args.quick,
        papers=papers,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
        traces=traces,
        command="elastic-slurm reproduce --update-docs"
        if args.update_docs
        else "elastic-slurm reproduce",
    )
    for s in sections:
        agreed = sum(c.agrees for c in s.checks)
        state = "did not run" if s.failed else f"{agreed}/{len(s.checks)} results reproduced"
        print(f"{s.title}: {state} ({s.seconds:.0f} s)")
    print(f"wrote {out}")
    return 1 if any(s.failed for s in sections) else 0
