"""The controller-to-job wire format: resize orders and the job's acknowledgements (JSON).

An order tells a running job its next node list. For an expansion Slurm has already added the
nodes; for a shrink the job must first vacate the nodes it leaves, say so (a *vacated*
acknowledgement), and only then does the controller give them back to Slurm. A *done*
acknowledgement closes the order, with the job's node list and the time of each phase.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


def _nodes(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"a node list must be a JSON list, got {value!r}")
    return tuple(str(n) for n in value)


class ResizeAction(enum.StrEnum):
    """Which way the job changes size."""

    EXPAND = "expand"
    SHRINK = "shrink"


class AckStatus(enum.StrEnum):
    """What a job reports about an order."""

    VACATED = "vacated"  # shrink: the leaving nodes run nothing of the job any more
    DONE = "done"  # the job runs on the order's nodes
    FAILED = "failed"  # the job could not follow; it runs on ``nodes`` (its old size)


@dataclass(frozen=True)
class ResizeOrder:
    """Order ``seq`` (1, 2, ... per job): run on ``nodes`` from now on.

    Parameters
    ----------
    seq
        Sequence number within the job, starting at 1.
    action
        :class:`ResizeAction`.
    nodes
        The job's node list after the resize (for a shrink: the nodes it keeps).
    issued_at
        When the controller issued it (seconds since the epoch).
    phases_s
        Seconds the controller already spent on it (``grant``: Slurm's grow).
    """

    seq: int
    action: ResizeAction
    nodes: tuple[str, ...]
    issued_at: float
    phases_s: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {**asdict(self), "action": self.action.value, "nodes": list(self.nodes)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ResizeOrder:
        """The inverse of :meth:`to_json`; ``KeyError``/``ValueError`` on malformed data."""
        return cls(
            seq=int(data["seq"]),
            action=ResizeAction(data["action"]),
            nodes=_nodes(data["nodes"]),
            issued_at=float(data["issued_at"]),
            phases_s={str(k): float(v) for k, v in dict(data.get("phases_s") or {}).items()},
        )


@dataclass(frozen=True)
class ResizeAck:
    """A job's answer to order ``seq``.

    Parameters
    ----------
    seq
        The order answered.
    status
        :class:`AckStatus`.
    nodes
        For ``vacated``: the nodes released; otherwise the nodes the job now runs on.
    strategy
        How the job followed (``spawn`` or ``restart``) and, in ``reason``, why.
    phases_s
        Seconds spent in each phase (``checkpoint``, ``relaunch``, ``restore``, ``spawn``,
        ``merge``, ``redistribute``...).
    at
        When the job wrote it (seconds since the epoch).
    """

    seq: int
    status: AckStatus
    nodes: tuple[str, ...]
    at: float
    strategy: str = ""
    reason: str = ""
    ranks: int = 0
    phases_s: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {**asdict(self), "status": self.status.value, "nodes": list(self.nodes)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ResizeAck:
        """The inverse of :meth:`to_json`."""
        return cls(
            seq=int(data["seq"]),
            status=AckStatus(data["status"]),
            nodes=_nodes(data["nodes"]),
            at=float(data["at"]),
            strategy=str(data.get("strategy", "")),
            reason=str(data.get("reason", "")),
            ranks=int(data.get("ranks", 0)),
            phases_s={str(k): float(v) for k, v in dict(data.get("phases_s", {})).items()},
        )
