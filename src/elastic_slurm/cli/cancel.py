"""``elastic-slurm cancel JOB``: cancel a job and any expander or sibling allocation of it."""

from __future__ import annotations

import argparse
import json

from elastic_slurm import jobs
from elastic_slurm.config import load_site


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``cancel`` subcommand."""
    p = sub.add_parser("cancel", help="cancel a job with its helper allocations")
    p.add_argument("job_ids", type=int, nargs="+", metavar="JOB")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Cancel each job."""
    slurm = jobs.site_backend(load_site(args.site))
    cancelled = {str(j): jobs.cancel(slurm, j) for j in args.job_ids}
    if args.json:
        print(json.dumps({"cancelled": cancelled}))
    else:
        for job_id, ids in cancelled.items():
            extra = [i for i in ids if str(i) != job_id]
            print(f"cancelled job {job_id}" + (f" and its allocations {extra}" if extra else ""))
    return 0
