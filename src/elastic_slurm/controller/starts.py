"""What the controller does with a policy's :class:`~elastic_slurm.model.decisions.Start`.

Slurm starts queued jobs itself; a policy repeats its Start decisions every cycle while a job
waits, so only a new expectation (job, size) is journaled and logged.
"""

from __future__ import annotations

import logging

from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.controller.journal import Journal
from elastic_slurm.model.decisions import Start

log = logging.getLogger(__name__)


class Starts:
    """Carries out Start decisions.

    Parameters
    ----------
    slurm
        The Slurm backend.
    journal
        Where each new expectation is recorded (a ``decision`` record).
    """

    def __init__(self, slurm: SlurmBackend, journal: Journal) -> None:
        self.slurm = slurm
        self.journal = journal
        self._expected: dict[int, int] = {}  # pending job -> size, already journaled

    def apply(self, d: Start, job: SlurmJob | None) -> None:
        """Record that the policy wants job ``d.job_id`` started on ``d.nodes`` node(s).

        ``job`` is this cycle's Slurm view of it (``None`` if Slurm no longer lists it).
        """
        if self._expected.get(d.job_id) == d.nodes:
            return
        self._expected[d.job_id] = d.nodes
        self.journal.write(
            "decision", decision="Start", job_id=d.job_id, count=d.nodes, reason=d.reason
        )
        log.info("job %d: start on %d node(s) is Slurm's to do (%s)", d.job_id, d.nodes, d.reason)
