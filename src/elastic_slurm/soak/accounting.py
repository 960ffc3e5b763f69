"""What a soak counts at the end: jobs, resizes and allocations, from Slurm and the journal.

* **Jobs** (``sacct``, the last allocation record of each job): *completed* ended
  ``COMPLETED``; *lost* is every other end (``FAILED``, ``NODE_FAIL``, ``TIMEOUT``, cancelled
  by someone else than the soak, ...), a job Slurm does not know, or one that had not ended
  when the soak stopped waiting. Only trace jobs count; the misbehaving jobs are reported
  apart (their ends are their own doing). One exception, counted apart and not as lost
  (:func:`ended_in_outage`): a job whose program wrote its result within its time limit while
  slurmctld was down, which Slurm records ``TIMEOUT`` because the job's end reached it only
  after the limit had passed (stock Slurm: a job whose completion arrives after its end time
  is a timeout).
* **Resizes** (the journal's ``resizes`` table): *done*, *rolled back* (every other closed
  outcome, by name) and *lost*: still open once every job has ended and the controller has
  had time to settle them.
* **Leaked allocations**: once every job has ended, a node Slurm still shows allocated, or a
  job (a helper allocation) still holding nodes. Nothing should hold anything then.
* **Cycle time**: quantiles of the controller's ``elastic_slurm_cycle_seconds`` histogram,
  summed over its incarnations, interpolated within buckets as Prometheus'
  ``histogram_quantile`` does.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.controller.journal import Journal
from elastic_slurm.model.snapshot import JobState

#: Allocation states of a node (``sinfo``'s long form, flags stripped).
_HELD = ("allocated", "mixed", "completing")


@dataclass(frozen=True)
class JobCount:
    """Jobs by how they ended (Slurm job ids)."""

    completed: tuple[int, ...]
    lost: dict[int, str]  # job id -> why (its final state, or "unknown", "unfinished")
    #: Jobs whose program ended well during a slurmctld outage, recorded TIMEOUT by Slurm.
    ended_in_outage: dict[int, str] = field(default_factory=dict)


def final_states(slurm: SlurmBackend, job_ids: list[int]) -> dict[int, str]:
    """Each job's state in its last ``sacct`` allocation record (``CANCELLED by 0``: the word).

    Jobs ``sacct`` does not list are left out.
    """
    if not job_ids:
        return {}
    res = slurm.transport.run(
        ["sacct", "-X", "-n", "-P", "-j", ",".join(map(str, job_ids)), "-o", "JobIDRaw,State"],
        timeout_s=60,
    )
    return parse_final_states(res.stdout)


def parse_final_states(text: str) -> dict[int, str]:
    r"""Parse ``sacct -X -n -P -o JobIDRaw,State``: the last record of each job wins.

    >>> parse_final_states("7|RESIZING\n7|COMPLETED\n8|CANCELLED by 0\nx|y\n")
    {7: 'COMPLETED', 8: 'CANCELLED'}
    """
    out: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) == 2 and parts[0].isdigit() and parts[1].strip():
            out[int(parts[0])] = parts[1].split()[0]
    return out


def count_jobs(
    states: dict[int, str],
    job_ids: list[int],
    unfinished: set[int],
    in_outage: dict[int, str] | None = None,
) -> JobCount:
    """Sort ``job_ids`` into completed and lost (``unfinished``: the soak gave up on them).

    ``in_outage``: jobs :func:`ended_in_outage` found (job id -> what was seen); counted
    apart, neither completed nor lost.

    >>> c = count_jobs({1: "COMPLETED", 2: "NODE_FAIL", 3: "CANCELLED"}, [1, 2, 3, 4], {3})
    >>> c.completed, c.lost
    ((1,), {2: 'NODE_FAIL', 3: 'unfinished', 4: 'unknown'})
    >>> count_jobs({5: "TIMEOUT"}, [5], set(), {5: "result at 12:00:07"}).ended_in_outage
    {5: 'result at 12:00:07'}
    """
    completed, lost, late = [], {}, {}
    for job_id in job_ids:
        if job_id in unfinished:
            lost[job_id] = "unfinished"
        elif states.get(job_id) == "COMPLETED":
            completed.append(job_id)
        elif states.get(job_id) == "TIMEOUT" and job_id in (in_outage or {}):
            late[job_id] = (in_outage or {})[job_id]
        else:
            lost[job_id] = states.get(job_id, "unknown")
    return JobCount(tuple(completed), lost, late)


def has_result(output: Path) -> bool:
    r"""Whether a job's output holds its program's result: a JSON object with a ``checksum``.

    ``examples/trace_job.py`` prints that line once its work is done, and only then.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "7.out"
    >>> _ = p.write_text('elastic-slurm: order 1 done\n{"runtime_s": 6.0, "checksum": 1.5}\n')
    >>> has_result(p), has_result(p.with_name("8.out"))
    (True, False)
    """
    try:
        lines = output.read_text(errors="replace").splitlines()
    except OSError:
        return False
    for line in lines:
        if line.startswith("{") and '"checksum"' in line:
            try:
                if isinstance(json.loads(line), dict):
                    return True
            except ValueError:
                continue
    return False


def ended_in_outage(
    slurm: SlurmBackend,
    states: dict[int, str],
    jobs_dir: Path,
    outages: list[tuple[float, float]],
    slack_s: float = 30.0,
) -> dict[int, str]:
    """``TIMEOUT`` jobs whose program ended well, within its limit, while slurmctld was down.

    A job counts when its output (``jobs_dir/<id>.out``) holds its result (:func:`has_result`),
    the output was last written before the job's start plus its time limit (``sacct``), and
    that moment falls in one of ``outages`` (epoch seconds; ``slack_s`` before its start too:
    a completion sent just before the stop is lost with it). Returns job id -> what was seen.
    """
    timeouts = sorted(j for j, s in states.items() if s == "TIMEOUT")
    if not timeouts or not outages:
        return {}
    res = slurm.transport.run(
        [
            "sacct",
            "-X",
            "-n",
            "-P",
            "-j",
            ",".join(map(str, timeouts)),
            "-o",
            "JobIDRaw,Start,TimelimitRaw",
        ],
        env={"SLURM_TIME_FORMAT": "%s"},
        timeout_s=60,
    )
    out: dict[int, str] = {}
    for line in res.stdout.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        try:
            job_id, start, limit_min = int(parts[0]), float(parts[1]), float(parts[2])
        except ValueError:
            continue
        output = jobs_dir / f"{job_id}.out"
        if job_id not in states or not has_result(output):
            continue
        try:
            written = output.stat().st_mtime
        except OSError:
            continue
        in_window = any(t0 - slack_s <= written <= t1 for t0, t1 in outages)
        if in_window and written <= start + 60.0 * limit_min:
            out[job_id] = (
                f"result written {written - start:.0f} s after its start, within its "
                f"{limit_min:g}-min limit, while slurmctld was down; Slurm says TIMEOUT"
            )
    return out


def why_failed(output: Path, width: int = 160) -> str:
    r"""The last line of a job's output that names an error (``""`` if none or unreadable).

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "7.out"
    >>> _ = p.write_text("ok\nValueError: save_state: 1 of 2 ranks failed\nmpirun: bye\n")
    >>> why_failed(p)
    'ValueError: save_state: 1 of 2 ranks failed'
    """
    try:
        lines = output.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if "Error" in line or "error:" in line:
            return line.strip()[:width]
    return ""


@dataclass(frozen=True)
class ResizeCount:
    """Resizes from the journal: done, rolled back (by outcome), lost (still open)."""

    done: int
    rolled_back: dict[str, int] = field(default_factory=dict)
    lost: tuple[tuple[int, int, str], ...] = ()  # (job id, seq, phase) still open


def count_resizes(journal: Path) -> ResizeCount:
    """Count the resizes of ``journal`` (a controller may still be writing to it)."""
    j = Journal(journal, readonly=True)
    try:
        rows = j.resizes()
    finally:
        j.close()
    outcomes = Counter(r.outcome for r in rows if not r.open)
    done = outcomes.pop("done", 0)
    lost = tuple((r.job_id, r.seq, str(r.phase)) for r in rows if r.open)
    return ResizeCount(done, dict(sorted(outcomes.items())), lost)


def live_jobs(slurm: SlurmBackend) -> dict[int, tuple[str, ...]]:
    """Jobs pending, running or completing now: job id -> the nodes it holds."""
    live = (JobState.PENDING, JobState.RUNNING, JobState.COMPLETING)
    return {j.job_id: tuple(j.nodes) for j in slurm.jobs() if j.model_state in live}


def leaked(slurm: SlurmBackend, expected: set[int]) -> dict[str, str]:
    """Nodes held with no job that should hold them: node -> by what.

    ``expected``: jobs that may still hold nodes (none at the end of a soak). A node held by
    another job is leaked to that job; a node Slurm shows allocated that no job lists is
    leaked to nobody.
    """
    out: dict[str, str] = {}
    holders: dict[str, int] = {}
    for job_id, nodes in live_jobs(slurm).items():
        for node in nodes:
            holders[node] = job_id
            if job_id not in expected:
                out[node] = f"job {job_id}"
    for node in slurm.nodes():
        state = node.state.rstrip("*~#!%$@^-+").lower()
        if state in _HELD and node.name not in holders:
            out[node.name] = f"no job ({node.state})"
    return out


def quantile(buckets: dict[float, float], q: float) -> float | None:
    """The ``q``-quantile of a cumulative histogram (upper bound -> count), in its unit.

    Linear within the bucket it falls in, as Prometheus' ``histogram_quantile``; ``None``
    without observations. A quantile in the ``+Inf`` bucket is the largest finite bound.

    >>> quantile({0.1: 50.0, 0.5: 90.0, 1.0: 100.0, math.inf: 100.0}, 0.5)
    0.1
    >>> round(quantile({0.1: 50.0, 0.5: 90.0, 1.0: 100.0, math.inf: 100.0}, 0.99), 3)
    0.95
    """
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def merge_buckets(incarnations: list[dict[float, float]]) -> dict[float, float]:
    """Sum the cumulative buckets of several incarnations (the same bounds)."""
    out: dict[float, float] = {}
    for buckets in incarnations:
        for bound, count in buckets.items():
            out[bound] = out.get(bound, 0.0) + count
    return out
