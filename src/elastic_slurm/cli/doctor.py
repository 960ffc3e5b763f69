"""``elastic-slurm doctor``: what this site's Slurm and MPI allow, and the grow path chosen.

It runs probes, not only queries: ``scontrol`` and ``squeue --json`` on the site, a test
``MPI_Comm_spawn`` under ``mpirun -n 1`` on this machine (with this Python and its mpi4py), and
two one-node job steps on the cluster that ask PMIx, under ``srun --mpi=pmix`` and under
``mpirun``, whether its server can spawn and serve allocation requests (``unknown: <why>``
when a step cannot run, e.g. no node is free). Over SSH only the Slurm part runs.

Every "no" in the table is explained below it (:func:`explain`): what it means for elastic
jobs, whether it is expected on this stack, and what would change it. A test spawn that failed
only because the Python running ``doctor`` has no mpi4py says nothing about MPI: it is shown
as unknown, with the extra to install (:func:`spawn_test_blocker`).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from elastic_slurm.adapter.capabilities import Capabilities, cache_path, cached_probe
from elastic_slurm.adapter.factory import transport_for
from elastic_slurm.adapter.transport.base import Transport
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.config import load_site
from elastic_slurm.errors import SlurmCommandError

#: What the help of ``doctor`` says it does.
HELP = (
    "probe Slurm and MPI and say how jobs will grow (runs a test MPI spawn here and two "
    "one-node job steps, srun and mpirun, on the cluster)"
)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``doctor`` subcommand."""
    p = sub.add_parser(
        "doctor",
        help=HELP,
        description=HELP[0].upper() + HELP[1:] + ". Every 'no' is explained below the table.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Probe afresh (and refresh the site's cache); print the findings and explain each no."""
    site = load_site(args.site)
    transport = transport_for(site)
    caps = cached_probe(
        transport, site.name, preference=site.grow_path, refresh=True, test_pmix=True
    )
    blocker = spawn_test_blocker(caps, transport)
    if blocker:
        caps = replace(caps, mpi_can_spawn=None, mpi_detail=f"unknown: {blocker}")
    why = explain(caps)
    reached = _reached(transport)
    if args.json:
        extra = {"explanations": dict(why), **({"ssh": reached} if reached else {})}
        print(json.dumps({"site": site.name, **caps.to_json(), **extra}))
        return 0
    table = Table(title=f"site {site.name}: Slurm {caps.slurm_version}")
    table.add_column("check")
    table.add_column("found")
    spawn = "unknown" if caps.mpi_can_spawn is None else str(caps.mpi_can_spawn)
    rows = [
        ("permit_job_expansion", str(caps.permit_job_expansion)),
        ("disable_job_shrink", str(caps.disable_job_shrink)),
        ("PrologFlags", ",".join(caps.prolog_flags) or "(none)"),
        ("accounting", caps.accounting or "(none)"),
        ("resizes per job", caps.resizes_per_job),
        ("SelectType", caps.select_type),
        ("JSON output (squeue --json)", str(caps.json_output)),
        ("MPI", caps.mpi or "(none found)"),
        ("MPI can spawn", f"{spawn}: {caps.mpi_detail.removeprefix('unknown: ')}"),
        ("pyslurm", f"{caps.pyslurm or '-'}: {caps.pyslurm_detail}"),
        ("PMIx", caps.pmix_version or "(not seen in a job step)"),
        ("PMIx spawn", _per_launcher(caps.pmix_spawn, caps.pmix_detail, "spawn_detail")),
        (
            "PMIx allocation requests",
            _per_launcher(caps.pmix_allocation, caps.pmix_detail, "allocation_detail"),
        ),
        ("grow path", f"{caps.grow_path}: {caps.grow_path_reason}"),
    ]
    if reached:
        rows.insert(0, ("reached over SSH", reached))
    for check, found in rows:
        table.add_row(escape(check), escape(found))
    console = Console()
    console.print(table)
    for check, text in why:
        console.print(f"{check}: {text}", markup=False, highlight=False)
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


def _reached(transport: Transport) -> str | None:
    """``user@host:port (Host alias) via jump, ...`` for an SSH transport, else ``None``."""
    target = getattr(transport, "target", None)
    if transport.is_local or not callable(target):
        return None
    t = target()
    via = " via " + ", ".join(h.label for h in t.jumps) if t.jumps else ""
    proxy = f" through ProxyCommand {t.proxy_command!r}" if t.proxy_command else ""
    return f"{t.label}{via}{proxy}"


def spawn_test_blocker(caps: Capabilities, transport: Transport) -> str | None:
    """Why the test spawn failed without saying anything about MPI, or ``None``.

    The test runs ``mpirun -n 1 PYTHON -c 'MPI.COMM_SELF.Spawn(...)'`` with the Python that
    runs ``doctor`` (a chroot flavour's ``python3``); without mpi4py there, it fails whatever
    MPI can do, and ``mpirun``'s last lines (what the probe keeps) do not say why. Asked only
    when the test failed on this machine (one ``python -c 'import mpi4py'``).
    """
    if caps.mpi_can_spawn is not False or not transport.is_local or not caps.mpi:
        return None
    python = sys.executable if isinstance(transport, LocalTransport) else "python3"
    try:
        res = transport.run([python, "-c", "import mpi4py"], timeout_s=30)
    except SlurmCommandError:
        return None
    if res.returncode == 0:
        return None
    return (
        f"the test spawn runs {python}, which cannot import mpi4py, so it says nothing about "
        "MPI (install the MPI extra there: pip install 'elastic-slurm[mpi]'; jobs use the "
        "site's python)"
    )


def _unknown(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("unknown")


def explain(caps: Capabilities) -> list[tuple[str, str]]:
    """One ``(check, explanation)`` per "no" (or unknown) of the table, in its order.

    Each says what the finding means for elastic jobs, whether it is expected on this stack,
    and what would change it.

    >>> from elastic_slurm.adapter.capabilities import Capabilities
    >>> caps = Capabilities("22.05.8", False, False, (), "accounting_storage/slurmdbd",
    ...     "select/linear", True, "any number", "Open MPI 4.1.4", True, "", None, "",
    ...     "sibling", "permit_job_expansion is not set")
    >>> [check for check, _ in explain(caps)]
    ['permit_job_expansion', 'pyslurm', 'grow path']
    """
    out: list[tuple[str, str]] = []
    if not caps.permit_job_expansion:
        out.append(
            (
                "permit_job_expansion",
                "no: Slurm refuses to merge an expander allocation into a job, so jobs grow "
                "by a sibling allocation beside them instead (works, but the job id does not "
                "cover the new nodes); to allow merges add permit_job_expansion to "
                "SchedulerParameters in slurm.conf and run `scontrol reconfigure`",
            )
        )
    if caps.disable_job_shrink:
        out.append(
            (
                "disable_job_shrink",
                "set: Slurm refuses every node-list update that shrinks a job, so elastic "
                "jobs cannot give nodes back before they end; remove disable_job_shrink from "
                "SchedulerParameters",
            )
        )
    if any(f.lower() == "contain" for f in caps.prolog_flags):
        out.append(
            (
                "PrologFlags",
                "Contain adds an extern step to every job, which is expected to block merging "
                "an expander into it: jobs grow by sibling allocations",
            )
        )
    if not caps.accounting.endswith("slurmdbd") and "per job" in caps.resizes_per_job:
        out.append(
            (
                "accounting",
                f"{caps.accounting or 'none'}: {caps.resizes_per_job}; run slurmdbd "
                "(AccountingStorageType=accounting_storage/slurmdbd) to resize a job again",
            )
        )
    if not caps.json_output:
        out.append(
            (
                "JSON output (squeue --json)",
                "no: `squeue --json` did not answer with JSON (Slurm older than 21.08, or its "
                "JSON serializer plugin is missing); the backend reads jobs with it, so "
                "install Slurm's JSON support (Debian's slurm-wlm has it)",
            )
        )
    if not caps.mpi:
        out.append(
            (
                "MPI",
                f"no mpirun was found ({caps.mpi_detail}): jobs cannot start MPI ranks; "
                "install Open MPI (Debian: openmpi-bin libopenmpi-dev) on the nodes",
            )
        )
    elif caps.mpi_can_spawn is not True:
        out.append(("MPI can spawn", _explain_spawn(caps)))
    if caps.pyslurm is None:
        out.append(
            (
                "pyslurm",
                f"not used ({caps.pyslurm_detail}): nothing is lost, the command-line tools "
                "are the default backend; pyslurm is optional and must match Slurm's version",
            )
        )
    if not caps.pmix_version and caps.pmix_spawn:
        reasons = {str(v).removeprefix("unknown: ") for v in caps.pmix_spawn.values()}
        then = (
            "run doctor on the login node to ask PMIx"
            if all("over SSH" in r for r in reasons)
            else "run doctor again when a node is idle"
        )
        out.append(("PMIx", f"not seen ({'; '.join(sorted(reasons))}): {then}"))
    out += _explain_pmix(caps)
    if caps.grow_path == "sibling":
        out.append(
            (
                "grow path",
                f"sibling, because {caps.grow_path_reason}: a grow adds a second allocation "
                "whose ranks join the job's application; it is cancelled when the job shrinks "
                "off it or ends",
            )
        )
    return out


def _explain_spawn(caps: Capabilities) -> str:
    detail = caps.mpi_detail.removeprefix("unknown: ")
    then = (
        "; this test only informs: each job chooses its join strategy at each resize "
        "(spawn-and-merge with Open MPI 4.1 when every rank runs on mpirun's node, else "
        "checkpoint-restart, which works with any MPI); ELASTIC_SLURM_JOIN=restart makes "
        "jobs restart from a checkpoint without trying to spawn"
    )
    if caps.mpi_can_spawn is None:
        return f"unknown: {detail}" + then
    if not (caps.mpi or "").startswith("Open MPI"):
        return f"no: {detail}" + then
    return (
        f"no: {detail.splitlines()[0] if detail else 'the test spawn failed'}; run the test "
        "by hand to see all of mpirun's output: mpirun -n 1 --oversubscribe python -c "
        "\"import sys; from mpi4py import MPI; MPI.COMM_SELF.Spawn(sys.executable, ['-c', "
        "'from mpi4py import MPI; MPI.Comm.Get_parent().Disconnect()']).Disconnect()\"" + then
    )


def _explain_pmix(caps: Capabilities) -> list[tuple[str, str]]:
    out = []
    spawn = caps.pmix_spawn
    notes = []
    if spawn.get("srun") is False:
        notes.append(
            "srun: no, as expected: Slurm's PMIx server (srun --mpi=pmix) has no spawn "
            "support; elastic jobs start their ranks with mpirun inside the job, whose server "
            "can"
        )
    if spawn.get("mpirun") is False:
        notes.append(
            "mpirun: no: mpirun's PMIx server says it cannot spawn, so new ranks cannot join "
            "a running application and grows restart it from a checkpoint"
        )
    notes += [f"{k}: {v}" for k, v in spawn.items() if _unknown(v) and caps.pmix_version]
    if notes:
        out.append(("PMIx spawn", "; ".join(notes)))
    refused = [k for k, v in caps.pmix_allocation.items() if v is False]
    if refused:
        statuses = {(caps.pmix_detail.get(k) or {}).get("extend_status") for k in refused}
        expected = (
            "as expected on this stack (PMIx_Allocation_request returns -47, not supported, "
            "under Slurm 22.05's and Open MPI 4.1's servers)"
            if statuses == {-47}
            else f"PMIx_Allocation_request returned {sorted(map(str, statuses))}"
        )
        out.append(
            (
                "PMIx allocation requests",
                f"no under {', '.join(refused)}, {expected}: applications cannot ask PMIx for "
                "nodes; the controller grows and shrinks jobs through Slurm instead, so "
                "nothing is lost",
            )
        )
    return out
