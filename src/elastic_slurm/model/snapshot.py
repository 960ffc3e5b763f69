"""An immutable view of the cluster at one instant, as the controller or simulator observed it.

The policy sees only this: no Slurm handles, no I/O. Times are in seconds since the epoch (live)
or since the simulation started (simulator); the policy compares them only with each other.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from elastic_slurm.model.request import JobKind


class JobState(enum.StrEnum):
    """The job states a policy distinguishes (Slurm's states map onto these)."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETING = "completing"
    ENDED = "ended"
    UNKNOWN = "unknown"


class NodeState(enum.StrEnum):
    """Node availability as a policy needs it."""

    IDLE = "idle"
    ALLOCATED = "allocated"
    UNAVAILABLE = "unavailable"  # down, drained, failing, not responding
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class JobView:
    """One job as observed.

    Parameters
    ----------
    job_id
        Slurm's job id.
    kind
        The job's kind; jobs not submitted through elastic-slurm are rigid.
    state
        :class:`JobState`.
    nodes
        Names of the allocated nodes, in Slurm's order (empty while pending).
    nodes_requested
        Nodes the job asks for while pending; its current size while running.
    nodes_min, nodes_max
        The node range; equal to ``nodes_requested`` for rigid jobs.
    submit_time_s, start_time_s
        Submission and start times in seconds; ``start_time_s`` is ``None`` while pending.
    resizing
        True while a resize of this job is under way (a policy must leave it alone).
    batch_host
        The node running the batch script, which can never be given back while the job runs.
    """

    job_id: int
    kind: JobKind
    state: JobState
    nodes: tuple[str, ...]
    nodes_requested: int
    nodes_min: int
    nodes_max: int
    submit_time_s: float
    start_time_s: float | None = None
    resizing: bool = False
    batch_host: str | None = None
    name: str = ""

    @property
    def size(self) -> int:
        """Current size in nodes (allocated nodes while running, requested while pending)."""
        return len(self.nodes) if self.state is JobState.RUNNING else self.nodes_requested

    @property
    def malleable(self) -> bool:
        """True when a resource manager may resize the job while it runs."""
        return self.kind is JobKind.MALLEABLE


@dataclass(frozen=True)
class NodeView:
    """One node as observed: its name, state and CPU count."""

    name: str
    state: NodeState
    cpus: int = 1


@dataclass(frozen=True)
class ClusterSnapshot:
    """The cluster at ``time_s``: every known job and node.

    Invariant: job ids and node names are unique; ``jobs`` is sorted by submission time, then id.
    """

    time_s: float
    jobs: tuple[JobView, ...]
    nodes: tuple[NodeView, ...]

    def idle_nodes(self) -> tuple[str, ...]:
        """Names of nodes that can take a job now."""
        return tuple(n.name for n in self.nodes if n.state is NodeState.IDLE)

    def pending(self) -> tuple[JobView, ...]:
        """Pending jobs in submission order (first come, first served)."""
        return tuple(j for j in self.jobs if j.state is JobState.PENDING)

    def running(self) -> tuple[JobView, ...]:
        """Running jobs in submission order."""
        return tuple(j for j in self.jobs if j.state is JobState.RUNNING)

    def job(self, job_id: int) -> JobView:
        """The job with this id; ``KeyError`` if it is not in the snapshot."""
        for j in self.jobs:
            if j.job_id == job_id:
                return j
        raise KeyError(job_id)
