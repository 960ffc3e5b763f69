"""The controller's append-only journal: ``controller/journal.py``."""

from __future__ import annotations

import json
import time
from pathlib import Path

from elastic_slurm.controller.journal import Journal


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


def test_file_journal_appends_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "journal.jsonl"
    journal = Journal(path)
    assert path.parent.is_dir()  # created at once
    journal.write("order", job_id=4, seq=1, nodes=["n1", "n2"])
    journal.write("outcome", job_id=4, ok=True, where=Path("/w"))
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {**journal.records[0]},
        {**journal.records[1], "where": "/w"},  # non-JSON values are written as strings
    ]
    # a second journal on the same file appends; its records hold only its own writes
    again = Journal(path)
    again.write("note", message="restarted")
    assert len(path.read_text().splitlines()) == 3
    assert [r["kind"] for r in again.records] == ["note"]
