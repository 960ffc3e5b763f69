"""The launch agent Open MPI's ``mpirun`` uses to start its daemons on the job's nodes.

``mpirun`` (plm ``rsh``) calls its agent like ``ssh``: ``agent HOST COMMAND...``, where the words
of COMMAND form one command line for a shell on HOST (ORTE quotes them for that shell, as it
does for ssh). This agent runs it in a step of the current job on exactly that node::

    srun --overlap --nodes=1 --ntasks=1 --nodelist=HOST --mpi=none /bin/sh -c COMMAND

after dropping the job's size variables, which are stale once Slurm has added nodes, so that
srun asks slurmctld for the current allocation. A host held by a sibling allocation of the job
(the grow path where Slurm cannot merge) is reached with ``--jobid=<sibling>``; the launcher
passes which allocation holds each node of the generation (``ELASTIC_SLURM_NODE_HOLDERS``), and
only for a node not in it (one added to the job while ``mpirun`` runs) does the agent ask
Slurm. This is what lets ``MPI_Comm_spawn`` start ranks on nodes Slurm added to the job while
``mpirun`` runs (SLURM-FACTS.md). With
``orte_leave_session_attached`` the daemon stays in that step, so Slurm tracks it and ends it
with the job.

Usage: ``python -m elastic_slurm.mpi_runtime.rsh_agent HOST COMMAND...``
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from elastic_slurm import envvars
from elastic_slurm.mpi_runtime.slurm_env import (
    job_slurm,
    parse_holders,
    without_allocation_size,
)


def srun_argv(host: str, command: Sequence[str], job_id: int | None = None) -> list[str]:
    """The srun command that runs ``command`` (ssh-style words) on ``host``.

    ``job_id`` names the allocation holding ``host`` when it is not the current job (a
    sibling allocation of the job).

    >>> srun_argv("n2", ["orted", "-mca", "ess", '"env"'])[-3:]
    ['/bin/sh', '-c', 'orted -mca ess "env"']
    >>> srun_argv("n3", ["orted"], job_id=42)[:2]
    ['srun', '--jobid=42']
    """
    return [
        "srun",
        *([f"--jobid={job_id}"] if job_id is not None else []),
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={host}",
        "--mpi=none",
        "--kill-on-bad-exit=0",
        "/bin/sh",
        "-c",
        " ".join(command),
    ]


def _holder(host: str) -> int | None:
    """The sibling allocation of the current job that holds ``host``, if any.

    From the launcher's ``ELASTIC_SLURM_NODE_HOLDERS`` when it names ``host``; otherwise asked
    of Slurm: a listing of every job (``squeue --json`` of 22.05 ignores ``--jobs``), whose
    cost grows with the site's queue, and which is retried for minutes while slurmctld does
    not answer; without the map every daemon of every launch made one.
    """
    job = os.environ.get("SLURM_JOB_ID")
    if not job or not job.isdigit():
        return None
    known = parse_holders(envvars.get_str("NODE_HOLDERS"))
    if host in known:
        holder: int | None = known[host]
    else:
        holder = job_slurm().elastic_nodes(int(job)).get(host)
    return holder if holder is not None and holder != int(job) else None


def main(argv: Sequence[str] | None = None) -> int:
    """Exec srun for ``HOST COMMAND...``; returns 2 on a usage error."""
    args = list(sys.argv[1:] if argv is None else argv)
    while args and args[0].startswith("-"):  # ssh options some launchers add (-x, -T)
        args.pop(0)
    if len(args) < 2:
        print("usage: rsh_agent HOST COMMAND...", file=sys.stderr)
        return 2
    host, command = args[0], args[1:]
    os.execvpe("srun", srun_argv(host, command, _holder(host)), without_allocation_size(os.environ))
    return 127  # pragma: no cover - execvpe does not return


if __name__ == "__main__":
    sys.exit(main())
