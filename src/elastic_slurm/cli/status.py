"""``elastic-slurm status``: the operator's view of the cluster, its elastic jobs and open resizes.

One ``squeue``/``sinfo`` pair for the jobs and nodes, and the controller's journal
(:mod:`elastic_slurm.controller.journal`; the site config's ``controller.journal`` unless
``--journal`` is given) for the resizes under way (their phase, age, whether the job is overdue,
and who asked: the policy or a user) and the last ones that ended. A resize of a job that no
longer runs is never listed as under way (:func:`~elastic_slurm.controller.journal.settle`), as
in ``show``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from elastic_slurm import jobs
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.adapter.hostlist import compress
from elastic_slurm.adapter.parse import job_state
from elastic_slurm.config import load_site
from elastic_slurm.controller.journal import Journal, ResizeRow, settle
from elastic_slurm.model.snapshot import JobState, NodeState


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``status`` subcommand."""
    p = sub.add_parser(
        "status", help="nodes, elastic jobs and the controller's resizes under way, as tables"
    )
    p.add_argument(
        "--journal",
        type=Path,
        default=None,
        help="the controller's journal (default: the site config's controller.journal; its "
        "resizes are listed, skipped if missing)",
    )
    p.add_argument(
        "--recent",
        type=int,
        default=10,
        metavar="N",
        help="also list the last N resizes that ended (default 10; 0: none)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def negotiations(records: list[dict[str, Any]]) -> dict[tuple[int, int], str]:
    """The state of each resize's negotiation, by ``(job_id, seq)``, from journal records.

    >>> negotiations([
    ...     {"kind": "offer", "job_id": 7, "seq": 1, "number": 1, "action": "shrink",
    ...      "count": 2, "final": False},
    ...     {"kind": "answer", "job_id": 7, "seq": 1, "number": 1, "answer": "counter",
    ...      "count": 1},
    ...     {"kind": "offer", "job_id": 7, "seq": 1, "number": 2, "action": "shrink",
    ...      "count": 1, "final": True},
    ... ])
    {(7, 1): 'final offer 2: shrink 1, awaiting answer'}
    """
    out: dict[tuple[int, int], str] = {}
    for r in records:
        key = (r.get("job_id"), r.get("seq"))
        if r.get("kind") == "offer":
            final = "final " if r.get("final") else ""
            out[key] = (  # type: ignore[index]
                f"{final}offer {r['number']}: {r['action']} {r['count']}, awaiting answer"
            )
        elif r.get("kind") == "answer" and key in out:
            count = f" {r['count']}" if r.get("count") else ""
            out[key] = out[key].replace("awaiting answer", f"answered {r['answer']}{count}")  # type: ignore[index]
    return out


def run(args: argparse.Namespace) -> int:
    """Print the status."""
    site = load_site(args.site)
    slurm = slurm_for(site)
    nodes = slurm.nodes()
    idle = [n.name for n in nodes if n.model_state is NodeState.IDLE]
    found = jobs.queue(slurm)
    path: Path = args.journal if args.journal is not None else site.controller.journal
    rows: list[ResizeRow] = []
    talks: dict[tuple[int, int], str] = {}
    readable = False
    try:
        if not path.is_file():
            raise FileNotFoundError(f"no journal at {path}")
        journal = Journal(path, readonly=True)
        try:
            rows = journal.resizes()
            talks = negotiations(journal.records)
        finally:
            journal.close()
        readable = True
    except (OSError, sqlite3.Error) as exc:
        # the site's journal is the controller's (mode 0700): most users cannot read it
        if args.journal is not None:
            print(f"elastic-slurm: warning: journal not read: {exc}", file=sys.stderr)
    running = [j.job_id for j in found if job_state(j.state) is JobState.RUNNING]
    rows = settle(rows, running)
    resizes = [r for r in rows if r.open]
    ended = (
        sorted((r for r in rows if not r.open), key=lambda r: r.closed_at or r.decided_at)[
            -args.recent :
        ]
        if args.recent > 0
        else []
    )
    now = time.time()
    if args.json:
        print(
            json.dumps(
                {
                    "site": site.name,
                    "nodes": len(nodes),
                    "idle": idle,
                    "jobs": [j.to_json() for j in found],
                    "resizes": [
                        {
                            "job_id": r.job_id,
                            "seq": r.seq,
                            "action": r.action,
                            "phase": r.phase,
                            "age_s": now - r.decided_at,
                            "overdue": r.overdue,
                            "target": list(r.target),
                            "negotiation": talks.get((r.job_id, r.seq), ""),
                            "by": r.by,
                        }
                        for r in resizes
                    ],
                    "recent": [
                        {
                            "job_id": r.job_id,
                            "seq": r.seq,
                            "action": r.action,
                            "by": r.by,
                            "outcome": r.outcome,
                            "ended_s_ago": now - (r.closed_at or r.decided_at),
                            "target": list(r.target),
                        }
                        for r in ended
                    ],
                }
            )
        )
        return 0
    console = Console(width=200)
    console.print(
        f"site {site.name}: {len(nodes)} node(s), {len(idle)} idle"
        f"{' (' + compress(idle) + ')' if idle else ''}; {len(found)} job(s)"
    )
    table = Table(box=None, pad_edge=False, title=None)
    for col in ("JOBID", "NAME", "USER", "STATE", "KIND", "NODES", "RANGE", "RESIZE", "NODELIST"):
        table.add_column(col, no_wrap=True)
    for j in found:
        table.add_row(
            str(j.job_id),
            j.name,
            j.user,
            j.state,
            j.kind,
            str(j.size),
            f"{j.nodes_min}-{j.nodes_max}",
            j.resize or "-",
            compress(j.nodes) if j.nodes else "",
        )
    console.print(table)
    if not resizes:
        console.print("resizes under way: none" + ("" if readable else " known"))
    else:
        opened = Table(box=None, pad_edge=False)
        cols = (
            "JOBID",
            "ORDER",
            "ACTION",
            "BY",
            "PHASE",
            "AGE",
            "OVERDUE",
            "TARGET",
            "NEGOTIATION",
        )
        for col in cols:
            opened.add_column(col, no_wrap=True)
        for r in resizes:
            opened.add_row(
                str(r.job_id),
                str(r.seq),
                r.action,
                r.by,
                r.phase,
                f"{now - r.decided_at:.0f} s",
                "yes" if r.overdue else "no",
                compress(r.target) if r.target else "-",
                talks.get((r.job_id, r.seq), "-"),
            )
        console.print(f"resizes under way ({path}):")
        console.print(opened)
    if ended:
        closed = Table(box=None, pad_edge=False)
        for col in ("JOBID", "ORDER", "ACTION", "BY", "OUTCOME", "ENDED", "NODES"):
            closed.add_column(col, no_wrap=True)
        for r in ended:
            closed.add_row(
                str(r.job_id),
                str(r.seq),
                r.action,
                r.by,
                r.outcome,
                f"{now - (r.closed_at or r.decided_at):.0f} s ago",
                compress(r.target) if r.target else "-",
            )
        console.print(f"last resizes ended ({path}):")
        console.print(closed)
    return 0
