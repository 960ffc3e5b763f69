"""MPI parameters a site or a job gives to the ``mpirun`` of elastic jobs.

Open MPI reads its MCA parameters from the environment (``OMPI_MCA_<name>`` for Open MPI 4.1,
``PRTE_MCA_<name>`` for the PRRTE of Open MPI 5 and 6, ``PMIX_MCA_<name>`` for PMIx). The
launcher of a malleable or evolving job starts ``mpirun`` with none of the ``OMPI_``, ``PRTE_``
and ``PMIX_`` variables it inherited (an MPI singleton in the submitting process leaves some
that make ``mpirun`` exit at once: :func:`elastic_slurm.mpi_runtime.launcher.without_mpi_env`).
The parameters a site sets in its config (``mpi_env``) and those a job spec sets in its
``env:`` are exported by the batch script, and their names are listed in
``ELASTIC_SLURM_MPI_ENV`` (:data:`NAMES_VAR`), which the launcher passes on.

The local cluster sets ``OMPI_MCA_mpi_yield_when_idle=1``: its nodes share this machine's
cores, so ranks are oversubscribed although every node has a rank per CPU, and Open MPI does
not know it. A rank waiting in a blocking collective then busy-polls and takes the core from
the rank it waits for: a 14 ms checkpoint of 32 MiB took 35-60 ms that way (measured in
``bench/resize.py``'s shrink 4->2), and 13 ms with the parameter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: The variable that lists, comma-separated, the MPI parameters the batch script exported.
NAMES_VAR = "ELASTIC_SLURM_MPI_ENV"
#: An MCA parameter's variable name.
NAME = re.compile(r"(OMPI|PRTE|PMIX)_MCA_[A-Za-z0-9_]{1,120}")
#: Most parameters a site or job may set.
MAX_PARAMS = 64
#: Longest value (characters).
MAX_VALUE = 4096


def is_param(name: str) -> bool:
    """Whether ``name`` is an MCA parameter's variable.

    >>> is_param("OMPI_MCA_mpi_yield_when_idle"), is_param("OMPI_COMM_WORLD_RANK")
    (True, False)
    """
    return NAME.fullmatch(name) is not None


def check(params: Mapping[str, str]) -> dict[str, str]:
    """Return ``params`` if every name is an MCA parameter's and every value is usable.

    Raises
    ------
    ValueError
        Naming the first bad entry: a name that is not ``OMPI_MCA_*``, ``PRTE_MCA_*`` or
        ``PMIX_MCA_*``, a value that is not a string, longer than :data:`MAX_VALUE` or holds
        a NUL, or more than :data:`MAX_PARAMS` entries.
    """
    if len(params) > MAX_PARAMS:
        raise ValueError(f"{len(params)} MPI parameters: at most {MAX_PARAMS}")
    for name, value in params.items():
        if not isinstance(name, str) or not is_param(name):
            raise ValueError(
                f"{name!r} is not an MPI parameter's variable (OMPI_MCA_<name>, "
                "PRTE_MCA_<name> or PMIX_MCA_<name>)"
            )
        if not isinstance(value, str) or "\0" in value or len(value) > MAX_VALUE:
            raise ValueError(
                f"{name}: the value must be a string of at most {MAX_VALUE} characters "
                "without NUL (quote numbers in YAML)"
            )
    return dict(params)


def names_value(names: set[str] | frozenset[str]) -> str:
    """The value of :data:`NAMES_VAR` for these parameter names.

    >>> names_value({"PRTE_MCA_x", "OMPI_MCA_y"})
    'OMPI_MCA_y,PRTE_MCA_x'
    """
    return ",".join(sorted(names))


def passed_on(env: Mapping[str, str]) -> dict[str, str]:
    """The MPI parameters in ``env`` that :data:`NAMES_VAR` lists (the launcher's side).

    Names that are not MCA parameters' are ignored, and at most :data:`MAX_PARAMS` are taken:
    the list only lets through what the job's own batch script exported.

    >>> passed_on({"ELASTIC_SLURM_MPI_ENV": "OMPI_MCA_a,OMPI_COMM_WORLD_RANK",
    ...            "OMPI_MCA_a": "1", "OMPI_COMM_WORLD_RANK": "0", "OMPI_MCA_b": "2"})
    {'OMPI_MCA_a': '1'}
    """
    listed = env.get(NAMES_VAR, "").split(",")[:MAX_PARAMS]
    return {n: env[n] for n in listed if is_param(n) and n in env}
