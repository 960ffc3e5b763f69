"""The backend contract, and the resize procedures every backend shares.

A backend supplies a few primitives (queries, ``submit``, ``cancel``, node-list and node-count
updates, ``allocate``); :class:`SlurmBackend` builds the elastic operations on them once:

* **grow by merge** (SLURM-FACTS.md): an expander allocation ``expand:<job>`` with
  ``--dependency=expand:<job> --exclusive``, then ``NumNodes=0`` on it and ``NumNodes=ALL`` on
  the job. Needs ``permit_job_expansion``.
* **grow by sibling**: a second allocation ``sibling:<job>`` in the job's partition, account
  and QOS, exclusive, with a time limit no longer than what remains of the job's. Its nodes
  belong to the job from then on (:meth:`SlurmBackend.elastic_nodes`); it is cancelled when the
  job shrinks off all its nodes (or shrunk when the job leaves some), and when the job ends
  (the launcher and the controller both see to it).
* **shrink** to an exact list of nodes to keep, across the job and its siblings.

Both grow paths withdraw a grant that does not come within its deadline, and roll back a grow
that fails half-way: the helper allocation is cancelled and the job keeps exactly the nodes it
had. Nothing is left allocated.
"""

from __future__ import annotations

import abc
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from elastic_slurm.adapter.dialect import Dialect, dialect_for
from elastic_slurm.adapter.parse import AllocationRecord, SlurmJob, SlurmNode
from elastic_slurm.adapter.tags import SizedBy
from elastic_slurm.adapter.transport.base import Transport
from elastic_slurm.errors import ResizeError, SlurmCommandError, SlurmUnavailableError
from elastic_slurm.model.request import ElasticRequest
from elastic_slurm.model.snapshot import JobState, NodeState

log = logging.getLogger(__name__)

EXPANDER_PREFIX = "expand:"
SIBLING_PREFIX = "sibling:"

GrowPath = Literal["merge", "sibling"]


def helper_parent(name: str) -> int | None:
    """The job an expander or sibling allocation belongs to, from its name; else ``None``.

    >>> helper_parent("sibling:42"), helper_parent("expand:7"), helper_parent("expand:x")
    (42, 7, None)
    """
    for prefix in (EXPANDER_PREFIX, SIBLING_PREFIX):
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            return int(name[len(prefix) :])
    return None


@dataclass(frozen=True)
class GrowResult:
    """The outcome of a grow.

    Parameters
    ----------
    path
        ``merge`` or ``sibling``.
    helper_id
        The expander (merged, gone now) or the sibling allocation (which holds ``added``).
    added
        The new nodes.
    nodes
        All the job's nodes after the grow (the job's own, then its siblings').
    elapsed_s
        Wall time of the grow, seconds.
    """

    path: GrowPath
    helper_id: int
    added: tuple[str, ...]
    nodes: tuple[str, ...]
    elapsed_s: float


def ahead_of(batch_host: str | None, order: Sequence[str]) -> tuple[str, ...]:
    """The nodes an expander must not bring into a job whose batch script runs on ``batch_host``.

    Slurm makes a job's first node (in the configuration's order, ``order``) its batch host. When
    an expander merged into the job holds a node that comes before the batch host, Slurm 22.05
    moves the batch host there, and then refuses the job's completion from the node its script
    really ran on ("Batch completion for JobId=J sent from wrong node"): the job runs on until
    its time limit (seen in the soak, ``docs/slurm-findings.md``). So those nodes are left out.

    >>> ahead_of("n3", ["n1", "n2", "n3", "n4"])
    ('n1', 'n2')
    >>> ahead_of("n1", ["n1", "n2"]), ahead_of(None, ["n1"])
    ((), ())
    """
    if not batch_host or batch_host not in order:
        return ()
    return tuple(order[: list(order).index(batch_host)])


class SlurmBackend(abc.ABC):
    """What the rest of elastic-slurm needs from Slurm, whatever drives it.

    Subclasses implement the primitives; the elastic operations below are shared.
    """

    name = "abstract"
    #: where checks outside Slurm run, and commands a backend delegates to Slurm's tools
    transport: Transport
    #: how long (seconds) transient Slurm errors are retried (:meth:`set_retry_window`)
    retry_s: float = 20.0

    def set_retry_window(self, seconds: float) -> None:
        """Retry transient Slurm errors (an unreachable slurmctld too) for ``seconds`` seconds.

        User commands and the controller set the site's ``controller.slurm_retry_s``.

        Raises
        ------
        ValueError
            ``seconds`` is not in ``(0, 3600]``.
        """
        if not 0 < seconds <= 3600:
            raise ValueError(f"a Slurm retry window is in (0, 3600] seconds, got {seconds!r}")
        self.retry_s = float(seconds)

    # ------------------------------------------------------------------ primitives
    @abc.abstractmethod
    def version(self) -> tuple[int, int, int]:
        """Slurm's version, e.g. ``(22, 5, 8)``."""

    @abc.abstractmethod
    def jobs(self, job_ids: Sequence[int] = ()) -> list[SlurmJob]:
        """Jobs slurmctld knows (all of them, or at least ``job_ids``), in one call."""

    @abc.abstractmethod
    def nodes(self) -> list[SlurmNode]:
        """Every node with its state and CPU count."""

    @abc.abstractmethod
    def steps(self, job_id: int) -> dict[str, tuple[str, ...]]:
        """The job's running steps and their nodes (``{"12.0": ("n1", "n2")}``)."""

    @abc.abstractmethod
    def allocation_history(self, job_id: int) -> list[AllocationRecord]:
        """Every size the job had, in order, from accounting."""

    @abc.abstractmethod
    def submit(
        self,
        req: ElasticRequest,
        *,
        python: str,
        chdir: str | None = None,
        output: str | None = None,
        env: dict[str, str] | None = None,
        hold: bool = False,
        sized_by: SizedBy = "slurm",
    ) -> int:
        """Submit ``req``; return its job id.

        Parameters
        ----------
        req
            The request.
        python
            The interpreter with elastic-slurm installed, as seen from the nodes.
        chdir, output
            The job's working directory and output file pattern.
        env
            Variables exported in the batch script.
        hold
            Submit the job held (as ``sbatch --hold``): pending with reason ``JobHeldUser``
            until :meth:`release`.
        sized_by
            ``controller``: a held moldable job whose start size the controller chooses
            (written into its elastic tag; see :mod:`.tags`).

        Raises
        ------
        InvalidRequest
            ``sized_by="controller"`` for a job that is not moldable, or an array.
        ValueError
            ``sized_by="controller"`` without ``hold``.
        SlurmCommandError
            Slurm refused the job; nothing was queued.
        """

    @abc.abstractmethod
    def release(self, job_id: int) -> None:
        """Let a held pending job be scheduled (``scontrol release``).

        Releasing a job that is not held (running, or pending for another reason) changes
        nothing.

        Raises
        ------
        SlurmCommandError
            Slurm refused: the job is unknown, or the caller may not release it (a job held
            by an operator can be released only by an operator).
        """

    @abc.abstractmethod
    def cancel(self, *job_ids: int) -> None:
        """Cancel jobs (ended ones are fine)."""

    @abc.abstractmethod
    def select_type(self) -> str:
        """The ``SelectType`` of slurmctld, e.g. ``select/linear``."""

    @abc.abstractmethod
    def reconfigure(self) -> None:
        """Make slurmctld re-read its configuration (``SlurmCommandError`` without rights)."""

    @abc.abstractmethod
    def requeue(self, job_id: int) -> None:
        """Put a running job back in the queue (``SlurmCommandError`` if Slurm refuses)."""

    @abc.abstractmethod
    def update_nodelist(self, job_id: int, nodes: Sequence[str]) -> None:
        """Set a running job's node list to ``nodes`` (a subset: a shrink)."""

    @abc.abstractmethod
    def update_numnodes(self, job_id: int, value: int | Literal["ALL"]) -> None:
        """Set ``NumNodes`` (a pending job's size; 0 on an expander; ``ALL`` to absorb)."""

    @abc.abstractmethod
    def set_array_throttle(self, array_job_id: int, max_running: int) -> None:
        """How many tasks of a job array may run at once (0: no limit)."""

    @abc.abstractmethod
    def set_time_limit(self, job_id: int, minutes: int) -> None:
        """Set a job's time limit to ``minutes`` from its start (``scontrol update TimeLimit``).

        Raising a limit needs Slurm operator rights. Raises ``ValueError`` for fewer than 1
        minute, ``SlurmCommandError`` if Slurm refuses.
        """

    @abc.abstractmethod
    def allocate(
        self,
        count: int,
        *,
        name: str,
        immediate_s: int,
        dependency: str | None = None,
        time_limit_min: int | None = None,
        partition: str | None = None,
        account: str | None = None,
        qos: str | None = None,
        exclude: Sequence[str] = (),
    ) -> int:
        """An exclusive allocation of ``count`` nodes with no step (``salloc --no-shell``).

        Raises
        ------
        ResizeError
            Not granted within ``immediate_s`` seconds; nothing is left queued.
        """

    # ------------------------------------------------------------------ shared queries
    def job(self, job_id: int) -> SlurmJob | None:
        """One job, or ``None`` if slurmctld no longer knows it.

        Raises
        ------
        SlurmUnavailableError
            slurmctld did not answer: whether the job exists is unknown (never ``None``).
        """
        try:
            found = self.jobs([job_id])
        except SlurmUnavailableError:
            raise
        except SlurmCommandError as exc:
            if "Invalid job id" in exc.stderr + exc.stdout:  # later squeue --json: in stdout
                return None
            raise
        return next((j for j in found if j.job_id == job_id), None)

    def helpers(self, job_id: int, jobs: Sequence[SlurmJob] | None = None) -> list[SlurmJob]:
        """The job's expander and sibling allocations that are pending or running."""
        return [
            j
            for j in (self.jobs() if jobs is None else jobs)
            if helper_parent(j.name) == job_id
            and j.model_state in (JobState.PENDING, JobState.RUNNING)
        ]

    def elastic_nodes(self, job_id: int) -> dict[str, int]:
        """Every node the job holds, mapped to the allocation (job id) that holds it.

        The job's own nodes first, then its siblings'; empty if the job is not running.
        """
        jobs = self.jobs()
        own = next((j for j in jobs if j.job_id == job_id), None)
        if own is None or own.model_state is not JobState.RUNNING:
            return {}
        out = {n: job_id for n in own.nodes}
        for s in self.helpers(job_id, jobs):
            if s.name.startswith(SIBLING_PREFIX) and s.model_state is JobState.RUNNING:
                out.update({n: s.job_id for n in s.nodes})
        return out

    # ------------------------------------------------------------------ operations
    def cancel_job(self, job_id: int) -> list[int]:
        """Cancel a job and its expander and sibling allocations; return what was cancelled."""
        ids = [job_id, *(h.job_id for h in self.helpers(job_id))]
        self.cancel(*ids)
        return ids

    def set_pending_size(self, job_id: int, nodes: int) -> None:
        """Fix a pending (moldable) job's size before it starts: exactly ``nodes`` nodes.

        The job's node range becomes ``nodes-nodes`` (``NumNodes=N-N``), so Slurm starts it at
        that size and no other.

        Raises
        ------
        ResizeError
            The job is not pending, or Slurm refused.
        SlurmUnavailableError
            slurmctld did not answer (an outage, not a refusal: the size may be set later).
        """
        job = self.job(job_id)
        if job is None or job.model_state is not JobState.PENDING:
            raise ResizeError(f"job {job_id} is not pending: its size can no longer be chosen")
        try:
            self.update_numnodes(job_id, nodes)
        except SlurmUnavailableError:
            raise
        except SlurmCommandError as exc:
            raise ResizeError(f"Slurm refused to set job {job_id} to {nodes} nodes: {exc}") from exc

    def merge_room(self, job_id: int) -> int:
        """How many idle nodes a merge could add to running job ``job_id`` now (nodes).

        The idle nodes that come after its batch host in the configuration's order
        (:func:`ahead_of`); 0 if it is not running.
        """
        job = self.job(job_id)
        if job is None or not job.nodes or job.model_state is not JobState.RUNNING:
            return 0
        nodes = self.nodes()
        exclude = set(ahead_of(job.batch_host, [n.name for n in nodes]))
        return sum(1 for n in nodes if n.name not in exclude and n.model_state is NodeState.IDLE)

    def grow(
        self, job_id: int, count: int, *, path: GrowPath = "merge", grant_timeout_s: int = 30
    ) -> GrowResult:
        """Grow running job ``job_id`` by ``count`` nodes, by ``path``.

        Raises
        ------
        ResizeError
            Not running, no grant within ``grant_timeout_s`` seconds, or Slurm refused. The job
            keeps exactly the nodes it had, and no helper allocation is left behind.
        """
        t0 = time.monotonic()
        job = self.job(job_id)
        if job is None or not job.nodes or job.model_state is not JobState.RUNNING:
            raise ResizeError(f"job {job_id} is not running; nothing to grow")
        before = tuple(self.elastic_nodes(job_id))
        if path == "merge":
            nodes = self.nodes()
            exclude = ahead_of(job.batch_host, [n.name for n in nodes])
            usable = [n for n in nodes if n.name not in exclude and n.model_state is NodeState.IDLE]
            if exclude and len(usable) < count:
                raise ResizeError(
                    f"job {job_id} cannot grow by {count} by merge now: the idle nodes come "
                    f"before its batch host {job.batch_host} ({', '.join(exclude)} are left out: "
                    "Slurm would move the batch host and refuse the job's completion)"
                )
            helper = self.allocate(
                count,
                name=f"{EXPANDER_PREFIX}{job_id}",
                immediate_s=grant_timeout_s,
                dependency=f"expand:{job_id}",
                partition=job.partition or None,
                account=job.account or None,
                qos=job.qos or None,
                exclude=exclude,
            )
        else:
            remaining_s = (job.end_time_s or 0.0) - time.time()
            minutes = int(remaining_s // 60)
            if minutes < 1:
                raise ResizeError(
                    f"job {job_id} has less than a minute left ({remaining_s:.0f} s): a "
                    "sibling allocation would outlive it"
                )
            helper = self.allocate(
                count,
                name=f"{SIBLING_PREFIX}{job_id}",
                immediate_s=grant_timeout_s,
                time_limit_min=minutes,
                partition=job.partition or None,
                account=job.account or None,
                qos=job.qos or None,
            )
        try:
            self._finish_grow(job_id, helper, path)
        except BaseException:
            self.cancel(helper)
            raise
        after = tuple(self.elastic_nodes(job_id))
        added = tuple(n for n in after if n not in before)
        if len(added) != count or not set(before) <= set(after):
            if path == "sibling":
                self.cancel(helper)
            raise ResizeError(
                f"after growing job {job_id} by {path} ({helper}) it holds {list(after)} (was "
                f"{list(before)}; expected {count} more)"
            )
        log.info("job %d grew by %s via %s %d", job_id, ",".join(added), path, helper)
        return GrowResult(path, helper, added, after, time.monotonic() - t0)

    def _finish_grow(self, job_id: int, helper: int, path: GrowPath) -> None:
        still = self.job(job_id)
        if still is None or still.model_state is not JobState.RUNNING:
            # merging into a job that ended while salloc waited leaves a ghost COMPLETING
            # expander in Slurm 22.05 (seen here): cancel the helper instead (the caller does)
            raise ResizeError(f"job {job_id} ended while its grow was being granted")
        if path == "merge":
            try:
                self.update_numnodes(helper, 0)
                self.update_numnodes(job_id, "ALL")
            except SlurmCommandError as exc:
                raise ResizeError(
                    f"Slurm refused to merge expander {helper} into job {job_id}: {exc}"
                ) from exc

    def shrink(self, job_id: int, keep: Sequence[str]) -> tuple[str, ...]:
        """Shrink job ``job_id`` to exactly the nodes ``keep`` (among its own and siblings').

        Nodes of the job's own allocation are given back with a node-list update; a sibling
        the job leaves entirely is cancelled, one it leaves partly is shrunk. The job's batch
        host must be kept. The caller must have vacated the other nodes: Slurm kills steps left
        on them.

        Raises
        ------
        ResizeError
            ``keep`` is empty, holds nodes the job does not have, or leaves out its batch host;
            Slurm refused; the job ended meanwhile; or Slurm reports something else
            afterwards.
        SlurmUnavailableError
            slurmctld did not answer (an outage, not a refusal): what Slurm did is unknown, and
            the caller asks again once it answers.
        """
        held = self.elastic_nodes(job_id)
        if not held:
            raise ResizeError(f"job {job_id} is not running; nothing to shrink")
        job = self.job(job_id)
        assert job is not None
        if not keep or not set(keep) <= set(held):
            raise ResizeError(
                f"cannot shrink job {job_id} to {list(keep)}: it holds {list(held)}, and the "
                "nodes to keep must be a non-empty subset of those"
            )
        if job.batch_host and job.batch_host not in keep:
            raise ResizeError(
                f"cannot shrink job {job_id} to {list(keep)}: its batch host {job.batch_host} "
                "runs the batch script and must be kept"
            )
        by_alloc: dict[int, list[str]] = {}
        for node, alloc in held.items():
            by_alloc.setdefault(alloc, []).append(node)
        updated = False
        try:
            for alloc, nodes in by_alloc.items():
                kept = [n for n in nodes if n in keep]
                if len(kept) == len(nodes):
                    continue
                if alloc != job_id and not kept:
                    self.cancel(alloc)
                else:
                    self.update_nodelist(alloc, kept)
                    updated = True
        except SlurmUnavailableError:
            raise
        except SlurmCommandError as exc:
            raise ResizeError(f"Slurm refused to shrink job {job_id}: {exc}") from exc
        if updated:
            self._after_nodelist_shrink()
        after = self._wait_nodes(job_id, set(keep))
        if not after:
            raise ResizeError(f"job {job_id} ended while it was being shrunk to {list(keep)}")
        if set(after) != set(keep):
            raise ResizeError(
                f"after shrinking job {job_id} to {list(keep)} Slurm reports {list(after)}"
            )
        return after

    #: Whether a node-list shrink needs ``scontrol reconfigure`` after it (None: not yet asked).
    _shrink_needs_reconfigure: bool | None = None
    _dialect: Dialect | None = None

    def dialect(self) -> Dialect:
        """The version-dependent behaviour of this Slurm (:mod:`.dialect`), probed once.

        Raises
        ------
        SlurmCommandError
            Slurm's version could not be read.
        """
        if self._dialect is None:
            self._dialect = dialect_for(self.version())
        return self._dialect

    def _after_nodelist_shrink(self) -> None:
        """Work around Slurm 22.05's select/linear after a node-list shrink.

        Seen here (``docs/slurm-findings.md``): once a job is shrunk with a node-list update
        and another job has run on the released nodes, slurmctld keeps refusing those nodes
        ("Requested nodes are busy") while ``sinfo`` shows them idle, so every later job (and
        every expander) waits 20-40 s, until slurmctld rebuilds its state. A reconfigure right
        after the shrink prevents it. The dialect decides
        (:meth:`.Dialect.reconfigure_after_nodelist_shrink`: 22.05 with select/linear; 24.11
        and 26.05 did not need it); without operator rights the reconfigure is skipped with a
        warning.
        """
        if self._shrink_needs_reconfigure is None:
            try:
                self._shrink_needs_reconfigure = self.dialect().reconfigure_after_nodelist_shrink(
                    self.select_type()
                )
            except SlurmCommandError as exc:
                log.warning("cannot tell whether shrinks need a reconfigure: %s", exc)
                self._shrink_needs_reconfigure = False
        if self._shrink_needs_reconfigure:
            try:
                self.reconfigure()
            except SlurmCommandError as exc:
                log.warning(
                    "scontrol reconfigure after a shrink failed (%s): with Slurm 22.05's "
                    "select/linear the released nodes may stay unschedulable for a while",
                    exc,
                )

    def _wait_nodes(self, job_id: int, want: set[str], timeout_s: float = 10.0) -> tuple[str, ...]:
        """The job's nodes once they equal ``want`` (a cancelled sibling takes a moment).

        Empty at once if the job no longer runs; what it holds after ``timeout_s`` seconds
        otherwise.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            got = tuple(self.elastic_nodes(job_id))
            if not got or set(got) == want or time.monotonic() >= deadline:
                return got
            time.sleep(0.1)
