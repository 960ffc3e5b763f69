"""``elastic-slurm try``: force resizes of an elastic application on one machine, compare.

No Slurm and no controller: the program runs under plain ``mpirun`` on this machine

1. once at its starting size with no resize (the reference);
2. once per join strategy (``spawn``, ``restart``) with forced resizes: each size of the
   plan ordered a few resize points after the last (:mod:`.local`, which also checks every
   registered array across every resize and the arrays' shapes at every resize point).

Each run is driven by :class:`~.local_launcher.LocalLauncher`, the Slurm job's launcher
(:mod:`.launcher`) with this machine standing in for the nodes: ranks sit on virtual nodes
``local1..localN``, restarts go through the same waiting successor and checkpoint, spawns
through the same ``MPI_Comm_spawn``. Shrinks are always restarts (as on a cluster: Open MPI
4.1 cannot let go of a daemon), so with ``spawn`` only the grows spawn.

The resized runs' results are compared with the reference's: the last line of standard
output by default, all of it, or a file the program writes (:func:`compare`). Numbers are
compared with a relative tolerance (the sum of a global reduction may round differently at
another rank count); everything else exactly.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic_slurm import envvars
from elastic_slurm.errors import ElasticSlurmError, InvalidRequest
from elastic_slurm.mpi_runtime.local import RECORD
from elastic_slurm.mpi_runtime.local_launcher import LocalLauncher, local_env
from elastic_slurm.mpi_runtime.probe import ENDED_BEFORE_JOIN
from elastic_slurm.protocol.jobdir import JobDir

STRATEGIES = ("spawn", "restart")


# ---------------------------------------------------------------------------- one run
@dataclass
class RunResult:
    """What one run did: its label, exit status, sizes, checks, output and result."""

    label: str
    returncode: int
    seconds: float
    sizes: list[int]
    planned: int
    resizes: int
    records: list[dict[str, Any]]
    stdout: str
    stderr: str
    result: str | None
    timed_out: bool = False
    failed_orders: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    verdict: str = ""

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems


def _records(jobdir: JobDir) -> list[dict[str, Any]]:
    path = jobdir.path / RECORD
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


_ERROR_LINE = re.compile(r"^([A-Za-z_]\w*\.)*[A-Za-z_]\w*(Error|Exception|Failed|Ranks): ")


def explain_failure(stderr: str) -> str:
    r"""The line of ``stderr`` that says best why a run failed.

    The check's own line, else the last Python exception line, else the first line that is
    neither the runtime's progress nor ``mpirun``'s frame of dashes.

    >>> explain_failure("x\nTraceback...\nValueError: bad\nmpirun noticed...")
    'ValueError: bad'
    """
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("elastic-slurm try: check failed:"):
            return ln.removeprefix("elastic-slurm try: ")
    errors = [ln for ln in lines if _ERROR_LINE.match(ln)]
    if errors:
        return errors[-1]
    # the first line that is neither the runtime's progress nor mpirun's frame
    said = [ln for ln in lines if not ln.startswith("elastic-slurm") and set(ln) != {"-"}]
    return said[0] if said else "(no error on standard error)"


def run_once(
    program: Sequence[str],
    *,
    label: str,
    ranks: int,
    plan: Sequence[int],
    every: int,
    strategy: str | None,
    workdir: Path,
    results: str | None,
    env: Mapping[str, str],
    timeout_s: float,
) -> RunResult:
    """Run ``program`` once from ``ranks`` ranks through the sizes of ``plan`` (collects all).

    ``results`` names the file the program writes (relative to the current directory); it is
    removed before the run and copied into ``workdir`` after it.
    """
    jobdir = JobDir(workdir / label)
    if jobdir.path.exists():
        shutil.rmtree(jobdir.path)
    jobdir.create()
    run_env = dict(env)
    run_env.update(envvars.names(local_try=json.dumps({"plan": list(plan), "every": every})))
    if strategy:
        run_env.update(envvars.names(join=strategy))
    if results:
        Path(results).unlink(missing_ok=True)
    launcher = LocalLauncher(program, ranks=ranks, jobdir=jobdir, env=run_env, timeout_s=timeout_s)
    t0 = time.monotonic()
    rc = launcher.run()
    seconds = time.monotonic() - t0
    outs = sorted(launcher.outputs)
    stdout = "".join(p.read_text(errors="replace") for _, p, _ in outs)
    stderr = "".join(e.read_text(errors="replace") for _, _, e in outs)
    records = _records(jobdir)
    failed = [
        f"order {e.get('seq')} failed: {e.get('reason', '')}"
        + (
            "; give it more resize points after the order (lower --every)"
            if e.get("reason") == ENDED_BEFORE_JOIN
            else ""
        )
        for e in jobdir.events()
        if e.get("event") == "failed"
    ]
    checked = [r for r in records if r["event"] == "checked"]
    result: str | None
    if results:
        path = Path(results)
        result = None
        if path.exists():
            shutil.copy(path, jobdir.path / "results")
            data = path.read_bytes()
            try:
                result = data.decode()
            except UnicodeDecodeError:  # a binary file (.npy...): compared exactly
                result = (
                    f"binary file of {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}"
                )
    else:
        result = stdout
    return RunResult(
        label=label,
        returncode=rc,
        seconds=seconds,
        sizes=[ranks, *[int(r["ranks"]) for r in checked]],
        planned=len(plan),
        resizes=len(checked),
        records=records,
        stdout=stdout,
        stderr=stderr,
        result=result,
        timed_out=launcher.timed_out,
        failed_orders=failed,
    )


# ---------------------------------------------------------------------------- comparing
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)\b")


def pick(text: str, mode: str, match: str | None = None) -> str:
    r"""The part of a run's output that is compared: ``last-line`` or ``all``.

    With ``match`` (a regular expression), only what it matches there, one match a line.

    >>> pick("step 1\nresult 3.5\n\n", "last-line")
    'result 3.5'
    >>> pick('{"ranks": 4, "sum": 2.5, "seconds": 0.1}', "last-line", r'"sum": \S+')
    '"sum": 2.5,'
    """
    if mode != "all":
        lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
        text = lines[-1] if lines else ""
    if match:
        text = "\n".join(m.group(0) for m in re.finditer(match, text))
    return text


def compare(reference: str, other: str, rtol: float) -> str | None:
    """``None`` when ``other`` matches ``reference``, else where they first differ (one line).

    Numbers must agree within ``rtol`` (relative; at least 1e-300 absolute), the text around
    them exactly.

    >>> compare("norm 1.0000000001", "norm 1.0", 1e-9) is None
    True
    >>> compare("norm 1.5 after 10", "norm 1.25 after 10", 1e-9)
    'number 1 differs: 1.5 (unresized) vs 1.25'
    >>> print(compare("sum 3, hosts a", "sum 3, hosts a b", 1e-9))
    line 1 differs at character 15: 'sum #, hosts a' (unresized) vs 'sum #, hosts a b'
    """
    ref_nums = _NUMBER.findall(reference)
    new_nums = _NUMBER.findall(other)
    ref_text = _NUMBER.sub("#", reference)
    new_text = _NUMBER.sub("#", other)
    if ref_text != new_text or len(ref_nums) != len(new_nums):
        a = ref_text.splitlines() or [""]
        b = new_text.splitlines() or [""]
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                at = next((k for k, (c, d) in enumerate(zip(x, y, strict=False)) if c != d), None)
                at = min(len(x), len(y)) if at is None else at
                start = max(0, at - 20)
                cut = "..." if start else ""
                return (
                    f"line {i + 1} differs at character {at + 1}: "
                    f"{cut + x[start : at + 40]!r} (unresized) vs {cut + y[start : at + 40]!r}"
                )
        return f"{len(a)} line(s) (unresized) vs {len(b)}"
    for i, (x, y) in enumerate(zip(ref_nums, new_nums, strict=True)):
        fx, fy = float(x), float(y)
        if math.isnan(fx) and math.isnan(fy):
            continue
        if not math.isclose(fx, fy, rel_tol=rtol, abs_tol=1e-300):
            return f"number {i + 1} differs: {x} (unresized) vs {y}"
    return None


def judge(
    run: RunResult,
    reference: RunResult | None,
    mode: str,
    rtol: float,
    match: str | None = None,
) -> None:
    """Fill ``run.problems`` and ``run.verdict`` (against ``reference``; ``None``: it is one)."""
    problems = run.problems
    done = {r["seq"] for r in run.records if r["event"] == "checked"}
    open_orders = [r["seq"] for r in run.records if r["event"] == "order" and r["seq"] not in done]
    if run.timed_out:
        why = "timed out (a hang: ranks waiting for each other?)"
        if open_orders:
            why = (
                f"timed out with order {open_orders[0]} under way: a resize point after it is "
                "not reached by every rank, or the program waits for something else"
            )
        error = explain_failure(run.stderr)
        if _ERROR_LINE.match(error) or error.startswith("check failed"):
            why = f"timed out after {error}"
        problems.append(why)
    elif run.returncode != 0:
        problems.append(f"exit status {run.returncode}: {explain_failure(run.stderr)}")
    for rec in run.records:
        if rec["event"] == "checked" and rec.get("changed"):
            problems.append(
                f"order {rec['seq']} ({rec['strategy']}): array(s) {', '.join(rec['changed'])} "
                "changed across the resize"
            )
    problems.extend(run.failed_orders)
    if not problems and run.resizes < run.planned:
        problems.append(
            f"only {run.resizes} of {run.planned} resize(s) happened before the program ended: "
            "it needs more resize points (lower --every)"
        )
    if reference is not None and not problems:
        if run.result is None or reference.result is None:
            problems.append("no results file was written")
        elif match and not pick(reference.result, mode, match):
            problems.append(f"--match {match!r} matches nothing in the unresized run's output")
        else:
            why = compare(pick(reference.result, mode, match), pick(run.result, mode, match), rtol)
            if why:
                problems.append(
                    f"results differ from the unresized run: {why} (compare only the result "
                    "with --match REGEX or --results FILE)"
                )
    run.verdict = "PASS" if not problems else "FAIL"


def unchanged_notes(run: RunResult) -> list[str]:
    """Warnings: arrays whose data did not change between two resizes; no spawn in a spawn run."""
    notes = []
    strategies = [r.get("strategy") for r in run.records if r["event"] == "checked"]
    if run.label == "spawn" and strategies and "spawn" not in strategies:
        notes.append(
            "spawn: no grow spawned (the runtime chose restart here: its reason is in "
            "generation-0.err), so this run tried restarts only"
        )
    for rec in run.records:
        if rec["event"] == "checked" and rec.get("unchanged"):
            notes.append(
                f"{run.label}: array(s) {', '.join(rec['unchanged'])} held the same data at order "
                f"{rec['seq']} as after the resize before: does the program update them "
                "(name.local), or compute on a copy?"
            )
    return notes


def table(runs: Sequence[RunResult]) -> str:
    """The pass/fail table, one run a row."""
    rows = [("run", "ranks", "resizes", "arrays", "seconds", "verdict")]
    for run in runs:
        arrays = "-"
        checked = [r for r in run.records if r["event"] == "checked"]
        if checked:
            arrays = "ok" if not any(r.get("changed") for r in checked) else "CHANGED"
        rows.append(
            (
                run.label,
                "->".join(str(n) for n in run.sizes),
                f"{run.resizes}/{run.planned}" if run.planned else "-",
                arrays,
                f"{run.seconds:.1f}",
                run.verdict,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


# ---------------------------------------------------------------------------- the command
def plan_sizes(start: int, grow_to: int | None, shrink_to: int | None) -> list[int]:
    """The sizes to resize to: grow first, then shrink (either may be left out).

    >>> plan_sizes(2, 4, 1)
    [4, 1]

    Raises
    ------
    InvalidRequest
        A grow that does not grow, a shrink that does not shrink, or neither.
    """
    sizes: list[int] = []
    current = start
    if grow_to is not None:
        if grow_to <= current:
            raise InvalidRequest(f"--grow-to {grow_to} must be more than --np {start}")
        sizes.append(grow_to)
        current = grow_to
    if shrink_to is not None:
        if not 1 <= shrink_to < current:
            raise InvalidRequest(f"--shrink-to {shrink_to} must be 1 to {current - 1}")
        sizes.append(shrink_to)
    if not sizes:
        raise InvalidRequest("nothing to try: give --grow-to and/or --shrink-to")
    return sizes


def try_program(
    program: Sequence[str],
    *,
    ranks: int = 2,
    sizes: Sequence[int] = (4, 1),
    every: int = 3,
    strategies: Sequence[str] = STRATEGIES,
    compare_mode: str = "last-line",
    results: str | None = None,
    match: str | None = None,
    rtol: float = 1e-9,
    timeout_s: float = 120.0,
    point_timeout_s: float = 20.0,
    workdir: Path | None = None,
    out: Any = None,
) -> tuple[bool, list[RunResult]]:
    """Run the reference and the resized runs, print the table; ``(all passed, runs)``.

    Raises
    ------
    ElasticSlurmError
        ``mpirun`` is not installed.
    InvalidRequest
        An unknown strategy or compare mode.
    """
    out = out or sys.stdout
    if shutil.which("mpirun") is None:
        raise ElasticSlurmError("mpirun is not installed: install Open MPI (openmpi-bin)")
    for s in strategies:
        if s not in STRATEGIES:
            raise InvalidRequest(f"unknown strategy {s!r}: use spawn, restart or both")
    if compare_mode not in ("last-line", "all"):
        raise InvalidRequest(f"unknown --compare {compare_mode!r}: use last-line or all")
    if match:
        try:
            re.compile(match)
        except re.error as exc:
            raise InvalidRequest(f"--match {match!r} is not a regular expression: {exc}") from exc
    workdir = Path(workdir or Path.cwd() / ".elastic-slurm" / "try").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    env = local_env(os.environ, point_timeout_s=point_timeout_s)
    common = dict(every=every, workdir=workdir, results=results, env=env, timeout_s=timeout_s)
    print(f"elastic-slurm try: unresized run at {ranks} rank(s)...", file=out, flush=True)
    reference = run_once(program, label="unresized", ranks=ranks, plan=[], strategy=None, **common)
    judge(reference, None, compare_mode, rtol)
    runs = [reference]
    if reference.ok:
        for strategy in strategies:
            path = "->".join(str(n) for n in [ranks, *sizes])
            print(f"elastic-slurm try: {strategy} run {path}...", file=out, flush=True)
            run = run_once(
                program, label=strategy, ranks=ranks, plan=sizes, strategy=strategy, **common
            )
            judge(run, reference, compare_mode, rtol, match)
            runs.append(run)
    print(table(runs), file=out)
    for run in runs:
        for problem in run.problems:
            print(f"{run.label}: {problem}", file=out)
        for note in unchanged_notes(run):
            print(f"note: {note}", file=out)
    if not reference.ok:
        print("the unresized run failed, so no resized run was tried", file=out)
    print(f"outputs and records: {workdir}", file=out, flush=True)
    return all(r.ok for r in runs), runs
