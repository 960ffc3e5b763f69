"""The command-line backend: Slurm driven through its own tools (the default backend).

It composes the pure builders of :mod:`.commands`, a :class:`~.transport.base.Transport` and the
pure parsers of :mod:`.parse`. Errors that Slurm marks as passing (the 22.05 "DB index is being
set" message after a resize, a busy or unreachable slurmctld, a timeout) are retried with
exponential backoff for ``retry_s`` seconds (the site's ``controller.slurm_retry_s``); anything
else raises at once.

A slurmctld that does not answer is never taken for an empty cluster: a command that says so
(``Unable to contact slurm controller``, ``Socket timed out``...), one that times out, and
``squeue --json``'s exit 0 with an ``errors`` list and no jobs (22.05) all raise
:class:`~elastic_slurm.errors.SlurmUnavailableError` once the retries are over. With
slurmctld stopped, each 22.05 command here took 19 s to give up (slurm.conf's
``MessageTimeout`` of 20 s), so a query gives up after at most ``retry_s`` plus one
command's time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, TypeVar

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
from elastic_slurm.errors import (
    ElasticSlurmError,
    ResizeError,
    SlurmCommandError,
    SlurmUnavailableError,
)
from elastic_slurm.model.request import ElasticRequest

log = logging.getLogger(__name__)

T = TypeVar("T")


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, SlurmCommandError) and exc.transient


def _never_reached(exc: BaseException) -> bool:
    """True when slurmctld was not reached at all: a submission can be sent again safely."""
    return isinstance(exc, SlurmUnavailableError) and "connect failure" in exc.stderr


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    what = "slurmctld did not answer" if isinstance(exc, SlurmUnavailableError) else "transient"
    first = str(exc).splitlines()[-1].strip() if exc else ""
    log.info("%s, retrying (attempt %d): %s", what, state.attempt_number, first)


def failure(res: Completed) -> SlurmCommandError:
    """The error for a Slurm command that exited non-zero.

    :class:`SlurmUnavailableError` when its message says that slurmctld did not answer,
    else :class:`SlurmCommandError` (``transient`` when retrying can help).
    """
    text = res.stderr + res.stdout
    if parse.is_unavailable(text):
        return SlurmUnavailableError(res.argv, res.returncode, res.stdout, res.stderr)
    return SlurmCommandError(
        res.argv, res.returncode, res.stdout, res.stderr, transient=parse.is_transient(text)
    )


class SlurmCLI(SlurmBackend):
    """Slurm through ``sbatch``, ``squeue``, ``sinfo``, ``scontrol``, ``salloc``, ``scancel``.

    Parameters
    ----------
    transport
        Where the commands run (this machine, or a login node).
    retry_s
        How long (seconds) transient errors are retried before they are raised (the site's
        ``controller.slurm_retry_s``).
    command_timeout_s
        Timeout (seconds) of one command.
    """

    name = "cli"

    def __init__(
        self, transport: Transport, *, retry_s: float = 20.0, command_timeout_s: float = 30.0
    ) -> None:
        self.transport = transport
        self.set_retry_window(retry_s)
        self.command_timeout_s = command_timeout_s

    # ------------------------------------------------------------------ running
    def _once(
        self,
        argv: Sequence[str],
        timeout_s: float | None,
        input_text: str | None,
        env: Mapping[str, str] | None = None,
    ) -> Completed:
        try:
            res = self.transport.run(
                argv, timeout_s=timeout_s or self.command_timeout_s, input_text=input_text, env=env
            )
        except SlurmUnavailableError:
            raise
        except SlurmCommandError as exc:
            if exc.returncode is None and exc.transient:  # timed out, or the host is unreachable
                raise SlurmUnavailableError(
                    exc.argv, None, exc.stdout, exc.stderr, reason=f"no answer: {exc.reason}"
                ) from exc
            raise
        if res.returncode != 0:
            raise failure(res)
        return res

    def _retrying(
        self, call: Callable[[], T], retryable: Callable[[BaseException], bool] = _retryable
    ) -> T:
        """``call()``, again while it raises a ``retryable`` error, for up to ``retry_s``."""
        for attempt in Retrying(
            retry=retry_if_exception(retryable),
            stop=stop_after_delay(self.retry_s),
            wait=wait_exponential(multiplier=0.1, max=2.0),
            before_sleep=_log_retry,
            reraise=True,
        ):
            with attempt:
                return call()
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    def query(
        self,
        argv: Sequence[str],
        parser: Callable[[Completed], T],
        env: Mapping[str, str] | None = None,
    ) -> T:
        """Run a read-only command and parse its output, both retried as one.

        An answer that parses to an outage (``squeue --json``'s ``errors``) is retried like a
        failed command.

        Raises
        ------
        SlurmUnavailableError
            slurmctld did not answer within ``retry_s`` seconds.
        SlurmOutputError
            Slurm's answer is unusable (the message names the field).
        SlurmCommandError
            The command failed for good.
        """
        return self._retrying(lambda: parser(self._once(argv, None, None, env)))

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
        SlurmUnavailableError
            slurmctld did not answer (the message said so, or the command timed out) for
            ``retry_s`` seconds (without ``retry``: at once).
        SlurmCommandError
            It failed for good (``transient`` tells whether it was still failing transiently
            when the retry time ran out).
        """
        if not retry:
            return self._once(argv, timeout_s, input_text, env)
        return self._retrying(lambda: self._once(argv, timeout_s, input_text, env))

    # ------------------------------------------------------------------ queries
    def version(self) -> tuple[int, int, int]:
        """Slurm's version, e.g. ``(22, 5, 8)``."""
        return self.query(commands.scontrol_version(), lambda r: parse.parse_version(r.stdout))

    def jobs(self, job_ids: Sequence[int] = ()) -> list[SlurmJob]:
        """Every job slurmctld still knows (running, pending, recently ended), in one call.

        ``squeue --json`` of 22.05 ignores ``--jobs`` (it lists every job, and says nothing of
        an unknown id): callers pick theirs from the list (:meth:`job`).

        Raises
        ------
        SlurmUnavailableError
            slurmctld did not answer for ``retry_s`` seconds: Slurm's view is unknown, which
            is not an empty list.
        SlurmOutputError
            The answer is unusable; the message names the job and field.
        """
        return self.query(
            commands.squeue_json(job_ids), lambda r: parse.parse_squeue_json(r.stdout, r.argv)
        )

    def steps(self, job_id: int) -> dict[str, tuple[str, ...]]:
        """The job's running steps and their nodes (``{"12.0": ("n1", "n2")}``)."""
        return self.query(
            commands.squeue_steps(job_id), lambda r: parse.parse_squeue_steps(r.stdout)
        )

    def allocation_history(self, job_id: int) -> list[parse.AllocationRecord]:
        """Every size the job had, in order, from accounting (needs slurmdbd)."""
        return self.query(
            commands.sacct_allocations(job_id),
            lambda r: parse.parse_sacct_allocations(r.stdout, job_id),
            env=commands.EPOCH_TIMES,
        )

    def nodes(self) -> list[SlurmNode]:
        """Every node with its state and CPU count.

        Raises
        ------
        SlurmUnavailableError
            slurmctld did not answer for ``retry_s`` seconds.
        SlurmOutputError
            A line is unusable; the message names it.
        """
        return self.query(
            commands.sinfo_nodes(), lambda r: parse.parse_sinfo_nodes(r.stdout, r.argv)
        )

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
        SlurmUnavailableError
            slurmctld did not answer. Only a submission that never reached it (``connect
            failure``) is sent again, for up to ``retry_s`` seconds: after a timeout the job
            may have been queued, and a second sbatch would queue it twice.
        SlurmCommandError
            sbatch refused the job (its message is quoted); nothing was queued.
        """
        argv = render.sbatch_argv(req, output=output, chdir=chdir, hold=hold, sized_by=sized_by)
        script = render.batch_script(req, python=python, env=env)
        res = self._retrying(
            lambda: self.run(argv, input_text=script, retry=False), retryable=_never_reached
        )
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

    def set_time_limit(self, job_id: int, minutes: int) -> None:
        """``scontrol update JobId=J TimeLimit=M`` (transient errors retried)."""
        self.run(commands.set_time_limit(job_id, minutes))

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
        exclude: Sequence[str] = (),
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
            exclude=exclude,
        )
        res = self.transport.run(argv, timeout_s=immediate_s + 30)
        job_id, granted = parse.parse_salloc_job_id(res.stderr)
        if res.returncode != 0 and job_id is None and parse.is_unavailable(res.stderr):
            raise failure(res)  # nothing was allocated: slurmctld did not answer
        if res.returncode != 0 or not granted or job_id is None:
            nodes_then = ""
            if job_id is not None:  # it was queued and waited: say what the nodes were doing
                nodes_then = self._node_states()
                self.cancel(job_id)
            raise ResizeError(
                f"no {count} node(s) granted to {name} within {immediate_s} s: "
                f"{res.stderr.strip() or res.stdout.strip() or 'salloc said nothing'}"
                f"{nodes_then}"
            )
        return job_id

    def _node_states(self, names_per_state: int = 8) -> str:
        """``"; nodes then: allocated n1,n2; idle n3,n4"``, or ``""`` when sinfo fails.

        For a refused allocation's message: one ``sinfo`` (not retried; at most 10 s), the
        nodes grouped by state, each group's names (a group of more than ``names_per_state``
        nodes only counted).
        """
        try:
            res = self._once(commands.sinfo_nodes(), 10.0, None)
            nodes = parse.parse_sinfo_nodes(res.stdout, res.argv)
        except ElasticSlurmError:
            return ""
        groups: dict[str, list[str]] = {}
        for node in nodes:
            groups.setdefault(node.state, []).append(node.name)
        said = [
            f"{state} {','.join(names) if len(names) <= names_per_state else f'{len(names)} nodes'}"
            for state, names in sorted(groups.items())
        ]
        return f"; nodes then: {'; '.join(said)}" if said else ""
