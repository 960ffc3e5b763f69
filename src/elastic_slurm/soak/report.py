"""The soak's result, its table, and what makes it fail.

A soak fails (:func:`failures` is not empty; the command exits 1) when a trace job or a resize
is lost, an allocation is leaked, a scheduled fault was not injected, a fault's check did not
hold (the bait outside a hostile directory changed, the controller stopped serving or died
during an outage), or the controller exited without being killed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from elastic_slurm.soak.accounting import JobCount, ResizeCount
from elastic_slurm.soak.inject import FaultRecord


@dataclass
class SoakResult:
    """Everything a soak measured (times in seconds, memory in bytes, CPU in % of one core)."""

    nodes: int
    window_s: float
    trace: str
    compress: float
    jobs: JobCount
    misbehaving: dict[int, str]  # job id -> final state
    resizes: ResizeCount
    leaked: dict[str, str]
    cycle_p50_s: float | None
    cycle_p99_s: float | None
    cycles: int
    peak_rss_bytes: int
    idle_cpu_pct: float | None
    idle_window_s: float
    kills: int
    unexpected_exits: list[int]
    faults: list[FaultRecord]
    submit_retries: int = 0
    failed_starts: int = 0
    lost_reasons: dict[int, str] = field(default_factory=dict)  # job id -> its output's error
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (with :func:`failures` under ``failures``)."""
        data = asdict(self)
        data["jobs"] = {
            "completed": len(self.jobs.completed),
            "lost": {str(k): v for k, v in self.jobs.lost.items()},
            "ended_in_outage": {str(k): v for k, v in self.jobs.ended_in_outage.items()},
        }
        data["faults"] = [
            {
                "name": r.fault.name,
                "at_s": r.fault.at_s,
                "duration_s": r.fault.duration_s,
                "injected": r.injected,
                "ok": r.ok,
                "notes": r.notes,
                "job_ids": r.job_ids,
            }
            for r in self.faults
        ]
        data["failures"] = failures(self)
        return data


def failures(r: SoakResult) -> list[str]:
    """Why the soak failed, one line each (empty: it passed)."""
    out = []
    if r.jobs.lost:
        out.append(f"{len(r.jobs.lost)} job(s) lost: {_short(r.jobs.lost)}")
    if r.resizes.lost:
        out.append(f"{len(r.resizes.lost)} resize(s) lost (still open): {list(r.resizes.lost)}")
    if r.leaked:
        out.append(f"{len(r.leaked)} allocation(s) leaked: {_short(r.leaked)}")
    for f in r.faults:
        if not f.injected:
            out.append(f"fault {f.fault.name} was not injected: {'; '.join(f.notes)}")
        elif f.ok is not True:
            out.append(f"fault {f.fault.name} did not hold: {'; '.join(f.notes)}")
    if r.unexpected_exits:
        out.append(
            f"the controller exited {len(r.unexpected_exits)} time(s) unasked: "
            f"status {r.unexpected_exits}"
        )
    return out


def _short(d: dict[Any, Any], n: int = 8) -> str:
    items = [f"{k}: {v}" for k, v in list(d.items())[:n]]
    return ", ".join(items) + (f", ... ({len(d) - n} more)" if len(d) > n else "")


def _ms(s: float | None) -> str:
    return "n/a" if s is None else f"{1000 * s:.0f} ms"


def table(r: SoakResult) -> str:
    """The soak's table (Markdown, so it pastes into ``docs/soak.md``)."""
    rolled = sum(r.resizes.rolled_back.values())
    by = ", ".join(f"{k} {v}" for k, v in r.resizes.rolled_back.items())
    cycle_note = (
        f"{_ms(r.cycle_p50_s)} / {_ms(r.cycle_p99_s)} ({r.cycles} cycles)"
        if r.cycles
        else "n/a (the controller served no `elastic_slurm_cycle_seconds`)"
    )
    rows = [
        (
            "cluster",
            f"{r.nodes} nodes, {r.window_s / 60:g} min of arrivals, {r.trace} "
            f"compressed {r.compress:.0f}x, {r.wall_s / 60:.1f} min in all",
        ),
        ("trace jobs completed", str(len(r.jobs.completed))),
        (
            "trace jobs ended well during the slurmctld outage (Slurm: TIMEOUT)",
            str(len(r.jobs.ended_in_outage))
            + (
                f" ({', '.join(map(str, r.jobs.ended_in_outage))})"
                if r.jobs.ended_in_outage
                else ""
            ),
        ),
        (
            "trace jobs lost",
            str(len(r.jobs.lost)) + (f" ({_short(r.jobs.lost)})" if r.jobs.lost else ""),
        ),
        ("misbehaving jobs (ended)", _short(r.misbehaving) or "none"),
        ("resizes done", str(r.resizes.done)),
        ("resizes rolled back / not done", f"{rolled}" + (f" ({by})" if by else "")),
        ("resizes lost", str(len(r.resizes.lost))),
        ("allocations leaked", str(len(r.leaked)) + (f" ({_short(r.leaked)})" if r.leaked else "")),
        ("controller cycle time p50 / p99", cycle_note),
        ("controller peak memory (VmHWM)", f"{r.peak_rss_bytes / 2**20:.0f} MiB"),
        (
            "controller CPU while idle",
            "n/a"
            if r.idle_cpu_pct is None
            else f"{r.idle_cpu_pct:.1f} % of one core over {r.idle_window_s:g} s",
        ),
        (
            "controller SIGKILLs / unasked exits / failed starts",
            f"{r.kills} / {len(r.unexpected_exits)} / {r.failed_starts}",
        ),
    ]
    for f in r.faults:
        verdict = "not injected" if not f.injected else ("held" if f.ok else "DID NOT HOLD")
        rows.append(
            (f"fault {f.fault.name} (t={f.fault.at_s:.0f} s)", f"{verdict}: {'; '.join(f.notes)}")
        )
    for job_id, why in r.lost_reasons.items():
        rows.append((f"lost job {job_id}", why))
    for job_id, seen in r.jobs.ended_in_outage.items():
        rows.append((f"job {job_id} (ended during the outage)", seen))
    width = max(len(k) for k, _ in rows)
    lines = [f"| {'':{width}} | |", f"|{'-' * (width + 2)}|---|"]
    lines += [f"| {k:{width}} | {v.replace('|', '/')} |" for k, v in rows]
    return "\n".join(lines)
