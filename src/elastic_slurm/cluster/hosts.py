"""A managed block in ``/etc/hosts`` naming the local cluster's hosts.

All the cluster's namespaces share this machine's filesystem, so one block serves every node.
The block is delimited by marker lines; only the block is ever changed, in place (``/etc/hosts``
is often a bind mount that cannot be replaced by a rename).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def _markers(cluster: str) -> tuple[str, str]:
    return (
        f"# BEGIN elastic-slurm local cluster {cluster} (managed by `elastic-slurm cluster`)",
        f"# END elastic-slurm local cluster {cluster}",
    )


def render_block(cluster: str, entries: Iterable[tuple[str, str]]) -> str:
    """The block of ``cluster`` for ``(address, hostname)`` pairs, markers included.

    ``cluster`` tells the blocks of several local clusters apart (their bridge's name).

    >>> print(render_block("esbr0", [("10.77.0.11", "n1")]), end="")
    # BEGIN elastic-slurm local cluster esbr0 (managed by `elastic-slurm cluster`)
    10.77.0.11 n1
    # END elastic-slurm local cluster esbr0
    """
    begin, end = _markers(cluster)
    lines = [begin, *(f"{addr} {name}" for addr, name in entries), end]
    return "\n".join(lines) + "\n"


def remove_block(text: str, cluster: str) -> str:
    r"""``text`` without the block of ``cluster``.

    Unchanged if there is none, or if its END line is missing (then nothing after BEGIN is
    removed: an unterminated block may have swallowed the user's own lines).

    >>> remove_block("a\n" + render_block("b0", [("1.2.3.4", "x")]) + "b\n", "b0")
    'a\nb\n'
    """
    begin, end = _markers(cluster)
    out: list[str] = []
    held: list[str] = []  # lines of a block whose end has not been seen yet
    inside = False
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\n")
        if stripped == begin and not inside:
            inside, held = True, [line]
        elif stripped == end and inside:
            inside, held = False, []
        elif inside:
            held.append(line)
        else:
            out.append(line)
    return "".join(out + held)  # an unterminated block is not ours to cut: keep it


def with_block(text: str, cluster: str, block: str) -> str:
    """``text`` with the block of ``cluster`` replaced by (or appended as) ``block``."""
    base = remove_block(text, cluster)
    if base and not base.endswith("\n"):
        base += "\n"
    return base + block


def write_in_place(path: Path, text: str) -> None:
    """Overwrite ``path`` keeping its inode (works on bind-mounted ``/etc/hosts``)."""
    with open(path, "r+", encoding="utf-8") as fh:
        fh.seek(0)
        fh.write(text)
        fh.truncate()
