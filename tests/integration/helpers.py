"""Helpers for tests against the real local cluster: what Slurm itself reports."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from elastic_slurm.adapter.hostlist import expand

T = TypeVar("T")


def scontrol_job(job_id: int) -> dict[str, str]:
    """``scontrol --oneliner show job`` as a dict, straight from Slurm (no project parser).

    A failure other than "Invalid job id" is asked again twice, 0.5 s apart: slurmctld
    sometimes refuses one request with "Protocol authentication error" (seen once here, its
    MUNGE decode failing), and a test must not fail on that.
    """
    for attempt in range(3):
        res = subprocess.run(
            ["scontrol", "--oneliner", "show", "job", str(job_id)],
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode == 0 or "Invalid job id" in res.stderr or attempt == 2:
            break
        time.sleep(0.5)
    res.check_returncode()
    out = res.stdout
    fields: dict[str, str] = {}
    for word in out.split():
        if "=" in word:
            k, v = word.split("=", 1)
            fields.setdefault(k, v)
    return fields


def scontrol_nodes(job_id: int) -> tuple[str, ...]:
    """The job's nodes according to ``scontrol show job`` (expanded)."""
    return expand(scontrol_job(job_id)["NodeList"])


def sacct_sizes(job_id: int) -> list[tuple[str, int, str]]:
    """(state, nnodes, nodelist) of each allocation record of the job in accounting."""
    out = subprocess.run(
        [
            "sacct",
            "-j",
            str(job_id),
            "-X",
            "--noheader",
            "--parsable2",
            "--format=JobID,State,NNodes,NodeList",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = []
    for line in out.splitlines():
        jid, state, nn, nl = line.split("|")
        if jid == str(job_id):
            rows.append((state.split()[0], int(nn), nl))
    return rows


def wait(check: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll ``check`` every 0.2 s until truthy; fail the test with ``what`` on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def job_state(job_id: int) -> str:
    """The job's state from ``scontrol`` (``RUNNING``, ``COMPLETED``...)."""
    return scontrol_job(job_id)["JobState"]


def pids_in_node(node: str) -> list[str]:
    """Command lines of processes inside a local-cluster node's network namespace."""
    target = os.stat(f"/run/netns/es-{node}").st_ino
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.stat(entry / "ns" / "net").st_ino == target:
                    found.append((entry / "cmdline").read_text().replace("\0", " ").strip())
            except OSError:
                continue
    return found


def all_idle() -> bool:
    """True when every node of the cluster is idle (nothing left allocated)."""
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, check=True
    ).stdout
    return all(line.split()[1] == "idle" for line in out.splitlines() if line.strip())


def squeue_jobs() -> list[tuple[int, str, str, str]]:
    """(id, name, state, nodelist) of every job, straight from ``squeue`` (no project parser)."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i|%j|%T|%N"], capture_output=True, text=True, check=True
    ).stdout
    rows = []
    for line in out.splitlines():
        jid, name, state, nodes = line.split("|")
        if jid.isdigit():  # job arrays show as 12_[3-9]: not jobs of their own here
            rows.append((int(jid), name, state, nodes))
    return rows


def slurm_held(job_id: int) -> set[str]:
    """Nodes of the job and of its running ``sibling:<job>`` allocations, from ``squeue``."""
    held: set[str] = set()
    for jid, name, state, nodes in squeue_jobs():
        if state == "RUNNING" and (jid == job_id or name == f"sibling:{job_id}"):
            held |= set(expand(nodes))
    return held


def helpers_alive(job_id: int) -> list[int]:
    """Pending or running expander/sibling allocations of the job, from ``squeue``."""
    return [
        jid
        for jid, name, state, _ in squeue_jobs()
        if name in (f"expand:{job_id}", f"sibling:{job_id}")
        and state in ("PENDING", "RUNNING", "CONFIGURING")
    ]
