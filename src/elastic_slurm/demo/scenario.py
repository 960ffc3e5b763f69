"""The demo scenario: a malleable heat2d job grows into idle nodes, then shrinks for a rigid job.

1. The local cluster is brought up (4 nodes) if it is not up already.
2. ``examples/heat2d.py`` is submitted as a malleable job (2-4 nodes) that starts on 2 nodes.
3. The controller, running the configured policy (Ghafoor's pending-jobs-first), expands it
   into the 2 idle nodes.
4. Once the job runs on 4 nodes, a rigid 2-node job is submitted: the same heat2d computation
   at a fixed size, whose result is the reference. It cannot start; the controller shrinks the
   malleable job back to 2 nodes, and Slurm starts the rigid job on the freed nodes.
5. Both run to their end (the controller keeps running its policy meanwhile). The demo then
   checks that no node is left allocated and compares the two results.

Nothing is left behind on failure or Ctrl-C: the demo cancels the jobs it submitted and any
expander allocation of theirs.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from elastic_slurm import api
from elastic_slurm.adapter.backend import GrowPath, SlurmBackend
from elastic_slurm.adapter.capabilities import cached_probe
from elastic_slurm.adapter.factory import job_python, slurm_for
from elastic_slurm.cluster.flavoured import make_cluster
from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.controller.actuate import ResizeOutcome
from elastic_slurm.controller.daemon import Controller
from elastic_slurm.controller.journal import Journal
from elastic_slurm.demo.timeline import Timeline
from elastic_slurm.errors import ClusterError, ElasticSlurmError, SlurmCommandError
from elastic_slurm.model.request import ElasticRequest, JobKind
from elastic_slurm.model.snapshot import NodeState
from elastic_slurm.plugins.registry import make_policy
from elastic_slurm.protocol.jobdir import SUBDIR as JOB_DIRS
from elastic_slurm.resources import example
from elastic_slurm.waiting import DeadlineExceeded, wait_for

log = logging.getLogger(__name__)

DEMO_NODES = 4
TOLERANCE = 1e-12  # absolute; Jacobi updates are the same expression at any size: 0.0 expected


@dataclass(frozen=True)
class DemoOptions:
    """Size of the computation and where its files go.

    ``n`` x ``n`` doubles, ``iterations`` Jacobi steps; ``workdir`` must be on a filesystem the
    nodes share (on the local cluster: any local directory).
    """

    workdir: Path
    n: int = 2048
    iterations: int = 1000
    timeout_s: float = 900.0


@dataclass
class DemoResult:
    """What the demo saw (the JSON summary's fields)."""

    job_id: int
    rigid_job_id: int | None
    node_counts: list[int]
    #: ``None`` when the cluster keeps no accounting (the newer flavours run without slurmdbd)
    node_counts_sacct: list[int] | None
    result_matches_rigid: bool
    max_abs_error: float | None
    leaked_nodes: int
    resize_seconds: list[float]
    #: per resize, how long the application stopped computing (``None``: not measured)
    resize_pause_seconds: list[float | None]
    resizes: list[dict[str, Any]]
    job_states: dict[str, str]
    timeline: Timeline = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        """The JSON summary (the demo's last line with ``--json``)."""
        return {
            "job_id": self.job_id,
            "rigid_job_id": self.rigid_job_id,
            "node_counts": self.node_counts,
            "node_counts_sacct": self.node_counts_sacct,
            "result_matches_rigid": self.result_matches_rigid,
            "max_abs_error": self.max_abs_error,
            "tolerance": TOLERANCE,
            "leaked_nodes": self.leaked_nodes,
            "resize_seconds": self.resize_seconds,
            "resize_pause_seconds": self.resize_pause_seconds,
            "resizes": self.resizes,
            "job_states": self.job_states,
        }


def _heat2d(opts: DemoOptions, save: Path) -> tuple[str, ...]:
    return (
        str(example("heat2d.py")),
        "--n",
        str(opts.n),
        "--iterations",
        str(opts.iterations),
        "--save",
        str(save),
    )


class Demo:
    """Runs the scenario.

    Parameters
    ----------
    site
        A site config with a local cluster.
    opts
        :class:`DemoOptions`.
    say
        Prints one progress line.
    """

    def __init__(
        self, site: SiteConfig, opts: DemoOptions, say: Callable[[str], None] = print
    ) -> None:
        self.site = site
        self.opts = opts
        self.say = say
        self.submitted: list[int] = []
        self.slurm: SlurmBackend = slurm_for(site)

    def grow_path(self) -> GrowPath:
        """The site's grow path, from its (cached) probe."""
        caps = cached_probe(self.slurm.transport, self.site.name, preference=self.site.grow_path)
        self.say(f"grow path: {caps.grow_path} ({caps.grow_path_reason})")
        return caps.grow_path

    def _ensure_cluster(self) -> None:
        cluster = make_cluster(self.site, progress=self.say)
        if cluster.healthy(DEMO_NODES):
            self.say(f"local cluster is up with {DEMO_NODES} nodes")
            return
        state = cluster.load_state()
        if state is not None and state.nodes != DEMO_NODES and cluster.status().up:
            raise ClusterError(
                f"the demo needs a {DEMO_NODES}-node cluster, but the local cluster has "
                f"{state.nodes}: run `elastic-slurm cluster down` first"
            )
        self.say("bringing the local cluster up")
        cluster.up(DEMO_NODES)

    def _check_idle(self) -> None:
        """Refuse a busy cluster; wait (up to a minute) for jobs that are only completing."""

        def busy(states: tuple[str, ...]) -> list[int]:
            return [
                j.job_id
                for j in self.slurm.jobs()
                if j.model_state.value in states
                and (j.nodes or j.model_state.value != "completing")
            ]

        active = busy(("pending", "running"))
        if not active and busy(("completing",)):
            self.say("waiting for the last jobs to finish completing")
            try:
                wait_for(
                    lambda: not busy(("completing",)),
                    timeout_s=60,
                    what="completing jobs to end",
                    interval_s=0.5,
                )
            except DeadlineExceeded:
                pass  # reported below
        active = busy(("pending", "running", "completing"))
        if active:
            ids = ", ".join(map(str, active))
            raise ClusterError(
                f"the cluster is busy (jobs {ids}); the demo needs it empty: "
                "wait for them or cancel them with scancel"
            )

    def _submit(self, req: ElasticRequest, label: str) -> int:
        job_id = api.submit(
            req,
            self.slurm,
            workdir=self.opts.workdir,
            output=str(self.opts.workdir / f"{label}-%j.out"),
            python=job_python(self.site),
            mpi_env=self.site.mpi_env,
        )
        self.submitted.append(job_id)
        return job_id

    def cleanup(self) -> None:
        """Cancel what the demo submitted, with their helper allocations (idempotent)."""
        for job_id in self.submitted:
            rec = self.slurm.job(job_id)
            if rec is not None and rec.model_state.value in ("pending", "running"):
                self.say(f"cancelling job {job_id}")
                self.slurm.cancel_job(job_id)

    def _clear_previous_run(self) -> None:
        """Remove what an earlier demo left in its work directory (jobs, journal, outputs).

        A cluster brought up afresh numbers its jobs from 1 again, so the new malleable job
        would find the earlier job 1's directory (and its orders, which it followed at once)
        and the controller the earlier journal. Only the demo's own names are removed.
        """
        workdir = self.opts.workdir
        with os.scandir(workdir) as entries:  # each entry as it is: no link is followed
            kinds = {e.name: e.stat(follow_symlinks=False).st_mode for e in entries}
        gone = []
        if stat.S_ISDIR(kinds.get(JOB_DIRS, 0)):
            shutil.rmtree(workdir / JOB_DIRS)  # never follows a link (Linux)
            gone.append(JOB_DIRS)
        for pattern in ("journal.sqlite*", "heat2d-malleable-*.out", "heat2d-rigid-*.out"):
            for name in sorted(fnmatch.filter(kinds, pattern)):
                if stat.S_ISREG(kinds[name]) or stat.S_ISLNK(kinds[name]):
                    os.unlink(workdir / name)  # the entry itself
                    gone.append(name)
        if gone:
            self.say(f"removed the previous demo's {', '.join(gone)} from {workdir}")

    def run(self) -> DemoResult:
        """Run the scenario; see the module docstring.

        Raises
        ------
        ElasticSlurmError
            The cluster cannot be used, or the scenario did not complete within the timeout
            (the jobs are cancelled first).
        """
        self._ensure_cluster()
        self._check_idle()
        self.opts.workdir.mkdir(parents=True, exist_ok=True)
        self._clear_previous_run()
        try:
            return self._scenario()
        except BaseException:
            self.cleanup()
            raise

    def _scenario(self) -> DemoResult:
        opts, site = self.opts, self.site
        malleable_out = opts.workdir / "malleable.npy"
        rigid_out = opts.workdir / "rigid.npy"
        for f in (malleable_out, rigid_out):
            f.unlink(missing_ok=True)
        policy = make_policy(site.controller.policy.name, site.controller.policy.options)
        controller = Controller(
            self.slurm,
            policy,
            Journal(opts.workdir / "journal.sqlite"),
            poll_interval_s=site.controller.poll_interval_s,
            grant_timeout_s=site.controller.grant_timeout_s,
            resize_timeout_s=site.controller.resize_timeout_s,
            min_resize_interval_s=site.controller.min_resize_interval_s,
            grow_path=self.grow_path(),
        )
        t0 = time.time()
        timeline = Timeline(t0)
        walltime = timedelta(seconds=opts.timeout_s)
        job = self._submit(
            ElasticRequest(
                program=_heat2d(opts, malleable_out),
                kind=JobKind.MALLEABLE,
                nodes_min=2,
                nodes_max=4,
                nodes_start=2,
                walltime=walltime,
                job_name="heat2d-malleable",
            ),
            "heat2d-malleable",
        )
        timeline.track(job, "heat2d malleable", time.time())
        self.say(
            f"submitted heat2d as malleable job {job} (2-4 nodes, starts on 2); the "
            f"controller runs policy {policy.name}"
        )
        rigid: int | None = None
        closed: list[ResizeOutcome] = []  # the job's resizes (the controller keeps recent ones)
        deadline = time.monotonic() + opts.timeout_s
        while True:
            cycle = controller.step()
            now = time.time()
            views = {v.job_id: v for v in cycle.snapshot.jobs}
            timeline.observe(views, now)
            for o in cycle.finished:
                self._report(timeline, o, now)
            closed += [o for o in cycle.finished if o.job_id == job]
            grown = any(o.ok and o.action == "expand" for o in closed)
            if rigid is None and grown and job in views and len(views[job].nodes) == 4:
                rigid = self._submit(
                    ElasticRequest(
                        program=(
                            job_python(self.site),
                            "-m",
                            "elastic_slurm",
                            "run",
                            *_heat2d(opts, rigid_out),
                        ),
                        kind=JobKind.RIGID,
                        nodes_min=2,
                        nodes_max=2,
                        walltime=walltime,
                        job_name="heat2d-rigid",
                    ),
                    "heat2d-rigid",
                )
                timeline.track(rigid, "heat2d rigid (ref.)", time.time())
                self.say(f"submitted the rigid reference run as job {rigid} (2 nodes)")
            watched = [j for j in (job, rigid) if j is not None]
            if rigid is not None and not any(j in views for j in watched):
                break
            if job not in views and rigid is None:
                rec = self.slurm.job(job)
                out = opts.workdir / f"heat2d-malleable-{job}.out"
                tail = out.read_text(errors="replace")[-2000:] if out.exists() else ""
                raise ElasticSlurmError(
                    f"job {job} ended ({rec.state if rec else 'state unknown'}) before the "
                    f"controller grew it; its output ({out}) ends:\n{tail or '(empty)'}\n"
                    "If it completed, give it more work with --iterations."
                )
            if time.monotonic() > deadline:
                raise ElasticSlurmError(f"the demo did not finish within {opts.timeout_s:g} s")
            time.sleep(max(0.0, site.controller.poll_interval_s - (time.time() - now)))
        return self._finish(closed, timeline, job, rigid, malleable_out, rigid_out)

    def _report(self, timeline: Timeline, o: ResizeOutcome, now: float) -> None:
        verdict = "done" if o.ok else f"FAILED ({o.message})"
        pause = o.phases_s.get("pause")
        paused = f", paused {pause:.2f} s" if pause is not None else ""
        what = (
            f"{o.action} {len(o.before)}->{len(o.after)} {verdict} in {o.seconds:.2f} s"
            f"{paused} [{o.strategy}]"
        )
        timeline.note(o.job_id, what, now)
        phases = ", ".join(f"{k} {v:.2f}" for k, v in o.phases_s.items() if k != "pause")
        self.say(f"job {o.job_id}: {what} ({phases})")

    def _finish(
        self,
        outcomes: list[ResizeOutcome],
        timeline: Timeline,
        job: int,
        rigid: int | None,
        malleable_out: Path,
        rigid_out: Path,
    ) -> DemoResult:
        def settled() -> list[str]:
            return [n.name for n in self.slurm.nodes() if n.model_state is not NodeState.IDLE]

        try:
            wait_for(
                lambda: not settled(), timeout_s=30, what="the nodes to be idle", interval_s=0.5
            )
        except DeadlineExceeded:
            pass  # whatever is still allocated now is reported as leaked below
        busy = settled()
        states = {}
        for j in (job, rigid):
            if j is not None:
                rec = self.slurm.job(j)
                states[str(j)] = rec.state if rec else "UNKNOWN"
        err: float | None = None
        if malleable_out.exists() and rigid_out.exists():
            err = float(np.max(np.abs(np.load(malleable_out) - np.load(rigid_out))))
        try:
            counts: list[int] | None = [len(r.nodes) for r in self.slurm.allocation_history(job)]
        except SlurmCommandError as exc:
            if "accounting storage is disabled" not in str(exc).lower():
                raise
            counts = None
            self.say("no accounting history: this cluster's accounting storage is disabled")
        return DemoResult(
            job_id=job,
            rigid_job_id=rigid,
            node_counts=timeline.sizes(job),
            node_counts_sacct=counts,
            result_matches_rigid=err is not None and err <= TOLERANCE,
            max_abs_error=err,
            leaked_nodes=len(busy),
            resize_seconds=[round(o.seconds, 3) for o in outcomes],
            resize_pause_seconds=[
                round(o.phases_s["pause"], 3) if "pause" in o.phases_s else None for o in outcomes
            ],
            resizes=[
                {
                    "action": o.action,
                    "from": len(o.before),
                    "to": len(o.after),
                    "ok": o.ok,
                    "seconds": round(o.seconds, 3),
                    "pause_s": round(o.phases_s["pause"], 3) if "pause" in o.phases_s else None,
                    "strategy": o.strategy,
                    "phases_s": {k: round(v, 3) for k, v in o.phases_s.items()},
                }
                for o in outcomes
            ],
            job_states=states,
            timeline=timeline,
        )
