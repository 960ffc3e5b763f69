"""What the controller does with a policy's :class:`~elastic_slurm.model.decisions.Start`.

Two cases, told apart by the job's elastic tag (:mod:`elastic_slurm.adapter.tags`) and its state
in Slurm:

* **A moldable job sized by the controller** (tag ``sized=controller``) that is still held as it
  was submitted (pending, reason ``JobHeldUser``). This is Huang et al.'s schedule-time moldable
  scheduling (section 3; section 4.2 with execution-time information): the scheduler chooses the
  job's size from its speedup model and the free nodes just before it starts, where Slurm alone
  would take the largest size that fits. The controller fixes the job's size in Slurm
  (:meth:`~elastic_slurm.adapter.backend.SlurmBackend.set_pending_size`, ``NumNodes=N-N``) and
  then releases it (``scontrol release``); Slurm starts it at exactly that size once the nodes
  are free. A ``decision`` record (with ``count``) and an ``outcome`` record (``action``
  ``start``, ``ok``, ``message``) go to the journal.
* **Any other pending job**: Slurm starts it itself, so only a new expectation (job, size) is
  journaled and logged; a policy repeats its Start decisions every cycle while a job waits.

A held job is released only when its tag says the controller sizes it: a job its user held
(``sbatch --hold``, ``scontrol hold``) without that mark is never released, and neither is a
marked job held by an operator (reason ``JobHeldAdmin``). Slurm cannot tell a user's own later
``scontrol hold`` of a marked job from the hold it was submitted with, so such a hold is
released too; ``docs/user-guide.md`` says how to keep such a job waiting.

Errors (the job has ended or started meanwhile, Slurm refuses) are journaled and logged and
never raised: the job stays held, and the next Start decision for it is tried again after
:attr:`Starts.retry_after_s` seconds. Sizing and releasing another user's job needs Slurm
operator rights: a controller without them is refused (seen here: ``Invalid user id``) and the
job stays held.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection

from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.adapter.tags import decode
from elastic_slurm.controller.journal import Journal
from elastic_slurm.errors import ResizeError, SlurmCommandError
from elastic_slurm.model.decisions import Start
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import JobState

log = logging.getLogger(__name__)

#: The reason Slurm gives a job submitted held (``sbatch --hold``, or priority 0 through the
#: C API), whoever submits it. An operator's ``scontrol hold`` gives ``JobHeldAdmin``.
SUBMITTED_HELD_REASON = "JobHeldUser"


def awaits_controller(job: SlurmJob) -> bool:
    """Whether ``job`` waits, held as submitted, for the controller to size and release it.

    True for a pending moldable job whose elastic tag says ``sized=controller`` and that is
    held with the reason of a held submission (:data:`SUBMITTED_HELD_REASON`). A job held by
    its user without that mark, or held by an operator, is not.

    >>> from elastic_slurm.adapter.parse import SlurmJob
    >>> def job(comment, reason="JobHeldUser", state="PENDING"):
    ...     return SlurmJob(1, "j", state, (), 1, comment, 0.0, None, None, "/w", "u", "p",
    ...                     "a", "q", reason)
    >>> tag = "elastic-slurm:kind=moldable;min=1;max=4"
    >>> awaits_controller(job(tag + ";sized=controller"))
    True
    >>> awaits_controller(job(tag))  # held by its user: not ours to release
    False
    >>> awaits_controller(job(tag + ";sized=controller", reason="JobHeldAdmin"))
    False
    >>> awaits_controller(job(tag + ";sized=controller", reason="Resources"))  # released
    False
    """
    tag = decode(job.comment)
    return (
        tag is not None
        and tag.kind is JobKind.MOLDABLE
        and tag.sized_by == "controller"
        and job.model_state is JobState.PENDING
        and job.reason == SUBMITTED_HELD_REASON
    )


class Starts:
    """Carries out Start decisions.

    Parameters
    ----------
    slurm
        The Slurm backend.
    journal
        Where decisions and outcomes are recorded.
    retry_after_s
        After a failed attempt to size and release a job, how long (seconds) later Start
        decisions for it are left alone before the next attempt.
    """

    def __init__(self, slurm: SlurmBackend, journal: Journal, retry_after_s: float = 10.0) -> None:
        self.slurm = slurm
        self.journal = journal
        self.retry_after_s = retry_after_s
        self._expected: dict[int, int] = {}  # pending job -> size, already journaled
        self._failed: dict[int, float] = {}  # job -> monotonic time of its last failed attempt
        #: jobs this controller sized and released, and the size each was given (nodes)
        self.released: dict[int, int] = {}

    def forget(self, live: Collection[int]) -> None:
        """Drop what is kept on jobs not in ``live`` (ids), once they outnumber those.

        Kept per job: the size journaled, the last failed attempt, the size released. A job
        Slurm lists again later (a requeue) is journaled again.
        """
        for kept in (self._expected, self._failed, self.released):
            if len(kept) > 2 * len(live) + 64:
                for job_id in [j for j in kept if j not in live]:
                    del kept[job_id]

    def apply(self, d: Start, job: SlurmJob | None) -> None:
        """Carry out the policy's wish to start job ``d.job_id`` on ``d.nodes`` node(s).

        A job waiting for the controller (:func:`awaits_controller`) is sized and released;
        for any other job the expectation is journaled (once per size). ``job`` is this
        cycle's Slurm view of it (``None`` if Slurm no longer lists it). Never raises for
        Slurm's errors: they are journaled and logged.
        """
        if job is not None and awaits_controller(job):
            self._size_and_release(d, job)
            return
        if self._expected.get(d.job_id) == d.nodes:
            return
        self._expected[d.job_id] = d.nodes
        self.journal.write(
            "decision", decision="Start", job_id=d.job_id, count=d.nodes, reason=d.reason
        )
        log.info("job %d: start on %d node(s) is Slurm's to do (%s)", d.job_id, d.nodes, d.reason)

    def _size_and_release(self, d: Start, job: SlurmJob) -> None:
        failed_at = self._failed.get(d.job_id)
        if failed_at is not None and time.monotonic() - failed_at < self.retry_after_s:
            return
        self.journal.write(
            "decision",
            decision="Start",
            job_id=d.job_id,
            count=d.nodes,
            reason=d.reason,
            sized_by="controller",
        )
        tag = decode(job.comment)
        assert tag is not None  # awaits_controller checked it
        try:
            if not tag.nodes_min <= d.nodes <= tag.nodes_max:
                raise ResizeError(
                    f"the policy chose {d.nodes} node(s), outside the job's range "
                    f"{tag.nodes_min}-{tag.nodes_max}: left held"
                )
            self.slurm.set_pending_size(d.job_id, d.nodes)
            self.slurm.release(d.job_id)
        except (ResizeError, SlurmCommandError) as exc:
            self._failed[d.job_id] = time.monotonic()
            message = str(exc)
            self.journal.write(
                "outcome",
                job_id=d.job_id,
                action="start",
                ok=False,
                count=d.nodes,
                message=message,
            )
            log.warning(
                "job %d: could not size it to %d node(s) and release it: %s",
                d.job_id,
                d.nodes,
                message,
            )
            return
        self._failed.pop(d.job_id, None)
        self._expected[d.job_id] = d.nodes
        self.released[d.job_id] = d.nodes
        message = f"sized to {d.nodes} node(s) and released"
        self.journal.write(
            "outcome", job_id=d.job_id, action="start", ok=True, count=d.nodes, message=message
        )
        log.info("job %d: %s (%s)", d.job_id, message, d.reason)
