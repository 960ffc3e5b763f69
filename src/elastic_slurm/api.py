"""Submit elastic jobs: validate the request against the site, then hand it to Slurm.

This is the layer under both ``elastic-slurm submit`` and the job objects of
:mod:`elastic_slurm.job` (``elastic_slurm.submit(...)``, which most Python users want).

:func:`submit` refuses what Slurm would accept but never run (more nodes than the partition
has: Slurm 22.05 queues such a job forever with reason ``PartitionConfig``) and programs that
do not exist, before anything reaches Slurm. :func:`submit_spec` takes a job spec (a YAML job
file's keys, or the command line's options) with the site's defaults, as the command does.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from elastic_slurm import mca
from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.tags import SizedBy, check_sized_by
from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.request import ElasticRequest
from elastic_slurm.model.snapshot import NodeState

if TYPE_CHECKING:
    from elastic_slurm.config.schema import SiteConfig
    from elastic_slurm.jobspec import JobSpec

#: The environment variable that carries a job's secret (set at submission).
SECRET_ENV = "ELASTIC_SLURM_JOB_SECRET"
#: The environment variable that carries the controller's URL, when the job has one.
CONTROLLER_ENV = "ELASTIC_SLURM_CONTROLLER"
#: ``job`` when the site's controller runs as a service user (``controller.privilege:
#: service``): the job does the Slurm side of its resizes (:mod:`.mpi_runtime.grant`).
SLURM_SIDE_ENV = "ELASTIC_SLURM_SLURM_SIDE"


def check_program(req: ElasticRequest, workdir: Path, slurm: SlurmBackend) -> None:
    """Refuse a program that cannot be found where the job will be submitted.

    A path (or a ``.py`` file) must exist, relative to ``workdir``; a bare command must be on
    ``PATH``. A batch script is not looked for: sbatch gets its text, not its path. The check
    runs through the backend's transport, so over SSH it looks on the login node (with a
    shared filesystem, what the nodes see too).

    Raises
    ------
    InvalidRequest
        The message names the program and where it was looked for.
    """
    if req.script is not None:  # the script's text travels with the job
        return
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
    mpi_env: Mapping[str, str] | None = None,
    slurm_side: str = "controller",
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
    mpi_env
        MPI parameters (``OMPI_MCA_*``, ``PRTE_MCA_*``, ``PMIX_MCA_*``) for the job's MPI
        launch: the site config's ``mpi_env``. The request's own ``extra_env`` entries of
        that kind win over them (:mod:`elastic_slurm.mca`).
    slurm_side
        ``job`` under a service controller (``controller.privilege: service``): the job's
        launcher gives a shrink's nodes back to Slurm itself (:data:`SLURM_SIDE_ENV`);
        ``controller``: the controller does.

    Returns
    -------
    int
        Slurm's job id.

    Raises
    ------
    InvalidRequest
        Nothing was submitted: the program is missing, the cluster is too small, or
        ``sized_by="controller"`` for a job that is not moldable (or is an array).
    SlurmCommandError
        sbatch refused the job; nothing was queued.

    Notes
    -----
    Every job gets a fresh secret (:data:`SECRET_ENV`, 256 random bits) in its environment; it
    proves to the controller that a message comes from this job (see ``docs/protocol.md``).
    """
    sized_by = check_sized_by(req.kind, sized_by, array=req.array is not None)
    check_program(req, workdir, slurm)
    check_size(req, slurm)
    env = {SECRET_ENV: secrets.token_urlsafe(32)}
    if controller:
        env[CONTROLLER_ENV] = controller
    if slurm_side == "job":  # a service controller: the job gives its nodes back itself
        env[SLURM_SIDE_ENV] = "job"
    params = {**(mpi_env or {}), **{k: v for k, v in req.extra_env if mca.is_param(k)}}
    if params:  # exported, and listed for the launcher, which drops other MPI variables
        env.update(params)
        env[mca.NAMES_VAR] = mca.names_value(set(params))
    return slurm.submit(
        req,
        python=python,
        chdir=str(workdir),
        output=output,
        env=env,
        hold=hold or sized_by == "controller",
        sized_by=sized_by,
    )


@dataclass(frozen=True)
class Submission:
    """What :func:`submit_spec` submitted.

    Parameters
    ----------
    job_id
        Slurm's job id.
    request
        The request as submitted (the site's partition, account and QOS filled in).
    sized_by
        Who chooses a moldable job's start size (``slurm`` or ``controller``).
    workdir
        The job's working directory (absolute).
    output
        The job's output file pattern as given (``None``: sbatch's default,
        ``slurm-%j.out`` in ``workdir``).
    """

    job_id: int
    request: ElasticRequest
    sized_by: SizedBy
    workdir: Path
    output: str | None


def prepare(
    spec: JobSpec, site: SiteConfig, *, base: Path | None = None
) -> tuple[ElasticRequest, SizedBy, Path]:
    """The request, sizing and working directory that ``spec`` asks for on ``site``.

    The site's partition, account and QOS fill in what the spec leaves out; its
    ``controller.max_grace_period_s`` caps the grace period; its
    ``controller.sizes_moldable`` decides who sizes a moldable job that does not say.

    Parameters
    ----------
    spec
        The job spec.
    site
        The site config.
    base
        The directory a relative ``spec.workdir`` is taken from (a job file's directory);
        ``None``: the current directory. Without ``spec.workdir`` the job runs in the
        current directory.

    Returns
    -------
    tuple
        ``(request, sized_by, workdir)``; ``workdir`` is absolute.

    Raises
    ------
    InvalidRequest
        The spec is impossible on this site (see :meth:`JobSpec.request`).
    """
    req = spec.request(max_grace_period_s=site.controller.max_grace_period_s)
    sized_by = spec.sizing(site.controller.sizes_moldable)
    req = replace(  # the site's defaults where the user gave none
        req,
        partition=req.partition or site.partition,
        account=req.account or site.account,
        qos=req.qos or site.qos,
    )
    root = base if base is not None else Path.cwd()
    workdir = (root / spec.workdir).resolve() if spec.workdir else Path.cwd().resolve()
    return req, sized_by, workdir


def submit_spec(
    spec: JobSpec,
    site: SiteConfig,
    *,
    base: Path | None = None,
    slurm: SlurmBackend | None = None,
    hold: bool = False,
) -> Submission:
    """Submit the job ``spec`` describes on ``site``, as ``elastic-slurm submit`` does.

    The job runs with the site's Python (:func:`~elastic_slurm.adapter.factory.job_python`)
    and is told where the site's controller listens.

    Parameters
    ----------
    spec
        The job spec (:func:`elastic_slurm.jobspec.load_spec`).
    site
        The site config (:func:`elastic_slurm.config.load_site`).
    base
        The directory a relative ``spec.workdir`` is taken from (see :func:`prepare`).
    slurm
        The backend to submit through; ``None``: the site's.
    hold
        Submit the job held for its user (see :func:`submit`).

    Raises
    ------
    InvalidRequest
        Nothing was submitted: the spec is impossible on this site, the program is missing,
        or the cluster is too small.
    ConfigError
        The site's controller address or backend is unusable.
    SlurmCommandError
        sbatch refused the job; nothing was queued.
    """
    from elastic_slurm.adapter.factory import job_python, slurm_for
    from elastic_slurm.protocol.address import controller_url

    req, sized_by, workdir = prepare(spec, site, base=base)
    job_id = submit(
        req,
        slurm if slurm is not None else slurm_for(site),
        workdir=workdir,
        output=spec.output,
        sized_by=sized_by,
        python=job_python(site),
        controller=controller_url(site),  # where the site's controller listens
        hold=hold,
        mpi_env=site.mpi_env,
        slurm_side="job" if site.controller.privilege == "service" else "controller",
    )
    return Submission(job_id, req, sized_by, workdir, spec.output)
