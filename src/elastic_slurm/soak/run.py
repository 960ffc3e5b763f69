"""A soak from start to end: cluster, controller, workload and faults, then the accounting.

1. The soak cluster comes up with ``nodes`` nodes (``soak/site.yaml``: its own
   directories, ports, bridge and names, beside the default cluster).
2. The controller starts (``elastic-slurm controller run``, the site's policy
   ``pending_first``, a journal in the output directory).
3. For ``window_s`` seconds trace jobs arrive and faults are injected on schedule; a
   controller that exits unasked is recorded and started again.
4. The soak waits for every job to end (at most ``drain_s`` seconds; what is left is cancelled
   and counted as lost), lets the controller settle its resizes, measures its CPU use while
   idle, counts leaked allocations, stops the controller, and takes the cluster down (unless
   ``keep_cluster``).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from elastic_slurm.adapter.factory import job_python, slurm_for
from elastic_slurm.cluster.local import LocalCluster
from elastic_slurm.config import load_site
from elastic_slurm.errors import ElasticSlurmError, InvalidRequest
from elastic_slurm.protocol.address import default_address
from elastic_slurm.soak import accounting
from elastic_slurm.soak.controller import ControllerError, ControllerProcess
from elastic_slurm.soak.daemons import Daemons
from elastic_slurm.soak.inject import Injector, open_resizes
from elastic_slurm.soak.report import SoakResult
from elastic_slurm.soak.schedule import fault_schedule
from elastic_slurm.soak.service import make_operator, prepare
from elastic_slurm.soak.workload import Replay, plan, wait_s

Say = Callable[[str], None]

#: ``sacct`` states of a job that has not ended.
_NOT_ENDED = {"PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "COMPLETING"}

#: The soak's own site config (package data, not in ``site_configs/``: not a site to pick).
SOAK_SITE = Path(__file__).with_name("site.yaml")


def soak(
    *,
    site_file: Path,
    nodes: int,
    window_s: float,
    jobs: int,
    out_dir: Path,
    trace: Path,
    policy: str | None = None,
    drain_s: float | None = None,
    idle_window_s: float = 30.0,
    only: tuple[str, ...] | None = None,
    keep_cluster: bool = False,
    service_user: str | None = None,
    say: Say = print,
) -> SoakResult:
    """Run a soak and return what it measured (see the module docstring).

    ``only`` keeps the faults of those names (``None``: all of them). ``service_user``: the
    controller runs as this unprivileged user (made if missing) with ``controller.privilege:
    service`` (:mod:`.service`); ``None``: as root.

    Raises
    ------
    elastic_slurm.errors.ClusterError
        The cluster did not come up.
    ControllerError
        The controller did not start the first time.
    elastic_slurm.errors.InvalidRequest
        Bad numbers (a window under 120 s, no usable trace jobs), or ``out_dir`` holds
        something already (:func:`fresh_out_dir`).
    """
    started = time.monotonic()
    fresh_out_dir(out_dir)
    journal = out_dir / "journal.sqlite"
    run_as: tuple[str, ...] = ()
    env: dict[str, str] = {}
    if service_user is not None:
        service = prepare(service_user, site_file, out_dir)
        site_file, journal = service.site_file, service.journal
        run_as, env = service.run_as, service.env
    site = load_site(str(site_file))
    policy = policy or site.controller.policy.name
    faults = tuple(f for f in fault_schedule(window_s) if only is None or f.name in only)
    slice_ = plan(trace, nodes=nodes, window_s=window_s, jobs=jobs)
    (out_dir / "jobs").mkdir(exist_ok=True)
    cluster = LocalCluster(site, progress=say)
    slurm = slurm_for(site)
    url = f"http://{default_address(site)}"
    python = job_python(site)
    ctl = ControllerProcess(
        site_file,
        policy,
        journal,
        out_dir / "controller.log",
        site.controller.metrics_address,
        run_as=run_as,
        env=env,
    )
    cluster.up(nodes)  # a failed start takes down what it started
    try:
        if service_user is not None:  # for stretching time limits after shrinks
            make_operator(service_user, site.slurm_conf)
        ctl.start()
        say(
            f"controller up (pid {ctl.pid}), policy {policy}; {len(slice_.jobs)} trace jobs "
            f"over {window_s:g} s on {nodes} nodes; faults at "
            + ", ".join(f"{f.name} {f.at_s:.0f} s" for f in faults)
        )
        replay = Replay(slice_, slurm, out_dir, url, python, mpi_env=site.mpi_env)
        injector = Injector(
            faults,
            ctl,
            Daemons(cluster),
            slurm,
            out_dir,
            controller_url=url,
            python=python,
            nodes=nodes,
            say=say,
            mpi_env=site.mpi_env,
        )
        unfinished = _drive(
            replay,
            injector,
            ctl,
            slurm,
            window_s,
            drain_s if drain_s is not None else max(300.0, window_s),
            say,
        )
        settle_deadline = time.monotonic() + site.controller.resize_timeout_s + 30
        while open_resizes(ctl.journal) and time.monotonic() < settle_deadline:
            _keep_alive(ctl, injector, say)
            time.sleep(2)
        ctl.sample()
        say(f"measuring the controller's CPU use while idle ({idle_window_s:g} s)")
        idle = ctl.idle_cpu(idle_window_s)
        ctl.sample()
        leaked = _leaks(slurm, site.controller.grant_timeout_s + 40.0, ctl, injector, say)
        states = accounting.final_states(
            slurm, [*replay.job_ids.values(), *injector.misbehaving_jobs]
        )
        trace_ids = list(replay.job_ids.values())
        outages = [r.down_epoch_s for r in injector.records if r.down_epoch_s is not None]
        in_outage = accounting.ended_in_outage(
            slurm, {j: states[j] for j in trace_ids if j in states}, out_dir / "jobs", outages
        )
        counted = accounting.count_jobs(states, trace_ids, unfinished & set(trace_ids), in_outage)
        reasons = {
            j: why
            for j in counted.lost
            if (why := accounting.why_failed(out_dir / "jobs" / f"{j}.out"))
        }
        misbehaving = {j: states.get(j, "unknown") for j in injector.misbehaving_jobs}
    finally:
        ctl.stop()
        # the daemons' logs go with `cluster down`: keep a copy beside the journal
        logs = cluster.layout(nodes).logs
        if logs.is_dir():
            shutil.copytree(logs, out_dir / "slurm-logs", dirs_exist_ok=True)
        if not keep_cluster:
            cluster.down()
    resizes = accounting.count_resizes(ctl.journal)
    buckets = accounting.merge_buckets(ctl.cycle_buckets)
    cycles = int(max(buckets.values(), default=0))
    result = SoakResult(
        nodes=nodes,
        window_s=window_s,
        trace=slice_.source,
        compress=slice_.compress,
        jobs=counted,
        misbehaving=misbehaving,
        resizes=resizes,
        leaked=leaked,
        cycle_p50_s=accounting.quantile(buckets, 0.5),
        cycle_p99_s=accounting.quantile(buckets, 0.99),
        cycles=cycles,
        peak_rss_bytes=ctl.peak_rss,
        idle_cpu_pct=idle,
        idle_window_s=idle_window_s,
        kills=ctl.kills,
        unexpected_exits=ctl.unexpected_exits,
        faults=injector.records,
        submit_retries=replay.retries,
        failed_starts=ctl.failed_starts,
        lost_reasons=reasons,
        wall_s=time.monotonic() - started,
    )
    (out_dir / "soak.json").write_text(json.dumps(result.to_json(), indent=1, default=str))
    return result


def _keep_alive(ctl: ControllerProcess, injector: Injector, say: Say) -> None:
    """Start the controller again if it is not running and the soak did not stop it.

    As its service manager would: at most every 10 seconds; its exits are recorded.
    """
    if injector.controller_held or ctl.alive() or time.monotonic() - ctl.last_start < 10:
        return
    say("the controller is not running (it exited unasked); starting it again")
    try:
        ctl.start()
    except ControllerError as exc:
        say(f"  {exc}; trying again in 10 s")


def _drive(
    replay: Replay,
    injector: Injector,
    ctl: ControllerProcess,
    slurm,  # type: ignore[no-untyped-def]
    window_s: float,
    drain_s: float,
    say: Say,
) -> set[int]:
    """Run the workload and the faults, then wait for the jobs; the ids left unfinished."""
    t0 = time.monotonic()
    last_note = last_sample = -1e9
    live: dict[int, tuple[str, ...]] = {}
    while True:
        now = time.monotonic() - t0
        if not injector.slurmctld_down:
            # during the outage the soak's own submissions wait, as a user's would
            replay.tick(now)
        injector.tick(now)
        _keep_alive(ctl, injector, say)
        ours = set(replay.job_ids.values()) | set(injector.misbehaving_jobs)
        seen = False
        if not injector.slurmctld_down:
            try:
                live = accounting.live_jobs(slurm)
                seen = True
            except ElasticSlurmError:
                pass  # Slurm does not answer: nothing is known to have ended
        if now - last_sample >= 5:
            ctl.sample()
            last_sample = now
        if now - last_note >= 15:
            mine = ours & set(live)
            say(
                f"t={now:5.0f} s: {len(replay.job_ids)}/{len(replay.slice_.jobs)} submitted, "
                f"{len(mine)} queued or running, open resizes "
                f"{len(open_resizes(ctl.journal))}, controller "
                + ("up" if ctl.proc is not None else "down")
            )
            last_note = now
        if replay.done and injector.over and seen and not ours & set(live):
            # an empty queue may be a slurmctld that did not answer: accounting must agree
            states = accounting.final_states(slurm, sorted(ours))
            if set(states) == ours and not set(states.values()) & _NOT_ENDED:
                say(f"t={now:5.0f} s: every job has ended")
                return set()
        if now > window_s + drain_s:
            left = sorted(ours & set(live))
            say(f"t={now:5.0f} s: giving up on jobs {left}; cancelling them")
            if left:
                try:
                    slurm.cancel(*left)
                except ElasticSlurmError as exc:
                    say(f"  cancelling failed: {exc}")
            return set(left)
        time.sleep(wait_s(replay, now))


def _leaks(slurm, settle_s: float, ctl: ControllerProcess, injector: Injector, say: Say):  # type: ignore[no-untyped-def]
    """Nodes still held once every job ended, after up to ``settle_s`` seconds of settling."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            held = accounting.leaked(slurm, set())
        except ElasticSlurmError as exc:
            held = {"?": f"Slurm did not answer: {exc}"}
        if not held or time.monotonic() > deadline:
            return held
        _keep_alive(ctl, injector, say)
        time.sleep(3)


def fresh_out_dir(out_dir: Path) -> None:
    """Make ``out_dir`` for a soak, or check that it is empty.

    A soak's controller works from the journal in it: another soak's journal would have the
    new controller settle that run's resizes, and its files would mix with this run's.

    Raises
    ------
    elastic_slurm.errors.InvalidRequest
        ``out_dir`` is not an empty directory (it holds a file, or is not a directory), or
        cannot be made.
    """
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        leftover = next(out_dir.iterdir(), None)
    except OSError as exc:
        raise InvalidRequest(f"cannot use {out_dir} for the soak's output: {exc}") from exc
    if leftover is not None:
        raise InvalidRequest(
            f"{out_dir} is not empty (it holds {leftover.name}): a soak writes its journal, "
            "logs and soak.json into a directory of its own; give a new --out or remove it"
        )


def default_out_dir() -> Path:
    """Where a soak writes by default: ``/var/tmp/elastic-slurm-soak/<time>``."""
    return Path("/var/tmp/elastic-slurm-soak") / time.strftime("%Y%m%d-%H%M%S")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run `python -m elastic_slurm.soak`")
