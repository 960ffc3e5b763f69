"""``elastic-slurm cancel JOB``: cancel a job and any expander or sibling allocation of it."""

from __future__ import annotations

import argparse
import json
import sys

from elastic_slurm import jobs
from elastic_slurm.config import load_site
from elastic_slurm.errors import InvalidRequest


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``cancel`` subcommand."""
    p = sub.add_parser("cancel", help="cancel a job with its helper allocations")
    p.add_argument("job_ids", type=int, nargs="+", metavar="JOB")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Cancel each job; as ``scancel``, a job that cannot be cancelled does not stop the others.

    Returns 2 if some job could not be cancelled (it does not exist, is another user's, or had
    already ended), each named on stderr; 0 otherwise.
    """
    slurm = jobs.site_backend(load_site(args.site))
    cancelled: dict[str, list[int]] = {}
    errors: dict[str, str] = {}
    for job_id in args.job_ids:
        try:
            cancelled[str(job_id)] = jobs.cancel(slurm, job_id)
        except InvalidRequest as exc:
            errors[str(job_id)] = str(exc)
    if args.json:
        print(json.dumps({"cancelled": cancelled, **({"errors": errors} if errors else {})}))
    else:
        for job_id, ids in cancelled.items():
            extra = [i for i in ids if str(i) != job_id]
            if str(job_id) not in map(str, ids):
                print(f"job {job_id} had already ended; cancelled its allocations {extra}")
                continue
            print(f"cancelled job {job_id}" + (f" and its allocations {extra}" if extra else ""))
        for why in errors.values():
            print(f"elastic-slurm: error: {why}", file=sys.stderr)
    return 2 if errors else 0
