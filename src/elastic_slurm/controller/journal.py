"""The controller's journal: every decision and outcome, and every resize under way (SQLite).

Two tables in one SQLite file (Python's ``sqlite3``; WAL mode, each write its own committed
transaction, ``synchronous=FULL``, so a killed controller loses nothing it had written):

* ``records``: an append-only log. Each record has ``t`` (seconds since the epoch), ``kind``
  (``decision``, ``offer``, ``answer``, ``order``, ``outcome``, ``overdue``, ``note``,
  ``recovery``, ``sizes``, ``skipped``: a job left out of a cycle, with its ``reason``;
  ``outage``: Slurm unreachable, then back) and its details
  (a JSON object); :attr:`Journal.records` returns them as flat dicts, in order.
* ``resizes``: one row per resize attempt, with its job and ``seq``, the number of its order
  in the job's directory (at most one open row per ``(job_id, seq)``; an attempt that failed
  or was rolled back before its order was sent leaves its number to the next one). A row is
  written *before* the controller touches Slurm or the job, updated at each phase, and closed
  with its outcome. ``by`` says who asked for it: ``policy`` (the controller's decisions) or
  ``user`` (a size change the controller saw but did not make: ``elastic-slurm resize``,
  ``scontrol``; journaled already closed, with outcome ``observed``). Rows still open when a
  controller starts are what it must reconcile with Slurm
  (:meth:`elastic_slurm.controller.actuate.Actuator.recover`).

Phases of a resize (:data:`PHASES`), in order: ``granting`` (an expansion asked Slurm for
nodes), ``ordering`` (the offer or order is being written to the job), ``offered`` (the resize
was offered to a job that negotiates; no order yet), ``awaiting_vacate`` (a shrink waits for
the job to leave the nodes it gives back), ``awaiting_done`` (the job is following the order).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

PHASES = ("granting", "ordering", "offered", "awaiting_vacate", "awaiting_done")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    t REAL NOT NULL,
    kind TEXT NOT NULL,
    job_id INTEGER,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_job ON records (job_id);
CREATE TABLE IF NOT EXISTS resizes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    action TEXT NOT NULL,
    phase TEXT NOT NULL,
    before TEXT NOT NULL,
    target TEXT NOT NULL,
    decided_at REAL NOT NULL,
    reason TEXT NOT NULL,
    phases_s TEXT NOT NULL,
    helper INTEGER,
    overdue INTEGER NOT NULL DEFAULT 0,
    open INTEGER NOT NULL DEFAULT 1,
    outcome TEXT NOT NULL DEFAULT '',
    closed_at REAL,
    requested_by TEXT NOT NULL DEFAULT 'policy'
);
CREATE UNIQUE INDEX IF NOT EXISTS resizes_open ON resizes (job_id, seq) WHERE open = 1;
CREATE INDEX IF NOT EXISTS resizes_job ON resizes (job_id, seq);
"""


@dataclass
class ResizeRow:
    """One resize as journaled (nodes as tuples of names, times in seconds since the epoch)."""

    job_id: int
    seq: int
    action: str
    phase: str
    before: tuple[str, ...]
    target: tuple[str, ...]
    decided_at: float
    reason: str = ""
    phases_s: dict[str, float] = field(default_factory=dict)
    helper: int | None = None
    overdue: bool = False
    open: bool = True
    outcome: str = ""
    closed_at: float | None = None
    by: str = "policy"


def _values(row: ResizeRow) -> tuple[object, ...]:
    """A resize row's values in the order the ``INSERT``s name its columns."""
    return (
        row.job_id,
        row.seq,
        row.action,
        row.phase,
        json.dumps(list(row.before)),
        json.dumps(list(row.target)),
        row.decided_at,
        row.reason,
        json.dumps(row.phases_s),
        row.helper,
        row.by,
    )


#: seconds a connection waits for another's lock before "database is locked" (sqlite3: 5)
BUSY_TIMEOUT_S = 30.0


class Journal:
    """The journal in the SQLite file ``path`` (created with its directory); ``None``: in memory.

    ``path`` is a :class:`~pathlib.Path` or a string.

    A directory created for it is made mode 0700 (the journal names users' jobs and nodes).

    Safe to use from several threads of one process. Opening an existing file keeps its
    contents: a restarted controller reads the resizes its predecessor left open.

    ``readonly`` opens an existing journal only to read it (``status``, ``report``, ``show``
    while the controller runs): no lock is taken that the controller's writes would wait for.
    A writer waits up to :data:`BUSY_TIMEOUT_S` seconds for another connection's lock.

    Raises
    ------
    sqlite3.DatabaseError
        ``path`` exists but is not an SQLite database (for example an old JSON-lines journal).
    sqlite3.OperationalError
        ``readonly`` and ``path`` does not exist or cannot be read.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, readonly: bool = False
    ) -> None:
        path = Path(path) if path is not None else None
        self.path = path
        self._lock = threading.Lock()
        self._readonly = readonly
        if readonly:
            if path is None:
                raise ValueError("a read-only journal needs a path")
            self._db = sqlite3.connect(
                f"{path.resolve().as_uri()}?mode=ro",
                uri=True,
                timeout=BUSY_TIMEOUT_S,
                check_same_thread=False,
                isolation_level=None,
            )
            return
        if path is not None:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            str(path) if path is not None else ":memory:",
            timeout=BUSY_TIMEOUT_S,
            check_same_thread=False,
            isolation_level=None,  # autocommit: every statement is its own transaction
        )
        with self._lock:
            if path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            columns = [r[1] for r in self._db.execute("PRAGMA table_info(resizes)")]
            if columns and "requested_by" not in columns:  # a journal from before ``by``
                self._db.execute(
                    "ALTER TABLE resizes ADD COLUMN requested_by TEXT NOT NULL DEFAULT 'policy'"
                )
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database (writes are already committed)."""
        with self._lock:
            self._db.close()

    def _select(self, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """The rows of a query; read-only and the tables not made yet: none.

        A controller creates its journal's file a moment before its tables, so a reader
        (``status``, ``report``, a test waiting for a record) can open the file in between;
        that journal is empty, not broken. A writer always has its tables.
        """
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.OperationalError as exc:
                if self._readonly and str(exc).startswith("no such table"):
                    return []
                raise

    # ------------------------------------------------------------------ the log
    def write(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Append one record and return it (``t``, ``kind`` and ``fields``).

        Values that are not JSON (paths, for example) are stored as strings.
        """
        record = {"t": time.time(), "kind": kind, **fields}
        data = json.dumps(fields, default=str)
        job_id = fields.get("job_id")
        with self._lock:
            self._db.execute(
                "INSERT INTO records (t, kind, job_id, data) VALUES (?, ?, ?, ?)",
                (record["t"], kind, job_id if isinstance(job_id, int) else None, data),
            )
        return record

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every record of the journal (this process's and earlier ones'), in order."""
        rows = self._select("SELECT t, kind, data FROM records ORDER BY id")
        return [{"t": t, "kind": kind, **json.loads(data)} for t, kind, data in rows]

    # ------------------------------------------------------------------ resizes
    def open_resize(self, row: ResizeRow) -> None:
        """Record a resize before anything is done for it.

        Raises
        ------
        sqlite3.IntegrityError
            A resize with the same ``(job_id, seq)`` is already open.
        """
        with self._lock:
            self._db.execute(
                "INSERT INTO resizes (job_id, seq, action, phase, before, target, decided_at,"
                " reason, phases_s, helper, requested_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                _values(row),
            )

    def update_resize(
        self,
        job_id: int,
        seq: int,
        *,
        phase: str | None = None,
        target: Sequence[str] | None = None,
        phases_s: dict[str, float] | None = None,
        helper: int | None = None,
        overdue: bool | None = None,
    ) -> None:
        """Change an open resize's phase, target nodes, phase timings, helper or overdue flag.

        Raises
        ------
        ValueError
            ``phase`` is not one of :data:`PHASES`.
        KeyError
            No open resize ``(job_id, seq)``.
        """
        if phase is not None and phase not in PHASES:
            raise ValueError(f"unknown resize phase {phase!r}; expected one of {PHASES}")
        changes: dict[str, Any] = {}
        if phase is not None:
            changes["phase"] = phase
        if target is not None:
            changes["target"] = json.dumps(list(target))
        if phases_s is not None:
            changes["phases_s"] = json.dumps(phases_s)
        if helper is not None:
            changes["helper"] = helper
        if overdue is not None:
            changes["overdue"] = int(overdue)
        if not changes:
            return
        sets = ", ".join(f"{k} = ?" for k in changes)
        with self._lock:
            cur = self._db.execute(
                f"UPDATE resizes SET {sets} WHERE job_id = ? AND seq = ? AND open = 1",  # noqa: S608
                (*changes.values(), job_id, seq),
            )
        if cur.rowcount != 1:
            raise KeyError(f"no open resize {seq} of job {job_id} in the journal")

    def close_resize(self, job_id: int, seq: int, outcome: str) -> None:
        """Close a resize with a one-word outcome (``done``, ``failed``, ``rolled_back``...).

        Closing one that is already closed (or unknown) does nothing.
        """
        with self._lock:
            self._db.execute(
                "UPDATE resizes SET open = 0, outcome = ?, closed_at = ? "
                "WHERE job_id = ? AND seq = ? AND open = 1",
                (outcome, time.time(), job_id, seq),
            )

    def record_observed(self, row: ResizeRow) -> None:
        """Record a resize the controller saw but did not make, closed at once (``observed``).

        ``row.by`` says who made it (``user`` when nobody else is known).
        """
        with self._lock:
            self._db.execute(
                "INSERT INTO resizes (job_id, seq, action, phase, before, target, decided_at,"
                " reason, phases_s, helper, requested_by, open, outcome, closed_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 'observed', ?)",
                (*_values(row), row.closed_at if row.closed_at is not None else time.time()),
            )

    def set_requested_by(self, job_id: int, seq: int, by: str) -> None:
        """Say who asked for resize ``seq`` of job ``job_id`` (``user``: by hand)."""
        with self._lock:
            self._db.execute(
                "UPDATE resizes SET requested_by = ? WHERE job_id = ? AND seq = ?",
                (by, job_id, seq),
            )

    def has_resize(self, job_id: int, seq: int) -> bool:
        """Whether order ``seq`` of job ``job_id`` is journaled (open or closed)."""
        rows = self._select(
            "SELECT 1 FROM resizes WHERE job_id = ? AND seq = ? LIMIT 1", (job_id, seq)
        )
        return bool(rows)

    def resizes(self, *, open_only: bool = False, job_id: int | None = None) -> list[ResizeRow]:
        """Journaled resize attempts in the order they were opened.

        ``open_only``: only the open ones; ``job_id``: only that job's.
        """
        sql = (
            "SELECT job_id, seq, action, phase, before, target, decided_at, reason, phases_s,"
            " helper, overdue, open, outcome, closed_at, requested_by FROM resizes"
        )
        where, args = [], []
        if open_only:
            where.append("open = 1")
        if job_id is not None:
            where.append("job_id = ?")
            args.append(job_id)
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self._select(sql + " ORDER BY id", args)
        return [
            ResizeRow(
                job_id=r[0],
                seq=r[1],
                action=r[2],
                phase=r[3],
                before=tuple(json.loads(r[4])),
                target=tuple(json.loads(r[5])),
                decided_at=r[6],
                reason=r[7],
                phases_s=json.loads(r[8]),
                helper=r[9],
                overdue=bool(r[10]),
                open=bool(r[11]),
                outcome=r[12],
                closed_at=r[13],
                by=r[14],
            )
            for r in rows
        ]


def settle(rows: Sequence[ResizeRow], running: Collection[int]) -> list[ResizeRow]:
    """Rows as they stand now: an open one whose job no longer runs is closed (``job_ended``).

    A controller closes such a row itself (``failed`` when it sees the job end, ``job_ended``
    when it starts again); until it has, ``show`` and ``status`` show it closed all the same,
    so they never call a resize of an ended job "under way". ``running``: the ids of the jobs
    Slurm lists as running.

    >>> row = ResizeRow(7, 1, "expand", "awaiting_done", ("n1",), ("n1", "n2"), 100.0)
    >>> [(r.open, r.outcome) for r in settle([row], running=[])]
    [(False, 'job_ended')]
    >>> settle([row], running=[7]) == [row]
    True
    """
    return [
        r if not r.open or r.job_id in running else replace(r, open=False, outcome="job_ended")
        for r in rows
    ]
