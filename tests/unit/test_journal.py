"""The controller's journal: ``controller/journal.py`` (SQLite)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from elastic_slurm.controller.journal import Journal, ResizeRow


def test_in_memory_journal() -> None:
    journal = Journal()
    before = time.time()
    first = journal.write("decision", decision="Expand", job_id=4, count=1, reason="idle nodes")
    second = journal.write("note", message="x")
    assert journal.path is None
    assert journal.records == [first, second]
    assert before <= first["t"] <= second["t"] <= time.time()
    assert {k: v for k, v in first.items() if k != "t"} == {
        "kind": "decision",
        "decision": "Expand",
        "job_id": 4,
        "count": 1,
        "reason": "idle nodes",
    }


def test_file_journal_survives_its_process(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "journal.sqlite"
    journal = Journal(path)
    assert path.parent.is_dir()  # created at once
    journal.write("order", job_id=4, seq=1, nodes=["n1", "n2"])
    journal.write("outcome", job_id=4, ok=True, where=Path("/w"))
    # another journal on the same file (a restarted controller) sees everything, and appends
    again = Journal(str(path))  # a string will do, as for open()
    assert again.path == path
    assert again.records[1]["where"] == "/w"  # non-JSON values are stored as strings
    assert [r["kind"] for r in again.records] == ["order", "outcome"]
    again.write("note", message="restarted")
    assert [r["kind"] for r in journal.records] == ["order", "outcome", "note"]


def test_resize_rows_move_through_phases_and_close(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    journal.open_resize(ResizeRow(7, 1, "expand", "granting", ("n1",), (), 100.0, "idle"))
    journal.open_resize(ResizeRow(8, 3, "shrink", "ordering", ("n2", "n3"), ("n2",), 101.0))
    with pytest.raises(sqlite3.IntegrityError):
        journal.open_resize(ResizeRow(7, 1, "expand", "granting", ("n1",), (), 102.0))
    journal.update_resize(7, 1, phase="awaiting_done", target=("n1", "n4"), helper=55)
    journal.update_resize(7, 1, phases_s={"grant": 0.5}, overdue=True)
    with pytest.raises(ValueError, match="unknown resize phase 'merging'"):
        journal.update_resize(7, 1, phase="merging")
    with pytest.raises(KeyError, match="no open resize 2 of job 7"):
        journal.update_resize(7, 2, phase="awaiting_done")
    # what a controller restarted on this file sees
    (row7, row8) = Journal(path).resizes(open_only=True)
    assert (row7.job_id, row7.phase, row7.target, row7.helper) == (
        7,
        "awaiting_done",
        ("n1", "n4"),
        55,
    )
    assert row7.phases_s == {"grant": 0.5} and row7.overdue and row7.reason == "idle"
    assert (row8.job_id, row8.before, row8.target) == (8, ("n2", "n3"), ("n2",))
    journal.close_resize(7, 1, "done")
    journal.close_resize(7, 1, "failed")  # already closed: no change
    assert [r.job_id for r in journal.resizes(open_only=True)] == [8]
    (closed,) = [r for r in journal.resizes() if r.job_id == 7]
    assert not closed.open and closed.outcome == "done" and closed.closed_at is not None
    with pytest.raises(KeyError):
        journal.update_resize(7, 1, phase="awaiting_done")  # closed rows do not change
    # a number whose attempt was closed is free for the next attempt
    journal.open_resize(ResizeRow(7, 1, "expand", "granting", ("n1",), (), 103.0))
    assert [(r.job_id, r.seq, r.open) for r in journal.resizes()] == [
        (7, 1, False),
        (8, 3, True),
        (7, 1, True),
    ]


def test_a_file_that_is_not_a_journal_is_refused(tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"
    old.write_text('{"t": 1, "kind": "note"}\n')
    with pytest.raises(sqlite3.DatabaseError):
        Journal(old)


def test_a_read_only_journal_reads_and_never_creates_or_writes(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    with pytest.raises(sqlite3.OperationalError):
        Journal(path, readonly=True)
    assert not path.exists()  # a reader never creates a journal
    writer = Journal(path)
    writer.write("note", message="one")
    reader = Journal(path, readonly=True)
    assert [r["message"] for r in reader.records] == ["one"]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.write("note", message="two")
    # while the reader stays open, the writer (and a restarted controller) go on
    writer.write("note", message="three")
    assert [r["message"] for r in Journal(path).records] == ["one", "three"]
    assert [r["message"] for r in reader.records] == ["one", "three"]


def test_a_reader_that_opens_a_journal_before_its_tables_exist_sees_it_empty(
    tmp_path: Path,
) -> None:
    # a controller creates the file a moment before its tables: `status`, `report` or a
    # script polling the journal can open it in between (seen in CI: "no such table")
    path = tmp_path / "journal.sqlite"
    sqlite3.connect(path).close()  # the file as sqlite3.connect leaves it: no tables
    reader = Journal(path, readonly=True)
    assert reader.records == []
    assert reader.resizes() == [] and reader.resizes(open_only=True, job_id=7) == []
    assert not reader.has_resize(7, 1)
    writer = Journal(path)  # the controller goes on
    writer.write("note", message="one")
    assert [r["message"] for r in reader.records] == ["one"]


def test_a_writer_never_hides_a_missing_table(tmp_path: Path) -> None:
    writer = Journal(tmp_path / "journal.sqlite")
    writer._db.execute("DROP TABLE records")  # damaged under the controller's feet
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        _ = writer.records
