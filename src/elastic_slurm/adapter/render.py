"""Render an elastic request into what ``sbatch`` receives: options and a script body.

Malleable and evolving jobs run their program through the elastic runtime's launcher
(``python -m elastic_slurm run``), which restarts or extends the MPI step when the job is
resized; rigid and moldable jobs run their command as given, and so do the tasks of an elastic
sweep (a malleable job array), which grows and shrinks by how many tasks run at once.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from elastic_slurm.adapter import commands
from elastic_slurm.adapter.tags import ElasticTag, SizedBy, check_sized_by
from elastic_slurm.model.request import ElasticRequest, JobKind

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def batch_script(req: ElasticRequest, *, python: str, env: Mapping[str, str] | None = None) -> str:
    """The batch script for ``req``; every value is shell-quoted.

    Parameters
    ----------
    req
        The request.
    python
        The Python interpreter that has elastic-slurm installed, as seen from the nodes.
    env
        Variables exported before the program runs.

    Raises
    ------
    ValueError
        A variable name that is not a shell identifier.
    """
    lines = ["#!/bin/bash", f"# elastic-slurm: {req.kind.value} job, nodes {_nodes_range(req)}"]
    for key, value in sorted({**dict(req.extra_env), **(env or {})}.items()):
        if not _ENV_NAME.fullmatch(key):
            raise ValueError(f"environment variable name {key!r} is not valid in a shell")
        lines.append(f"export {key}={shlex.quote(value)}")
    if req.kind.resizable and req.array is None:  # a sweep's tasks are plain commands
        argv = [
            python,
            "-m",
            "elastic_slurm",
            "run",
            f"--ntasks-per-node={req.ntasks_per_node}",
            "--",
            *req.program,
        ]
    else:
        argv = list(req.program)
    lines.append("exec " + shlex.join(argv))
    return "\n".join(lines) + "\n"


def _nodes_range(req: ElasticRequest) -> str:
    return (
        str(req.nodes_min) if req.nodes_min == req.nodes_max else f"{req.nodes_min}-{req.nodes_max}"
    )


def sbatch_argv(
    req: ElasticRequest,
    *,
    output: str | None = None,
    chdir: str | None = None,
    hold: bool = False,
    sized_by: SizedBy = "slurm",
) -> list[str]:
    """The ``sbatch`` command for ``req``.

    Rigid jobs ask for their size; moldable jobs for their range (Slurm picks the size at
    start); malleable and evolving jobs for their start size, and carry their range in the
    elastic tag so the controller can resize them.

    Parameters
    ----------
    req
        The request.
    output, chdir
        ``sbatch --output`` and ``--chdir``.
    hold
        Submit the job held (``--hold``): it waits until it is released.
    sized_by
        ``controller``: a moldable job whose start size the controller chooses (Huang et al.'s
        HPCaaS setting); the tag says so, which is what lets the controller release it. Such
        a job must be submitted held, else Slurm would start it at a size of its own.

    Raises
    ------
    InvalidRequest
        ``sized_by="controller"`` for a job that is not moldable, or for an array.
    ValueError
        ``sized_by="controller"`` without ``hold``.
    """
    sized_by = check_sized_by(req.kind, sized_by, array=req.array is not None)
    if sized_by == "controller" and not hold:
        raise ValueError(
            "a job sized by the controller must be submitted held (hold=True): Slurm would "
            "otherwise start it at a size of its own"
        )
    if req.kind is JobKind.MOLDABLE:
        nodes = _nodes_range(req)
    else:
        nodes = str(req.initial_nodes)
    from elastic_slurm.jobspec import speedup_spec  # the user-facing text form of the model

    tag = ElasticTag(
        req.kind,
        req.nodes_min,
        req.nodes_max,
        speedup_spec(req.speedup),
        req.grace_period_s,
        sized_by,
    ).encode()
    return commands.sbatch(
        nodes=nodes,
        time_limit=req.walltime,
        job_name=req.job_name,
        ntasks_per_node=req.ntasks_per_node,
        comment=tag,
        output=output,
        partition=req.partition,
        chdir=chdir,
        array=(
            f"{req.array}%{req.array_max_running}"
            if req.array and req.array_max_running
            else req.array
        ),
        account=req.account,
        qos=req.qos,
        hold=hold,
    )
