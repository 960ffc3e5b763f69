"""The integration set run against each cluster flavour: a flavour x check table.

Every check drives the flavour's real Slurm with elastic-slurm's own code, exactly as a user's
commands do: the site's backend (:func:`~elastic_slurm.adapter.factory.slurm_for`; for a chroot
flavour its commands run inside the chroot), :func:`elastic_slurm.api.submit` and the elastic
launcher with the flavour's own Python, Open MPI and mpi4py:

- ``probe``: the capabilities probe and the dialect chosen from the probed version;
- ``submit``: a malleable 2-node mpi4py job under ``elastic-slurm run``, its ranks on 2 hosts;
- ``shrink``: a 4-node job shrunk to 3 then 2 nodes (``SlurmBackend.shrink``);
- ``grow-merge``: a 1-node job grown to 2 then 3 nodes by merge (expander allocations), its job
  id kept (skipped where the probe finds merges impossible);
- ``grow-sibling``: a 1-node job grown to 3 by sibling allocations, then shrunk back to 1;
- ``array``: a 4-task job array with at most 2 running, every task's output present;
- ``elastic-app``: the demo (:mod:`elastic_slurm.demo.scenario`): heat2d as a malleable job,
  grown 2->4 and shrunk 4->2 by the controller's policy, its result compared with a rigid run
  (tolerance 1e-12) and no node left allocated;
- ``spawn-join``: heat2d started on 1 node with ``ELASTIC_SLURM_JOIN=spawn``, grown to 3 nodes
  (by the grow path of the ``probe`` check, by sibling when it did not run) and joined by
  ``MPI_Comm_spawn`` onto the added nodes (the spawn info of the flavour's Open MPI,
  :func:`~elastic_slurm.mpi_runtime.probe.spawn_info`), its result compared with the serial
  computation. On Open MPI 4.1 spawning is the automatic choice for this layout; on 5 and 6
  it is the option a user can ask for.

Each resize's wall time is recorded (``timings``). Jobs a check submitted are cancelled after
it; files go to ``<state_dir>/matrix``, visible at the same path inside a chroot.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from elastic_slurm import api
from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.capabilities import Capabilities, probe
from elastic_slurm.adapter.factory import job_python, slurm_for
from elastic_slurm.cluster.local import LocalCluster
from elastic_slurm.errors import ElasticSlurmError
from elastic_slurm.model.request import ElasticRequest, JobKind
from elastic_slurm.model.resize_order import AckStatus, ResizeAction, ResizeOrder
from elastic_slurm.model.snapshot import JobState
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.resources import example

CHECKS = (
    "probe",
    "submit",
    "shrink",
    "grow-merge",
    "grow-sibling",
    "array",
    "elastic-app",
    "spawn-join",
)

_MPI_APP = """\
from elastic_slurm.mpi_runtime import init

ec = init()
hosts = sorted(set(ec.hosts()))
if ec.rank == 0:
    print(f"MATRIX ranks={ec.size} hosts={','.join(hosts)} sum={ec.comm.allreduce(1)}")
else:
    ec.comm.allreduce(1)
"""


class CheckFailed(Exception):
    """A check saw Slurm or the job do something else than expected (the message says what)."""


class CheckSkipped(Exception):
    """A check does not apply to this flavour (the message says why)."""


@dataclass
class CheckResult:
    """One cell of the table: ``ok`` is True, False, or ``None`` when skipped."""

    flavour: str
    check: str
    ok: bool | None
    seconds: float
    detail: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            "flavour": self.flavour,
            "check": self.check,
            "ok": self.ok,
            "seconds": round(self.seconds, 2),
            "detail": self.detail,
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }


class _Context:
    """What the checks share: the backend, the site, a work directory, the jobs to cancel."""

    def __init__(self, cluster: LocalCluster, workdir: Path) -> None:
        self.site = cluster.site
        self.slurm: SlurmBackend = slurm_for(cluster.site)
        self.python = job_python(cluster.site)
        self.workdir = workdir
        self.jobs: list[int] = []
        self.caps: Capabilities | None = None

    def submit(self, name: str, program: Sequence[str], kind: JobKind, **kw: Any) -> int:
        start = kw.pop("nodes_start", None)
        pattern = f"{name}-%A_%a.out" if kw.get("array") else f"{name}-%j.out"
        req = ElasticRequest(
            program=tuple(program),
            kind=kind,
            walltime=timedelta(minutes=5),
            job_name=f"matrix-{name}",
            nodes_start=start,
            **kw,
        )
        job = api.submit(
            req,
            self.slurm,
            workdir=self.workdir,
            output=str(self.workdir / pattern),
            python=self.python,
            mpi_env=self.site.mpi_env,
        )
        self.jobs.append(job)
        return job

    def wait(self, what: str, pred: Callable[[], bool], timeout_s: float = 60) -> float:
        t0 = time.monotonic()
        while not pred():
            if time.monotonic() - t0 > timeout_s:
                raise CheckFailed(f"timed out after {timeout_s:.0f} s waiting for {what}")
            time.sleep(0.2)
        return time.monotonic() - t0

    def state(self, job: int) -> JobState | None:
        rec = self.slurm.job(job)
        return None if rec is None else rec.model_state

    def running(self, job: int) -> None:
        self.wait(f"job {job} to run", lambda: self.state(job) is JobState.RUNNING)

    def ended(self, job: int, timeout_s: float = 90) -> float:
        return self.wait(
            f"job {job} to end",
            lambda: self.state(job) not in (JobState.PENDING, JobState.RUNNING),
            timeout_s,
        )

    def all_idle(self) -> None:
        """Wait until every node is idle: the last check's jobs may still be completing."""
        self.wait(
            "all nodes idle",
            lambda: all(n.model_state.value == "idle" for n in self.slurm.nodes()),
        )

    def sleeper(self, name: str, nodes: int) -> int:
        # a sleeper placed around nodes still completing (on n4 with n1-n3 about to be idle)
        # cannot be grown by merge, which is refused then
        self.all_idle()
        job = self.submit(name, ("sleep", "300"), JobKind.RIGID, nodes_min=nodes, nodes_max=nodes)
        self.running(job)
        return job

    def cleanup(self) -> None:
        for job in self.jobs:
            try:
                self.slurm.cancel_job(job)
            except ElasticSlurmError:
                pass
        self.jobs.clear()


def _probe(c: _Context, timings: dict[str, float]) -> str:
    dialect = c.slurm.dialect()
    c.caps = probe(c.slurm.transport, preference=c.site.grow_path)
    if c.caps.dialect.get("series") != dialect.series:
        raise CheckFailed(f"backend dialect {dialect.series} but probe {c.caps.dialect}")
    return (
        f"Slurm {dialect.release} (dialect {dialect.series}); {c.caps.mpi}; grow path "
        f"{c.caps.grow_path}; resizes: {c.caps.resizes_per_job}"
    )


def _submit(c: _Context, timings: dict[str, float]) -> str:
    app = c.workdir / "matrix_app.py"
    app.write_text(_MPI_APP)
    job = c.submit(
        "submit", (str(app),), JobKind.MALLEABLE, nodes_min=1, nodes_max=4, nodes_start=2
    )
    timings["run"] = c.ended(job)
    out = c.workdir / f"submit-{job}.out"
    text = out.read_text(errors="replace") if out.exists() else "(no output file)"
    lines = [ln for ln in text.splitlines() if ln.startswith("MATRIX ")]
    if not lines or "ranks=2" not in lines[0] or "sum=2" not in lines[0]:
        raise CheckFailed(f"expected 2 ranks summing to 2; output ends:\n{text[-800:]}")
    hosts = lines[0].split("hosts=")[1].split()[0].split(",")
    if len(hosts) != 2:
        raise CheckFailed(f"expected ranks on 2 hosts: {lines[0]}")
    return f"elastic-slurm run: 2 ranks on {', '.join(hosts)}"


def _shrink(c: _Context, timings: dict[str, float]) -> str:
    job = c.sleeper("shrink", 4)
    rec = c.slurm.job(job)
    assert rec is not None
    first = [rec.batch_host] if rec.batch_host else []
    order = first + [n for n in rec.nodes if n not in first]
    for size in (3, 2):
        t = time.monotonic()
        after = c.slurm.shrink(job, order[:size])
        timings[f"to{size}"] = time.monotonic() - t
        if len(after) != size:
            raise CheckFailed(f"shrunk to {size} nodes but Slurm reports {list(after)}")
    return f"4 -> 3 -> 2 nodes ({'+'.join(order[:2])})"


def _grow(c: _Context, timings: dict[str, float], path: str) -> str:
    if path == "merge" and c.caps is not None and c.caps.grow_path != "merge":
        raise CheckSkipped(f"merges are not possible here: {c.caps.grow_path_reason}")
    job = c.sleeper(f"grow-{path}", 1)
    for _ in range(5 if path == "merge" else 0):
        # a merge cannot bring in idle nodes ahead of the batch host: a sleeper Slurm placed
        # on n4 while n1-n3 were still being released (seen in CI on trixie, with every node
        # already reported idle) is started again instead of failing the check
        if c.slurm.merge_room(job) >= 2:
            break
        c.slurm.cancel_job(job)
        c.ended(job)  # then the sleeper waits until every node is idle again
        job = c.sleeper(f"grow-{path}", 1)
    for size in (2, 3):
        t = time.monotonic()
        res = c.slurm.grow(job, 1, path=path, grant_timeout_s=30)  # type: ignore[arg-type]
        timings[f"to{size}"] = time.monotonic() - t
        if len(res.nodes) != size:
            raise CheckFailed(f"grown to {size} nodes but the job holds {list(res.nodes)}")
    if c.state(job) is not JobState.RUNNING:
        raise CheckFailed(f"job {job} is no longer running after the grows")
    if path == "merge":
        rec = c.slurm.job(job)
        if rec is None or len(rec.nodes) != 3:
            raise CheckFailed(f"Slurm reports job {job} with {rec and list(rec.nodes)}")
        return f"1 -> 2 -> 3 nodes by merge; job id {job} kept"
    own = c.slurm.job(job)
    assert own is not None
    t = time.monotonic()
    after = c.slurm.shrink(job, list(own.nodes))
    timings["back_to1"] = time.monotonic() - t
    if len(after) != 1 or c.slurm.helpers(job):
        raise CheckFailed(f"after shrinking off the siblings: {list(after)}, helpers left")
    return "1 -> 2 -> 3 nodes by sibling allocations, back to 1 (siblings cancelled)"


def _array(c: _Context, timings: dict[str, float]) -> str:
    job = c.submit(
        "array",
        ("hostname",),
        JobKind.RIGID,
        nodes_min=1,
        nodes_max=1,
        array="0-3",
        array_max_running=2,
    )

    seen = {"running": 0, "throttle": set()}

    def done() -> bool:
        tasks = [j for j in c.slurm.jobs() if (j.array_job_id or j.job_id) == job]
        seen["throttle"] |= {j.array_throttle for j in tasks if j.array_throttle}
        live = [j for j in tasks if j.model_state in (JobState.PENDING, JobState.RUNNING)]
        running = sum(1 for j in live if j.model_state is JobState.RUNNING)
        seen["running"] = max(seen["running"], running)
        return not live

    timings["run"] = c.wait(f"array {job} to finish", done, 120)
    if seen["running"] > 2 or seen["throttle"] - {2}:
        raise CheckFailed(f"throttle 2 not kept: {seen}")
    outs = sorted(c.workdir.glob(f"array-{job}_*.out"))
    if len(outs) != 4:
        raise CheckFailed(f"expected 4 task outputs, found {[o.name for o in outs]}")
    return "4 tasks, at most 2 running, 4 outputs"


def _elastic_app(c: _Context, timings: dict[str, float]) -> str:
    from elastic_slurm.demo.scenario import Demo, DemoOptions

    workdir = c.workdir / "elastic-app"
    workdir.mkdir(exist_ok=True)
    # the demo waits for jobs still completing, but not for their nodes: on trixie its
    # expander once waited 30 s for nodes the array check had just used, and was withdrawn
    c.all_idle()
    result = Demo(c.site, DemoOptions(workdir=workdir, timeout_s=300), say=lambda _m: None).run()
    for r in result.resizes:
        timings[f"{r['action']}{r['from']}to{r['to']}"] = r["seconds"]
    if result.node_counts != [2, 4, 2]:
        raise CheckFailed(f"heat2d's sizes were {result.node_counts}, expected [2, 4, 2]")
    if not result.result_matches_rigid or result.leaked_nodes:
        raise CheckFailed(
            f"max abs error {result.max_abs_error} (tolerance 1e-12), "
            f"{result.leaked_nodes} node(s) left allocated"
        )
    how = {r["strategy"] for r in result.resizes}
    return f"heat2d 2 -> 4 -> 2 nodes via {'/'.join(sorted(how))}, result equals the rigid run"


def _spawn_join(c: _Context, timings: dict[str, float]) -> str:
    path = c.caps.grow_path if c.caps is not None else "sibling"
    program = [str(example("heat2d.py")), "--n", "256", "--iterations", "1500", "--check"]
    job = c.submit(
        "spawn-join",
        [*program, "--pace-s", "0.01", "--report-every", "1000000"],
        JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=3,
        nodes_start=1,
        extra_env=(("ELASTIC_SLURM_JOIN", "spawn"),),
    )
    jobdir = JobDir.for_job(c.workdir, job)
    c.wait("heat2d to launch", lambda: any(e["event"] == "launch" for e in jobdir.events()))
    t = time.monotonic()
    grown = c.slurm.grow(job, 2, path=path, grant_timeout_s=30)  # type: ignore[arg-type]
    timings[f"grow_{path}"] = time.monotonic() - t
    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, tuple(grown.nodes), time.time()))
    t = time.monotonic()
    c.wait("the expand order to be acknowledged", lambda: jobdir.final_ack(1) is not None, 120)
    timings["join"] = time.monotonic() - t
    ack = jobdir.final_ack(1)
    assert ack is not None
    if ack.status is not AckStatus.DONE or ack.strategy != "spawn" or ack.ranks != 3:
        raise CheckFailed(f"expand acknowledged as {ack.status.value} by {ack.strategy}: {ack}")
    timings.update({f"{k}_phase": v for k, v in ack.phases_s.items()})
    c.ended(job, timeout_s=180)
    out = c.workdir / f"spawn-join-{job}.out"
    text = out.read_text(errors="replace") if out.exists() else "(no output file)"
    summaries = [ln for ln in text.splitlines() if ln.startswith("{")]
    summary = json.loads(summaries[-1]) if summaries else {}
    if summary.get("matches_reference") is not True or summary.get("ranks") != 3:
        raise CheckFailed(
            f"expected heat2d to end on 3 ranks with the serial result; output ends:\n{text[-800:]}"
        )
    return f"heat2d 1 -> 3 nodes by {path} + MPI_Comm_spawn, result equals the serial one"


_RUNNERS: dict[str, Callable[[_Context, dict[str, float]], str]] = {
    "probe": _probe,
    "submit": _submit,
    "shrink": _shrink,
    "grow-merge": lambda c, t: _grow(c, t, "merge"),
    "grow-sibling": lambda c, t: _grow(c, t, "sibling"),
    "array": _array,
    "elastic-app": _elastic_app,
    "spawn-join": _spawn_join,
}


def run_checks(
    flavour: str,
    cluster: LocalCluster,
    checks: Sequence[str] = CHECKS,
    progress: Callable[[str], None] = print,
) -> list[CheckResult]:
    """Run ``checks`` against ``cluster`` (which must be up); one result per check.

    A check that raises is a failure with the error as its detail; the other checks still run.

    Raises
    ------
    ValueError
        An unknown check name.
    """
    unknown = [c for c in checks if c not in _RUNNERS]
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}: choose from {', '.join(CHECKS)}")
    workdir = cluster.cfg.state_dir / "matrix"
    workdir.mkdir(parents=True, exist_ok=True)
    ctx = _Context(cluster, workdir)
    results = []
    for check in checks:
        timings: dict[str, float] = {}
        t0 = time.monotonic()
        ok: bool | None
        try:
            detail = _RUNNERS[check](ctx, timings)
            ok = True
        except CheckSkipped as exc:
            ok, detail = None, str(exc)
        except (CheckFailed, ElasticSlurmError, ValueError, OSError) as exc:
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        finally:
            ctx.cleanup()
        res = CheckResult(flavour, check, ok, time.monotonic() - t0, detail, timings)
        word = {True: "PASS", False: "FAIL", None: "skip"}[ok]
        progress(
            f"{flavour:<9} {check:<12} {word} {res.seconds:6.1f} s  {detail}"
            + (f"  {_fmt(timings)}" if timings else "")
        )
        results.append(res)
    return results


def _fmt(timings: dict[str, float]) -> str:
    return " ".join(f"{k}={v:.2f}s" for k, v in timings.items())


def table(results: Sequence[CheckResult]) -> str:
    """A flavour x check table: ``PASS 1.2s``, ``FAIL 3.0s`` or ``skip`` per cell."""
    flavours = list(dict.fromkeys(r.flavour for r in results))
    checks = list(dict.fromkeys(r.check for r in results))
    cell = {(r.flavour, r.check): r for r in results}
    width = max(13, *(len(c) + 2 for c in checks))
    lines = ["flavour   " + "".join(f"{c:<{width}}" for c in checks)]
    for fl in flavours:
        row = f"{fl:<10}"
        for c in checks:
            r = cell.get((fl, c))
            if r is None or r.ok is None:
                text = "skip"
            else:
                text = f"{'PASS' if r.ok else 'FAIL'} {r.seconds:.1f}s"
            row += f"{text:<{width}}"
        lines.append(row)
    return "\n".join(lines)
