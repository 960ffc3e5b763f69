"""The command-line backend: Slurm driven through its own tools (the default backend).

It composes the pure builders of :mod:`.commands`, a :class:`~.transport.base.Transport` and the
pure parsers of :mod:`.parse`. Errors that Slurm marks as passing (the 22.05 "DB index is being
set" message after a resize, a busy or unreachable slurmctld, a timeout) are retried with
exponential backoff; anything else raises at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
)

from elastic_slurm.adapter import commands, parse, render
from elastic_slurm.adapter.parse import SlurmJob, SlurmNode
from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.errors import ResizeError, SlurmCommandError
from elastic_slurm.model.request import ElasticRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GrowResult:
    """The outcome of a grow: the expander that carried the nodes and the job's nodes after."""

    expander_id: int
    added: tuple[str, ...]
    nodes: tuple[str, ...]
    elapsed_s: float


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, SlurmCommandError) and exc.transient


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.warning("transient Slurm error, retrying (attempt %d): %s", state.attempt_number, exc)


class SlurmCLI:
    """Slurm through ``sbatch``, ``squeue``, ``sinfo``, ``scontrol``, ``salloc``, ``scancel``.

    Parameters
    ----------
    transport
        Where the commands run (this machine, or a login node).
    retry_s
        How long (seconds) transient errors are retried before they are raised.
    command_timeout_s
        Timeout (seconds) of one command.
    """

    def __init__(
        self, transport: Transport, *, retry_s: float = 20.0, command_timeout_s: float = 30.0
    ) -> None:
        self.transport = transport
        self.retry_s = retry_s
        self.command_timeout_s = command_timeout_s

    # ------------------------------------------------------------------ running
    def _once(
        self,
        argv: Sequence[str],
        timeout_s: float | None,
        input_text: str | None,
        env: Mapping[str, str] | None = None,
    ) -> Completed:
        res = self.transport.run(
            argv, timeout_s=timeout_s or self.command_timeout_s, input_text=input_text, env=env
        )
        if res.returncode != 0:
            raise SlurmCommandError(
                res.argv,
                res.returncode,
                res.stdout,
                res.stderr,
                transient=parse.is_transient(res.stderr + res.stdout),
            )
        return res

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        input_text: str | None = None,
        retry: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> Completed:
        """Run a Slurm command, retrying transient failures for up to ``retry_s`` seconds.

        Raises
        ------
        SlurmCommandError
            It failed for good (``transient`` tells whether it was still failing transiently
            when the retry time ran out).
        """
        if not retry:
            return self._once(argv, timeout_s, input_text, env)
        for attempt in Retrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_delay(self.retry_s),
            wait=wait_exponential(multiplier=0.1, max=2.0),
            before_sleep=_log_retry,
            reraise=True,
        ):
            with attempt:
                return self._once(argv, timeout_s, input_text, env)
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    # ------------------------------------------------------------------ queries
    def version(self) -> tuple[int, int, int]:
        """Slurm's version, e.g. ``(22, 5, 8)``."""
        return parse.parse_version(self.run(commands.scontrol_version()).stdout)

    def jobs(self, job_ids: Sequence[int] = ()) -> list[SlurmJob]:
        """Every job slurmctld still knows (running, pending, recently ended), in one call."""
        return parse.parse_squeue_json(self.run(commands.squeue_json(job_ids)).stdout)

    def job(self, job_id: int) -> SlurmJob | None:
        """One job, or ``None`` if slurmctld no longer knows it."""
        try:
            found = self.jobs([job_id])
        except SlurmCommandError as exc:
            if "Invalid job id" in exc.stderr:
                return None
            raise
        return next((j for j in found if j.job_id == job_id), None)

    def steps(self, job_id: int) -> dict[str, tuple[str, ...]]:
        """The job's running steps and their nodes (``{"12.0": ("n1", "n2")}``)."""
        return parse.parse_squeue_steps(self.run(commands.squeue_steps(job_id)).stdout)

    def allocation_history(self, job_id: int) -> list[parse.AllocationRecord]:
        """Every size the job had, in order, from accounting (needs slurmdbd)."""
        res = self.run(commands.sacct_allocations(job_id), env=commands.EPOCH_TIMES)
        return parse.parse_sacct_allocations(res.stdout, job_id)

    def nodes(self) -> list[SlurmNode]:
        """Every node with its state and CPU count."""
        return parse.parse_sinfo_nodes(self.run(commands.sinfo_nodes()).stdout)

    # ------------------------------------------------------------------ submit / cancel
    def submit(
        self,
        req: ElasticRequest,
        *,
        python: str,
        chdir: str | None = None,
        output: str | None = None,
        env: dict[str, str] | None = None,
    ) -> int:
        """Submit ``req`` and return its job id.

        Raises
        ------
        SlurmCommandError
            sbatch refused the job (its message is quoted); nothing was queued.
        """
        argv = render.sbatch_argv(req, output=output, chdir=chdir)
        script = render.batch_script(req, python=python, env=env)
        res = self.run(argv, input_text=script, retry=False)
        job_id = parse.parse_sbatch_parsable(res.stdout)
        log.info("submitted %s job %d: %s", req.kind.value, job_id, " ".join(req.program))
        return job_id

    def cancel(self, *job_ids: int) -> None:
        """Cancel jobs (already ended ones are fine)."""
        if job_ids:
            try:
                self.run(commands.scancel(*job_ids))
            except SlurmCommandError as exc:
                if "Invalid job id" not in exc.stderr and "already completing" not in exc.stderr:
                    raise

    # ------------------------------------------------------------------ resize
    def shrink(self, job_id: int, keep: Sequence[str]) -> tuple[str, ...]:
        """Shrink running job ``job_id`` to exactly the nodes ``keep``; return its nodes after.

        The caller must have vacated the other nodes: Slurm kills steps left on them.

        Raises
        ------
        ResizeError
            ``keep`` is not a non-empty subset of the job's nodes, Slurm refused, or Slurm
            reports a different node list afterwards.
        """
        job = self.job(job_id)
        if job is None or not job.nodes:
            raise ResizeError(f"job {job_id} is not running; nothing to shrink")
        if not keep or not set(keep) <= set(job.nodes):
            raise ResizeError(
                f"cannot shrink job {job_id} to {list(keep)}: it runs on {list(job.nodes)}, and "
                "the nodes to keep must be a non-empty subset of those"
            )
        if set(keep) == set(job.nodes):
            return job.nodes
        try:
            self.run(commands.shrink_to(job_id, keep))
        except SlurmCommandError as exc:
            raise ResizeError(f"Slurm refused to shrink job {job_id}: {exc}") from exc
        after = self.job(job_id)
        got = after.nodes if after else ()
        if set(got) != set(keep):
            raise ResizeError(
                f"after shrinking job {job_id} to {list(keep)} Slurm reports {list(got)}"
            )
        return got

    def grow(
        self,
        job_id: int,
        count: int,
        *,
        grant_timeout_s: int = 30,
    ) -> GrowResult:
        """Grow running job ``job_id`` by ``count`` nodes through an expander merge.

        The procedure of SLURM-FACTS.md: ``salloc --no-shell --exclusive
        --dependency=expand:J`` (withdrawn by salloc itself if not granted within
        ``grant_timeout_s`` seconds), then ``NumNodes=0`` on the expander and ``NumNodes=ALL``
        on the job. Needs ``SchedulerParameters=permit_job_expansion``.

        Raises
        ------
        ResizeError
            No grant in time, or Slurm refused the merge. The job keeps its nodes and no
            expander is left behind (a granted expander is cancelled).
        """
        t0 = time.monotonic()
        job = self.job(job_id)
        if job is None or not job.nodes:
            raise ResizeError(f"job {job_id} is not running; nothing to grow")
        before = job.nodes
        argv = commands.expander_allocation(
            job_id,
            count,
            immediate_s=grant_timeout_s,
            partition=job.partition or None,
            account=job.account or None,
            qos=job.qos or None,
        )
        res = self.transport.run(argv, timeout_s=grant_timeout_s + 30)
        expander, granted = parse.parse_salloc_job_id(res.stderr)
        if res.returncode != 0 or not granted or expander is None:
            if expander is not None:
                self.cancel(expander)
            raise ResizeError(
                f"no {count} more node(s) for job {job_id} within {grant_timeout_s} s: "
                f"{res.stderr.strip() or res.stdout.strip()}"
            )
        still = self.job(job_id)
        if still is None or not still.nodes or still.model_state.value != "running":
            # the job ended while salloc waited: merging into an ended job leaves a ghost
            # COMPLETING expander in Slurm 22.05 (seen here), so cancel the expander instead
            self.cancel(expander)
            raise ResizeError(
                f"job {job_id} ended while its expansion was being granted; "
                f"expander {expander} cancelled"
            )
        try:
            self.run(commands.release_expander(expander))
            self.run(commands.absorb(job_id))
        except SlurmCommandError as exc:
            self.cancel(expander)
            raise ResizeError(
                f"Slurm refused to merge expander {expander} into job {job_id}: {exc}"
            ) from exc
        after = self.job(job_id)
        nodes = after.nodes if after else ()
        added = tuple(n for n in nodes if n not in before)
        if len(added) != count:
            raise ResizeError(
                f"after merging expander {expander}, job {job_id} runs on {list(nodes)} "
                f"(was {list(before)}; expected {count} more)"
            )
        return GrowResult(expander, added, nodes, time.monotonic() - t0)
