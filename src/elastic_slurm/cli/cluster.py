"""``elastic-slurm cluster up|down|status``: the local cluster."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from elastic_slurm.cluster.chroot import FLAVOURS
from elastic_slurm.cluster.flavoured import make_cluster
from elastic_slurm.config import load_site
from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.errors import ElasticSlurmError


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``cluster`` subcommand."""
    p = sub.add_parser(
        "cluster",
        help="build, start, inspect or remove the local Slurm cluster (root)",
        description="A real multi-node Slurm cluster on this machine: each node a slurmd in "
        "its own hostname and network namespace on a private bridge.",
    )
    csub = p.add_subparsers(
        dest="cluster_cmd", required=True, metavar="{up,down,status,reconfigure,matrix}"
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
    matrix = csub.add_parser(
        "matrix",
        help="run the integration set (submit, shrink, grow by merge and by sibling, arrays, "
        "an elastic MPI application) on each flavour",
        description="For each flavour: bring its 4-node cluster up if it is not (building a "
        "chroot flavour's chroot the first time), run the checks with elastic-slurm's own "
        "adapter, launcher and runtime, take clusters it started down again, and print a "
        "flavour x check table with timings. The bookworm cluster is used under "
        "/tmp/elastic-slurm-cluster.lock. Exit status 1 if a check failed.",
    )
    matrix.add_argument(
        "--flavours",
        default="bookworm,trixie,forky",
        help="comma-separated flavours (default: all three)",
    )
    matrix.add_argument(
        "--checks",
        default=None,
        help="comma-separated checks (default: all: probe, submit, shrink, grow-merge, "
        "grow-sibling, array, elastic-app)",
    )
    matrix.add_argument("--json", default=None, help="also write the results to this JSON file")
    matrix.add_argument(
        "--keep-up", action="store_true", help="leave clusters the matrix started running"
    )
    for sp in (up, down, reconf, status):
        sp.add_argument(
            "--flavour",
            choices=list(FLAVOURS),
            default=None,
            help="bookworm: this machine's Slurm 22.05 (default); trixie (Slurm 24.11) or forky "
            "(Slurm 26.05): the same cluster in a Debian chroot (site config local-FLAVOUR)",
        )
    p.set_defaults(func=run)


def site_for(site: str | None, flavour: str | None) -> SiteConfig:
    """The site config of ``--site``/``--flavour``: ``local-FLAVOUR`` unless a site is named.

    Raises
    ------
    SystemExit
        The named site's flavour is not ``flavour``.
    """
    if flavour is None or (flavour == "bookworm" and site is None):
        return load_site(site)
    cfg = load_site(site or f"local-{flavour}")
    have = cfg.local_cluster.flavour if cfg.local_cluster else None
    if have != flavour:
        raise SystemExit(
            f"error: site {cfg.name!r} ({cfg.source}) has flavour {have!r}, not {flavour!r}"
        )
    return cfg


def run(args: argparse.Namespace) -> int:
    """Carry out ``cluster up|down|status|reconfigure|matrix``."""
    if args.cluster_cmd == "matrix":
        return run_matrix(args)
    cluster = make_cluster(site_for(args.site, getattr(args, "flavour", None)), progress=print)
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


def run_matrix(args: argparse.Namespace) -> int:
    """``cluster matrix``: the checks of :mod:`elastic_slurm.cluster.matrix` per flavour."""
    import fcntl
    import time
    from contextlib import ExitStack

    from elastic_slurm.cluster import chroot, matrix

    checks = (
        [c.strip() for c in args.checks.split(",") if c.strip()] if args.checks else matrix.CHECKS
    )
    results: list[matrix.CheckResult] = []
    for name in [f.strip() for f in args.flavours.split(",") if f.strip()]:
        fl = chroot.flavour(name)
        cluster = make_cluster(site_for(None, name), progress=print)
        with ExitStack() as stack:
            if not fl.in_chroot:
                lock = stack.enter_context(open("/tmp/elastic-slurm-cluster.lock", "a"))
                fcntl.flock(lock, fcntl.LOCK_EX)
            started = False
            if not cluster.healthy(4):
                t0 = time.monotonic()
                try:
                    cluster.up(4)
                except ElasticSlurmError as exc:
                    print(f"{name}: cluster up failed: {exc}")
                    results += [
                        matrix.CheckResult(name, c, False, 0.0, f"cluster up failed: {exc}")
                        for c in checks
                    ]
                    continue
                started = True
                print(f"{name}: cluster up in {time.monotonic() - t0:.1f} s")
            try:
                results += matrix.run_checks(name, cluster, checks)
            finally:
                if started and not args.keep_up:
                    t0 = time.monotonic()
                    cluster.down()
                    print(f"{name}: cluster down in {time.monotonic() - t0:.1f} s")
    print(matrix.table(results))
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_json() for r in results], indent=1) + "\n")
    return 1 if any(r.ok is False for r in results) else 0
