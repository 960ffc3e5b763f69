"""What a user does with their elastic jobs after submitting them: list, show, resize, cancel.

Answers are in Slurm's terms (job ids, states, node lists) plus the elastic ones: the job's kind
and node range, and the resize under way. A resize asked by a user goes through the same path
as a controller decision (:class:`~elastic_slurm.controller.actuate.Actuator`): grow in Slurm
then order the job, or order a shrink and give the nodes back once the job vacated them.
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from elastic_slurm.adapter.backend import GrowPath, SlurmBackend, helper_parent
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.adapter.tags import decode
from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.controller.actuate import Actuator, ResizeOutcome
from elastic_slurm.controller.journal import Journal
from elastic_slurm.controller.observe import held_nodes
from elastic_slurm.errors import InvalidRequest, JobInputError, ResizeError
from elastic_slurm.model.decisions import Expand, Shrink
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.resize_order import AckStatus
from elastic_slurm.model.snapshot import JobState
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.waiting import DeadlineExceeded, wait_for


@dataclass(frozen=True)
class JobInfo:
    """One job as a user sees it (``queue`` lines, ``show`` headers).

    ``nodes`` includes the nodes of the job's sibling allocations; ``resize`` describes an
    order the job has not finished following (``""`` when none).
    """

    job_id: int
    name: str
    user: str
    state: str
    kind: str
    nodes: tuple[str, ...]
    size: int
    nodes_min: int
    nodes_max: int
    resize: str
    partition: str
    workdir: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {**asdict(self), "nodes": list(self.nodes)}


def site_backend(site: SiteConfig) -> SlurmBackend:
    """The site's Slurm backend, retrying an unreachable slurmctld for the site's window.

    The window is ``controller.slurm_retry_s`` (seconds): after it, queries raise
    :class:`~elastic_slurm.errors.SlurmUnavailableError`.

    Raises
    ------
    ConfigError
        The site's backend cannot be used (:func:`~elastic_slurm.adapter.factory.slurm_for`).
    """
    slurm = slurm_for(site)
    slurm.set_retry_window(site.controller.slurm_retry_s)
    return slurm


def _pending_resize(job: SlurmJob) -> str:
    if not job.workdir:
        return ""
    jobdir = JobDir.for_job(job.workdir, job.job_id, user=job.user)
    order = jobdir.open_order()
    if order is None:
        return ""
    vacated = jobdir.read_ack(order.seq, AckStatus.VACATED) is not None
    step = "giving nodes back" if vacated else "in the application"
    return f"{order.action.value} to {len(order.nodes)} ({step})"


def job_info(job: SlurmJob, held: tuple[str, ...] | None = None) -> JobInfo:
    """The user's view of one Slurm job (``held``: its nodes, siblings' included)."""
    tag = decode(job.comment)
    nodes = job.nodes if held is None else held
    running = job.model_state is JobState.RUNNING
    size = len(nodes) if running else job.node_count
    return JobInfo(
        job_id=job.job_id,
        name=job.name,
        user=job.user,
        state=job.state,
        kind=tag.kind.value if tag else JobKind.RIGID.value,
        nodes=nodes if running else (),
        size=size,
        nodes_min=tag.nodes_min if tag else size,
        nodes_max=tag.nodes_max if tag else size,
        resize=_pending_resize(job) if running and tag and tag.kind.resizable else "",
        partition=job.partition,
        workdir=job.workdir,
    )


def queue(
    slurm: SlurmBackend, *, user: str | None = None, all_states: bool = False
) -> list[JobInfo]:
    """Jobs in submission order, helpers folded into their job (one ``squeue`` call).

    ``user`` keeps only that user's jobs; ``all_states`` keeps recently ended jobs too.

    Raises
    ------
    SlurmUnavailableError
        slurmctld did not answer: the queue is unknown, not empty.
    """
    listed = slurm.jobs()
    held = held_nodes(listed)
    out = []
    for job in sorted(listed, key=lambda j: (j.submit_time_s, j.job_id)):
        if helper_parent(job.name) is not None:
            continue
        if user is not None and job.user != user:
            continue
        if not all_states and job.model_state not in (
            JobState.PENDING,
            JobState.RUNNING,
            JobState.COMPLETING,
        ):
            continue
        out.append(job_info(job, held.get(job.job_id)))
    return out


@dataclass(frozen=True)
class ResizeRecord:
    """One resize of a job, from its job directory (orders and acknowledgements)."""

    seq: int
    action: str
    nodes: tuple[str, ...]
    issued_at: float
    status: str
    seconds: float | None
    strategy: str
    phases_s: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {**asdict(self), "nodes": list(self.nodes)}


def resize_history(jobdir: JobDir) -> list[ResizeRecord]:
    """Every order issued to the job, with its outcome and duration (seconds)."""
    out = []
    for seq in range(1, jobdir.last_order_seq() + 1):
        order = jobdir.read_order(seq)
        if order is None:
            continue
        ack = jobdir.final_ack(seq)
        out.append(
            ResizeRecord(
                seq=seq,
                action=order.action.value,
                nodes=order.nodes,
                issued_at=order.issued_at,
                status=ack.status.value if ack else "open",
                seconds=(ack.at - order.issued_at + order.phases_s.get("grant", 0.0))
                if ack
                else None,
                strategy=ack.strategy if ack else "",
                phases_s={**order.phases_s, **(ack.phases_s if ack else {})},
            )
        )
    return out


def find_job(slurm: SlurmBackend, job_id: int) -> SlurmJob:
    """The job, or :class:`InvalidRequest` saying it does not exist (any more).

    Raises
    ------
    InvalidRequest
        slurmctld answered and does not know the job.
    SlurmUnavailableError
        slurmctld did not answer: whether the job exists is unknown.
    """
    job = slurm.job(job_id)
    if job is None:
        raise InvalidRequest(f"job {job_id} does not exist (or has left slurmctld's memory)")
    return job


def check_owner(job: SlurmJob, user: str | None = None) -> None:
    """Refuse to act on another user's job (root and the job's owner may).

    Raises
    ------
    InvalidRequest
        The message names the job's owner.
    """
    me = user or getpass.getuser()
    if me != "root" and job.user and job.user != me:
        raise InvalidRequest(
            f"job {job.job_id} belongs to {job.user}, not to you ({me}): "
            "only its owner (or an administrator) may change it"
        )


def resize(
    slurm: SlurmBackend,
    job_id: int,
    nodes: int,
    *,
    grow_path: GrowPath = "merge",
    grant_timeout_s: int = 30,
    timeout_s: float = 300.0,
    user: str | None = None,
    progress: Callable[[str], None] | None = None,
    controller: str | None = None,
) -> ResizeOutcome:
    """Resize running job ``job_id`` to ``nodes`` nodes, as a controller decision would.

    Returns when the job acknowledged (or refused) the order. ``controller``: the URL of a
    service controller (``controller.privilege: service``), which keeps the job's orders and
    carries the size out (:func:`resize_through`); ``None``: done here, as the caller.

    Raises
    ------
    InvalidRequest
        The job is not running, is not malleable or evolving (a rigid or moldable job has one
        size once started), ``nodes`` is outside its range or equals its size, or it is
        another user's job. Nothing was changed.
    ResizeError
        Slurm refused, or the job did not finish within ``timeout_s`` seconds (the order then
        stays open and the job keeps the nodes it has).
    """
    job = find_job(slurm, job_id)
    check_owner(job, user)
    tag = decode(job.comment)
    if tag is None or not tag.kind.resizable:
        kind = tag.kind.value if tag else "rigid"
        raise InvalidRequest(
            f"job {job_id} is {kind}: only malleable and evolving jobs change size while they run"
        )
    if job.model_state is not JobState.RUNNING:
        raise InvalidRequest(f"job {job_id} is {job.state}, not running: nothing to resize")
    if not tag.nodes_min <= nodes <= tag.nodes_max:
        raise InvalidRequest(
            f"{nodes} nodes is outside job {job_id}'s range {tag.nodes_min}-{tag.nodes_max}"
        )
    listed = slurm.jobs()
    held = held_nodes(listed).get(job_id, job.nodes)
    if nodes == len(held):
        raise InvalidRequest(f"job {job_id} already runs on {nodes} node(s)")
    if controller is not None:
        return resize_through(controller, job, held, nodes, timeout_s=timeout_s, progress=progress)
    actuator = Actuator(
        slurm,
        Journal(),
        grant_timeout_s=grant_timeout_s,
        resize_timeout_s=timeout_s,
        grow_path=grow_path,
    )
    jobs = {j.job_id: j for j in listed}
    delta = nodes - len(held)
    decision = (
        Expand(job_id, delta, "asked by the user")
        if delta > 0
        else Shrink(job_id, -delta, "asked by the user")
    )
    actuator.apply([decision], jobs, {job_id: held})
    if job_id not in actuator.in_flight:
        failed = [r for r in actuator.journal.records if r["kind"] == "outcome"]
        why = failed[-1]["message"] if failed else "the order could not be issued"
        raise ResizeError(f"job {job_id} was not resized: {why}")
    say = progress or (lambda line: None)
    say(
        f"job {job_id}: order {actuator.in_flight[job_id].seq} sent ({decision.__class__.__name__}"
        f" by {abs(delta)}); waiting for the application"
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = actuator.poll({j.job_id: j for j in slurm.jobs()})
        if done:
            return done[0]
        time.sleep(0.25)
    raise ResizeError(
        f"job {job_id} has not finished resizing after {timeout_s:g} s; the order "
        "stays open and the job keeps the nodes it has"
    )


def resize_through(
    url: str,
    job: SlurmJob,
    held: Sequence[str],
    nodes: int,
    *,
    timeout_s: float = 300.0,
    progress: Callable[[str], None] | None = None,
) -> ResizeOutcome:
    """Ask a service controller at ``url`` for ``job`` on ``nodes`` nodes; its outcome.

    The message carries the job's secret (read in the job's directory, as its user) and a
    MUNGE credential of the caller: the controller takes it from the job's user or an
    operator only. The job records each order it follows and its acknowledgement in its
    own directory; the outcome is read there.

    Raises
    ------
    InvalidRequest
        The job's secret cannot be read (not the job's user), or it never registered.
    ResizeError
        The controller refused (the reason), is unreachable, or the job did not finish
        within ``timeout_s`` seconds (the order then stays open).
    """
    from elastic_slurm.protocol.client import ControllerClient, RefusedError

    jobdir = JobDir.for_job(job.workdir, job.job_id) if job.workdir else None
    try:
        secret = jobdir.read_secret() if jobdir is not None else None
    except (JobInputError, OSError) as exc:
        raise InvalidRequest(f"job {job.job_id}: its secret cannot be read: {exc}") from exc
    if not secret or jobdir is None:
        raise InvalidRequest(
            f"job {job.job_id} has no secret in its directory: it has not started talking to "
            "the controller (or was not submitted with elastic-slurm submit)"
        )
    client = ControllerClient(url, job.job_id, secret)
    say = progress or (lambda line: None)
    deadline = time.monotonic() + timeout_s
    try:
        number = client.resize(nodes)
        answer = wait_for(
            lambda: client.resize_answer(number),
            timeout_s=max(0.0, deadline - time.monotonic()),
            what=f"the controller to act on job {job.job_id}'s size",
            interval_s=0.25,
        )
    except DeadlineExceeded as exc:
        raise ResizeError(str(exc)) from exc
    except RefusedError as exc:
        raise ResizeError(f"job {job.job_id} was not resized: {exc.reason}") from exc
    except ConnectionError as exc:
        raise ResizeError(f"job {job.job_id} was not resized: {exc}") from exc
    if answer.get("refused"):
        raise ResizeError(f"job {job.job_id} was not resized: {answer['refused']}")
    seq = int(answer["seq"])
    action = "expand" if nodes > len(held) else "shrink"
    say(f"job {job.job_id}: order {seq} sent ({action} to {nodes}); waiting for the application")
    started = time.time()
    try:
        ack = wait_for(
            lambda: jobdir.final_ack(seq),
            timeout_s=max(0.0, deadline - time.monotonic()),
            what=f"job {job.job_id} to follow order {seq}",
            interval_s=0.25,
        )
    except DeadlineExceeded:
        raise ResizeError(
            f"job {job.job_id} has not finished resizing after {timeout_s:g} s; the order "
            "stays open and the job keeps the nodes it has"
        ) from None
    order = jobdir.read_order(seq)
    issued = order.issued_at if order is not None else started
    return ResizeOutcome(
        job_id=job.job_id,
        seq=seq,
        action=action,
        before=tuple(held),
        after=ack.nodes,
        ok=ack.status is AckStatus.DONE,
        seconds=max(0.0, ack.at - issued),
        strategy=ack.strategy,
        phases_s={**(order.phases_s if order else {}), **ack.phases_s},
        message=ack.reason,
        finished_at=time.time(),
    )


def cancel(slurm: SlurmBackend, job_id: int, *, user: str | None = None) -> list[int]:
    """Cancel a job and its expander and sibling allocations; return what was cancelled.

    A job that has already ended is not cancelled again, but its allocations still pending or
    running are: then ``job_id`` is not among the ids returned.

    Raises
    ------
    InvalidRequest
        The job does not exist, belongs to another user, or has already ended with no
        allocation of it left.
    """
    job = find_job(slurm, job_id)
    check_owner(job, user)
    if job.model_state in (JobState.ENDED, JobState.COMPLETING):
        left = [h.job_id for h in slurm.helpers(job_id)]
        if not left:
            raise InvalidRequest(f"job {job_id} has already ended ({job.state}): nothing to cancel")
        slurm.cancel(*left)
        return left
    return slurm.cancel_job(job_id)
