"""``elastic-slurm show JOB``: like ``scontrol show job``, plus the job's resize history."""

from __future__ import annotations

import argparse
import json

from elastic_slurm import jobs
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.adapter.hostlist import compress
from elastic_slurm.config import load_site
from elastic_slurm.controller.observe import held_nodes
from elastic_slurm.errors import SlurmCommandError
from elastic_slurm.protocol.jobdir import JobDir


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``show`` subcommand."""
    p = sub.add_parser("show", help="one job like scontrol show job, with its resize history")
    p.add_argument("job_id", type=int, metavar="JOB")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print one job."""
    slurm = slurm_for(load_site(args.site))
    job = jobs.find_job(slurm, args.job_id)
    info = jobs.job_info(job, held_nodes(slurm.jobs()).get(job.job_id))
    history = jobs.resize_history(JobDir.for_job(job.workdir, job.job_id)) if job.workdir else []
    try:
        sizes = [
            {"state": r.state, "nodes": list(r.nodes), "start_s": r.start_s, "end_s": r.end_s}
            for r in slurm.allocation_history(job.job_id)
        ]
    except SlurmCommandError:
        sizes = []  # no accounting on this site
    if args.json:
        print(
            json.dumps(
                {**info.to_json(), "resizes": [h.to_json() for h in history], "allocations": sizes}
            )
        )
        return 0
    fields = [
        ("JobId", info.job_id),
        ("JobName", info.name),
        ("UserId", info.user),
        ("JobState", info.state),
        ("Kind", info.kind),
        ("NumNodes", f"{info.size} (range {info.nodes_min}-{info.nodes_max})"),
        ("NodeList", compress(info.nodes) if info.nodes else "(none)"),
        ("Partition", info.partition),
        ("WorkDir", info.workdir),
        ("Resize", info.resize or "none under way"),
    ]
    for key, value in fields:
        print(f"   {key}={value}")
    if history:
        print("   Resizes:")
        for h in history:
            took = f"{h.seconds:.2f} s" if h.seconds is not None else "under way"
            phases = ", ".join(f"{k} {v:.2f}" for k, v in h.phases_s.items())
            print(
                f"     {h.seq}. {h.action} to {len(h.nodes)} node(s) {compress(h.nodes)}: "
                f"{h.status}, {took}{f' via {h.strategy}' if h.strategy else ''}"
                f"{f' ({phases})' if phases else ''}"
            )
    if sizes:
        print("   Sizes (accounting): " + " -> ".join(str(len(s["nodes"])) for s in sizes))
    return 0
