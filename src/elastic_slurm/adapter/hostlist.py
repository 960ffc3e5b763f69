"""Slurm hostlist expressions (``n[1-3,7]``) to node names and back.

A thin layer over the ``python-hostlist`` library, so the rest of the code never parses them.
An expression is counted before it is expanded (:func:`count`): one that names more than
:data:`MAX_NAMES` nodes is refused, so a broken or hostile hostlist (``n[0-999999999]``, or
many ranges side by side) cannot exhaust memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import hostlist as _hostlist

#: The most node names one expression may expand to (repeats counted). The library's own cap
#: on one range or one bracket product (``hostlist.MAX_SIZE``); larger than any Slurm
#: partition the project targets.
MAX_NAMES = 100_000

_GROUP = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"([0-9]+)-([0-9]+)")


def _top_level_parts(expr: str) -> list[str]:
    """``expr`` split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(expr):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return [p for p in parts if p]


def count(expr: str) -> int:
    """How many names ``expr`` expands to (repeats counted), without expanding it.

    Ranges the library would refuse (``3-1``, ``a-b``) count as one name: :func:`expand` then
    reports them. Time and memory are linear in ``len(expr)``.

    >>> count("n[1-3,7],m[01-10]x[1-2]")
    24
    """
    total = 0
    for part in _top_level_parts(expr):
        names = 1
        for group in _GROUP.findall(part):
            size = 0
            for item in group.split(","):
                m = _RANGE.fullmatch(item)
                size += max(int(m.group(2)) - int(m.group(1)) + 1, 1) if m else 1
            names *= size
            if names > MAX_NAMES:  # stop multiplying huge numbers
                return names
        total += names
        if total > MAX_NAMES:
            return total
    return total


def expand(expr: str | None) -> tuple[str, ...]:
    """Node names of a hostlist expression, in order.

    Empty for ``""``, ``None``, and what Slurm prints for "no nodes": ``(null)`` (squeue,
    scontrol) and ``None assigned`` (sacct).

    >>> expand("n[1-3,7]")
    ('n1', 'n2', 'n3', 'n7')

    Raises
    ------
    ValueError
        The expression is malformed, or names more than :data:`MAX_NAMES` nodes.
    """
    if not expr or expr in ("(null)", "None assigned"):
        return ()
    if count(expr) > MAX_NAMES:
        shown = expr if len(expr) <= 60 else expr[:57] + "..."
        raise ValueError(
            f"Slurm hostlist {shown!r} names more than {MAX_NAMES} nodes: refused (a broken or "
            "hostile node list)"
        )
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
