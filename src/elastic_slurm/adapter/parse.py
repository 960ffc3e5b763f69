"""Pure parsers of Slurm's output, and the maps from Slurm's states to the model's.

Every format Slurm prints that the project reads is parsed here and nowhere else. Tested with
outputs recorded from Slurm 22.05 (``tests/unit/test_parse.py``). Numbers in ``squeue --json``
are plain integers in 22.05 and ``{"set": ..., "number": ...}`` objects in later releases, and
``job_state`` is a string in 22.05 and a list later; both shapes are accepted.

Slurm's answers are input like any other: every field read is checked at this boundary (its
type, its bounds, its node list), and an answer that fails raises
:class:`~elastic_slurm.errors.SlurmOutputError` naming the field, never a ``TypeError`` deep in
the controller or a silently wrong value. An answer that says slurmctld did not answer (the
``errors`` list of ``squeue --json``, which exits 0 then) raises
:class:`~elastic_slurm.errors.SlurmUnavailableError`: an outage is not an empty cluster.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from elastic_slurm.adapter.hostlist import expand
from elastic_slurm.errors import SlurmCommandError, SlurmOutputError, SlurmUnavailableError
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


#: Largest job id, node count or CPU count read from Slurm: its 32-bit fields, without the
#: ``NO_VAL`` (0xfffffffe) and ``INFINITE`` (0xffffffff) markers.
MAX_U32 = 0xFFFFFFFD
#: Latest time read from Slurm (seconds since the epoch, about the year 36800): later ones are
#: markers such as ``NO_VAL64``, not times.
MAX_EPOCH_S = 1 << 40
_SQUEUE = ("squeue", "--json")


class _Fields:
    """Typed reads of one JSON record; every refusal is a :class:`SlurmOutputError` naming it."""

    def __init__(self, record: Any, where: str, argv: Sequence[str]) -> None:
        if not isinstance(record, dict):
            raise SlurmOutputError(argv, f"{where}: an object expected, got {_shown(record)}")
        self.record = record
        self.where = where
        self.argv = argv

    def fail(self, key: str, what: str) -> SlurmOutputError:
        return SlurmOutputError(self.argv, f"{self.where}.{key}: {what}")

    def get(self, key: str, required: bool) -> Any:
        if key not in self.record:
            if required:
                raise self.fail(key, "missing")
            return None
        return self.record[key]

    def text(self, key: str, *, required: bool = True) -> str:
        """A string; ``null`` (and a missing optional key) is ``""``."""
        value = self.get(key, required)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.fail(key, f"a string expected, got {_shown(value)}")
        return value

    def number(
        self, key: str, *, required: bool = True, hi: int = MAX_U32, markers: bool = False
    ) -> int | None:
        """A whole number in ``[0, hi]``, or ``None`` for null, unset or infinite.

        22.05's plain integer or a later release's ``{"set": bool, "infinite": bool,
        "number": n}``; with ``markers``, Slurm's 32-bit ``NO_VAL`` and ``INFINITE`` are
        ``None`` too.
        """
        value = self.get(key, required)
        if markers and value in (0xFFFFFFFE, 0xFFFFFFFF) and not isinstance(value, bool):
            return None
        if isinstance(value, dict):
            flags = {k: value.get(k, d) for k, d in (("set", True), ("infinite", False))}
            if not all(isinstance(v, bool) for v in flags.values()):
                raise self.fail(key, f"set/infinite are not true/false in {_shown(value)}")
            if not flags["set"] or flags["infinite"]:
                return None
            value = value.get("number")
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"a whole number expected, got {_shown(value)}")
        if not 0 <= value <= hi:
            raise self.fail(key, f"{value} is outside [0, {hi}]")
        return value

    def state(self, key: str) -> str:
        """``job_state``: a string (22.05) or a list of strings (later; the first is the state)."""
        value = self.get(key, True)
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise self.fail(key, f"a list of strings expected, got {_shown(value)}")
            value = value[0] if value else "UNKNOWN"
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"a state name expected, got {_shown(value)}")
        return value

    def nodes(self, key: str) -> tuple[str, ...]:
        """A Slurm hostlist expression, expanded."""
        expr = self.text(key)
        try:
            return expand(expr)
        except ValueError as exc:
            raise self.fail(key, str(exc)) from exc


def _shown(value: Any) -> str:
    text = json.dumps(value) if _jsonable(value) else repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _minutes_s(minutes: int | None) -> float | None:
    """A time limit in minutes as seconds; ``None`` for unset or infinite."""
    if minutes is None or minutes <= 0:
        return None
    return minutes * 60.0


def _time(value: int | None) -> float | None:
    return float(value) if value else None  # 0 means "not set"


#: Slurm error numbers that mean "slurmctld did not answer" (slurm_errno.h: communication
#: errors, the standby backup controller, socket timeouts); ``-1`` is what 22.05's
#: ``squeue --json`` reports when ``slurm_load_jobs`` could not reach slurmctld.
UNAVAILABLE_ERRNOS = frozenset(
    {-1, 1000, 1001, 1002, 1003, 1004, 1800, 1801, 1802, 1803, 2027, 5004, 5005}
)
#: Slurm's error number for a job id it does not know (``ESLURM_INVALID_JOB_ID``).
INVALID_JOB_ID_ERRNO = 2017


def _check_errors(data: dict[str, Any], argv: Sequence[str], text: str) -> None:
    """Raise for the ``errors`` list of Slurm's JSON, unless it only says "no such job"."""
    errors = data.get("errors")
    if errors is None:
        return
    if not isinstance(errors, list):
        raise SlurmOutputError(argv, f"errors: a list expected, got {_shown(errors)}")
    for i, err in enumerate(errors):
        if not isinstance(err, dict):
            raise SlurmOutputError(argv, f"errors[{i}]: an object expected, got {_shown(err)}")
        number = err.get("error_number")
        if isinstance(number, bool) or not isinstance(number, int):
            number = None  # not a number: the words decide
        words = "; ".join(
            str(err[k]) for k in ("source", "description", "error") if err.get(k) not in (None, "")
        )
        said = f"{words} (error {number})" if number is not None else words or "an error"
        if number == INVALID_JOB_ID_ERRNO or "invalid job id" in words.lower():
            continue  # the job does not exist: not an outage
        if number in UNAVAILABLE_ERRNOS or is_unavailable(words):
            raise SlurmUnavailableError(argv, 0, text[:2000], said)
        raise SlurmCommandError(argv, 0, text[:2000], said, transient=is_transient(words))


def parse_squeue_json(text: str, argv: Sequence[str] = _SQUEUE) -> list[SlurmJob]:
    """Jobs from ``squeue --json``, every field checked (types, bounds, node lists).

    Slurm's ``errors`` list is read first: 22.05's ``squeue --json`` exits 0 with no jobs and
    an error when slurmctld did not answer, which is an outage, not an empty cluster. An error
    that says a job id is invalid is not one (the job does not exist).

    Parameters
    ----------
    text
        What the command printed.
    argv
        The command, named in errors.

    Raises
    ------
    SlurmUnavailableError
        Slurm reported that slurmctld did not answer.
    SlurmOutputError
        The text is not JSON, or a field is missing, of the wrong type or out of bounds; the
        message names it (``jobs[3].node_count: -1 is outside [0, ...]``). The whole answer is
        refused: nothing is decided on a partial view.
    SlurmCommandError
        Slurm reported another error.
    """
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SlurmOutputError(argv, f"not JSON: {exc}", output=text) from exc
    if not isinstance(data, dict):
        raise SlurmOutputError(argv, f"an object expected, got {_shown(data)}")
    _check_errors(data, argv, text)
    listed = data.get("jobs")
    if not isinstance(listed, list):
        raise SlurmOutputError(argv, f"jobs: a list expected, got {_shown(listed)}")
    return [_squeue_job(_Fields(j, f"jobs[{i}]", argv)) for i, j in enumerate(listed)]


def _squeue_job(f: _Fields) -> SlurmJob:
    job_id = f.number("job_id")
    if not job_id:
        raise f.fail("job_id", "missing, null or 0")
    state = f.state("job_state")
    if job_state(state) is JobState.PENDING:
        f.text("nodes")  # checked, not used: a pending job may show nodes it is planned on
        nodes: tuple[str, ...] = ()
    else:
        nodes = f.nodes("nodes")
    count = f.number("node_count")
    return SlurmJob(
        job_id=job_id,
        name=f.text("name"),
        state=state,
        nodes=nodes,
        node_count=count or len(nodes),
        comment=f.text("comment"),
        submit_time_s=_time(f.number("submit_time", hi=MAX_EPOCH_S)) or 0.0,
        start_time_s=_time(f.number("start_time", hi=MAX_EPOCH_S)) if nodes else None,
        end_time_s=_time(f.number("end_time", required=False, hi=MAX_EPOCH_S)),
        time_limit_s=_minutes_s(f.number("time_limit", required=False, markers=True)),
        array_job_id=f.number("array_job_id", required=False) or None,
        array_pending=f.text("array_task_string", required=False).split("%", 1)[0],
        array_throttle=f.number("array_max_tasks", required=False, markers=True) or None,
        batch_host=f.text("batch_host", required=False) or None,
        workdir=f.text("current_working_directory"),
        user=f.text("user_name"),
        partition=f.text("partition", required=False),
        account=f.text("account", required=False),
        qos=f.text("qos", required=False),
        reason=f.text("state_reason", required=False),
    )


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


_SINFO = ("sinfo", "--noheader", "--Node", "--format=%N|%T|%c")
_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def parse_sinfo_nodes(text: str, argv: Sequence[str] = _SINFO) -> list[SlurmNode]:
    """Nodes from ``sinfo --noheader --Node --format=%N|%T|%c`` (one line per node+partition).

    A node in several partitions appears once.

    Raises
    ------
    SlurmOutputError
        A line is not ``name|state|cpus``, or a field is not what it should be (a node name,
        a state word, a CPU count in ``[0, MAX_U32]``); the message names the line and field.
    """
    nodes: dict[str, SlurmNode] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.strip().split("|")
        if len(parts) != 3:
            raise SlurmOutputError(argv, f"line {lineno} is not name|state|cpus: {line[:80]!r}")
        name, state, cpus = parts
        if not _NODE_NAME.match(name):
            raise SlurmOutputError(argv, f"line {lineno}: node name {name[:40]!r} is not one")
        if not state or not state.strip("*~#!%$@^-+").replace("_", "").isalpha():
            raise SlurmOutputError(argv, f"line {lineno}: node state {state[:40]!r} is not one")
        if not (cpus.isascii() and cpus.isdigit()) or int(cpus) > MAX_U32:
            raise SlurmOutputError(
                argv, f"line {lineno}: CPU count {cpus[:40]!r} is not a number in [0, {MAX_U32}]"
            )
        nodes.setdefault(name, SlurmNode(name, state, int(cpus)))
    return list(nodes.values())


def parse_sbatch_parsable(text: str) -> int:
    r"""The job id printed by ``sbatch --parsable`` (``123`` or ``123;cluster``).

    >>> parse_sbatch_parsable("123;elastic\n")
    123

    Raises
    ------
    SlurmOutputError
        No job id (a whole number in ``[1, MAX_U32]``) starts the text.
    """
    first = text.strip().split(";")[0]
    if not (first.isascii() and first.isdigit()) or not 0 < int(first) <= MAX_U32:
        raise SlurmOutputError(("sbatch", "--parsable"), f"no job id in {text.strip()[:80]!r}")
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


#: What Slurm's tools print when slurmctld did not answer (slurm_errno.c's messages). The last
#: one is what ``scontrol release`` printed here (22.05) with slurmctld stopped.
_UNAVAILABLE = (
    "Unable to contact slurm controller",
    "Socket timed out",
    "Connection refused",
    "Slurm backup controller in standby mode",
    "Zero Bytes were transmitted or received",
    "Communication connection failure",
    "Communication send failure",
    "Communication receive failure",
    "Communication shutdown failure",
    "Unexpected message received",
)
_TRANSIENT = (
    *_UNAVAILABLE,
    "DB index is being set",
    "Resource temporarily unavailable",
    "try again",
)


def is_unavailable(stderr: str) -> bool:
    """True when Slurm's error text says that slurmctld did not answer (an outage).

    >>> is_unavailable("Unable to contact slurm controller (connect failure)")
    True
    >>> is_unavailable("slurm_load_jobs error: Invalid job id specified")
    False
    """
    return any(marker.lower() in stderr.lower() for marker in _UNAVAILABLE)


def is_transient(stderr: str) -> bool:
    """True when Slurm's error text says that retrying later can succeed.

    >>> is_transient("Job update not available right now, the DB index is being set, try again")
    True
    >>> is_transient("Requested operation not supported on this system")
    False
    """
    return any(marker.lower() in stderr.lower() for marker in _TRANSIENT)


def slurmctld_up(text: str) -> bool:
    r"""True when ``scontrol ping`` says a slurmctld (primary or backup) answers.

    >>> slurmctld_up("Slurmctld(primary) at head is UP")
    True
    >>> slurmctld_up("Slurmctld(primary) at head is DOWN")
    False
    >>> slurmctld_up("Slurmctld(primary) at a is DOWN\nSlurmctld(backup) at b is UP")
    True
    """
    return "is UP" in text


_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int, int]:
    """Slurm's version from ``scontrol --version`` (Debian: ``slurm-wlm 22.05.8``).

    >>> parse_version("slurm-wlm 22.05.8")
    (22, 5, 8)

    Raises
    ------
    SlurmOutputError
        No version in ``text`` (also a :class:`ValueError`).
    """
    m = _VERSION.search(text)
    if not m:
        raise SlurmOutputError(
            ("scontrol", "--version"), f"no Slurm version in {text.strip()[:80]!r}", output=text
        )
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def parse_squeue_steps(text: str) -> dict[str, tuple[str, ...]]:
    r"""Steps from ``squeue --steps --format=%i|%N``: ``{"12.0": ("n1", "n2"), ...}``.

    >>> parse_squeue_steps("12.0|n[1-2]\n12.batch|n1\n")
    {'12.0': ('n1', 'n2'), '12.batch': ('n1',)}

    Raises
    ------
    SlurmOutputError
        A node list does not parse.
    """
    steps = {}
    for line in text.splitlines():
        if "|" in line:
            step, nodes = line.strip().split("|", 1)
            steps[step] = _expand_field(nodes, ("squeue", "--steps"), f"step {step[:40]!r}")
    return steps


def _expand_field(expr: str, argv: Sequence[str], where: str) -> tuple[str, ...]:
    try:
        return expand(expr)
    except ValueError as exc:
        raise SlurmOutputError(argv, f"{where}: {exc}") from exc


@dataclass(frozen=True)
class AllocationRecord:
    """One size a job had, from accounting: its nodes and when (seconds since the epoch)."""

    state: str
    nodes: tuple[str, ...]
    start_s: float | None
    end_s: float | None


def _epoch(field: str) -> float | None:
    """Epoch seconds; ``None`` for ``Unknown``, ``None``, 0 or anything that is not a time."""
    field = field.strip()
    if not (field.isascii() and field.isdigit()) or not 0 < int(field) <= MAX_EPOCH_S:
        return None
    return float(field)


def parse_sacct_allocations(text: str, job_id: int) -> list[AllocationRecord]:
    r"""Records of ``job_id`` from ``sacct --allocations --parsable2`` (times as epoch seconds).

    >>> text = "7|RESIZING|2|n[1-2]|100|105\n7|COMPLETED|4|n[1-4]|105|130"
    >>> recs = parse_sacct_allocations(text, 7)
    >>> [(r.state, len(r.nodes)) for r in recs]
    [('RESIZING', 2), ('COMPLETED', 4)]

    A record's start is its submit time when that is later (the size began then; see
    :func:`elastic_slurm.adapter.commands.sacct_allocations`):

    >>> parse_sacct_allocations("7|COMPLETED|1|n1|100|130|105", 7)[0].start_s
    105.0

    Raises
    ------
    SlurmOutputError
        A record of the job has no state or a node list that does not parse.
    """
    out = []
    argv = ("sacct", "--allocations", f"--jobs={job_id}")
    for lineno, line in enumerate(text.splitlines(), start=1):
        fields = line.strip().split("|")
        if len(fields) not in (6, 7) or fields[0] != str(job_id):
            continue
        _, state, _count, nodelist, start, end = fields[:6]
        if not state.split():
            raise SlurmOutputError(argv, f"line {lineno}: no state")
        nodes = _expand_field(nodelist, argv, f"line {lineno}")
        begin = _epoch(start)
        submit = _epoch(fields[6]) if len(fields) == 7 else None
        if begin is not None and submit is not None and submit > begin:
            begin = submit  # a record whose start Slurm rewrote (see commands.sacct_allocations)
        out.append(AllocationRecord(state.split()[0], nodes, begin, _epoch(end)))
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
