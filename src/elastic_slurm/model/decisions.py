"""What a policy decides: frozen decisions that the controller or simulator carries out.

Each decision is a frozen dataclass (equality, hash and ``repr`` by its fields). Its
``__init__`` is written out rather than generated: it sets the three fields in one step,
where the generated one of a frozen dataclass calls ``object.__setattr__`` once per field
(about 0.9 us against 0.4 us; policies make one per start and resize, millions in a long
simulation). The signature is the generated one's.
"""

from __future__ import annotations

from dataclasses import dataclass

_set = object.__setattr__


@dataclass(frozen=True)
class Start:
    """Start pending job ``job_id`` on ``nodes`` nodes.

    On live Slurm the job is already queued; the controller makes room and Slurm starts it.
    """

    job_id: int
    nodes: int
    reason: str = ""

    def __init__(self, job_id: int, nodes: int, reason: str = "") -> None:
        _set(self, "__dict__", {"job_id": job_id, "nodes": nodes, "reason": reason})


@dataclass(frozen=True)
class Expand:
    """Grow running job ``job_id`` by ``count`` nodes (``count >= 1``)."""

    job_id: int
    count: int
    reason: str = ""

    def __init__(self, job_id: int, count: int, reason: str = "") -> None:
        _set(self, "__dict__", {"job_id": job_id, "count": count, "reason": reason})


@dataclass(frozen=True)
class Shrink:
    """Shrink running job ``job_id`` by ``count`` nodes (``count >= 1``), not below its minimum."""

    job_id: int
    count: int
    reason: str = ""

    def __init__(self, job_id: int, count: int, reason: str = "") -> None:
        _set(self, "__dict__", {"job_id": job_id, "count": count, "reason": reason})


Decision = Start | Expand | Shrink
