"""``elastic-slurm try -- APP [ARGS]``: force resizes of an elastic application on this machine.

No Slurm and no controller: see :mod:`elastic_slurm.mpi_runtime.local_try`. The module is
named after the command (``try``), so it is imported by name only (:func:`importlib`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

SUMMARY = "force grows and shrinks of an elastic MPI app on this machine and compare (no Slurm)"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``try`` subcommand."""
    p = sub.add_parser(
        "try",
        help=SUMMARY,
        description="Run APP under plain mpirun on this machine once without resizing, then "
        "once per join strategy with forced resizes (grow, then shrink), each ordered --every "
        "resize points after the last. Every registered array is checked across every "
        "resize, and the resized runs' results are compared with the unresized run's (the "
        "last line of standard output, or --results FILE). Exits 1 on any failure.",
    )
    p.add_argument("--np", type=int, default=2, help="ranks to start with (default 2)")
    p.add_argument(
        "--grow-to", type=int, default=None, help="grow to this many ranks (default: 2 x --np)"
    )
    p.add_argument(
        "--shrink-to",
        type=int,
        default=None,
        help="then shrink to this many ranks (default 1); with only one of --grow-to and "
        "--shrink-to, only that resize is tried",
    )
    p.add_argument(
        "--every",
        type=int,
        default=3,
        help="resize points between the start (or a resize) and the next forced resize (default 3)",
    )
    p.add_argument(
        "--strategy",
        choices=["spawn", "restart", "both"],
        default="both",
        help="how grows join new ranks (shrinks always restart); default both, one run each",
    )
    p.add_argument(
        "--compare",
        choices=["last-line", "all"],
        default="last-line",
        help="what of standard output must match the unresized run (default: the last line)",
    )
    p.add_argument(
        "--results",
        metavar="FILE",
        default=None,
        help="compare this file (written by the program, relative to here) instead of stdout",
    )
    p.add_argument(
        "--match",
        metavar="REGEX",
        default=None,
        help="compare only what this regular expression matches in it (e.g. a checksum, "
        "leaving out timings and rank counts)",
    )
    p.add_argument(
        "--rtol",
        type=float,
        default=1e-9,
        help="relative tolerance for numbers in the results (default 1e-9)",
    )
    p.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per run before it is killed"
    )
    p.add_argument(
        "--point-timeout",
        type=float,
        default=20.0,
        help="seconds the ranks wait at a resize point for the missing ones (default 20)",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where each run's outputs and records go (default .elastic-slurm/try)",
    )
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- APP [ARGS...]")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from elastic_slurm.errors import InvalidRequest
    from elastic_slurm.mpi_runtime.local_try import plan_sizes, try_program

    program = list(args.program_words) or list(args.program)
    if not program:
        raise InvalidRequest("give the application to run: elastic-slurm try -- APP [ARGS]")
    if args.np < 1 or args.every < 1:
        raise InvalidRequest("--np and --every must be at least 1")
    grow, shrink = args.grow_to, args.shrink_to
    if grow is None and shrink is None:
        grow, shrink = 2 * args.np, 1
    sizes = plan_sizes(args.np, grow, shrink)
    strategies = ["spawn", "restart"] if args.strategy == "both" else [args.strategy]
    ok, _runs = try_program(
        program,
        ranks=args.np,
        sizes=sizes,
        every=args.every,
        strategies=strategies,
        compare_mode=args.compare,
        results=args.results,
        match=args.match,
        rtol=args.rtol,
        timeout_s=args.timeout,
        point_timeout_s=args.point_timeout,
        workdir=args.workdir,
    )
    return 0 if ok else 1
