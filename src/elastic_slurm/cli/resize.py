"""``elastic-slurm resize JOB --nodes N``: ask for a size, as the controller would decide it."""

from __future__ import annotations

import argparse
import json

from elastic_slurm import jobs
from elastic_slurm.adapter.capabilities import cached_probe
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.config import load_site
from elastic_slurm.protocol.address import service_controller


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``resize`` subcommand."""
    p = sub.add_parser("resize", help="grow or shrink a running malleable or evolving job")
    p.add_argument("job_id", type=int, metavar="JOB")
    p.add_argument("--nodes", "-N", type=int, required=True, help="the size to go to")
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="give up waiting for the application after this (s)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Resize and report the outcome."""
    site = load_site(args.site)
    slurm = slurm_for(site)
    path = cached_probe(slurm.transport, site.name, preference=site.grow_path).grow_path
    outcome = jobs.resize(
        slurm,
        args.job_id,
        args.nodes,
        grow_path=path,
        grant_timeout_s=site.controller.grant_timeout_s,
        timeout_s=args.timeout,
        progress=None if args.json else print,
        controller=service_controller(site),
    )
    if args.json:
        print(
            json.dumps(
                {
                    "job_id": outcome.job_id,
                    "ok": outcome.ok,
                    "action": outcome.action,
                    "nodes": list(outcome.after),
                    "seconds": round(outcome.seconds, 3),
                    "strategy": outcome.strategy,
                    "phases_s": outcome.phases_s,
                    "message": outcome.message,
                }
            )
        )
    else:
        verdict = "done" if outcome.ok else f"FAILED: {outcome.message}"
        print(
            f"job {outcome.job_id}: {outcome.action} {len(outcome.before)} -> "
            f"{len(outcome.after)} node(s) {verdict} in {outcome.seconds:.2f} s"
            f"{f' via {outcome.strategy}' if outcome.strategy else ''}"
        )
    return 0 if outcome.ok else 1
