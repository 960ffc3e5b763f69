"""An append-only journal of the controller's decisions and their outcomes (JSON lines).

Each line is one JSON object with ``t`` (seconds since the epoch), ``kind`` (``decision``,
``order``, ``outcome``, ``note``) and the details. It is flushed line by line, so a crash loses
at most the line being written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any


class Journal:
    """Append records to ``path`` (its directory is created); ``path=None`` keeps them in memory.

    ``records`` holds everything written by this process, in order.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.records: list[dict[str, Any]] = []
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Record one event and return it."""
        record = {"t": time.time(), "kind": kind, **fields}
        self.records.append(record)
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record, default=str) + "\n")
        return record
