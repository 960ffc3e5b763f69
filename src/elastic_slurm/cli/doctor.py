"""``elastic-slurm doctor``: what this site's Slurm and MPI allow, and the grow path chosen.

It also runs two one-node job steps to ask PMIx, under ``srun --mpi=pmix`` and under
``mpirun``, whether its server can spawn and serve allocation requests (``unknown: <why>``
when a step cannot run, e.g. no node is free).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from elastic_slurm.adapter.capabilities import cache_path, cached_probe
from elastic_slurm.adapter.factory import transport_for
from elastic_slurm.config import load_site


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``doctor`` subcommand."""
    p = sub.add_parser("doctor", help="probe Slurm and MPI, and say how jobs will grow")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Probe afresh (and refresh the site's cache); print the findings."""
    site = load_site(args.site)
    caps = cached_probe(
        transport_for(site), site.name, preference=site.grow_path, refresh=True, test_pmix=True
    )
    if args.json:
        print(json.dumps({"site": site.name, **caps.to_json()}))
        return 0
    table = Table(title=f"site {site.name}: Slurm {caps.slurm_version}")
    table.add_column("check")
    table.add_column("found")
    rows = [
        ("permit_job_expansion", str(caps.permit_job_expansion)),
        ("disable_job_shrink", str(caps.disable_job_shrink)),
        ("PrologFlags", ",".join(caps.prolog_flags) or "(none)"),
        ("accounting", caps.accounting or "(none)"),
        ("resizes per job", caps.resizes_per_job),
        ("SelectType", caps.select_type),
        ("JSON output (squeue --json)", str(caps.json_output)),
        ("MPI", caps.mpi or "(none found)"),
        ("MPI can spawn", f"{caps.mpi_can_spawn}: {caps.mpi_detail}"),
        ("pyslurm", f"{caps.pyslurm or '-'}: {caps.pyslurm_detail}"),
        ("PMIx", caps.pmix_version or "(not seen in a job step)"),
        ("PMIx spawn", _per_launcher(caps.pmix_spawn, caps.pmix_detail, "spawn_detail")),
        (
            "PMIx allocation requests",
            _per_launcher(caps.pmix_allocation, caps.pmix_detail, "allocation_detail"),
        ),
        ("grow path", f"{caps.grow_path}: {caps.grow_path_reason}"),
    ]
    for check, found in rows:
        table.add_row(check, found)
    console = Console()
    console.print(table)
    for warning in caps.warnings:
        console.print(f"warning: {warning}")
    console.print(f"cached in {cache_path(site.name)}")
    return 0


def _per_launcher(values: dict[str, Any], detail: dict[str, Any], key: str) -> str:
    """One line per launcher: ``srun: False (PMIx_... returned -47 ...)``."""
    lines = []
    for launcher, value in values.items():
        why = (detail.get(launcher) or {}).get(key)
        lines.append(f"{launcher}: {value}" + (f" ({why})" if why else ""))
    return "\n".join(lines) or "(not probed)"
