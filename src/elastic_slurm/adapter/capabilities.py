"""What this site's Slurm (and MPI) allow, found by probing, and the grow path that follows.

``elastic-slurm doctor`` prints a fresh probe; every other command uses the probe cached for
the site (``$XDG_CACHE_HOME/elastic-slurm/<site>.json``), refreshed when Slurm's version or
the probed part of its configuration changes, and always by ``doctor``.

The grow path (SLURM-FACTS.md, ``docs/slurm-findings.md``):

* **merge**: an expander allocation merged into the job. Needs
  ``SchedulerParameters=permit_job_expansion``. ``PrologFlags=Contain`` adds an extern step
  that is expected to block the merge. On Slurm 22.05 with ``select/cons_tres`` the merged
  nodes are left unaccounted and handed to other jobs (seen here), so merge is not chosen
  there.
* **sibling**: a second allocation beside the job, cancelled when the job shrinks off it or
  ends; works everywhere.

PMIx (``doctor`` only, ``probe(..., test_pmix=True)``): two one-node job steps run
``python -m elastic_slurm.mpi_runtime.pmix --json``, one under ``srun --mpi=pmix`` and one under
``mpirun`` (inside ``srun --mpi=none``), each with ``--immediate`` so a full cluster gives a
quick "unknown" instead of a wait. Each reports whether its PMIx server spawns
(``PMIx_Query_info``) and serves allocation requests (``PMIx_Allocation_request``); see
:mod:`elastic_slurm.mpi_runtime.probe`. About 0.7 s for both on the local cluster.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from elastic_slurm.adapter import commands, parse
from elastic_slurm.adapter.dialect import dialect_for
from elastic_slurm.adapter.transport.base import Transport
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.errors import SlurmCommandError

log = logging.getLogger(__name__)

GrowPath = Literal["merge", "sibling"]

#: scontrol show config keys the probe depends on (their values key the cache)
PROBED_KEYS = (
    "SchedulerParameters",
    "PrologFlags",
    "AccountingStorageType",
    "SelectType",
    "SLURM_VERSION",
    "ClusterName",
    "MpiDefault",
)


@dataclass(frozen=True)
class Capabilities:
    """The probe's findings; see the module docstring for how ``grow_path`` is chosen."""

    slurm_version: str
    permit_job_expansion: bool
    disable_job_shrink: bool
    prolog_flags: tuple[str, ...]
    accounting: str
    select_type: str
    json_output: bool
    resizes_per_job: str
    mpi: str | None
    mpi_can_spawn: bool | None
    mpi_detail: str
    pyslurm: str | None
    pyslurm_detail: str
    grow_path: GrowPath
    grow_path_reason: str
    warnings: tuple[str, ...] = ()
    config_key: str = ""
    probed_at: float = field(default=0.0)
    #: what differs with this Slurm version (:meth:`.Dialect.to_json`)
    dialect: dict[str, Any] = field(default_factory=dict)
    #: PMIx library version seen in a job step (``None``: not probed or unavailable)
    pmix_version: str | None = None
    #: per launcher (``srun``, ``mpirun``): True/False, or ``"unknown: <why>"``
    pmix_spawn: dict[str, Any] = field(default_factory=dict)
    pmix_allocation: dict[str, Any] = field(default_factory=dict)
    #: per launcher: the probe step's full report (server, statuses, layout), or ``unknown``
    pmix_detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (``doctor --json``)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Capabilities:
        """The inverse of :meth:`to_json`."""
        data = dict(data)
        for key in ("prolog_flags", "warnings"):
            data[key] = tuple(data.get(key, ()))
        return cls(**data)


def choose_grow_path(
    *,
    version: tuple[int, int, int],
    permit_job_expansion: bool,
    prolog_flags: tuple[str, ...],
    select_type: str,
    preference: str = "auto",
) -> tuple[GrowPath, str]:
    """The grow path for these facts and the site's ``grow_path`` preference, with the reason.

    >>> choose_grow_path(version=(22, 5, 8), permit_job_expansion=True, prolog_flags=(),
    ...                  select_type="select/linear")
    ('merge', 'permit_job_expansion is set and nothing blocks a merge')
    >>> choose_grow_path(version=(22, 5, 8), permit_job_expansion=False, prolog_flags=(),
    ...                  select_type="select/linear")[0]
    'sibling'
    """
    if preference == "sibling":
        return "sibling", "the site config asks for sibling allocations (grow_path: sibling)"
    blockers = []
    if not permit_job_expansion:
        blockers.append("SchedulerParameters lacks permit_job_expansion (Slurm refuses merges)")
    if "Contain" in prolog_flags:
        blockers.append("PrologFlags=Contain adds an extern step, expected to block merges")
    if select_type == "select/cons_tres" and version[0] < 23:
        blockers.append(
            "select/cons_tres in Slurm 22.05 leaves merged nodes unaccounted and "
            "gives them to other jobs"
        )
    if blockers:
        asked = " (the site asked for merge)" if preference == "merge" else ""
        return "sibling", "; ".join(blockers) + asked
    return "merge", "permit_job_expansion is set and nothing blocks a merge"


def _mpi(transport: Transport, local: bool) -> tuple[str | None, bool | None, str]:
    try:
        res = transport.run(["mpirun", "--version"], timeout_s=20)
    except SlurmCommandError as exc:
        return None, None, f"no mpirun: {exc.stderr or exc}"
    if res.returncode != 0:
        return None, None, f"mpirun --version failed: {res.stderr.strip()[:200]}"
    first = (res.stdout or res.stderr).strip().splitlines()[0] if (res.stdout or res.stderr) else ""
    vendor = "Open MPI " + first.split()[-1] if "Open MPI" in first else first
    if "Open MPI" not in first:
        return vendor, False, "only Open MPI can spawn here (MPICH 4.0 cannot, SLURM-FACTS.md)"
    if not local:
        return vendor, None, "spawn not tested over SSH (run doctor on the login node)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "SLURM_"))}
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    child = "from mpi4py import MPI; MPI.Comm.Get_parent().Disconnect()"
    parent = (
        "import sys; from mpi4py import MPI; "
        f"c = MPI.COMM_SELF.Spawn(sys.executable, ['-c', {child!r}], maxprocs=1); "
        "c.Disconnect(); print('spawn ok')"
    )
    # on this machine with this Python; in a flavour's chroot with the chroot's own
    test: Transport = transport
    if isinstance(transport, LocalTransport):
        test = LocalTransport(env=env)
    python = _python(transport)
    try:
        has_mpi4py = test.run([python, "-c", "import mpi4py"], timeout_s=30).returncode == 0
    except SlurmCommandError:
        has_mpi4py = False
    if not has_mpi4py:
        return (
            vendor,
            None,
            f"unknown: {python} cannot import mpi4py (pip install 'elastic-slurm[mpi]')",
        )
    try:
        res = test.run(
            ["mpirun", "-n", "1", "--oversubscribe", python, "-c", parent],
            timeout_s=60,
            env=None if test is not transport else {"OMPI_ALLOW_RUN_AS_ROOT": "1"},
        )
    except SlurmCommandError as exc:
        return vendor, False, f"a test spawn timed out: {exc}"
    if res.returncode == 0 and "spawn ok" in res.stdout:
        return (
            vendor,
            True,
            (
                "MPI_Comm_spawn works (onto nodes added to a job only when every "
                "rank runs on mpirun's node, SLURM-FACTS.md)"
            ),
        )
    output = (res.stderr or res.stdout).strip()
    errors = [line.strip() for line in output.splitlines() if "rror" in line]
    why = " | ".join(errors[:3])[:300] if errors else output[-300:]
    return vendor, False, f"a test spawn failed: {why}"


PMIX_PROBE_TIMEOUT_S = 60.0
#: what the probe step runs (the package must be importable on the nodes, as for jobs)
PMIX_PROBE_MODULE = ("-m", "elastic_slurm.mpi_runtime.pmix", "--json")


def pmix_probe_argv(launcher: str, python: str = sys.executable) -> list[str]:
    """The command of the one-node PMIx probe step under ``launcher`` (``srun``/``mpirun``).

    >>> pmix_probe_argv("srun", "py")[:3]
    ['srun', '--mpi=pmix', '--nodes=1']
    """
    step = ["--nodes=1", "--ntasks=1", "--immediate=10", "--time=1", "--quiet"]
    step += ["--job-name=elastic-slurm-pmix-probe"]
    if launcher == "srun":
        return ["srun", "--mpi=pmix", *step, python, *PMIX_PROBE_MODULE]
    if launcher == "mpirun":
        return ["srun", "--mpi=none", *step, "mpirun", "-n", "1", python, *PMIX_PROBE_MODULE]
    raise ValueError(f"unknown launcher {launcher!r}: use srun or mpirun")


def _python(transport: Transport) -> str:
    """The Python that jobs started through ``transport`` run: this one, or a chroot's own."""
    return sys.executable if isinstance(transport, LocalTransport) else "python3"


def _pmix_step(transport: Transport, launcher: str) -> dict[str, Any]:
    """Run the probe step; its report, or ``{"unknown": why}``."""
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    argv = pmix_probe_argv(launcher, _python(transport))
    try:
        res = transport.run(argv, timeout_s=PMIX_PROBE_TIMEOUT_S, env=env)
    except SlurmCommandError as exc:
        return {"unknown": f"the {launcher} probe step failed: {str(exc)[:300]}"}
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        tail = (res.stderr or res.stdout).strip()[-300:] or "no output"
        return {"unknown": f"the {launcher} probe step exited {res.returncode}: {tail}"}
    try:
        report = json.loads(lines[-1])
    except ValueError as exc:
        return {"unknown": f"the {launcher} probe step printed no JSON: {exc}"}
    if not report.get("available"):
        return {"unknown": f"PMIx unavailable under {launcher}: {report.get('reason')}"}
    return report


def _pmix(
    transport: Transport, local: bool
) -> tuple[str | None, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """PMIx version, spawn and allocation support per launcher, and the full reports."""
    if not local:
        why = "unknown: not probed over SSH (run doctor on the login node)"
        return None, {"srun": why, "mpirun": why}, {"srun": why, "mpirun": why}, {}
    detail = {launcher: _pmix_step(transport, launcher) for launcher in ("srun", "mpirun")}
    spawn: dict[str, Any] = {}
    allocation: dict[str, Any] = {}
    version = None
    for launcher, report in detail.items():
        if "unknown" in report:
            spawn[launcher] = allocation[launcher] = f"unknown: {report['unknown']}"
            continue
        version = version or report.get("version")
        spawn[launcher] = bool(report.get("spawn"))
        allocation[launcher] = bool(report.get("allocation"))
    return version, spawn, allocation, detail


def _pyslurm(version: tuple[int, int, int], slurm_conf: str | None) -> tuple[str | None, str]:
    """The pyslurm version that can drive this Slurm (or ``None``), and why.

    It never imports pyslurm blindly: libslurm reads a slurm.conf at import and may end the
    process when the file is missing.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    from elastic_slurm.adapter.pyslurm_backend import pyslurm_available

    try:
        installed = dist_version("pyslurm")
    except PackageNotFoundError:
        return None, "not installed; optional: pip install the pyslurm wheel for this Slurm"
    ok, why = pyslurm_available(version, slurm_conf)
    return (installed if ok else None), why


def probe(
    transport: Transport,
    *,
    preference: str = "auto",
    test_spawn: bool = True,
    test_pmix: bool = False,
) -> Capabilities:
    """Probe Slurm (and MPI) through ``transport``; with ``test_pmix``, PMIx in job steps.

    Raises
    ------
    SlurmCommandError
        Slurm cannot be reached (``scontrol`` fails).
    """
    version_text = transport.run(commands.scontrol_version(), timeout_s=20).check().stdout
    version = parse.parse_version(version_text)
    config = parse.parse_scontrol_config(
        transport.run(commands.scontrol_show_config(), timeout_s=30).check().stdout
    )
    sched = [p.strip() for p in config.get("SchedulerParameters", "").split(",") if p.strip()]
    prolog = tuple(p.strip() for p in config.get("PrologFlags", "").split(",") if p.strip())
    accounting = config.get("AccountingStorageType", "")
    select_type = config.get("SelectType", "")
    permit = "permit_job_expansion" in sched
    json_ok = False
    try:
        res = transport.run(commands.squeue_json(), timeout_s=30)
        json_ok = res.returncode == 0 and isinstance(json.loads(res.stdout), dict)
    except (SlurmCommandError, ValueError):
        json_ok = False
    dialect = dialect_for(version)
    allowed = dialect.resizes_allowed(accounting)
    if accounting.endswith("slurmdbd"):
        resizes = "any number (accounting through slurmdbd)"
    elif allowed is not None:
        resizes = (
            f"{allowed} per job: Slurm {dialect.series} without slurmdbd refuses later updates"
        )
    else:
        resizes = f"any number (Slurm {dialect.series} needs no slurmdbd for it)"
    local = transport.is_local
    mpi, spawn, detail = _mpi(transport, local) if test_spawn else (None, None, "not probed")
    conf = getattr(transport, "env", {}).get("SLURM_CONF") if local else None
    pyslurm_version, pyslurm_detail = (
        _pyslurm(version, conf or os.environ.get("SLURM_CONF"))
        if local
        else (None, "not probed over SSH")
    )
    pmix_version, pmix_spawn, pmix_alloc, pmix_detail = (
        _pmix(transport, local) if test_pmix else (None, {}, {}, {})
    )
    path, reason = choose_grow_path(
        version=version,
        permit_job_expansion=permit,
        prolog_flags=prolog,
        select_type=select_type,
        preference=preference,
    )
    warnings = []
    if "disable_job_shrink" in sched:
        warnings.append(
            "disable_job_shrink is set: Slurm refuses shrinks, so jobs cannot give "
            "nodes back before they end"
        )
    if allowed is not None:
        warnings.append(f"accounting is {accounting or 'none'}: {resizes}")
    return Capabilities(
        slurm_version=version_text.strip().split()[-1],
        permit_job_expansion=permit,
        disable_job_shrink="disable_job_shrink" in sched,
        prolog_flags=prolog,
        accounting=accounting,
        select_type=select_type,
        json_output=json_ok,
        resizes_per_job=resizes,
        mpi=mpi,
        mpi_can_spawn=spawn,
        mpi_detail=detail,
        pyslurm=pyslurm_version,
        pyslurm_detail=pyslurm_detail,
        grow_path=path,
        grow_path_reason=reason,
        warnings=tuple(warnings),
        config_key=_config_key(config, preference),
        probed_at=time.time(),
        dialect=dialect.to_json(),
        pmix_version=pmix_version,
        pmix_spawn=pmix_spawn,
        pmix_allocation=pmix_alloc,
        pmix_detail=pmix_detail,
    )


def _config_key(config: dict[str, str], preference: str) -> str:
    probed = {k: config.get(k, "") for k in PROBED_KEYS}
    text = json.dumps({"config": probed, "preference": preference}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(site_name: str) -> Path:
    """Where the probe of ``site_name`` is cached."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "elastic-slurm" / f"{site_name}.json"


def cached_probe(
    transport: Transport,
    site_name: str,
    *,
    preference: str = "auto",
    refresh: bool = False,
    test_pmix: bool = False,
) -> Capabilities:
    """The site's probe: cached, unless Slurm's probed configuration changed.

    One ``scontrol show config`` decides; a fresh probe replaces the cached one. With
    ``test_pmix`` (``doctor``) a fresh probe also runs the PMIx probe steps.
    """
    path = cache_path(site_name)
    cached = None
    if not refresh:
        try:
            cached = Capabilities.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError):  # none, unreadable, or garbage
            cached = None
        if cached is not None:
            config = parse.parse_scontrol_config(
                transport.run(commands.scontrol_show_config(), timeout_s=30).check().stdout
            )
            if _config_key(config, preference) == cached.config_key:
                return cached
    caps = probe(transport, preference=preference, test_pmix=test_pmix)
    try:  # an exclusive temporary file, renamed: a reader never sees half of it
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, prefix=f".{path.name}.", delete=False
        ) as fh:
            fh.write(json.dumps(caps.to_json(), indent=1))
        os.replace(fh.name, path)
    except OSError as exc:  # a cache this user cannot write (HOME of another user, read-only)
        log.warning("Slurm's probe is not cached (%s): set XDG_CACHE_HOME to a writable place", exc)
    return caps
