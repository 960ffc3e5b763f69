"""The pyslurm backend: Slurm driven through its C API from this process (optional).

pyslurm (the ``pyslurm`` extra; 22.5.x for Slurm 22.05) is tied to one Slurm major version, so
the command-line backend stays the default: this backend is chosen only for a site with
``backend: pyslurm``, or ``auto`` when :func:`pyslurm_available` finds that pyslurm imports and
matches the running Slurm's major.minor version exactly. It talks to slurmctld with this
machine's libslurm and ``slurm.conf``, so it is never used over SSH.

What pyslurm 22.5 does here, and what is delegated to :class:`~.slurm_cli.SlurmCLI` over a
:class:`~.transport.local.LocalTransport` (the same commands the default backend runs):

=======================  ===========  ====================================================
operation                done by      how, or why delegated
=======================  ===========  ====================================================
``version``              pyslurm      ``slurm_load_ctl_conf`` (the running slurmctld's)
``jobs``                 pyslurm      ``Jobs.load`` (``slurm_load_jobs``), then filtered
``nodes``                pyslurm      ``Nodes.load`` (``slurm_load_node``)
``steps``                pyslurm      ``JobSteps.load`` (``slurm_get_job_steps``)
``submit``               pyslurm      ``JobSubmitDescription.submit``, built from the same
                                      ``sbatch`` options the CLI backend renders
                                      (``--hold`` is ``priority=0``, as in sbatch: reason
                                      ``JobHeldUser``)
``cancel``               pyslurm      ``slurm_kill_job(job, SIGKILL)``
``release``              pyslurm      ``Job.release`` (as ``scontrol release``)
``update_nodelist``      pyslurm      ``Job.modify`` with ``required_nodes`` (a shrink)
``set_array_throttle``   pyslurm      ``Job.modify`` with ``array="<n>"`` (slurmctld reads
                                      an update's array string as the new throttle)
``update_numnodes``      delegated    pyslurm 22.5's ``Job.modify`` drops ``nodes`` on an
                                      update (seen here: ``NumNodes`` stays unchanged), so
                                      ``scontrol update NumNodes=`` (pending size, ``0``
                                      on an expander, ``ALL`` to merge)
``allocation_history``   delegated    ``pyslurm.db.Jobs`` is keyed by job id and keeps only
                                      the newest record of a resized job; ``sacct
                                      --allocations`` lists one record per size
``allocate``             delegated    pyslurm 22.5 has no allocation call; an allocation
                                      with no step that is withdrawn when not granted in
                                      time is ``salloc --no-shell --immediate``
=======================  ===========  ====================================================

Records are mapped onto exactly the :class:`~.parse.SlurmJob` and :class:`~.parse.SlurmNode`
values the CLI parsers give (the contract tests compare both backends field by field). Node
states come out in ``sinfo``'s long form (``idle``, ``drained``, ``down*``) through Slurm's own
``node_state_string``. Differences that remain: a pending job whose reason has a description
(``state_desc``) reports that description where ``squeue`` reports the reason code; step ids of
array tasks and heterogeneous jobs are ``<job id>.<step>``, not ``squeue``'s ``A_T.step``.

Errors: pyslurm's ``RPCError`` (and the ``ValueError((message, errno))`` of its older calls)
become :class:`~elastic_slurm.errors.SlurmCommandError` whose ``argv`` names the call
(``("pyslurm", "Job.modify", "JobId=7", ...)``), ``returncode`` is Slurm's error number and
``stderr`` Slurm's message; ``transient`` is set as for the CLI backend (controller busy or
unreachable, the 22.05 "DB index is being set" message), and transient errors are retried with
the same backoff. RPC timeouts are slurm.conf's ``MessageTimeout``; ``command_timeout_s``
bounds the delegated commands only.

libslurm holds one configuration per process: it reads ``SLURM_CONF`` when pyslurm is imported
(and exits the process if that file is missing). This module imports pyslurm with the site's
``slurm.conf`` and re-initialises libslurm when another file is asked for, unless a live
backend still uses the first one (then :class:`~elastic_slurm.errors.ConfigError`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import math
import os
import pwd
import re
import signal
import socket
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from elastic_slurm.adapter import parse, render
from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.hostlist import compress, expand
from elastic_slurm.adapter.parse import AllocationRecord, SlurmJob, SlurmNode
from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.tags import SizedBy
from elastic_slurm.adapter.transport.base import Transport
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.errors import (
    ConfigError,
    InvalidRequest,
    SlurmCommandError,
    SlurmOutputError,
    SlurmUnavailableError,
)
from elastic_slurm.model.request import ElasticRequest
from elastic_slurm.model.snapshot import JobState

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Where libslurm looks for its configuration when ``SLURM_CONF`` is not set (Debian's path).
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"

# ---------------------------------------------------------------------------- availability


def _major_minor(version: str) -> tuple[int, int] | None:
    """``(22, 5)`` from pyslurm's ``22.5.3`` or Slurm's ``22.05.8``.

    >>> _major_minor("22.5.3"), _major_minor("22.05.8"), _major_minor("x")
    ((22, 5), (22, 5), None)
    """
    m = re.match(r"(\d+)\.(\d+)", version.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def _conf_path(slurm_conf: str | os.PathLike[str] | None) -> str:
    return str(slurm_conf or os.environ.get("SLURM_CONF") or DEFAULT_SLURM_CONF)


def pyslurm_available(
    slurm_version: tuple[int, int, int] | str,
    slurm_conf: str | os.PathLike[str] | None = None,
) -> tuple[bool, str]:
    """Whether the pyslurm backend can drive this Slurm, and why (or why not).

    It can when pyslurm is installed, imports (with libslurm), and both pyslurm's version and
    the libslurm it loaded match ``slurm_version``'s major.minor exactly (pyslurm 22.5.x and
    libslurm 22.05 for Slurm 22.05). This is the backend's affinity: anything else and the
    command-line backend wins.

    Parameters
    ----------
    slurm_version
        The running Slurm's version, ``(22, 5, 8)`` or ``"22.05.8"`` (for instance
        :meth:`SlurmCLI.version`).
    slurm_conf
        The ``slurm.conf`` to initialise libslurm with (default: ``$SLURM_CONF``, else
        :data:`DEFAULT_SLURM_CONF`). When pyslurm is not imported yet and the file does not
        exist, pyslurm is not imported at all: libslurm would end the process.

    Returns
    -------
    tuple of (bool, str)
        Availability, and the reason in words.

    Raises
    ------
    ValueError
        ``slurm_version`` is a string without a version in it.
    """
    if isinstance(slurm_version, str):
        slurm_version = parse.parse_version(slurm_version)
    want = tuple(slurm_version[:2])
    shown = f"{slurm_version[0]}.{slurm_version[1]:02d}.{slurm_version[2]}"

    def mismatch(version: str) -> str | None:
        built_for = _major_minor(version)
        if built_for == want:
            return None
        made_for = f"{built_for[0]}.{built_for[1]:02d}" if built_for else "unknown"
        return (
            f"pyslurm {version} follows one Slurm major version ({made_for}) and this Slurm "
            f"is {shown}: the command-line tools are used"
        )

    if "pyslurm" not in sys.modules and importlib.util.find_spec("pyslurm") is None:
        return False, (
            "pyslurm is not installed (optional: install the pyslurm wheel built for "
            f"Slurm {slurm_version[0]}.{slurm_version[1]:02d})"
        )
    try:  # check the version first: libslurm is neither loaded nor re-initialised for
        # another Slurm (imported already, it would be re-initialised with that Slurm's file)
        why = mismatch(importlib.metadata.version("pyslurm"))
    except importlib.metadata.PackageNotFoundError:
        why = None  # importable without metadata (a source tree): checked after import
    if why:
        return False, why
    if "pyslurm" not in sys.modules:
        conf = _conf_path(slurm_conf)
        if not Path(conf).is_file():
            return False, (
                f"no slurm.conf at {conf}: importing pyslurm would make libslurm end the "
                "process; set SLURM_CONF or the site's slurm_conf"
            )
    try:
        ps = _pyslurm(slurm_conf)
    except ImportError as exc:  # also a missing libslurm.so
        return False, f"pyslurm does not import: {exc}"
    except ConfigError as exc:
        return False, str(exc)
    version = str(getattr(ps, "__version__", "") or "?")
    why = mismatch(version)
    if why:
        return False, why
    api = tuple(ps.slurm_api_version())
    if tuple(api[:2]) != want:
        return False, (
            f"pyslurm {version} loaded libslurm {'.'.join(map(str, api))}, which does not "
            f"match Slurm {shown}"
        )
    return True, (
        f"pyslurm {version} (libslurm {api[0]}.{api[1]:02d}.{api[2]}) matches Slurm {shown}"
    )


# ---------------------------------------------------------------------------- libslurm state

_lock = threading.RLock()
_init_conf: str | None = None  # the slurm.conf libslurm was initialised with by this module
_live: weakref.WeakSet[PyslurmBackend] = weakref.WeakSet()


def _pyslurm(slurm_conf: str | os.PathLike[str] | None) -> ModuleType:
    """pyslurm, with libslurm initialised from ``slurm_conf``.

    Raises
    ------
    ImportError
        pyslurm (or libslurm) is missing.
    ConfigError
        The file does not exist, or a live backend uses libslurm with another file.
    """
    global _init_conf
    conf = _conf_path(slurm_conf)
    with _lock:
        if _init_conf == conf and "pyslurm" in sys.modules:
            return sys.modules["pyslurm"]
        if not Path(conf).is_file():
            raise ConfigError(
                f"slurm.conf {conf} does not exist: libslurm (pyslurm) cannot be initialised"
            )
        others = {b.slurm_conf for b in _live if b.slurm_conf != conf}
        if others:
            raise ConfigError(
                f"pyslurm already drives the Slurm of {sorted(others)[0]} in this process and "
                f"libslurm holds one configuration per process, so it cannot also drive "
                f"{conf}: use the command-line backend (backend: cli) for one of the sites"
            )
        if "pyslurm" not in sys.modules:
            before = os.environ.get("SLURM_CONF")
            os.environ["SLURM_CONF"] = conf  # read by slurm_init() when pyslurm is imported
            try:
                import pyslurm  # type: ignore[import-not-found]
            finally:
                if before is None:
                    os.environ.pop("SLURM_CONF", None)
                else:
                    os.environ["SLURM_CONF"] = before
        else:  # imported elsewhere, or for another file: initialise libslurm again
            pyslurm = sys.modules["pyslurm"]
            pyslurm.slurm_fini()
            pyslurm.slurm_init(conf)
            # slurm_init() setenv()s SLURM_CONF behind os.environ's back (seen here): child
            # processes started without an explicit environment would then talk to that
            # Slurm. Put the process's environment back as os.environ has it.
            before = os.environ.get("SLURM_CONF")
            if before is None:
                os.unsetenv("SLURM_CONF")
            else:
                os.putenv("SLURM_CONF", before)
        _init_conf = conf
        log.debug("libslurm initialised with %s", conf)
        return pyslurm


# ---------------------------------------------------------------------------- pure mappings

_NODE_BASES = {
    "UNKNOWN": 0,
    "DOWN": 1,
    "IDLE": 2,
    "ALLOCATED": 3,
    "ERROR": 4,
    "MIXED": 5,
    "FUTURE": 6,
}
_NODE_BASE_MASK = 0xF
#: Flag names of ``slurm_node_state_string_complete`` (Slurm 22.05's slurm.h bits).
_NODE_FLAGS = {
    "PERFCTRS": 1 << 4,
    "RESERVED": 1 << 5,
    "CLOUD": 1 << 7,
    "RESUME": 1 << 8,
    "DRAIN": 1 << 9,
    "COMPLETING": 1 << 10,
    "NOT_RESPONDING": 1 << 11,
    "POWERED_DOWN": 1 << 12,
    "FAIL": 1 << 13,
    "POWERING_UP": 1 << 14,
    "MAINTENANCE": 1 << 15,
    "REBOOT_REQUESTED": 1 << 16,
    "POWERING_DOWN": 1 << 18,
    "DYNAMIC_FUTURE": 1 << 19,
    "REBOOT_ISSUED": 1 << 20,
    "PLANNED": 1 << 21,
    "INVALID_REG": 1 << 22,
    "POWER_DOWN": 1 << 23,
    "POWER_UP": 1 << 24,
    "DYNAMIC_NORM": 1 << 26,
}
_warned: set[str] = set()


def node_state_bits(complete: str) -> int | None:
    """Slurm's node state number from pyslurm's ``Node.state`` (``IDLE+DRAIN``).

    pyslurm 22.5 shows ``slurm_node_state_string_complete``: the base state, then ``+FLAG`` for
    each flag. ``?`` (flags Slurm cannot name, which change nothing shown) is skipped; an
    unknown name gives ``None``.

    >>> node_state_bits("IDLE+DRAIN"), node_state_bits("ALLOCATED"), node_state_bits("NEW+X")
    (514, 3, None)
    """
    base, *flags = complete.strip().upper().split("+")
    if base not in _NODE_BASES:
        return None
    bits = _NODE_BASES[base]
    for flag in flags:
        if flag == "?":
            continue
        if flag not in _NODE_FLAGS:
            return None
        bits |= _NODE_FLAGS[flag]
    return bits


def node_state_long(
    complete: str,
    alloc_cpus: int | None,
    total_cpus: int | None,
    state_string: Callable[[int], str | bytes],
) -> str:
    """A node's state as ``sinfo --format=%T`` prints it (``idle``, ``drained``, ``down*``).

    Parameters
    ----------
    complete
        pyslurm's ``Node.state`` (``IDLE+NOT_RESPONDING``).
    alloc_cpus, total_cpus
        CPUs allocated on the node, and its CPU count: like ``sinfo``, an allocated node with
        some CPUs free is ``mixed``.
    state_string
        Slurm's ``node_state_string`` (``pyslurm.get_node_state``), which ``sinfo`` prints in
        lower case.

    Returns
    -------
    str
        The long form; for a state this module cannot read, pyslurm's text in lower case (the
        parser then maps it to ``unknown`` and logs it once).
    """
    bits = node_state_bits(complete)
    if bits is None:
        if complete not in _warned:
            _warned.add(complete)
            log.warning("node state %r from pyslurm is not one this backend knows", complete)
        return complete.strip().lower()
    if (
        bits & _NODE_BASE_MASK == _NODE_BASES["ALLOCATED"]
        and alloc_cpus
        and total_cpus
        and alloc_cpus < total_cpus
    ):
        bits = (bits & ~_NODE_BASE_MASK) | _NODE_BASES["MIXED"]
    text = state_string(bits)
    if isinstance(text, bytes):  # pyslurm 22.5's get_node_state returns bytes
        text = text.decode()
    return text.lower()


def _time(value: Any) -> float | None:
    return float(value) if value else None  # pyslurm gives None (or 0) for "not set"


def _limit_s(minutes: Any) -> float | None:
    """A time limit in minutes as seconds; ``None`` for unset or unlimited (as the parser)."""
    if not isinstance(minutes, int) or minutes <= 0 or minutes >= 0xFFFFFFFE:
        return None
    return minutes * 60.0


@functools.lru_cache(maxsize=4096)
def user_name(uid: int | None) -> str:
    """A user's name from the password database, cached (``""`` for no user).

    pyslurm looks the name up for every job it is asked about; with a cache one observation
    of 2,400 jobs took half the time here.

    >>> user_name(0), user_name(None)
    ('root', '')
    """
    if uid is None:
        return ""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def job_from_pyslurm(job: Any, user: str | None = None) -> SlurmJob:
    """A :class:`SlurmJob` from a ``pyslurm.Job``, with the values ``squeue --json`` gives.

    Empty strings stand for pyslurm's ``None``; a pending job has no nodes and no start
    time (pyslurm reports the expected start); times are seconds since the epoch. ``user``
    is the owner's name if known already (else ``job.user_name`` is asked).

    Raises
    ------
    SlurmOutputError
        A value is of the wrong type or out of bounds (:func:`checked_job`); the message
        names the job and the field.
    """
    try:
        return checked_job(_job_from_pyslurm(job, user))
    except SlurmOutputError:
        raise
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise SlurmOutputError(
            ("pyslurm", "Jobs.load"), f"job {getattr(job, 'id', '?')!r}: {exc}"
        ) from exc


def checked_job(job: SlurmJob) -> SlurmJob:
    """``job`` if its numbers are in bounds (as :func:`~.parse.parse_squeue_json` checks them).

    Raises
    ------
    SlurmOutputError
        The message names the job and the field.
    """
    argv = ("pyslurm", "Jobs.load")
    checks = {
        "id": 0 < job.job_id <= parse.MAX_U32,
        "num_nodes": 0 <= job.node_count <= parse.MAX_U32,
        "array_id": job.array_job_id is None or 0 < job.array_job_id <= parse.MAX_U32,
        "array_tasks_parallel": job.array_throttle is None
        or 0 < job.array_throttle <= parse.MAX_U32,
        "time_limit": job.time_limit_s is None or math.isfinite(job.time_limit_s),
        "batch_host": job.batch_host is None or isinstance(job.batch_host, str),
        "submit_time": 0 <= job.submit_time_s <= parse.MAX_EPOCH_S,
        "start_time": job.start_time_s is None or 0 < job.start_time_s <= parse.MAX_EPOCH_S,
        "end_time": job.end_time_s is None or 0 < job.end_time_s <= parse.MAX_EPOCH_S,
    }
    for name, ok in checks.items():
        if not ok:
            raise SlurmOutputError(argv, f"job {job.job_id}: {name} is out of bounds")
    return job


def _job_from_pyslurm(job: Any, user: str | None) -> SlurmJob:
    state = str(job.state or "UNKNOWN")
    if not state.strip():  # as squeue's JSON path refuses it (parse._Fields.state)
        raise ValueError(f"state: a state name expected, got {state!r}")
    pending = parse.job_state(state) is JobState.PENDING
    nodes = () if pending else expand(job.allocated_nodes)
    return SlurmJob(
        job_id=int(job.id),
        name=str(job.name or ""),
        state=state,
        nodes=nodes,
        node_count=int(job.num_nodes or len(nodes)),
        comment=str(job.comment or ""),
        submit_time_s=_time(job.submit_time) or 0.0,
        start_time_s=_time(job.start_time) if nodes else None,
        end_time_s=_time(job.end_time),
        time_limit_s=_limit_s(job.time_limit),
        array_job_id=int(job.array_id) if job.array_id else None,
        array_pending=str(job.array_tasks_waiting or ""),
        array_throttle=int(job.array_tasks_parallel) if job.array_tasks_parallel else None,
        batch_host=job.batch_host or None,
        workdir=str(job.working_directory or ""),
        user=str(job.user_name or "") if user is None else user,
        partition=str(job.partition or ""),
        account=str(job.account or ""),
        qos=str(job.qos or ""),
        reason=str(job.state_reason or ""),
    )


def step_nodes(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """A step's nodes from pyslurm 22.5.3's ``JobStep.allocated_nodes``.

    Its docstring says str, but it is the hostlist split at commas, brackets and all: join it
    back before expanding.

    >>> step_nodes(["n[1-2]"]), step_nodes(["n[1", "3]"]), step_nodes("n4"), step_nodes(None)
    (('n1', 'n2'), ('n1', 'n3'), ('n4',), ())
    """
    if value is None or isinstance(value, str):
        return expand(value)
    return expand(",".join(value))


#: sbatch options rendered by :func:`render.sbatch_argv`, and their JobSubmitDescription names
_SBATCH_TO_PYSLURM = {
    "--nodes": "nodes",
    "--ntasks-per-node": "ntasks_per_node",
    "--time": "time_limit",
    "--job-name": "name",
    "--comment": "comment",
    "--output": "standard_output",
    "--partition": "partitions",
    "--chdir": "working_directory",
    "--array": "array",
    "--account": "account",
    "--qos": "qos",
}


def submit_description(argv: Sequence[str]) -> dict[str, Any]:
    """``JobSubmitDescription`` keywords equal to an ``sbatch`` command line.

    The CLI backend's own command (:func:`render.sbatch_argv`) is translated, so both backends
    submit the same job. Like sbatch, the task count is the minimum node count times the tasks
    per node.

    >>> submit_description(["sbatch", "--parsable", "--nodes=2-3", "--ntasks-per-node=2",
    ...                     "--time=0-00:10:00", "--job-name=a b"])
    {'nodes': '2-3', 'ntasks_per_node': 2, 'time_limit': '0-00:10:00', 'name': 'a b', 'ntasks': 4}

    Raises
    ------
    ValueError
        Not an sbatch command, or an option this translation does not know (it would be
        dropped silently otherwise).
    ``--hold`` becomes ``priority=0``, which is what sbatch sends for it (the job is then
    held, reason ``JobHeldUser``):

    >>> submit_description(["sbatch", "--nodes=1-4", "--hold"])
    {'nodes': '1-4', 'priority': 0, 'ntasks': 1}
    """
    if not argv or argv[0] != "sbatch":
        raise ValueError(f"not an sbatch command: {list(argv)[:3]}")
    out: dict[str, Any] = {}
    for arg in argv[1:]:
        if arg == "--parsable":
            continue
        if arg == "--hold":
            out["priority"] = 0
            continue
        key, sep, value = arg.partition("=")
        if not sep or key not in _SBATCH_TO_PYSLURM:
            raise ValueError(
                f"sbatch option {arg!r} has no pyslurm translation; known: "
                f"{', '.join(sorted(_SBATCH_TO_PYSLURM))}"
            )
        out[_SBATCH_TO_PYSLURM[key]] = value
    per_node = int(out.get("ntasks_per_node", 1))
    if "ntasks_per_node" in out:
        out["ntasks_per_node"] = per_node
    out["ntasks"] = int(str(out.get("nodes", "1")).split("-")[0]) * per_node
    return out


def sbatch_env(options: Mapping[str, Any]) -> dict[str, str]:
    """The variables sbatch adds to the environment it submits (seen in jobs on 22.05).

    ``options`` are :func:`submit_description`'s keywords. The submitting directory and host
    are this process's.
    """
    env = {
        "SLURM_SUBMIT_DIR": os.getcwd(),
        "SLURM_SUBMIT_HOST": socket.gethostname(),
        "SLURM_PRIO_PROCESS": str(os.getpriority(os.PRIO_PROCESS, 0)),
    }
    if options.get("name"):
        env["SLURM_JOB_NAME"] = str(options["name"])
    if options.get("ntasks_per_node"):
        env["SLURM_NTASKS_PER_NODE"] = str(options["ntasks_per_node"])
    return env


#: Error names (pyslurm constants) that mean "retry later"; the message is checked too.
_TRANSIENT_ERRNO_NAMES = (
    "ESLURM_JOB_SETTING_DB_INX",
    "ESLURM_IN_STANDBY_MODE",
    "SLURM_COMMUNICATIONS_CONNECTION_ERROR",
    "SLURM_COMMUNICATIONS_SEND_ERROR",
    "SLURM_COMMUNICATIONS_RECEIVE_ERROR",
    "SLURM_COMMUNICATIONS_SHUTDOWN_ERROR",
    "SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR",
    "SLURMCTLD_COMMUNICATIONS_SEND_ERROR",
    "SLURMCTLD_COMMUNICATIONS_RECEIVE_ERROR",
    "SLURMCTLD_COMMUNICATIONS_SHUTDOWN_ERROR",
    "SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT",
    "SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT",
)


def command_error(
    call: Sequence[str], exc: BaseException, transient_errnos: frozenset[int] = frozenset()
) -> SlurmCommandError:
    """The :class:`SlurmCommandError` for a failed pyslurm call.

    pyslurm's ``RPCError`` carries ``errno`` and ``msg``; its older module-level calls raise
    ``ValueError((message, errno))``.

    >>> err = command_error(["pyslurm", "Job.modify", "JobId=3"],
    ...                     ValueError(("Unable to contact slurm controller", 1800)))
    >>> err.returncode, err.transient, err.stderr, type(err).__name__
    (1800, True, 'Unable to contact slurm controller', 'SlurmUnavailableError')

    A communication error number (:data:`~.parse.UNAVAILABLE_ERRNOS`: slurmctld unreachable,
    in standby, timed out) or a message that says so gives
    :class:`~elastic_slurm.errors.SlurmUnavailableError`; "Invalid job id" (2017) does not.
    """
    errno = getattr(exc, "errno", None)
    message = getattr(exc, "msg", None)
    if (
        isinstance(exc, ValueError)
        and len(exc.args) == 1
        and isinstance(exc.args[0], tuple)
        and len(exc.args[0]) == 2
    ):
        message, errno = exc.args[0]
    elif isinstance(exc, ValueError) and len(exc.args) == 2 and isinstance(exc.args[1], int):
        message, errno = exc.args
    message = str(message or exc)
    errno = errno if isinstance(errno, int) and not isinstance(errno, bool) else None
    reason = f"Slurm error {errno}" if errno is not None else type(exc).__name__
    comm = errno is not None and errno in parse.UNAVAILABLE_ERRNOS and errno != -1
    if (comm or parse.is_unavailable(message)) and errno != parse.INVALID_JOB_ID_ERRNO:
        return SlurmUnavailableError(tuple(call), errno, "", message, reason=reason)
    transient = parse.is_transient(message) or (errno is not None and errno in transient_errnos)
    return SlurmCommandError(
        tuple(call),
        errno,
        "",
        message,
        transient=transient,
        reason=f"Slurm error {errno}" if errno is not None else type(exc).__name__,
    )


# ---------------------------------------------------------------------------- the backend


class PyslurmBackend(SlurmBackend):
    """Slurm through pyslurm (its C API), with the CLI backend for what pyslurm cannot do.

    See the module docstring for which operation goes where, and why.

    Parameters
    ----------
    transport
        A local transport: checks outside Slurm and the delegated commands run there. Its
        ``SLURM_CONF`` is libslurm's configuration unless ``slurm_conf`` is given.
    slurm_conf
        The ``slurm.conf`` libslurm reads (default: the transport's ``SLURM_CONF``, then this
        process's, then :data:`DEFAULT_SLURM_CONF`).
    retry_s
        How long (seconds) transient errors are retried before they are raised.
    command_timeout_s
        Timeout (seconds) of one delegated command; pyslurm's calls time out after
        slurm.conf's ``MessageTimeout``.

    Raises
    ------
    ConfigError
        The transport is not local (pyslurm cannot reach a login node), the ``slurm.conf``
        does not exist, or libslurm is in use for another ``slurm.conf`` in this process.
    ImportError
        pyslurm (or libslurm) is not installed.
    """

    name = "pyslurm"

    def __init__(
        self,
        transport: Transport | None = None,
        *,
        slurm_conf: str | os.PathLike[str] | None = None,
        retry_s: float = 20.0,
        command_timeout_s: float = 30.0,
    ) -> None:
        if transport is not None and not isinstance(transport, LocalTransport):
            raise ConfigError(
                f"the pyslurm backend drives Slurm from this process and cannot run over "
                f"{type(transport).__name__}: use the command-line backend (backend: cli)"
            )
        env: Mapping[str, str] = transport.env if transport is not None else {}
        conf = slurm_conf or env.get("SLURM_CONF")
        self.slurm_conf = _conf_path(conf)
        self.transport: LocalTransport = transport or LocalTransport(
            env={"SLURM_CONF": self.slurm_conf}, default_timeout_s=command_timeout_s
        )
        self.set_retry_window(retry_s)
        #: the command-line backend for the operations pyslurm cannot do
        self.cli = SlurmCLI(self.transport, retry_s=retry_s, command_timeout_s=command_timeout_s)
        with _lock:
            self._ps = _pyslurm(self.slurm_conf)
            _live.add(self)
        self._transient = frozenset(
            v for v in (getattr(self._ps, n, None) for n in _TRANSIENT_ERRNO_NAMES) if v
        )

    def __repr__(self) -> str:
        return f"PyslurmBackend(slurm_conf={self.slurm_conf!r})"

    def set_retry_window(self, seconds: float) -> None:
        """As :meth:`SlurmBackend.set_retry_window`, for the delegated commands too."""
        super().set_retry_window(seconds)
        if hasattr(self, "cli"):
            self.cli.set_retry_window(seconds)

    # ------------------------------------------------------------------ calling pyslurm
    def _call(self, call: Sequence[str], fn: Callable[[], T], *, retry: bool = True) -> T:
        """Run one pyslurm call; errors become :class:`SlurmCommandError` (transient retried)."""

        def once() -> T:
            try:
                return fn()
            except (self._ps.PyslurmError, ValueError) as exc:
                raise command_error(call, exc, self._transient) from exc

        if not retry:
            return once()
        for attempt in Retrying(
            retry=retry_if_exception(lambda e: isinstance(e, SlurmCommandError) and e.transient),
            stop=stop_after_delay(self.retry_s),
            wait=wait_exponential(multiplier=0.1, max=2.0),
            before_sleep=lambda s: log.info(
                "transient Slurm error, retrying (attempt %d): %s",
                s.attempt_number,
                s.outcome.exception() if s.outcome else None,
            ),
            reraise=True,
        ):
            with attempt:
                return once()
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    # ------------------------------------------------------------------ queries
    def version(self) -> tuple[int, int, int]:
        """The running slurmctld's version, e.g. ``(22, 5, 8)`` (``slurm_load_ctl_conf``)."""
        conf = self._call(("pyslurm", "config.get"), lambda: self._ps.config().get())
        return parse.parse_version(str(conf.get("version", "")))

    def jobs(self, job_ids: Sequence[int] = ()) -> list[SlurmJob]:
        """Jobs slurmctld knows, in one call: all of them, or those in ``job_ids``.

        An array's id selects all its tasks, as with ``squeue --jobs``; unknown ids are left
        out (``job`` then returns ``None``).
        """
        loaded = self._call(("pyslurm", "Jobs.load"), lambda: self._ps.Jobs.load())
        wanted = set(job_ids)
        return [
            job_from_pyslurm(j, user_name(j.user_id))
            for j in loaded.values()
            if not wanted or j.id in wanted or (j.array_id and j.array_id in wanted)
        ]

    def nodes(self) -> list[SlurmNode]:
        """Every node with its state (``sinfo``'s long form) and CPU count."""
        loaded = self._call(("pyslurm", "Nodes.load"), lambda: self._ps.Nodes.load())
        to_string = self._ps.get_node_state
        out = []
        for n in loaded.values():
            try:
                node = SlurmNode(
                    str(n.name),
                    node_state_long(str(n.state), n.allocated_cpus, n.total_cpus, to_string),
                    int(n.total_cpus or 0),
                )
            except (TypeError, ValueError, AttributeError, OverflowError) as exc:
                raise SlurmOutputError(
                    ("pyslurm", "Nodes.load"), f"node {getattr(n, 'name', '?')!r}: {exc}"
                ) from exc
            if not node.name or not 0 <= node.cpus <= parse.MAX_U32:
                raise SlurmOutputError(
                    ("pyslurm", "Nodes.load"), f"node {node.name!r}: name or total_cpus unusable"
                )
            out.append(node)
        return out

    def steps(self, job_id: int) -> dict[str, tuple[str, ...]]:
        """The job's steps and their nodes (``{"12.0": ("n1", "n2"), "12.batch": ("n1",)}``).

        Empty for a pending, ended or unknown job, as ``squeue --steps`` prints nothing then
        (pyslurm 22.5 raises ``KeyError`` for a pending job; that is caught).
        """

        def load() -> Any:
            try:
                return self._ps.JobSteps.load(job_id)
            except KeyError:  # pyslurm 22.5 on a job without steps
                return {}

        try:
            steps = self._call(("pyslurm", "JobSteps.load", str(job_id)), load)
        except SlurmCommandError as exc:
            # an ended job: "Failed to load step info for Job J." (error -1)
            if "Invalid job id" in exc.stderr or "Failed to load step info" in exc.stderr:
                return {}
            raise
        return {f"{job_id}.{step.id}": step_nodes(step.allocated_nodes) for step in steps.values()}

    def allocation_history(self, job_id: int) -> list[AllocationRecord]:
        """Every size the job had, from ``sacct --allocations`` (delegated: see the module)."""
        return self.cli.allocation_history(job_id)

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
        """Submit ``req`` with ``JobSubmitDescription.submit``; return its job id.

        The description carries the same options and script as the CLI backend's ``sbatch``,
        and the same environment: this process's plus the transport's, as sbatch exports it,
        with the variables sbatch adds (:func:`sbatch_env`). ``hold`` and ``sized_by`` as in
        :meth:`SlurmBackend.submit` (a held job is submitted with priority 0).

        Raises
        ------
        InvalidRequest, ValueError
            ``sized_by`` does not fit the job or ``hold`` (:func:`render.sbatch_argv`), or an
            sbatch option passed through has no pyslurm translation (use ``backend: cli``).
        SlurmCommandError
            Slurm (or pyslurm's own checks) refused the job; nothing was queued.
        """
        argv = render.sbatch_argv(req, output=output, chdir=chdir, hold=hold, sized_by=sized_by)
        script = render.batch_script(req, python=python, env=env)
        try:
            options = submit_description(argv)
        except ValueError as exc:  # a passed-through sbatch option pyslurm cannot express
            raise InvalidRequest(f"the pyslurm backend cannot submit this job: {exc}") from exc
        environment = {**os.environ, **self.transport.env, **sbatch_env(options)}

        def submit() -> int:
            desc = self._ps.JobSubmitDescription(script=script, environment=environment, **options)
            return int(desc.submit())

        # not retried, as the CLI backend's sbatch: a retry after a lost answer could queue twice
        job_id = self._call(
            ("pyslurm", "JobSubmitDescription.submit", *argv[1:]), submit, retry=False
        )
        log.info("submitted %s job %d: %s", req.kind.value, job_id, " ".join(req.program))
        return job_id

    def cancel(self, *job_ids: int) -> None:
        """Cancel jobs with ``slurm_kill_job(job, SIGKILL)`` (ended or unknown ones are fine).

        An array's id cancels all its tasks. Every job is tried; the first real error is
        raised afterwards.

        Raises
        ------
        SlurmCommandError
            Slurm refused to cancel one of them.
        """
        failed: list[SlurmCommandError] = []
        for job_id in job_ids:
            try:
                self._call(
                    ("pyslurm", "slurm_kill_job", str(job_id), "SIGKILL"),
                    lambda j=job_id: self._ps.slurm_kill_job(j, int(signal.SIGKILL), 0),
                )
            except SlurmCommandError as exc:
                if "Invalid job id" in exc.stderr or "already completing" in exc.stderr:
                    continue
                failed.append(exc)
        if failed:
            raise failed[0]

    def release(self, job_id: int) -> None:
        """Let a held pending job be scheduled, with ``Job.release`` (as ``scontrol release``).

        Raises
        ------
        SlurmCommandError
            Unknown job, or not allowed (transient errors are retried first).
        """
        self._call(
            ("pyslurm", "Job.release", f"JobId={job_id}"),
            lambda: self._ps.Job(job_id).release(),
        )

    def select_type(self) -> str:
        """The ``SelectType`` of slurmctld (``slurm_load_ctl_conf``), e.g. ``select/linear``."""
        conf = self._call(("pyslurm", "config.get"), lambda: self._ps.config().get())
        return str(conf.get("select_type", ""))

    def reconfigure(self) -> None:
        """``slurm_reconfigure()`` (operator rights).

        Raises
        ------
        SlurmCommandError
            Slurm refused (for example: not an operator).
        """
        self._call_rc("slurm_reconfigure")

    def requeue(self, job_id: int) -> None:
        """Put a running job back in the queue with ``slurm_requeue(job, 0)``.

        Raises
        ------
        SlurmCommandError
            Slurm refused (for example: the job is not requeueable, or not running).
        """
        self._call_rc("slurm_requeue", job_id, 0)

    def _call_rc(self, function: str, *args: int) -> None:
        """Call a pyslurm function that returns Slurm's error code instead of raising."""

        def call() -> None:
            rc = getattr(self._ps, function)(*args)
            if rc:
                raise ValueError(f"{function}: {self._ps.slurm_strerror(rc)}")

        self._call(("pyslurm", function, *(str(a) for a in args)), call)

    # ------------------------------------------------------------------ updates
    def _modify(self, job_id: int, **changes: Any) -> None:
        call = (
            "pyslurm",
            "Job.modify",
            f"JobId={job_id}",
            *(f"{k}={v}" for k, v in changes.items()),
        )
        self._call(
            call,
            lambda: self._ps.Job(job_id).modify(self._ps.JobSubmitDescription(**changes)),
        )

    def update_nodelist(self, job_id: int, nodes: Sequence[str]) -> None:
        """Shrink a running job to exactly ``nodes`` (``Job.modify``, ``required_nodes``).

        Raises
        ------
        ValueError
            ``nodes`` is empty (cancel the job instead).
        SlurmCommandError
            Slurm refused (transient errors are retried first).
        """
        if not nodes:
            raise ValueError("a job cannot be shrunk to zero nodes; cancel it instead")
        self._modify(job_id, required_nodes=compress(nodes))

    def update_numnodes(self, job_id: int, value: int | Literal["ALL"]) -> None:
        """``scontrol update NumNodes=`` (delegated: pyslurm 22.5 drops node counts on updates)."""
        self.cli.update_numnodes(job_id, value)

    def set_time_limit(self, job_id: int, minutes: int) -> None:
        """A job's time limit in minutes from its start (``Job.modify``, ``time_limit``).

        Raises
        ------
        ValueError
            ``minutes`` is less than 1.
        SlurmCommandError
            Slurm refused (for example: raising a limit without operator rights).
        """
        if minutes < 1:
            raise ValueError(f"a time limit is at least 1 minute, got {minutes}")
        self._modify(job_id, time_limit=int(minutes))

    def set_array_throttle(self, array_job_id: int, max_running: int) -> None:
        """How many tasks of a job array may run at once (0: no limit), via ``Job.modify``.

        Raises
        ------
        ValueError
            ``max_running`` is negative.
        SlurmCommandError
            Slurm refused (for example: not an array).
        """
        if max_running < 0:
            raise ValueError(f"a throttle is >= 0, got {max_running}")
        self._modify(array_job_id, array=str(int(max_running)))

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
        """``salloc --no-shell --exclusive`` (delegated; see :meth:`SlurmBackend.allocate`)."""
        return self.cli.allocate(
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
