"""``elastic-slurm demo``: the main job, an elastic MPI job growing and shrinking on Slurm."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from elastic_slurm.config import load_site
from elastic_slurm.demo.scenario import Demo, DemoOptions


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``demo`` subcommand."""
    p = sub.add_parser(
        "demo",
        help="run heat2d as a malleable job that grows and shrinks on the local cluster",
        description="Bring the local cluster up if needed, submit heat2d as a malleable job "
        "(2-4 nodes), let the controller grow it into idle nodes and shrink it for a rigid "
        "job, and check the result against the rigid run.",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("demo-output"),
        help="where job outputs and results go (default ./demo-output)",
    )
    p.add_argument("--n", type=int, default=2048, help="grid size, n x n doubles (>= 2048)")
    p.add_argument("--iterations", type=int, default=1000, help="Jacobi iterations")
    p.add_argument("--timeout", type=float, default=900.0, help="give up after this (s)")
    p.add_argument("--json", action="store_true", help="end with one JSON summary line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo and print its timeline, verification and (``--json``) summary."""
    if args.n < 16 or args.iterations < 1:
        raise SystemExit("elastic-slurm demo: error: --n must be >= 16 and --iterations >= 1")
    console = Console()
    opts = DemoOptions(
        workdir=args.workdir.resolve(), n=args.n, iterations=args.iterations, timeout_s=args.timeout
    )
    demo = Demo(load_site(args.site), opts, say=lambda line: console.print(line))
    result = demo.run()
    result.timeline.render(console, title=f"heat2d job {result.job_id}: sizes as Slurm reported")
    for i, r in enumerate(result.resizes, start=1):
        phases = ", ".join(f"{k} {v:.2f} s" for k, v in r["phases_s"].items())
        console.print(
            f"resize {i}: {r['action']} {r['from']} -> {r['to']} nodes in "
            f"{r['seconds']:.2f} s via {r['strategy'] or '-'} ({phases})"
        )
    console.print(
        f"node counts (controller's polls): {result.node_counts}; "
        "(sacct): "
        + (
            str(result.node_counts_sacct)
            if result.node_counts_sacct is not None
            else "not recorded (no accounting)"
        )
    )
    err = "n/a" if result.max_abs_error is None else f"{result.max_abs_error:.3g}"
    console.print(
        f"result matches the rigid run: {result.result_matches_rigid} "
        f"(max abs error {err}, tolerance 1e-12)"
    )
    console.print(f"nodes still allocated after all jobs ended: {result.leaked_nodes}")
    console.print(f"job states: {result.job_states}")
    if args.json:
        print(json.dumps(result.to_json()), flush=True)
    ok = result.result_matches_rigid and result.leaked_nodes == 0
    return 0 if ok else 1
