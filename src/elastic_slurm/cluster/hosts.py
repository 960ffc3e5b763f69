"""A managed block in ``/etc/hosts`` naming the local cluster's hosts.

All the cluster's namespaces share this machine's filesystem, so one block serves every node.
The block is delimited by marker lines; only the block is ever changed, in place (``/etc/hosts``
is often a bind mount that cannot be replaced by a rename).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

BEGIN = "# BEGIN elastic-slurm local cluster (managed by `elastic-slurm cluster`; do not edit)"
END = "# END elastic-slurm local cluster"


def render_block(entries: Iterable[tuple[str, str]]) -> str:
    """The block for ``(address, hostname)`` pairs, markers included, ending in a newline.

    >>> print(render_block([("10.77.0.11", "n1")]), end="")
    # BEGIN elastic-slurm local cluster (managed by `elastic-slurm cluster`; do not edit)
    10.77.0.11 n1
    # END elastic-slurm local cluster
    """
    lines = [BEGIN, *(f"{addr} {name}" for addr, name in entries), END]
    return "\n".join(lines) + "\n"


def remove_block(text: str) -> str:
    """``text`` without the managed block (unchanged if there is none).

    >>> remove_block("a\\n" + render_block([("1.2.3.4", "x")]) + "b\\n")
    'a\\nb\\n'
    """
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\n")
        if stripped == BEGIN:
            inside = True
        elif stripped == END and inside:
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out)


def with_block(text: str, block: str) -> str:
    """``text`` with the managed block replaced by (or appended as) ``block``."""
    base = remove_block(text)
    if base and not base.endswith("\n"):
        base += "\n"
    return base + block


def write_in_place(path: Path, text: str) -> None:
    """Overwrite ``path`` keeping its inode (works on bind-mounted ``/etc/hosts``)."""
    with open(path, "r+", encoding="utf-8") as fh:
        fh.seek(0)
        fh.write(text)
        fh.truncate()
