"""The command-line backend: Slurm driven through its own tools (the default backend).

It composes the pure builders of :mod:`.commands`, a :class:`~.transport.base.Transport` and the
pure parsers of :mod:`.parse`. Errors that Slurm marks as passing (the 22.05 "DB index is being
set" message after a resize, a busy or unreachable slurmctld, a timeout) are retried with
exponential backoff; anything else raises at once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Literal

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
)

from elastic_slurm.adapter import commands, parse, render
from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.parse import SlurmJob, SlurmNode
from elastic_slurm.adapter.tags import SizedBy
from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.errors import ResizeError, SlurmCommandError
from elastic_slurm.model.request import ElasticRequest

log = logging.getLogger(__name__)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, SlurmCommandError) and exc.transient


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.warning("transient Slurm error, retrying (attempt %d): %s", state.attempt_number, exc)


class SlurmCLI(SlurmBackend):
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

    name = "cli"

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
        hold: bool = False,
        sized_by: SizedBy = "slurm",
    ) -> int:
        """Submit ``req`` with ``sbatch`` (``--hold`` if ``hold``) and return its job id.

        See :meth:`SlurmBackend.submit` for the parameters.

        Raises
        ------
        InvalidRequest, ValueError
            ``sized_by`` does not fit the job or ``hold`` (:func:`render.sbatch_argv`).
        SlurmCommandError
            sbatch refused the job (its message is quoted); nothing was queued.
        """
        argv = render.sbatch_argv(req, output=output, chdir=chdir, hold=hold, sized_by=sized_by)
        script = render.batch_script(req, python=python, env=env)
        res = self.run(argv, input_text=script, retry=False)
        job_id = parse.parse_sbatch_parsable(res.stdout)
        log.info(
            "submitted %s job %d%s: %s",
            req.kind.value,
            job_id,
            " (held for the controller to size)"
            if sized_by == "controller"
            else (" (held)" if hold else ""),
            " ".join(req.program),
        )
        return job_id

    def release(self, job_id: int) -> None:
        """``scontrol release JOB`` (transient errors retried; see :meth:`SlurmBackend.release`).

        Raises
        ------
        SlurmCommandError
            Unknown job, or not allowed.
        """
        self.run(commands.release(job_id))

    def cancel(self, *job_ids: int) -> None:
        """Cancel jobs (already ended ones are fine)."""
        if job_ids:
            try:
                self.run(commands.scancel(*job_ids))
            except SlurmCommandError as exc:
                if "Invalid job id" not in exc.stderr and "already completing" not in exc.stderr:
                    raise

    def select_type(self) -> str:
        """The ``SelectType`` of slurmctld (``scontrol show config``), e.g. ``select/linear``."""
        text = self.run(commands.scontrol_show_config()).stdout
        return parse.parse_scontrol_config(text).get("SelectType", "")

    def reconfigure(self) -> None:
        """``scontrol reconfigure`` (operator rights; transient errors retried)."""
        self.run(commands.reconfigure())

    def requeue(self, job_id: int) -> None:
        """``scontrol requeue JOB`` (transient errors retried)."""
        self.run(commands.requeue(job_id))

    # ------------------------------------------------------------------ updates
    def update_nodelist(self, job_id: int, nodes: Sequence[str]) -> None:
        """``scontrol update JobId=J NodeList=...`` (transient errors retried)."""
        self.run(commands.shrink_to(job_id, nodes))

    def update_numnodes(self, job_id: int, value: int | Literal["ALL"]) -> None:
        """``scontrol update JobId=J NumNodes=...`` (transient errors retried)."""
        if value == "ALL":
            self.run(commands.absorb(job_id))
        elif value == 0:
            self.run(commands.release_expander(job_id))
        else:
            self.run(commands.set_pending_size(job_id, int(value)))

    def set_array_throttle(self, array_job_id: int, max_running: int) -> None:
        """``scontrol update JobId=A ArrayTaskThrottle=n``."""
        self.run(commands.set_array_throttle(array_job_id, max_running))

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
    ) -> int:
        """``salloc --no-shell --exclusive`` (see :meth:`SlurmBackend.allocate`)."""
        argv = commands.allocation(
            count,
            name=name,
            immediate_s=immediate_s,
            dependency=dependency,
            time_limit_min=time_limit_min,
            partition=partition,
            account=account,
            qos=qos,
        )
        res = self.transport.run(argv, timeout_s=immediate_s + 30)
        job_id, granted = parse.parse_salloc_job_id(res.stderr)
        if res.returncode != 0 or not granted or job_id is None:
            if job_id is not None:
                self.cancel(job_id)
            raise ResizeError(
                f"no {count} node(s) granted to {name} within {immediate_s} s: "
                f"{res.stderr.strip() or res.stdout.strip() or 'salloc said nothing'}"
            )
        return job_id
