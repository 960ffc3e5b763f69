"""``elastic-slurm run APP [ARGS]``: run an elastic MPI application inside its Slurm job."""

from __future__ import annotations

import argparse

from elastic_slurm.mpi_runtime import launcher


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``run`` subcommand."""
    p = sub.add_parser(
        "run",
        help="run an elastic MPI application inside its Slurm job (in a batch script)",
        description="Start APP with mpirun on the job's nodes, set up for growing by spawn, and "
        "restart it at the new size when it checkpoints for a resize. Python scripts (.py) run "
        "with this Python.",
    )
    p.add_argument("--ntasks-per-node", type=int, default=1, help="MPI ranks per node")
    p.add_argument("program", nargs=argparse.REMAINDER, help="APP [ARGS...]")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    program = list(args.program_words) or list(args.program)
    if not program:
        raise SystemExit("elastic-slurm run: error: give the application to run: run APP [ARGS]")
    if args.ntasks_per_node < 1:
        raise SystemExit("elastic-slurm run: error: --ntasks-per-node must be at least 1")
    return launcher.run(program, ntasks_per_node=args.ntasks_per_node)
