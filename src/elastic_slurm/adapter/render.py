"""Render an elastic request into what ``sbatch`` receives: options and a script body.

Malleable and evolving jobs run their program through the elastic runtime's launcher
(``python -m elastic_slurm run``), which restarts or extends the MPI step when the job is
resized. Rigid and moldable jobs whose request says ``with_ranks`` (every job submitted from
a job spec: ``elastic-slurm submit``) run their program with its ranks too, as one ``srun``
step over the whole allocation (nodes x ``ntasks_per_node`` ranks; Python scripts with the
job's Python), unless the program is itself a launcher (``srun``, ``mpirun``...); without
it they run their command once, as given. The tasks of an
elastic sweep (a malleable job array) run their command as given, once per task: the sweep
grows and shrinks by how many tasks run at once. A request with a batch ``script`` runs that
script as the batch step, as ``sbatch script.sh`` would; its ``#SBATCH`` lines were read at
submission (:mod:`elastic_slurm.batch_script`) and sbatch does not read them again.
Other sbatch options of the request (``sbatch_options``) follow elastic-slurm's own on the
command line, unchanged.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from elastic_slurm.adapter import commands
from elastic_slurm.adapter.tags import ElasticTag, SizedBy, check_sized_by
from elastic_slurm.model.request import ElasticRequest, JobKind

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Programs that start MPI ranks themselves: a rigid or moldable job runs them as given.
LAUNCHERS = frozenset({"srun", "mpirun", "mpiexec", "orterun", "prun", "mpiexec.hydra"})


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
    header = f"# elastic-slurm: {req.kind.value} job, nodes {_nodes_range(req)}"
    exports = []
    for key, value in sorted({**dict(req.extra_env), **(env or {})}.items()):
        if not _ENV_NAME.fullmatch(key):
            raise ValueError(f"environment variable name {key!r} is not valid in a shell")
        exports.append(f"export {key}={shlex.quote(value)}")
    if req.script is not None:
        # after the #! line, before the script's own lines: sbatch reads no #SBATCH line
        # after a command, so it cannot read the directives again (they were read already)
        first, _, body = req.script.partition("\n")
        return "\n".join(
            [
                first,
                f"{header} (batch script {req.program[0]}; its #SBATCH lines were read "
                "at submission)",
                *exports,
                "set -- " + shlex.join(req.program[1:]),
                body,
            ]
        ) + ("" if body.endswith("\n") or not body else "\n")
    return (
        "\n".join(["#!/bin/bash", header, *exports, "exec " + shlex.join(launch_argv(req, python))])
        + "\n"
    )


def launch_argv(req: ElasticRequest, python: str) -> list[str]:
    """The command the batch step runs for ``req``'s program (see the module's description).

    >>> req = ElasticRequest(program=("app.py", "-n", "3"), with_ranks=True)
    >>> launch_argv(req, "/venv/bin/python")
    ['srun', '/venv/bin/python', 'app.py', '-n', '3']
    >>> launch_argv(ElasticRequest(program=("mpirun", "./a.out"), with_ranks=True), "python")
    ['mpirun', './a.out']
    >>> launch_argv(ElasticRequest(program=("app.py",)), "python")  # once, as given
    ['app.py']
    """
    if req.kind.resizable:
        if req.array is not None:  # a sweep's tasks are plain commands
            return list(req.program)
        return [
            python,
            "-m",
            "elastic_slurm",
            "run",
            f"--ntasks-per-node={req.ntasks_per_node}",
            "--",
            *req.program,
        ]
    if not req.with_ranks or req.program[0].rsplit("/", 1)[-1] in LAUNCHERS:
        return list(req.program)
    program = [python, *req.program] if req.program[0].endswith(".py") else list(req.program)
    return ["srun", *program]


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
        req.evolution_profile,
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
        extra=req.sbatch_options,
    )
