"""First come, first served: start queued jobs in arrival order until one does not fit.

The baseline of every paper in ``shared/papers`` (for example Lina et al. section 5.3, the
"rigid" line, and Ghafoor's thesis chapter 6). No job ever overtakes an earlier one, so a wide
job at the head of the queue leaves nodes idle until enough are free.

``start_size``, ``estimate_s`` and ``estimated_end_s``, which other policies once imported from
here, live in the shared kit (:mod:`elastic_slurm.plugins.kit`) and are re-exported.
"""

from __future__ import annotations

from typing import ClassVar

from elastic_slurm.model.decisions import Decision, Start
from elastic_slurm.model.snapshot import ClusterSnapshot
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.kit.backfill import estimate_s, estimated_end_s
from elastic_slurm.plugins.kit.queue import INFINITY, start_size
from elastic_slurm.plugins.policy import Policy


class FCFS(Policy):
    """First come, first served, without backfilling.

    Each cycle starts pending jobs in submission order at :func:`start_size`, while they fit
    in the idle nodes, and stops at the first that does not fit. Running jobs are never
    resized. Ignores the trigger.
    """

    name: ClassVar[str] = "fcfs"
    summary: ClassVar[str] = (
        "First come, first served: start queued jobs in order until one does not fit; no "
        "backfilling."
    )
    paper: ClassVar[str] = ""
    section: ClassVar[str] = "the baseline of Lina et al. (section 5.3) and Ghafoor (chapter 6)"
    job_kinds: ClassVar[tuple[str, ...]] = ("rigid",)
    resizes: ClassVar[bool] = False

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Start the longest prefix of the queue that fits in the idle nodes."""
        pending = snapshot.pending()
        if not pending:
            return []
        free = len(snapshot.idle_nodes())
        decisions: list[Decision] = []
        for job in pending:
            size = start_size(job)
            if size > free:
                break
            decisions.append(Start(job.job_id, size, "first come, first served"))
            free -= size
        return decisions


__all__ = ["FCFS", "INFINITY", "estimate_s", "estimated_end_s", "start_size"]
