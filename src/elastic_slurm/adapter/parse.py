"""Pure parsers of Slurm's output, and the maps from Slurm's states to the model's.

Every format Slurm prints that the project reads is parsed here and nowhere else. Tested with
outputs recorded from Slurm 22.05 (``tests/unit/test_parse.py``). Numbers in ``squeue --json``
are plain integers in 22.05 and ``{"set": ..., "number": ...}`` objects in later releases, and
``job_state`` is a string in 22.05 and a list later; both shapes are accepted.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from elastic_slurm.adapter.hostlist import expand
from elastic_slurm.model.snapshot import JobState, NodeState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlurmJob:
    """One job as Slurm reports it (times in seconds since the epoch)."""

    job_id: int
    name: str
    state: str
    nodes: tuple[str, ...]
    node_count: int
    comment: str
    submit_time_s: float
    start_time_s: float | None
    batch_host: str | None
    workdir: str
    user: str
    partition: str
    account: str
    qos: str
    reason: str
    end_time_s: float | None = None
    time_limit_s: float | None = None
    array_job_id: int | None = None  # the array a task belongs to (the array's own id too)
    array_pending: str = ""  # task ids still pending, on the array's own record ("2-9")
    array_throttle: int | None = None  # how many tasks may run at once

    @property
    def model_state(self) -> JobState:
        """The state in the model's terms."""
        return job_state(self.state)


@dataclass(frozen=True)
class SlurmNode:
    """One node as ``sinfo`` reports it; ``state`` is Slurm's long form (``idle``, ``down*``)."""

    name: str
    state: str
    cpus: int

    @property
    def model_state(self) -> NodeState:
        """The state in the model's terms."""
        return node_state(self.state)


_JOB_STATES = {
    "PENDING": JobState.PENDING,
    "CONFIGURING": JobState.RUNNING,
    "RUNNING": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "COMPLETING": JobState.COMPLETING,
    "STAGE_OUT": JobState.COMPLETING,
    "SIGNALING": JobState.COMPLETING,
    "COMPLETED": JobState.ENDED,
    "CANCELLED": JobState.ENDED,
    "FAILED": JobState.ENDED,
    "TIMEOUT": JobState.ENDED,
    "NODE_FAIL": JobState.ENDED,
    "PREEMPTED": JobState.ENDED,
    "BOOT_FAIL": JobState.ENDED,
    "DEADLINE": JobState.ENDED,
    "OUT_OF_MEMORY": JobState.ENDED,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "SPECIAL_EXIT": JobState.PENDING,
}

_NODE_STATES = {
    "idle": NodeState.IDLE,
    "allocated": NodeState.ALLOCATED,
    "mixed": NodeState.ALLOCATED,
    "completing": NodeState.ALLOCATED,
    "down": NodeState.UNAVAILABLE,
    "drained": NodeState.UNAVAILABLE,
    "draining": NodeState.UNAVAILABLE,
    "drain": NodeState.UNAVAILABLE,
    "fail": NodeState.UNAVAILABLE,
    "failing": NodeState.UNAVAILABLE,
    "maint": NodeState.UNAVAILABLE,
    "reserved": NodeState.UNAVAILABLE,
    "future": NodeState.UNAVAILABLE,
    "inval": NodeState.UNAVAILABLE,
    "planned": NodeState.UNAVAILABLE,
    "powered_down": NodeState.UNAVAILABLE,
    "powering_up": NodeState.UNAVAILABLE,
    "powering_down": NodeState.UNAVAILABLE,
    "reboot_issued": NodeState.UNAVAILABLE,
    "reboot_requested": NodeState.UNAVAILABLE,
    "unknown": NodeState.UNKNOWN,
}
_warned: set[str] = set()


def _unknown(kind: str, value: str) -> None:
    if value not in _warned:
        _warned.add(value)
        log.warning("unknown Slurm %s state %r, treated as unknown", kind, value)


def job_state(state: str) -> JobState:
    """Map a Slurm job state (``RUNNING``, ``CANCELLED by 0``) to :class:`JobState`.

    >>> job_state("RESIZING")
    <JobState.RUNNING: 'running'>
    """
    key = state.split()[0].upper() if state.strip() else ""
    if key in _JOB_STATES:
        return _JOB_STATES[key]
    _unknown("job", state)
    return JobState.UNKNOWN


def node_state(state: str) -> NodeState:
    """Map a node state from ``sinfo %T`` to :class:`NodeState`.

    A flag appended by Slurm (``*`` not responding, ``~`` powered off, ``#``/``%``/``!`` power
    changes, ``$`` maintenance, ``@``/``^`` reboot) makes an idle node unavailable.

    >>> [node_state(s).value for s in ("idle", "idle*", "mixed", "down*")]
    ['idle', 'unavailable', 'allocated', 'unavailable']
    """
    base = state.rstrip("*~#!%$@^-+").lower()
    mapped = _NODE_STATES.get(base)
    if mapped is None:
        _unknown("node", state)
        return NodeState.UNKNOWN
    if base != state.lower() and mapped is NodeState.IDLE:
        return NodeState.UNAVAILABLE  # idle but not responding, powered off, rebooting...
    return mapped


def _num(value: Any) -> float | None:
    """A number from 22.05's plain ints or later ``{"set": bool, "number": n}`` objects."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if value is None:
        return None
    return float(value)


def _time(value: Any) -> float | None:
    t = _num(value)
    return t if t else None  # 0 means "not set"


def _minutes_s(value: Any) -> float | None:
    """A time limit in minutes as seconds; ``None`` for unset or infinite."""
    minutes = _num(value)
    if minutes is None or minutes <= 0 or minutes >= 0xFFFFFFFE:
        return None
    return minutes * 60.0


def _state(value: Any) -> str:
    if isinstance(value, list):
        return value[0] if value else "UNKNOWN"
    return str(value)


def parse_squeue_json(text: str) -> list[SlurmJob]:
    """Jobs from ``squeue --json``.

    Raises
    ------
    ValueError
        The text is not JSON, or has no ``jobs`` list; Slurm's own errors are quoted.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"squeue --json printed something that is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        errors = data.get("errors") if isinstance(data, dict) else None
        raise ValueError(f"squeue --json gave no job list (errors: {errors})")
    jobs = []
    for j in data["jobs"]:
        if not isinstance(j, dict) or "job_id" not in j:
            raise ValueError(f"squeue --json listed a job without a job_id: {str(j)[:200]}")
        nodes_expr = j.get("nodes") or ""
        state = _state(j.get("job_state", "UNKNOWN"))
        nodes = expand(nodes_expr) if job_state(state) is not JobState.PENDING else ()
        jobs.append(
            SlurmJob(
                job_id=int(j["job_id"]),
                name=str(j.get("name", "")),
                state=state,
                nodes=nodes,
                node_count=int(_num(j.get("node_count")) or len(nodes)),
                comment=str(j.get("comment") or ""),
                submit_time_s=_time(j.get("submit_time")) or 0.0,
                start_time_s=_time(j.get("start_time")) if nodes else None,
                end_time_s=_time(j.get("end_time")),
                time_limit_s=_minutes_s(j.get("time_limit")),
                array_job_id=int(_num(j.get("array_job_id")) or 0) or None,
                array_pending=str(j.get("array_task_string") or "").split("%", 1)[0],
                array_throttle=int(_num(j.get("array_max_tasks")) or 0) or None,
                batch_host=j.get("batch_host") or None,
                workdir=str(j.get("current_working_directory") or ""),
                user=str(j.get("user_name") or ""),
                partition=str(j.get("partition") or ""),
                account=str(j.get("account") or ""),
                qos=str(j.get("qos") or ""),
                reason=str(j.get("state_reason") or ""),
            )
        )
    return jobs


def array_task_count(spec: str) -> int:
    """How many task ids an array specification names (``"2-9%2"`` -> 8; ``"1,3,5-7"`` -> 5).

    >>> array_task_count("2-9%2"), array_task_count("1,3,5-7"), array_task_count("0-10:5")
    (8, 5, 3)
    """
    spec = spec.split("%", 1)[0].strip()
    total = 0
    for part in filter(None, spec.split(",")):
        rng, _, step = part.partition(":")
        lo, _, hi = rng.partition("-")
        if hi:
            total += (int(hi) - int(lo)) // int(step or 1) + 1
        else:
            total += 1
    return total


def parse_sinfo_nodes(text: str) -> list[SlurmNode]:
    """Nodes from ``sinfo --noheader --Node --format=%N|%T|%c`` (one line per node+partition).

    A node in several partitions appears once. Malformed lines raise ``ValueError``.
    """
    nodes: dict[str, SlurmNode] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.strip().split("|")
        if len(parts) != 3:
            raise ValueError(f"sinfo line {lineno} is not name|state|cpus: {line!r}")
        name, state, cpus = parts
        if not cpus.isdigit():
            raise ValueError(f"sinfo line {lineno} has a CPU count that is not a number: {line!r}")
        nodes.setdefault(name, SlurmNode(name, state, int(cpus)))
    return list(nodes.values())


def parse_sbatch_parsable(text: str) -> int:
    r"""The job id printed by ``sbatch --parsable`` (``123`` or ``123;cluster``).

    >>> parse_sbatch_parsable("123;elastic\n")
    123
    """
    first = text.strip().split(";")[0]
    if not first.isdigit():
        raise ValueError(f"sbatch printed no job id: {text.strip()!r}")
    return int(first)


_GRANTED = re.compile(r"Granted job allocation (\d+)")
_PENDING_ALLOC = re.compile(r"Pending job allocation (\d+)")


def parse_salloc_job_id(stderr: str) -> tuple[int | None, bool]:
    r"""The job id in salloc's messages, and whether it was granted.

    >>> parse_salloc_job_id("salloc: Granted job allocation 8\n")
    (8, True)
    >>> parse_salloc_job_id("salloc: Pending job allocation 9\nsalloc: error: ...")
    (9, False)
    """
    m = _GRANTED.search(stderr)
    if m:
        return int(m.group(1)), True
    m = _PENDING_ALLOC.search(stderr)
    return (int(m.group(1)) if m else None), False


_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_scontrol_oneline(text: str) -> dict[str, str]:
    """``Key=Value`` pairs of ``scontrol --oneliner show ...`` (values may contain spaces).

    >>> parse_scontrol_oneline("JobId=5 JobName=a b NodeList=n[1-2] ReqB:S:C:T=0:0:*:*")
    {'JobId': '5', 'JobName': 'a b', 'NodeList': 'n[1-2]', 'ReqB:S:C:T': '0:0:*:*'}
    """
    line = text.strip().splitlines()[0] if text.strip() else ""
    matches = list(_KEY.finditer(line))
    out = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out[m.group(1)] = line[m.end() : end].strip()
    return out


_TRANSIENT = (
    "DB index is being set",
    "Socket timed out",
    "Unable to contact slurm controller",
    "Slurm backup controller in standby mode",
    "Resource temporarily unavailable",
    "Connection refused",
    "Zero Bytes were transmitted or received",
    "Communication connection failure",
    "try again",
)


def is_transient(stderr: str) -> bool:
    """True when Slurm's error text says that retrying later can succeed.

    >>> is_transient("Job update not available right now, the DB index is being set, try again")
    True
    >>> is_transient("Requested operation not supported on this system")
    False
    """
    return any(marker.lower() in stderr.lower() for marker in _TRANSIENT)


_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int, int]:
    """Slurm's version from ``scontrol --version`` (Debian: ``slurm-wlm 22.05.8``).

    >>> parse_version("slurm-wlm 22.05.8")
    (22, 5, 8)
    """
    m = _VERSION.search(text)
    if not m:
        raise ValueError(f"no Slurm version in {text.strip()!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def parse_squeue_steps(text: str) -> dict[str, tuple[str, ...]]:
    r"""Steps from ``squeue --steps --format=%i|%N``: ``{"12.0": ("n1", "n2"), ...}``.

    >>> parse_squeue_steps("12.0|n[1-2]\n12.batch|n1\n")
    {'12.0': ('n1', 'n2'), '12.batch': ('n1',)}
    """
    steps = {}
    for line in text.splitlines():
        if "|" in line:
            step, nodes = line.strip().split("|", 1)
            steps[step] = expand(nodes)
    return steps


@dataclass(frozen=True)
class AllocationRecord:
    """One size a job had, from accounting: its nodes and when (seconds since the epoch)."""

    state: str
    nodes: tuple[str, ...]
    start_s: float | None
    end_s: float | None


def _epoch(field: str) -> float | None:
    return float(field) if field.strip().isdigit() and int(field) > 0 else None


def parse_sacct_allocations(text: str, job_id: int) -> list[AllocationRecord]:
    r"""Records of ``job_id`` from ``sacct --allocations --parsable2`` (times as epoch seconds).

    >>> text = "7|RESIZING|2|n[1-2]|100|105\n7|COMPLETED|4|n[1-4]|105|130"
    >>> recs = parse_sacct_allocations(text, 7)
    >>> [(r.state, len(r.nodes)) for r in recs]
    [('RESIZING', 2), ('COMPLETED', 4)]
    """
    out = []
    for line in text.splitlines():
        fields = line.strip().split("|")
        if len(fields) != 6 or fields[0] != str(job_id):
            continue
        _, state, _count, nodelist, start, end = fields
        out.append(AllocationRecord(state.split()[0], expand(nodelist), _epoch(start), _epoch(end)))
    return out


def parse_scontrol_config(text: str) -> dict[str, str]:
    r"""``scontrol show config`` as ``{key: value}`` (``(null)`` becomes ``""``).

    Only the first block is read (the main configuration; later blocks such as cgroup or
    MPI plugin settings repeat some keys).

    >>> parse_scontrol_config("Configuration data as of x\nPrologFlags = Alloc,Contain\n")
    {'PrologFlags': 'Alloc,Contain'}
    """
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if out:
                break
            continue
        if " = " not in line:
            continue
        key, value = line.split(" = ", 1)
        value = value.strip()
        out.setdefault(key.strip(), "" if value == "(null)" else value)
    return out
