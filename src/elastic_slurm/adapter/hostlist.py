"""Slurm hostlist expressions (``n[1-3,7]``) to node names and back.

A thin layer over the ``python-hostlist`` library, so the rest of the code never parses them.
"""

from __future__ import annotations

from collections.abc import Iterable

import hostlist as _hostlist


def expand(expr: str | None) -> tuple[str, ...]:
    """Node names of a hostlist expression, in order.

    Empty for ``""``, ``None``, and what Slurm prints for "no nodes": ``(null)`` (squeue,
    scontrol) and ``None assigned`` (sacct).

    >>> expand("n[1-3,7]")
    ('n1', 'n2', 'n3', 'n7')

    Raises
    ------
    ValueError
        The expression is malformed.
    """
    if not expr or expr in ("(null)", "None assigned"):
        return ()
    try:
        return tuple(_hostlist.expand_hostlist(expr))
    except _hostlist.BadHostlist as exc:
        raise ValueError(f"malformed Slurm hostlist {expr!r}: {exc}") from exc


def compress(names: Iterable[str]) -> str:
    """The shortest hostlist expression for ``names``.

    >>> compress(["n1", "n2", "n3", "n7"])
    'n[1-3,7]'
    """
    return _hostlist.collect_hostlist(list(names))
