"""The two resize paths of the runtime, and which one a job takes.

``overlap`` (the default) does what is slow while the application computes (:mod:`.orders`);
``sequential`` does everything at the resize point, as the first design did, for comparison
(``bench/resize.py``). This module does not import MPI: the launcher, which never starts MPI
itself, reads the choice too.
"""

from __future__ import annotations

from typing import Any

from elastic_slurm import envvars

#: ``ELASTIC_SLURM_RESIZE_PATH``: ``overlap`` (default) or ``sequential`` (the old path).
OVERLAP = "overlap"
SEQUENTIAL = "sequential"


def resize_path(env: Any = None) -> str:
    """``overlap`` or ``sequential`` from ``ELASTIC_SLURM_RESIZE_PATH`` (default ``overlap``).

    ``env`` is a mapping of environment variables (default ``os.environ``).

    >>> resize_path({"ELASTIC_SLURM_RESIZE_PATH": "sequential"})
    'sequential'

    Raises
    ------
    ValueError
        Another value.
    """
    value = envvars.get_str("RESIZE_PATH", OVERLAP, env)
    if value not in (OVERLAP, SEQUENTIAL):
        raise ValueError(f"ELASTIC_SLURM_RESIZE_PATH={value!r}: use {OVERLAP} or {SEQUENTIAL}")
    return str(value)
