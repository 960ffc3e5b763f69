"""``elastic-slurm cluster up|down|status``: the local cluster."""

from __future__ import annotations

import argparse
import json

from elastic_slurm.cluster.local import LocalCluster
from elastic_slurm.config import load_site


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``cluster`` subcommand."""
    p = sub.add_parser(
        "cluster",
        help="build, start, inspect or remove the local Slurm cluster (root)",
        description="A real multi-node Slurm cluster on this machine: each node a slurmd in "
        "its own hostname and network namespace on a private bridge.",
    )
    csub = p.add_subparsers(
        dest="cluster_cmd", required=True, metavar="{up,down,status,reconfigure}"
    )
    up = csub.add_parser("up", help="install what is missing and start the cluster")
    up.add_argument("--nodes", "-N", type=int, default=None, help="number of nodes (default 4)")
    down = csub.add_parser("down", help="stop the cluster and remove what it created")
    down.add_argument("--keep-logs", action="store_true", help="keep the daemons' logs")
    reconf = csub.add_parser(
        "reconfigure", help="change a setting of the running cluster (slurm.conf + reconfigure)"
    )
    reconf.add_argument(
        "--job-expansion",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="permit_job_expansion: jobs grow by merge (on) or by sibling allocations (off)",
    )
    reconf.add_argument(
        "--job-submit-lua",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="load elastic-slurm's job_submit.lua (checks elastic node ranges at submission)",
    )
    status = csub.add_parser("status", help="show whether the cluster runs")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Carry out ``cluster up|down|status``."""
    cluster = LocalCluster(load_site(args.site), progress=print)
    if args.cluster_cmd == "up":
        if args.nodes is not None and args.nodes < 1:
            raise SystemExit(f"error: --nodes must be at least 1, got {args.nodes}")
        st = cluster.up(args.nodes)
        print(st.sinfo, end="")
        print(f"use it from a shell with: export SLURM_CONF={st.slurm_conf}")
        return 0
    if args.cluster_cmd == "reconfigure":
        if args.job_expansion is None and args.job_submit_lua is None:
            raise SystemExit(
                "elastic-slurm cluster reconfigure: error: give --[no-]job-expansion "
                "and/or --[no-]job-submit-lua"
            )
        cluster.reconfigure(
            permit_job_expansion=args.job_expansion, job_submit_lua=args.job_submit_lua
        )
        return 0
    if args.cluster_cmd == "down":
        if not cluster.down(keep_logs=args.keep_logs):
            print("no local cluster is up")
        return 0
    st = cluster.status()
    if args.json:
        print(json.dumps(st.to_json()))
    elif not st.daemons:
        print("no local cluster (run `elastic-slurm cluster up`)")
    else:
        print(f"local cluster: {'up' if st.up else 'DEGRADED'}, {st.nodes} nodes")
        for name, alive in st.daemons.items():
            print(f"  {name:<14} {'running' if alive else 'NOT RUNNING'}")
        print(st.sinfo, end="")
        print(f"SLURM_CONF={st.slurm_conf}")
    return 0 if st.up else 1
