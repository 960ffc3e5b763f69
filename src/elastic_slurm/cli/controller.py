"""``elastic-slurm controller run``: run a policy against live Slurm, as a service.

SIGTERM (``systemctl stop``) and SIGINT (Ctrl-C) let the cycle under way finish, then the
controller closes its journal and exits 0; after ``controller.max_failed_cycles`` failed cycles
in a row it exits 1, for the service manager to restart it with back-off. The journal is the
site config's ``controller.journal`` unless ``--journal`` is given; logs go to stderr at the
site's level and format unless ``--log-level``/``--log-format`` say otherwise; metrics are
served for Prometheus on ``controller.metrics_address`` when the site sets one.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TypeVar

from elastic_slurm.adapter.capabilities import cached_probe
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.config import load_site
from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.controller import metrics
from elastic_slurm.controller.daemon import Controller
from elastic_slurm.controller.journal import Journal
from elastic_slurm.controller.logs import FORMATS, LEVELS, setup_logging
from elastic_slurm.errors import ConfigError, SlurmUnavailableError
from elastic_slurm.plugins.registry import make_policy
from elastic_slurm.protocol.address import default_address, site_munge_socket
from elastic_slurm.protocol.jobdir import JobDirs

log = logging.getLogger(__name__)
T = TypeVar("T")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``controller`` subcommand."""
    p = sub.add_parser("controller", help="run a scheduling policy against live Slurm")
    csub = p.add_subparsers(dest="controller_cmd", required=True, metavar="{run}")
    r = csub.add_parser("run", help="observe, decide and resize until stopped (SIGTERM or Ctrl-C)")
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
        default=None,
        help="the SQLite journal of decisions, outcomes and resizes under way (default: the "
        "site config's controller.journal); a controller restarted on the same journal "
        "settles what the previous one left open",
    )
    r.add_argument("--log-level", choices=LEVELS, default=None, help="default: the site config's")
    r.add_argument(
        "--log-format",
        choices=FORMATS,
        default=None,
        help="text, or json (one object a line); default: the site config's",
    )
    p.set_defaults(func=run)


def journal_path(args: argparse.Namespace, site: SiteConfig) -> Path:
    """Where the journal is: ``--journal``, else the site config's ``controller.journal``."""
    return args.journal if args.journal is not None else site.controller.journal


@contextlib.contextmanager
def stop_on_signals(controller: Controller) -> Iterator[None]:
    """While inside, SIGTERM and SIGINT ask ``controller`` to stop after its cycle.

    The handlers only set a flag (:meth:`Controller.stop`): no step is interrupted half-done.
    The previous handlers are put back on leaving.
    """

    def handler(signum: int, frame: FrameType | None) -> None:
        controller.stop()  # only a flag: logging here could re-enter a handler's lock

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def until_slurm_answers(call: Callable[[], T], poll_s: float) -> T:
    """``call()``, asked again every ``poll_s`` seconds while slurmctld does not answer.

    A controller (re)started during an outage waits for Slurm instead of exiting: a service
    manager would otherwise give up on it after a few restarts. SIGTERM still stops it (there
    is nothing half-done to finish before the first cycle).
    """
    since = None
    while True:
        try:
            result = call()
        except SlurmUnavailableError as exc:
            if since is None:
                since = time.monotonic()
                log.warning("Slurm unreachable at start-up; waiting for it: %s", exc)
            time.sleep(poll_s)
            continue
        if since is not None:
            log.warning("Slurm reachable again after %.0f s", time.monotonic() - since)
        return result


def spool_dir(path: Path) -> Path:
    """Make a service controller's spool (mode 0700, this user's) if missing; return it.

    Raises
    ------
    ConfigError
        It cannot be made, or it is not a directory of this user that only they may open.
    """
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.lstat()
    except OSError as exc:
        raise ConfigError(
            f"cannot make controller.spool {path}: {exc.strerror or exc}; set it to a place "
            "this user may write"
        ) from exc
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise ConfigError(
            f"controller.spool {path} must be a directory of this user (uid {os.geteuid()}) "
            "that no one else may open (mode 0700)"
        )
    return path


def run(args: argparse.Namespace) -> int:
    """Build the controller from the site config and run it; the service's exit status."""
    site = load_site(args.site)
    c = site.controller
    setup_logging(args.log_level or c.log_level, args.log_format or c.log_format)
    name = args.policy or c.policy.name
    options = c.policy.options if name == c.policy.name else {}
    policy = make_policy(name, options)
    slurm = slurm_for(site)
    grow_path = until_slurm_answers(
        lambda: cached_probe(slurm.transport, site.name, preference=site.grow_path).grow_path,
        c.slurm_outage_poll_s,
    )
    path = journal_path(args, site)
    try:
        journal = Journal(path)
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(
            f"cannot open the controller's journal {path}: {exc}; give --journal, or set "
            "controller.journal in the site config to a place this user may write"
        ) from exc
    if c.privilege == "root" and os.geteuid() != 0 and not args.dry_run:
        log.warning(
            "controller.privilege is root but this controller runs as uid %d: it cannot grow "
            "other users' jobs (unless it is Slurm's SlurmUser) nor write their job "
            "directories; a controller run as a service user needs controller.privilege: service",
            os.geteuid(),
        )
    jobdirs = JobDirs(spool_dir(c.spool) if c.privilege == "service" else None)
    controller = Controller(
        slurm,
        policy,
        journal,
        jobdirs=jobdirs,
        grow_path=grow_path,
        poll_interval_s=c.poll_interval_s,
        grant_timeout_s=c.grant_timeout_s,
        resize_timeout_s=c.resize_timeout_s,
        min_resize_interval_s=c.min_resize_interval_s,
        on_overdue=c.on_overdue,
        offer_cooldown_s=c.offer_cooldown_s,
        dry_run=args.dry_run,
        max_grace_period_s=c.max_grace_period_s,
        slurm_outage_poll_s=c.slurm_outage_poll_s,
        manual_hold_s=c.manual_hold_s,
        max_failed_cycles=c.max_failed_cycles,
        stretch_time_limit=c.stretch_time_limit,
        spool_retention_s=c.spool_retention_s,
    )
    if c.metrics_address:
        try:
            metrics.serve(c.metrics_address)
        except OSError as exc:
            journal.close()
            raise ConfigError(
                f"cannot serve metrics on controller.metrics_address {c.metrics_address}: {exc}"
            ) from exc
    server = None
    if not args.dry_run:
        # imported here: jobs run ``python -m elastic_slurm run`` with no HTTP server installed
        from elastic_slurm.protocol.server import observed_lookup, serve, slurm_lookup

        server = serve(
            slurm,
            args.listen or default_address(site),
            operators=c.operators,
            munge_socket=site_munge_socket(site),
            max_body_bytes=c.max_body_bytes,
            tls_cert=c.tls_cert,
            tls_key=c.tls_key,
            # who a job belongs to comes from the controller's last cycle, not a Slurm query
            # per message (a job that started since is asked of Slurm, and cached)
            lookup=observed_lookup(lambda: controller.observed_jobs, slurm_lookup(slurm)),
            jobdirs=jobdirs,
            on_resize=controller.size_asked,
        )
    print(
        f"controller: policy {policy.name}, grow path {grow_path}, polling every "
        f"{c.poll_interval_s:g} s, journal {path}"
        f"{f', jobs resize themselves, state in {jobdirs.spool}' if jobdirs.by_job else ''}"
        f"{f', jobs talk to {server.url}' if server else ''}"
        f"{f', metrics on {c.metrics_address}' if c.metrics_address else ''}"
        f"{' (dry run)' if args.dry_run else ''}; SIGTERM or Ctrl-C to stop",
        flush=True,
    )
    try:
        with stop_on_signals(controller):
            status = controller.run()
        log.warning("controller stopped (exit status %d)", status)
    finally:
        if server is not None:
            server.stop()
        journal.close()
    open_resizes = sorted(controller.actuator.in_flight)
    if open_resizes:
        print(
            f"controller: stopped with resizes of jobs {open_resizes} under way; their jobs "
            "keep the nodes they have, and the next controller takes them over"
        )
    return status
