"""What a policy decides: frozen decisions that the controller or simulator carries out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Start:
    """Start pending job ``job_id`` on ``nodes`` nodes.

    On live Slurm the job is already queued; the controller makes room and Slurm starts it.
    """

    job_id: int
    nodes: int
    reason: str = ""


@dataclass(frozen=True)
class Expand:
    """Grow running job ``job_id`` by ``count`` nodes (``count >= 1``)."""

    job_id: int
    count: int
    reason: str = ""


@dataclass(frozen=True)
class Shrink:
    """Shrink running job ``job_id`` by ``count`` nodes (``count >= 1``), not below its minimum."""

    job_id: int
    count: int
    reason: str = ""


Decision = Start | Expand | Shrink
