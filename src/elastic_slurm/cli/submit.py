"""``elastic-slurm submit``: sbatch-like options (or a YAML job file) for elastic MPI jobs."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from elastic_slurm import api
from elastic_slurm.adapter.factory import job_python, slurm_for
from elastic_slurm.config import load_site
from elastic_slurm.jobspec import load_spec
from elastic_slurm.protocol.address import controller_url


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``submit`` subcommand."""
    p = sub.add_parser(
        "submit",
        help="submit a rigid, moldable, malleable or evolving job (like sbatch)",
        description="Submit PROGRAM [ARGS] (after --), or the job described in a YAML job file; "
        "options override the file's values. Prints the job id like sbatch.",
    )
    p.add_argument("-N", "--nodes", help="N, or MIN-MAX for the elastic kinds")
    p.add_argument("--kind", choices=["rigid", "moldable", "malleable", "evolving"])
    p.add_argument("--start-nodes", type=int, help="size to start at (malleable, evolving)")
    p.add_argument("--ntasks-per-node", type=int, help="MPI ranks per node")
    p.add_argument("-t", "--time", help="time limit (minutes, HH:MM:SS, D-HH:MM:SS)")
    p.add_argument("-p", "--partition")
    p.add_argument("-A", "--account")
    p.add_argument("-q", "--qos")
    p.add_argument("-J", "--job-name")
    p.add_argument("-o", "--output", help="output file pattern (%%j: job id)")
    p.add_argument("-D", "--chdir", dest="workdir", help="working directory (shared)")
    p.add_argument("-a", "--array", help="job array, e.g. 0-99%%8 (malleable: elastic sweep)")
    p.add_argument("--speedup", help="amdahl:P, downey:A:SIGMA or linear (moldable sizing)")
    p.add_argument(
        "--grace-period",
        type=float,
        dest="grace_period_s",
        help="seconds the job has to follow a shrink order (finite, at most the site's "
        "controller.max_grace_period_s)",
    )
    p.add_argument(
        "--sized-by",
        choices=["slurm", "controller"],
        help="who chooses a moldable job's start size: slurm (at start, within MIN-MAX) or "
        "controller (submitted held; the controller's policy sizes it from --speedup and "
        "releases it); default: the site's controller.sizes_moldable",
    )
    p.add_argument("--parsable", action="store_true", help="print only the job id")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "job_file",
        nargs="?",
        type=Path,
        metavar="JOB.yaml",
        help="a YAML job file (options override its values); the program goes "
        "after --: submit [options] [JOB.yaml] -- PROGRAM [ARGS]",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate and submit; print the job id."""
    job_file, program = args.job_file, list(args.program_words)
    overrides = {
        "program": program or None,
        "nodes": args.nodes,
        "kind": args.kind,
        "start_nodes": args.start_nodes,
        "ntasks_per_node": args.ntasks_per_node,
        "time": args.time,
        "partition": args.partition,
        "account": args.account,
        "qos": args.qos,
        "job_name": args.job_name,
        "output": args.output,
        "workdir": args.workdir,
        "array": args.array,
        "speedup": args.speedup,
        "grace_period_s": args.grace_period_s,
        "sized_by": args.sized_by,
    }
    site = load_site(args.site)
    spec = load_spec(job_file, overrides)
    req = spec.request(max_grace_period_s=site.controller.max_grace_period_s)
    sized_by = spec.sizing(site.controller.sizes_moldable)
    req = replace(  # the site's defaults where the user gave none
        req,
        partition=req.partition or site.partition,
        account=req.account or site.account,
        qos=req.qos or site.qos,
    )
    base = job_file.parent if job_file else Path.cwd()
    workdir = (base / spec.workdir).resolve() if spec.workdir else Path.cwd().resolve()
    job_id = api.submit(
        req,
        slurm_for(site),
        workdir=workdir,
        output=spec.output,
        sized_by=sized_by,
        python=job_python(site),
        controller=controller_url(site),  # where the site's controller listens
    )
    if args.json:
        print(
            json.dumps(
                {
                    "job_id": job_id,
                    "kind": req.kind.value,
                    "nodes": [req.nodes_min, req.nodes_max],
                    "sized_by": sized_by,
                    "workdir": str(workdir),
                }
            )
        )
    elif args.parsable:
        print(job_id)
    else:
        print(f"Submitted batch job {job_id}")
        if sized_by == "controller":
            print(
                f"job {job_id} waits held until the controller chooses its size and releases it",
                file=sys.stderr,
            )
    return 0
