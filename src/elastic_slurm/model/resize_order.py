"""The controller-to-job wire format: resize orders and the job's acknowledgements (JSON).

An order tells a running job its next node list. For an expansion Slurm has already added the
nodes; for a shrink the job must first vacate the nodes it leaves, say so (a *vacated*
acknowledgement), and only then does the controller give them back to Slurm. A *done*
acknowledgement closes the order, with the job's node list and the time of each phase.

Under a controller that runs as a service user (``controller.privilege: service``) the job does
the Slurm side itself, as its own user: an expansion order then carries ``by_job`` and the
number of nodes to ask for (``count``, ``grow_path``, ``grant_timeout_s``) and names the nodes
the job had when it was issued; the job asks Slurm for them before following it
(:mod:`elastic_slurm.mpi_runtime.grant`). A shrink with ``by_job`` is given back to Slurm by the
job's launcher once the leaving nodes are vacated, before it says so.
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
    by_job
        The job does the Slurm side itself, as its user (a service controller).
    count
        With ``by_job``, an expansion: how many nodes the job asks Slurm for (``nodes`` is then
        its node list before the expansion).
    grow_path
        With ``by_job``, an expansion: ``merge`` or ``sibling``
        (:mod:`elastic_slurm.adapter.capabilities`).
    grant_timeout_s
        With ``by_job``, an expansion: how long (seconds) the job waits for Slurm's grant.
    """

    seq: int
    action: ResizeAction
    nodes: tuple[str, ...]
    issued_at: float
    phases_s: dict[str, float] = field(default_factory=dict)
    by_job: bool = False
    count: int = 0
    grow_path: str = ""
    grant_timeout_s: float = 0.0

    @property
    def needs_grant(self) -> bool:
        """An expansion whose nodes the job must still ask Slurm for (``by_job``, ``count``)."""
        return self.by_job and self.action is ResizeAction.EXPAND and self.count > 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (the ``by_job`` fields only when set)."""
        data = {**asdict(self), "action": self.action.value, "nodes": list(self.nodes)}
        if not self.by_job:
            for key in ("by_job", "count", "grow_path", "grant_timeout_s"):
                del data[key]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ResizeOrder:
        """The inverse of :meth:`to_json`; ``KeyError``/``ValueError`` on malformed data."""
        return cls(
            seq=int(data["seq"]),
            action=ResizeAction(data["action"]),
            nodes=_nodes(data["nodes"]),
            issued_at=float(data["issued_at"]),
            phases_s={str(k): float(v) for k, v in dict(data.get("phases_s") or {}).items()},
            by_job=bool(data.get("by_job", False)),
            count=int(data.get("count", 0)),
            grow_path=str(data.get("grow_path", "")),
            grant_timeout_s=float(data.get("grant_timeout_s", 0.0)),
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
