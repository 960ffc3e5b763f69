"""``elastic-slurm soak``: the site soak with faults (``docs/soak.md``)."""

from __future__ import annotations

import argparse

from elastic_slurm.soak.command import DESCRIPTION, add_arguments, run


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``soak`` subcommand (its own cluster; the global ``--site`` if given)."""
    p = sub.add_parser(
        "soak",
        help="replay a trace live with faults; lost and leaked must be 0",
        description=DESCRIPTION,
    )
    add_arguments(p, site=False)
    p.set_defaults(func=run)
