"""``elastic-slurm controller run``: run a policy against live Slurm until interrupted."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from elastic_slurm.adapter.capabilities import cached_probe
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.config import load_site
from elastic_slurm.controller.daemon import Controller
from elastic_slurm.controller.journal import Journal
from elastic_slurm.plugins.registry import make_policy
from elastic_slurm.protocol.address import default_address, site_munge_socket
from elastic_slurm.protocol.server import serve


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``controller`` subcommand."""
    p = sub.add_parser("controller", help="run a scheduling policy against live Slurm")
    csub = p.add_subparsers(dest="controller_cmd", required=True, metavar="{run}")
    r = csub.add_parser("run", help="observe, decide and resize until interrupted (Ctrl-C)")
    r.add_argument("--policy", help="policy name (default: the site config's)")
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="print the decisions; change nothing in Slurm or in any job",
    )
    r.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="where running jobs reach the controller (default: the site config's "
        "controller.address, else a cluster-internal address)",
    )
    r.add_argument(
        "--journal",
        type=Path,
        default=Path("controller-journal.sqlite"),
        help="the SQLite journal of decisions, outcomes and resizes under way; a controller "
        "restarted on the same journal settles what the previous one left open",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the controller from the site config and run it."""
    site = load_site(args.site)
    name = args.policy or site.controller.policy.name
    options = site.controller.policy.options if name == site.controller.policy.name else {}
    policy = make_policy(name, options)
    logging.getLogger("elastic_slurm").setLevel(logging.INFO)
    c = site.controller
    slurm = slurm_for(site)
    grow_path = cached_probe(slurm.transport, site.name, preference=site.grow_path).grow_path
    controller = Controller(
        slurm,
        policy,
        Journal(args.journal),
        grow_path=grow_path,
        poll_interval_s=c.poll_interval_s,
        grant_timeout_s=c.grant_timeout_s,
        resize_timeout_s=c.resize_timeout_s,
        min_resize_interval_s=c.min_resize_interval_s,
        on_overdue=c.on_overdue,
        offer_cooldown_s=c.offer_cooldown_s,
        dry_run=args.dry_run,
    )
    server = None
    if not args.dry_run:
        server = serve(
            slurm,
            args.listen or default_address(site),
            operators=c.operators,
            munge_socket=site_munge_socket(site),
        )
    print(
        f"controller: policy {policy.name}, grow path {grow_path}, polling every "
        f"{c.poll_interval_s:g} s, journal {args.journal}"
        f"{f', jobs talk to {server.url}' if server else ''}"
        f"{' (dry run)' if args.dry_run else ''}; Ctrl-C to stop",
        flush=True,
    )
    try:
        controller.run()
    except KeyboardInterrupt:
        open_resizes = sorted(controller.actuator.in_flight)
        if open_resizes:
            print(
                f"controller: stopped with resizes of jobs {open_resizes} under way; their "
                "jobs keep the nodes they have"
            )
    finally:
        if server is not None:
            server.stop()
    return 0
