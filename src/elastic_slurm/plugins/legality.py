"""Whether a policy's decisions may be carried out: the one place that says so.

Both the simulator (:meth:`~elastic_slurm.simulator.cluster.VirtualCluster.apply`, which
raises on the first illegal decision) and the live controller
(:meth:`~elastic_slurm.controller.actuate.Actuator.apply`, which refuses, journals and logs it,
and never sends it to Slurm) call :func:`check` before acting.

The rules, for decisions taken in the order the policy returned them, each seeing the effect
of the earlier *legal* ones of the same batch:

* **Types.** A decision is a :class:`~elastic_slurm.model.decisions.Start`,
  :class:`~elastic_slurm.model.decisions.Expand` or
  :class:`~elastic_slurm.model.decisions.Shrink`, and its node count is an ``int`` (not a
  float, not a bool).
* **Start(job, n).** The job is pending (and was not started earlier in the batch). ``n`` is its
  requested size for rigid and evolving jobs, and within ``[nodes_min, nodes_max]`` for
  moldable and malleable ones. ``n`` does not exceed the nodes free for it: the idle nodes,
  plus the nodes being released (``releasing``, and what earlier shrinks of the batch give
  back), minus what earlier starts and expansions of the batch took.
* **Expand(job, k) / Shrink(job, k).** The job is running, has no resize under way
  (``JobView.resizing``) and was not resized or started short of nodes earlier in the batch
  (one resize at a time per job); ``k >= 1``; the new size stays within
  ``[nodes_min, nodes_max]``. Only malleable jobs are resized at will; an evolving job only to
  serve its outstanding request (same direction, at most the nodes asked); rigid and moldable
  jobs never while they run. An expansion's ``k`` nodes must be free as for a start.

Decisions name node *counts*, never node names: which nodes a start or an expansion gets is
Slurm's choice (the lowest-numbered idle ones in the simulator), and which nodes a shrink gives
back is the controller's (:func:`~elastic_slurm.controller.actuate.choose_keep`: never the
batch host). So no decision can name a node that does not exist, or give one node twice; the
counts above are what keeps every node given to at most one job.

The function is pure: no I/O, the snapshot is not changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState, JobView


@dataclass(frozen=True)
class Verdict:
    """A decision and whether it may be carried out.

    Parameters
    ----------
    decision
        The decision judged (as the policy returned it).
    reason
        Why it is illegal; empty when it is legal.
    """

    decision: Decision
    reason: str = ""

    @property
    def legal(self) -> bool:
        """True when the decision may be carried out."""
        return not self.reason


# what earlier legal decisions of the batch did to a job: it started (running, size n), it
# waits for nodes to start, or it is resizing
_STARTED, _STARTING, _RESIZING = 1, 2, 3

# the enum members read for every decision, as module constants: reading a member from its
# Enum class goes through the metaclass (about 80 ns more than a global's 15 ns)
_PENDING, _RUNNING = JobState.PENDING, JobState.RUNNING
_EVOLVING, _MALLEABLE = JobKind.EVOLVING, JobKind.MALLEABLE
_FIXED_START = (JobKind.RIGID, JobKind.EVOLVING)  # kinds that start at their requested size


def check(
    snapshot: ClusterSnapshot, decisions: Iterable[Decision], *, releasing: int = 0
) -> list[Verdict]:
    """Judge ``decisions`` against ``snapshot``, in order (the rules: see the module docstring).

    Parameters
    ----------
    snapshot
        The cluster the policy decided on.
    decisions
        The policy's decisions, in the order they are to be carried out.
    releasing
        Nodes that resizes already under way will give back and that nothing has claimed yet
        (nodes); a start or an expansion may count on them. The simulator knows this number;
        the live controller passes 0 (it decides only when no resize is in progress).

    Returns
    -------
    list[Verdict]
        One verdict per decision, in the same order. An illegal decision changes nothing for
        the decisions after it.
    """
    decisions = list(decisions)
    new, set_state = object.__new__, object.__setattr__
    verdicts: list[Verdict] = []
    for d, reason in zip(decisions, reasons(snapshot, decisions, releasing=releasing), strict=True):
        # Verdict(d, reason), without the frozen __init__'s cost per field
        verdict = new(Verdict)
        set_state(verdict, "__dict__", {"decision": d, "reason": reason})
        verdicts.append(verdict)
    return verdicts


def reasons(
    snapshot: ClusterSnapshot, decisions: Sequence[Decision], *, releasing: int = 0
) -> list[str]:
    """Why each of ``decisions`` is illegal, in order: :func:`check` without the verdicts.

    Parameters
    ----------
    snapshot, releasing
        As for :func:`check`.
    decisions
        The policy's decisions, in the order they are to be carried out.

    Returns
    -------
    list[str]
        One reason per decision, in the same order: ``""`` for a legal one (then it is
        ``check(...)[i].reason``). For callers that need no :class:`Verdict` objects (the
        simulator, which judges every cycle's decisions).
    """
    idle = len(snapshot.idle_nodes())
    free_later = releasing  # nodes not idle yet, but that will be, and nobody claimed
    done: dict[int, tuple[int, int]] = {}  # job id -> (what the batch did, size after)
    out: list[str] = []
    for d in decisions:
        kind = type(d)
        if kind is Start:
            n = d.nodes  # type: ignore[union-attr]
            reason = "the node count must be an int" if type(n) is not int else ""
            reason = reason or _start(snapshot, d, done, idle, free_later)  # type: ignore[arg-type]
            if not reason:
                have = min(n, idle)
                idle -= have
                free_later -= n - have
                done[d.job_id] = (_STARTED if have == n else _STARTING, n)
        elif kind is Expand or kind is Shrink:
            k = d.count  # type: ignore[union-attr]
            reason = "the node count must be an int" if type(k) is not int else ""
            reason = reason or _resize(snapshot, d, done, idle + free_later)  # type: ignore[arg-type]
            if not reason:
                if kind is Expand:
                    have = min(k, idle)
                    idle -= have
                    free_later -= k - have
                else:
                    free_later += k
                done[d.job_id] = (_RESIZING, 0)
        else:
            reason = "this is not a Start, Expand or Shrink"
        out.append(reason)
    return out


def _a(kind: JobKind) -> str:
    return f"an {kind}" if kind is _EVOLVING else f"a {kind}"


def _view(snapshot: ClusterSnapshot, job_id: int) -> JobView | None:
    try:
        return snapshot.job(job_id)
    except (KeyError, TypeError):
        return None


def _start(
    snapshot: ClusterSnapshot,
    d: Start,
    done: dict[int, tuple[int, int]],
    idle: int,
    free_later: int,
) -> str:
    job = _view(snapshot, d.job_id)
    if job is None or job.state is not _PENDING or d.job_id in done:
        return f"job {d.job_id} is not pending"
    n = d.nodes
    if job.kind in _FIXED_START:
        if n != job.nodes_requested:
            return f"{_a(job.kind)} job starts at its requested size, {job.nodes_requested}"
    elif not job.nodes_min <= n <= job.nodes_max:
        return f"the size must be within the job's range {job.nodes_min}-{job.nodes_max}"
    if n > idle + free_later:
        more = f" and {free_later} more are being released" if free_later > 0 else ""
        return f"it needs {n} node(s) but only {idle} are idle{more}"
    return ""


def _resize(
    snapshot: ClusterSnapshot,
    d: Expand | Shrink,
    done: dict[int, tuple[int, int]],
    available: int,
) -> str:
    job = _view(snapshot, d.job_id)
    earlier = done.get(d.job_id)
    if earlier is not None and earlier[0] == _STARTED:
        size = earlier[1]  # started by this batch: running at that size, nothing under way
    elif job is None or job.state is not _RUNNING or earlier is not None:
        if earlier is not None and earlier[0] == _RESIZING:
            return "the job is already resizing"
        return f"job {d.job_id} is not running"
    elif job.resizing:
        return "the job is already resizing"
    else:
        size = len(job.nodes)
    assert job is not None
    if d.count < 1:
        return "the count must be at least 1"
    grow = type(d) is Expand
    if job.kind is _EVOLVING:
        request = job.evolving_request if earlier is None else 0
        wanted = request if grow else -request
        if wanted <= 0 or d.count > wanted:
            return (
                "an evolving job is resized only to serve its request "
                f"(it asks for {request:+d} node(s))"
            )
    elif job.kind is not _MALLEABLE:
        return f"{_a(job.kind)} job cannot be resized while it runs"
    new = size + d.count if grow else size - d.count
    if not job.nodes_min <= new <= job.nodes_max:
        return (
            f"the job would have {new} node(s), outside its range {job.nodes_min}-{job.nodes_max}"
        )
    if grow and d.count > available:
        return f"it needs {d.count} node(s) but only {available} are free"
    return ""


__all__ = ["Verdict", "check", "reasons"]
