"""``elastic-slurm show JOB``: like ``scontrol show job``, plus the job's resize history.

The history comes from the job's directory (every order it was given, and its
acknowledgements) and, when this user can read it, from the controller's journal (who asked
for each resize, how it ended, and the size changes the controller saw but did not make, such
as an ``scontrol update``). A resize of a job that no longer runs is closed, never "under way":
``show`` and ``status`` agree (:func:`elastic_slurm.controller.journal.settle`).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from elastic_slurm import jobs
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.adapter.hostlist import compress
from elastic_slurm.config import load_site
from elastic_slurm.controller.journal import ResizeRow, settle
from elastic_slurm.controller.observe import held_nodes
from elastic_slurm.errors import SlurmCommandError, SlurmUnavailableError
from elastic_slurm.model.snapshot import JobState
from elastic_slurm.protocol.jobdir import JobDir


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``show`` subcommand."""
    p = sub.add_parser("show", help="one job like scontrol show job, with its resize history")
    p.add_argument("job_id", type=int, metavar="JOB")
    p.add_argument(
        "--journal",
        type=Path,
        default=None,
        help="the controller's journal (default: the site config's controller.journal; "
        "skipped when it cannot be read)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


@dataclass(frozen=True)
class ShownResize:
    """One resize of a job as ``show`` prints it.

    ``by``: who asked (``policy``, ``user``; ``""``: unknown, no journal); ``status``: ``done``,
    ``failed``, ``observed``, ``job_ended``... or ``open`` while under way; ``seconds``: how
    long it took, from the decision to the acknowledgement, ``None`` when unknown or under way;
    :attr:`pause_s`: how long the application stopped computing for it (its ``pause`` phase).
    """

    seq: int
    action: str
    nodes: tuple[str, ...]
    issued_at: float
    status: str
    seconds: float | None
    strategy: str
    by: str = ""
    phases_s: dict[str, float] = field(default_factory=dict)

    @property
    def open(self) -> bool:
        """Whether it is still under way."""
        return self.status == "open"

    @property
    def pause_s(self) -> float | None:
        """Seconds the application stopped computing (as the runtime measured it), if known."""
        pause = self.phases_s.get("pause")
        return float(pause) if pause is not None else None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            **asdict(self),
            "nodes": list(self.nodes),
            "open": self.open,
            "pause_s": self.pause_s,
        }


def merge_history(
    history: list[jobs.ResizeRecord], rows: list[ResizeRow], running: bool
) -> list[ShownResize]:
    """The job directory's ``history`` and the journal's ``rows`` (this job's), as one list.

    A journal row names who asked for the order of the same number, and closes it when the
    job did not; a row of a size change no order explains (``by`` ``user``) is added. When
    the job is not ``running``, nothing is left open: an order it never finished is closed
    as ``job_ended`` (or as the journal closed it).

    >>> from elastic_slurm.jobs import ResizeRecord
    >>> order = ResizeRecord(1, "expand", ("n1", "n2"), 10.0, "open", None, "")
    >>> [(r.status, r.open) for r in merge_history([order], [], running=False)]
    [('job_ended', False)]
    """
    rows = settle(rows, [rows[0].job_id] if rows and running else [])
    by_seq = {r.seq: r for r in rows if r.seq}
    out = []
    for h in history:
        row = by_seq.pop(h.seq, None)
        status = h.status
        if status == "open" and row is not None and not row.open:
            status = row.outcome or "closed"
        if status == "open" and not running:
            status = "job_ended"
        out.append(
            ShownResize(
                h.seq,
                h.action,
                h.nodes,
                h.issued_at,
                status,
                h.seconds,
                h.strategy,
                row.by if row is not None else "",
                dict(h.phases_s),
            )
        )
    for row in rows:
        if row.by == "policy" or (row.seq and row.seq not in by_seq):
            continue  # the policy's are in the job directory; an order's row was used above
        out.append(
            ShownResize(
                row.seq,
                row.action,
                row.target,
                row.decided_at,
                "open" if row.open else row.outcome,
                None,
                "",
                row.by,
                dict(row.phases_s),
            )
        )
    return sorted(out, key=lambda r: r.issued_at)


def journal_rows(path: Path | None, default: Path, job_id: int) -> list[ResizeRow]:
    """The job's rows of the journal at ``path`` (``None``: ``default``); [] if unreadable.

    Only an explicitly given journal that cannot be read is worth a warning.
    """
    from elastic_slurm.controller.journal import Journal

    where = path if path is not None else default
    try:
        if not where.is_file():
            raise FileNotFoundError(f"no journal at {where}")
        journal = Journal(where, readonly=True)
        try:
            return journal.resizes(job_id=job_id)
        finally:
            journal.close()
    except (OSError, sqlite3.Error) as exc:
        if path is not None:
            print(f"elastic-slurm: warning: journal not read: {exc}", file=sys.stderr)
        return []


def run(args: argparse.Namespace) -> int:
    """Print one job."""
    site = load_site(args.site)
    slurm = slurm_for(site)
    job = jobs.find_job(slurm, args.job_id)
    info = jobs.job_info(job, held_nodes(slurm.jobs()).get(job.job_id))
    history = (
        jobs.resize_history(JobDir.for_job(job.workdir, job.job_id, user=job.user))
        if job.workdir
        else []
    )
    rows = journal_rows(args.journal, site.controller.journal, job.job_id)
    shown = merge_history(history, rows, job.model_state is JobState.RUNNING)
    try:
        sizes = [
            {"state": r.state, "nodes": list(r.nodes), "start_s": r.start_s, "end_s": r.end_s}
            for r in slurm.allocation_history(job.job_id)
        ]
    except SlurmUnavailableError:
        raise  # slurmctld did not answer: an outage, said as one (exit 1)
    except SlurmCommandError:
        sizes = []  # no accounting on this site
    if args.json:
        print(
            json.dumps(
                {**info.to_json(), "resizes": [h.to_json() for h in shown], "allocations": sizes}
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
    if shown:
        print("   Resizes:")
        for h in shown:
            took = (
                ", under way" if h.open else f", {h.seconds:.2f} s" if h.seconds is not None else ""
            )
            if h.pause_s is not None:
                took += f" (application paused {h.pause_s:.2f} s)"
            phases = ", ".join(f"{k} {v:.2f}" for k, v in h.phases_s.items() if k != "pause")
            who = f" by {h.by}" if h.by and h.by != "policy" else ""
            print(
                f"     {h.seq}. {h.action} to {len(h.nodes)} node(s) {compress(h.nodes)}{who}: "
                f"{h.status}{took}{f' via {h.strategy}' if h.strategy else ''}"
                f"{f' ({phases})' if phases else ''}"
            )
    if sizes:
        print("   Sizes (accounting): " + " -> ".join(str(len(s["nodes"])) for s in sizes))
    return 0
