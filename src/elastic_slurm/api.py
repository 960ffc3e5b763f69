"""Submit elastic jobs from Python: validate the request against the site, then hand it to Slurm.

``submit`` refuses what Slurm would accept but never run (more nodes than the partition has:
Slurm 22.05 queues such a job forever with reason ``PartitionConfig``) and programs that do
not exist, before anything reaches Slurm.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.tags import SizedBy, check_sized_by
from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.request import ElasticRequest
from elastic_slurm.model.snapshot import NodeState

#: The environment variable that carries a job's secret (set at submission).
SECRET_ENV = "ELASTIC_SLURM_JOB_SECRET"
#: The environment variable that carries the controller's URL, when the job has one.
CONTROLLER_ENV = "ELASTIC_SLURM_CONTROLLER"


def check_program(req: ElasticRequest, workdir: Path, slurm: SlurmBackend) -> None:
    """Refuse a program that cannot be found where the job will be submitted.

    A path (or a ``.py`` file) must exist, relative to ``workdir``; a bare command must be on
    ``PATH``. The check runs through the backend's transport, so over SSH it looks on the
    login node (with a shared filesystem, what the nodes see too).

    Raises
    ------
    InvalidRequest
        The message names the program and where it was looked for.
    """
    prog = req.program[0]
    if "/" in prog or prog.endswith(".py"):
        path = prog if prog.startswith("/") else str(workdir / prog)
        if slurm.transport.run(["test", "-f", path], timeout_s=10).returncode != 0:
            raise InvalidRequest(f"program {prog!r} does not exist (looked for {path})")
    elif (
        slurm.transport.run(["sh", "-c", 'command -v "$1"', "sh", prog], timeout_s=10).returncode
        != 0
    ):
        raise InvalidRequest(f"program {prog!r} is not on PATH; give its full path")


def check_size(req: ElasticRequest, slurm: SlurmBackend) -> None:
    """Refuse a node range the cluster can never satisfy.

    Raises
    ------
    InvalidRequest
        ``nodes_min`` (or a rigid size) exceeds the usable nodes of the cluster.
    """
    nodes = slurm.nodes()
    usable = [n for n in nodes if n.model_state is not NodeState.UNAVAILABLE]
    if req.nodes_min > len(usable):
        unusable = ", ".join(f"{n.name} {n.state}" for n in nodes if n not in usable)
        raise InvalidRequest(
            f"the job needs at least {req.nodes_min} node(s) but the cluster has {len(usable)} "
            f"usable node(s) (not usable: {unusable or 'none'}): ask for fewer nodes"
        )


def submit(
    req: ElasticRequest,
    slurm: SlurmBackend,
    *,
    workdir: Path,
    output: str | None = None,
    python: str = sys.executable,
    controller: str | None = None,
    sized_by: SizedBy = "slurm",
    hold: bool = False,
) -> int:
    """Validate ``req`` and submit it; return Slurm's job id.

    Parameters
    ----------
    req
        The request (its node range is already checked by :class:`ElasticRequest`).
    slurm
        The site's Slurm backend.
    workdir
        The job's working directory, shared with the nodes; relative programs are found there.
    output
        The job's output file pattern (``sbatch --output``).
    python
        The interpreter with elastic-slurm installed, as seen from the nodes.
    controller
        The controller's URL (``http://host:port``) the job talks to, or ``None``: the job
        then follows orders through its job directory only (``elastic-slurm resize``).
    sized_by
        Who chooses a moldable job's start size: ``slurm`` (within ``--nodes=MIN-MAX``, at
        start) or ``controller``: the job is submitted held and tagged so, and the
        controller's policy sets its size from its speedup model and releases it (Huang et
        al.). The job waits, held, until a controller runs.
    hold
        Submit the job held for its user (``sbatch --hold``): it waits until the user
        releases it (``scontrol release``); the controller never does, as the job is not
        marked as sized by the controller.

    Every job gets a fresh secret (:data:`SECRET_ENV`, 256 random bits) in its environment; it
    proves to the controller that a message comes from this job (see ``docs/protocol.md``).

    Raises
    ------
    InvalidRequest
        Nothing was submitted: the program is missing, the cluster is too small, or
        ``sized_by="controller"`` for a job that is not moldable (or is an array).
    SlurmCommandError
        sbatch refused the job; nothing was queued.
    """
    sized_by = check_sized_by(req.kind, sized_by, array=req.array is not None)
    check_program(req, workdir, slurm)
    check_size(req, slurm)
    env = {SECRET_ENV: secrets.token_urlsafe(32)}
    if controller:
        env[CONTROLLER_ENV] = controller
    return slurm.submit(
        req,
        python=python,
        chdir=str(workdir),
        output=output,
        env=env,
        hold=hold or sized_by == "controller",
        sized_by=sized_by,
    )
