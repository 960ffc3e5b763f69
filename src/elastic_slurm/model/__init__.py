"""The shared vocabulary: requests, snapshots, decisions, triggers, resize orders.

Pure data with no I/O. It imports nothing from the rest of the package, so that the adapter, the
controller, the simulator and the runtime all depend inward on it.
"""

from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.request import ElasticRequest, JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState, JobView, NodeState, NodeView
from elastic_slurm.model.triggers import Trigger, TriggerKind

__all__ = [
    "ClusterSnapshot",
    "Decision",
    "ElasticRequest",
    "Expand",
    "JobKind",
    "JobState",
    "JobView",
    "NodeState",
    "NodeView",
    "Shrink",
    "Start",
    "Trigger",
    "TriggerKind",
]
