"""What differs between the Slurm versions elastic-slurm drives, in one place.

A :class:`Dialect` is chosen from the probed version (:func:`dialect_for`, or
:func:`probe_dialect` with a transport) and answers the version questions the adapter asks.
Each fact below was seen on this project's local clusters (SLURM-FACTS.md, docs/flavours.md):

- Version text: Debian prints ``slurm-wlm 22.05.8`` / ``slurm-wlm 24.11.5``; upstream builds
  print ``slurm 26.05.5``; release candidates add ``-0rc1``.
- JSON: ``squeue``/``sinfo``/``sacct --json`` exist from 22.05 (data_parser v0.0.38 there);
  ``scontrol --json`` from 23.02. From 23.02 numbers are objects
  (``{"set": true, "infinite": false, "number": 3}``) and ``job_state`` is a list of strings;
  22.05 prints plain numbers and one state string. 24.11 reports its version in
  ``meta.slurm.version`` (``{"major": "24", "minor": "11", "micro": "5"}``).
- Resizes without slurmdbd: 22.05 allows one resize per job (later updates fail with
  ``Job update not available right now, the DB index is being set``); 24.11 and 26.05 resize
  any number of times without it.
- 22.05 with ``select/linear`` keeps nodes released by a node-list shrink unschedulable for
  20-40 s unless slurmctld is reconfigured right after the shrink
  (``SlurmBackend._after_nodelist_shrink``); newer versions were not seen to need it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elastic_slurm.adapter.transport.base import Transport

_VERSION = re.compile(r"(?<![\d.])(\d{2})\.(\d{1,2})\.(\d+)(?:-?(\d*rc\d+|pre\d+))?")

#: The text of the 22.05 accounting bug, and of a transient state seen with slurmdbd too.
DB_INDEX_MESSAGE = "the DB index is being set"


def parse_version(text: str) -> tuple[int, int, int]:
    """Slurm's version from ``scontrol --version`` or ``sinfo --version``.

    >>> parse_version("slurm-wlm 22.05.8"), parse_version("slurm 26.05.5")
    ((22, 5, 8), (26, 5, 5))
    >>> parse_version("slurm 24.11.0-0rc1")
    (24, 11, 0)

    Raises
    ------
    ValueError
        The text names no version (``YY.MM.N``).
    """
    m = _VERSION.search(text)
    if not m:
        raise ValueError(f"no Slurm version (YY.MM.N) in {text.strip()[:200]!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def version_from_json_meta(data: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """The version in a ``--json`` answer's ``meta`` (23.02+ layout), or ``None``.

    >>> version_from_json_meta({"meta": {"slurm": {"version":
    ...     {"major": "24", "minor": "11", "micro": "5"}}}})
    (24, 11, 5)
    >>> version_from_json_meta({"meta": {"Slurm": {"version": {"major": 22, "minor": 5,
    ...     "micro": 8}}}})
    (22, 5, 8)
    """
    meta = data.get("meta")
    if not isinstance(meta, Mapping):
        return None
    slurm = meta.get("slurm") or meta.get("Slurm")
    version = slurm.get("version") if isinstance(slurm, Mapping) else None
    if not isinstance(version, Mapping):
        return None
    try:
        return int(version["major"]), int(version["minor"]), int(version["micro"])
    except (KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Dialect:
    """The version-dependent behaviour of one Slurm release series.

    Parameters
    ----------
    version
        The probed version ``(major, minor, micro)`` (``(24, 11, 5)``).
    """

    version: tuple[int, int, int]

    @property
    def series(self) -> str:
        """``"22.05"``, ``"24.11"``, ``"26.05"``."""
        return f"{self.version[0]:02d}.{self.version[1]:02d}"

    @property
    def release(self) -> str:
        """``"24.11.5"``."""
        return f"{self.version[0]:02d}.{self.version[1]:02d}.{self.version[2]}"

    @property
    def squeue_json(self) -> bool:
        """``squeue``/``sinfo``/``sacct`` accept ``--json`` (22.05 and later)."""
        return self.version[:2] >= (22, 5)

    @property
    def scontrol_json(self) -> bool:
        """``scontrol show ... --json`` exists (23.02 and later)."""
        return self.version[:2] >= (23, 2)

    @property
    def json_numbers_wrapped(self) -> bool:
        """JSON numbers come as ``{"set", "infinite", "number"}`` objects (23.02 and later)."""
        return self.version[:2] >= (23, 2)

    @property
    def job_state_is_list(self) -> bool:
        """``squeue --json`` gives ``job_state`` as a list of flags (23.02 and later)."""
        return self.version[:2] >= (23, 2)

    def resizes_allowed(self, accounting: str) -> int | None:
        """How many times a job may be resized with ``AccountingStorageType=accounting``.

        ``None`` means any number. Slurm 22.05 without slurmdbd: once.
        """
        if self.version[:2] <= (22, 5) and not accounting.endswith("slurmdbd"):
            return 1
        return None

    def reconfigure_after_nodelist_shrink(self, select_type: str) -> bool:
        """Whether slurmctld must be reconfigured right after a ``NodeList=`` shrink.

        Only Slurm 22.05 (and older) with ``select/linear`` needs it (see the module docstring);
        24.11 and 26.05 ran later jobs on released nodes without it.
        """
        return self.version[:2] <= (22, 5) and select_type == "select/linear"

    def update_error_is_transient(self, stderr: str) -> bool:
        """True if a failed ``scontrol update`` is worth retrying.

        The DB-index message is transient with slurmdbd on every version, and permanent in
        22.05 without it; callers that know the accounting use :meth:`resizes_allowed`.
        """
        return DB_INDEX_MESSAGE in stderr

    def numeric(self, value: Any) -> int | None:
        """A number from this version's JSON (plain, or the 23.02+ object; unset: ``None``).

        >>> Dialect((24, 11, 5)).numeric({"set": True, "infinite": False, "number": 3})
        3
        >>> Dialect((22, 5, 8)).numeric(3), Dialect((24, 11, 5)).numeric({"set": False})
        (3, None)
        """
        if isinstance(value, Mapping):
            if not value.get("set", True) or value.get("infinite"):
                return None
            value = value.get("number")
        return None if value is None else int(value)

    def job_states(self, value: Any) -> tuple[str, ...]:
        """A job's state flags from this version's ``squeue --json`` (``("RUNNING",)``).

        >>> Dialect((24, 11, 5)).job_states(["RUNNING", "COMPLETING"])
        ('RUNNING', 'COMPLETING')
        >>> Dialect((22, 5, 8)).job_states("PENDING")
        ('PENDING',)
        """
        if isinstance(value, str):
            return (value,)
        return tuple(str(v) for v in value or ())

    def to_json(self) -> dict[str, Any]:
        """A JSON-able summary (for ``capabilities`` and the flavour tests)."""
        return {
            "version": self.release,
            "series": self.series,
            "squeue_json": self.squeue_json,
            "scontrol_json": self.scontrol_json,
            "json_numbers_wrapped": self.json_numbers_wrapped,
            "job_state_is_list": self.job_state_is_list,
            "resizes_without_slurmdbd": self.resizes_allowed("accounting_storage/none"),
            "reconfigure_after_linear_shrink": self.reconfigure_after_nodelist_shrink(
                "select/linear"
            ),
        }


def dialect_for(version: tuple[int, int, int] | str) -> Dialect:
    """The dialect of a version tuple or version text (``"slurm-wlm 24.11.5"``).

    Raises
    ------
    ValueError
        The text names no version.
    """
    if isinstance(version, str):
        version = parse_version(version)
    return Dialect(tuple(version))  # type: ignore[arg-type]


def probe_dialect(transport: Transport, timeout_s: float = 20.0) -> Dialect:
    """Ask Slurm for its version through ``transport`` and return its dialect.

    Raises
    ------
    SlurmCommandError
        ``scontrol --version`` failed.
    ValueError
        Its output names no version.
    """
    res = transport.run(["scontrol", "--version"], timeout_s=timeout_s).check()
    return dialect_for(res.stdout)


def observed_json_shape(squeue_json_text: str) -> dict[str, bool]:
    """What an ``squeue --json`` answer looks like (to check a dialect against real output).

    Returns ``{"numbers_wrapped": ..., "job_state_is_list": ...}`` from the first job, and
    ``{}`` when there is no job to look at.

    Raises
    ------
    ValueError
        The text is not JSON with a ``jobs`` list.
    """
    data = json.loads(squeue_json_text)
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        raise ValueError("squeue --json gave no jobs list")
    if not jobs:
        return {}
    job = jobs[0]
    return {
        "numbers_wrapped": isinstance(job.get("node_count"), dict),
        "job_state_is_list": isinstance(job.get("job_state"), list),
    }
