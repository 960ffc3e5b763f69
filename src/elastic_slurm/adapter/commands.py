"""Pure builders of Slurm command lines: every function returns an argument list.

Nothing here runs a command or reads Slurm's output (that is :mod:`.parse`), so each builder is
tested on its own. Values such as job names and paths stay single arguments: no shell ever
sees them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

from elastic_slurm.adapter.hostlist import compress


def format_time_limit(limit: timedelta) -> str:
    """A time limit in Slurm's ``days-hours:minutes:seconds`` form (Slurm rounds up to minutes).

    >>> format_time_limit(timedelta(hours=25, minutes=3, seconds=7))
    '1-01:03:07'
    """
    if limit <= timedelta(0):
        raise ValueError(f"a time limit must be positive, got {limit}")
    total = math.ceil(limit.total_seconds())
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"


def sbatch(
    *,
    nodes: str,
    time_limit: timedelta,
    job_name: str,
    ntasks_per_node: int = 1,
    comment: str | None = None,
    output: str | None = None,
    partition: str | None = None,
    chdir: str | None = None,
    array: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    hold: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """Submit the batch script given on standard input; sbatch prints ``jobid[;cluster]``.

    ``nodes`` is one count (``"2"``) or a range (``"2-4"``, a moldable start). ``hold``
    submits the job held (``--hold``: priority 0, reason ``JobHeldUser``) until someone
    releases it (:func:`release`). ``extra`` holds other sbatch options, one word each
    (``--mem=4G``), added last and unchanged. Every option is passed as its own argument,
    never through a script directive or a shell.
    """
    argv = [
        "sbatch",
        "--parsable",
        f"--nodes={nodes}",
        f"--ntasks-per-node={ntasks_per_node}",
        f"--time={format_time_limit(time_limit)}",
        f"--job-name={job_name}",
    ]
    if comment:
        argv.append(f"--comment={comment}")
    if output:
        argv.append(f"--output={output}")
    if partition:
        argv.append(f"--partition={partition}")
    if chdir:
        argv.append(f"--chdir={chdir}")
    if array:
        argv.append(f"--array={array}")
    if account:
        argv.append(f"--account={account}")
    if qos:
        argv.append(f"--qos={qos}")
    if hold:
        argv.append("--hold")
    argv += extra
    return argv


def squeue_json(job_ids: Sequence[int] = ()) -> list[str]:
    """All jobs Slurm still knows (or only ``job_ids``), as JSON."""
    argv = ["squeue", "--json"]
    if job_ids:
        argv += ["--jobs", ",".join(str(j) for j in job_ids)]
    return argv


def sinfo_nodes() -> list[str]:
    """One line per node: ``name|state|cpus`` (state in long form, e.g. ``allocated``)."""
    return ["sinfo", "--noheader", "--Node", "--format=%N|%T|%c"]


def scontrol_show_job(job_id: int) -> list[str]:
    """One job's record on one line (``Key=Value`` pairs)."""
    return ["scontrol", "--oneliner", "show", "job", str(job_id)]


def shrink_to(job_id: int, keep: Sequence[str]) -> list[str]:
    """Shrink a running job to exactly the nodes ``keep`` (others go back to Slurm).

    Steps running on the released nodes are killed by Slurm, so the job must have left them.
    """
    if not keep:
        raise ValueError("a job cannot be shrunk to zero nodes; cancel it instead")
    return ["scontrol", "update", f"JobId={job_id}", f"NodeList={compress(keep)}"]


def allocation(
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
) -> list[str]:
    """An exclusive allocation of ``count`` nodes with no step: an expander or a sibling.

    ``salloc --no-shell`` leaves an allocation without a step (an sbatch job's batch step
    would make a merge fail); ``--exclusive`` keeps it off nodes in use; it must share the
    job's partition, account and QOS to be merged. salloc prints ``Granted job allocation E``
    on standard error, and withdraws the request itself when it is not granted within
    ``immediate_s`` seconds. An expander has ``dependency="expand:<job>"``; a sibling a
    ``time_limit_min`` no longer than what remains of its job's. ``exclude``: nodes it must
    not get (``--exclude``).
    """
    if count < 1:
        raise ValueError(f"an allocation has at least one node, got {count}")
    if immediate_s < 1:
        raise ValueError(f"the grant deadline must be at least 1 s, got {immediate_s}")
    argv = [
        "salloc",
        "--no-shell",
        f"--nodes={count}",
        "--exclusive",
        f"--immediate={immediate_s}",
        f"--job-name={name}",
    ]
    if dependency:
        argv.append(f"--dependency={dependency}")
    if exclude:
        argv.append(f"--exclude={','.join(exclude)}")
    if time_limit_min is not None:
        if time_limit_min < 1:
            raise ValueError(f"a time limit is at least 1 minute, got {time_limit_min}")
        argv.append(f"--time={time_limit_min}")
    if partition:
        argv.append(f"--partition={partition}")
    if account:
        argv.append(f"--account={account}")
    if qos:
        argv.append(f"--qos={qos}")
    return argv


def release_expander(expander_id: int) -> list[str]:
    """Hand the expander's nodes over (first half of the merge): ``NumNodes=0``."""
    return ["scontrol", "update", f"JobId={expander_id}", "NumNodes=0"]


def absorb(job_id: int) -> list[str]:
    """Take over the nodes released by its expander (second half of the merge)."""
    return ["scontrol", "update", f"JobId={job_id}", "NumNodes=ALL"]


def scancel(*job_ids: int) -> list[str]:
    """Cancel jobs (at least one)."""
    if not job_ids:
        raise ValueError("scancel needs at least one job id")
    return ["scancel", *(str(j) for j in job_ids)]


def requeue(job_id: int) -> list[str]:
    """Put a running job back in the queue (``scontrol requeue``).

    It starts again from its batch script when Slurm schedules it.
    """
    return ["scontrol", "requeue", str(job_id)]


def ping() -> list[str]:
    """Ask whether slurmctld answers (``scontrol ping``; read with :func:`.parse.slurmctld_up`)."""
    return ["scontrol", "ping"]


def reconfigure() -> list[str]:
    """Make slurmctld re-read its configuration and rebuild its state (operator rights)."""
    return ["scontrol", "reconfigure"]


def scontrol_version() -> list[str]:
    """Slurm's version (Debian prints ``slurm-wlm 22.05.8``)."""
    return ["scontrol", "--version"]


def squeue_steps(job_id: int) -> list[str]:
    """The job's running steps, one line each: ``stepid|nodelist``."""
    return ["squeue", "--steps", f"--jobs={job_id}", "--noheader", "--format=%i|%N"]


#: Environment for commands whose times should print as seconds since the epoch.
EPOCH_TIMES = {"SLURM_TIME_FORMAT": "%s"}


def sacct_allocations(job_id: int) -> list[str]:
    """The job's allocation records in accounting, one per size it had (run with EPOCH_TIMES).

    Slurm closes a record (state ``RESIZING``) each time the job is resized; fields:
    ``jobid|state|nnodes|nodelist|start|end|submit``. A record's submit time is when that
    size began: Slurm 22.05 rewrites the start of a resized job's open record to the job's
    first start when its time limit is updated (seen here), so the start alone misorders them.
    """
    return [
        "sacct",
        f"--jobs={job_id}",
        "--allocations",
        "--noheader",
        "--parsable2",
        "--format=JobID,State,NNodes,NodeList,Start,End,Submit",
    ]


def scontrol_show_config() -> list[str]:
    """The running configuration of slurmctld, ``Key = Value`` per line."""
    return ["scontrol", "show", "config"]


def set_pending_size(job_id: int, nodes: int) -> list[str]:
    """Fix the node count of a pending (moldable) job before it starts.

    Both ends of the range are set (``NumNodes=N-N``): Slurm 22.05 reads ``NumNodes=N`` on a
    pending job of ``--nodes=1-4`` as a new minimum only (``NumNodes=N-4``, seen here), and
    would then still start the job at any size up to 4.
    """
    if nodes < 1:
        raise ValueError(f"a job needs at least one node, got {nodes}")
    return ["scontrol", "update", f"JobId={job_id}", f"NumNodes={nodes}-{nodes}"]


def release(job_id: int) -> list[str]:
    """Let a held pending job be scheduled (``scontrol release``)."""
    return ["scontrol", "release", str(job_id)]


def set_time_limit(job_id: int, minutes: int) -> list[str]:
    """Set a job's time limit, in whole minutes from its start (Slurm's ``TimeLimit``).

    >>> set_time_limit(7, 90)
    ['scontrol', 'update', 'JobId=7', 'TimeLimit=90']
    """
    if minutes < 1:
        raise ValueError(f"a time limit is at least 1 minute, got {minutes}")
    return ["scontrol", "update", f"JobId={job_id}", f"TimeLimit={int(minutes)}"]


def set_array_throttle(array_job_id: int, max_running: int) -> list[str]:
    """Change how many tasks of a job array may run at once (0: no limit)."""
    if max_running < 0:
        raise ValueError(f"a throttle is >= 0, got {max_running}")
    return ["scontrol", "update", f"JobId={array_job_id}", f"ArrayTaskThrottle={max_running}"]
