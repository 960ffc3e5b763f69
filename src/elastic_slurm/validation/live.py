"""Run a trace slice on live Slurm with the controller, and measure it from Slurm's accounting.

The controller runs as its own process (``elastic-slurm controller run``, journal and log in
the output directory). Each trace job is submitted at its arrival time
(``api.submit(..., controller=URL)``) as ``examples/trace_job.py``, a real MPI program that
computes for its run time and honours resize points; malleable jobs run under the elastic
launcher, rigid ones as one process holding their nodes. Times and node-seconds come from
``sacct`` (one allocation record per size a job had), resize times from the controller's
journal, never from the jobs' own claims. Whatever happens (an error, Ctrl-C), every job of
the run is cancelled and the controller stopped.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_fixed

from elastic_slurm import api
from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.controller.journal import Journal
from elastic_slurm.errors import ElasticSlurmError, InvalidRequest
from elastic_slurm.model.request import ElasticRequest, JobKind
from elastic_slurm.model.snapshot import JobState
from elastic_slurm.protocol.address import controller_url
from elastic_slurm.resources import example
from elastic_slurm.simulator.cluster import JobRecord
from elastic_slurm.simulator.metrics import measured
from elastic_slurm.validation.compare import RunTimes
from elastic_slurm.validation.mapping import Slice, TraceJob

Say = Callable[[str], None]


class ValidationError(ElasticSlurmError):
    """The live run could not be done (busy cluster, controller did not start, timeout)."""


@dataclass(frozen=True)
class LiveRun:
    """What the live run measured.

    ``times``: each job's record by trace id (seconds since the first submission);
    ``job_ids`` trace id -> Slurm job id; ``resize_s`` the duration of each completed resize
    (seconds, from the journal); ``journal`` and ``log`` the controller's files.
    """

    times: RunTimes
    job_ids: dict[int, int]
    resize_s: list[float]
    journal: Path
    log: Path


def request_for(job: TraceJob, python: str = sys.executable) -> ElasticRequest:
    """The Slurm request of one trace job (``examples/trace_job.py`` with its work).

    A malleable job's work is ``runtime_s`` on its start size, linear up to its maximum; a
    rigid job runs as one process (``--ref-nodes 1``) on the nodes it holds.
    """
    prog = str(example("trace_job.py"))
    if job.malleable:
        program: tuple[str, ...] = (
            prog,
            "--runtime-s",
            str(job.runtime_s),
            "--ref-nodes",
            str(job.nodes),
            "--max-nodes",
            str(job.nodes_max),
        )
        kind, start = JobKind.MALLEABLE, job.nodes
    else:
        program = (python, prog, "--runtime-s", str(job.runtime_s), "--ref-nodes", "1")
        kind, start = JobKind.RIGID, None
    return ElasticRequest(
        program=program,
        kind=kind,
        nodes_min=job.nodes_min,
        nodes_max=job.nodes_max,
        nodes_start=start,
        walltime=timedelta(seconds=max(60.0, job.walltime_s)),
        job_name=f"trace-{job.trace_id}",
    )


#: sacct states of an allocation record that has ended.
_ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}


def sacct_times(
    slurm: SlurmBackend, job_ids: dict[int, int], kinds: dict[int, JobKind] | None = None
) -> dict[int, JobRecord] | None:
    """Each job's record from ``sacct`` (``None``: not all ended); see :func:`parse_sacct`."""
    res = slurm.transport.run(
        [
            "sacct",
            "-X",
            "-n",
            "-P",
            "-j",
            ",".join(map(str, job_ids.values())),
            "--format=JobIDRaw,Submit,Start,End,NNodes,State",
        ],
        env={"SLURM_TIME_FORMAT": "%s"},
        timeout_s=60,
    )
    return parse_sacct(res.stdout, job_ids, kinds)


def parse_sacct(
    text: str, job_ids: dict[int, int], kinds: dict[int, JobKind] | None = None
) -> dict[int, JobRecord] | None:
    r"""Parse what :func:`sacct_times` reads (``None``: some job has not ended).

    ``text``: ``sacct -X -P`` lines of JobIDRaw, Submit, Start, End (``SLURM_TIME_FORMAT=%s``),
    NNodes, State; ``job_ids``: trace id -> Slurm job id; ``kinds``: trace id -> kind (rigid
    when not given). A resized job has one allocation record per size: its start is the first
    record's, its end the last one's, its node-seconds the sum over records of ``(end -
    start) * nodes``, its resizes the changes of size between records. The records'
    ``job_id`` is the trace id.

    >>> r = parse_sacct("7|100|110|130|2|RESIZING\n7|130|130|Unknown|1|COMPLETED\n", {1: 7})
    >>> r[1].submit_s, r[1].start_s, r[1].end_s, r[1].node_s, r[1].nodes_end, r[1].shrinks
    (100.0, 110.0, 130.0, 40.0, 1, 1)
    >>> parse_sacct("7|100|110|Unknown|2|RUNNING\n", {1: 7}) is None
    True

    A record whose start Slurm rewrote to the job's first (after a time-limit update) begins
    at its submit time:

    >>> text = "7|100|110|130|2|RESIZING\n7|130|110|150|1|COMPLETED\n"
    >>> r = parse_sacct(text, {1: 7})
    >>> r[1].end_s, r[1].node_s, r[1].nodes_end
    (150.0, 60.0, 1)
    """
    by_slurm = {v: k for k, v in job_ids.items()}
    rows: dict[int, list[tuple[float, float, float, int]]] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) != 6 or not parts[0].isdigit() or int(parts[0]) not in by_slurm:
            continue
        submit, start, end, nnodes, state = parts[1], parts[2], parts[3], parts[4], parts[5]
        if end == "Unknown" and start.isdigit() and state.split()[0] in _ENDED:
            # Slurm 22.05: a job that ends in the same second as a resize keeps End=Unknown on
            # its last record (seen here; scontrol shows that second as its end)
            end = start
        if not (submit.isdigit() and start.isdigit() and end.isdigit()):
            return None  # still pending or running: no end yet
        # a record begins at its submit time when that is later: Slurm 22.05 rewrites the
        # start of a resized job's open record to the job's first start when its time limit
        # changes (a shrink stretches it), which would misorder the records
        rows.setdefault(int(parts[0]), []).append(
            (float(submit), max(float(start), float(submit)), float(end), int(nnodes or 0))
        )
    if set(rows) != set(by_slurm):
        return None
    out = {}
    for sid, recs in rows.items():
        recs.sort(key=lambda r: (r[1], r[2]))
        node_s = sum((e - s) * n for _, s, e, n in recs)
        tid = by_slurm[sid]
        sizes = [n for _, _, _, n in recs]
        out[tid] = measured(
            tid,
            min(r[0] for r in recs),
            recs[0][1],
            recs[-1][2],
            node_s,
            kind=(kinds or {}).get(tid, JobKind.RIGID),
            nodes_start=sizes[0],
            nodes_end=sizes[-1],
            expansions=sum(b > a for a, b in zip(sizes, sizes[1:], strict=False)),
            shrinks=sum(b < a for a, b in zip(sizes, sizes[1:], strict=False)),
        )
    return out


def _submit(job: TraceJob, slurm: SlurmBackend, out_dir: Path, url: str, say: Say) -> int:
    """Submit one trace job; its Slurm job id.

    A node briefly unusable makes the size check refuse the job (seen once in a long run);
    that is retried for up to 30 s.
    """

    @retry(
        retry=retry_if_exception_type(InvalidRequest),
        wait=wait_fixed(1.0),
        stop=stop_after_delay(30.0),
        reraise=True,
        before_sleep=lambda st: say(f"job {job.trace_id}: {st.outcome.exception()}; retrying"),
    )
    def once() -> int:
        return api.submit(
            request_for(job),
            slurm,
            workdir=out_dir / "jobs",
            output=str(out_dir / "jobs" / "%j.out"),
            controller=url,
        )

    return once()


def _queue_ids(slurm: SlurmBackend) -> set[int]:
    """Jobs pending or running now."""
    live = (JobState.PENDING, JobState.RUNNING)
    return {j.job_id for j in slurm.jobs() if j.model_state in live}


def run_live(
    slice_: Slice,
    slurm: SlurmBackend,
    site: SiteConfig,
    out_dir: Path,
    *,
    policy: str,
    say: Say = print,
    timeout_s: float = 3600.0,
) -> LiveRun:
    """Replay ``slice_`` on the cluster with the controller running ``policy``.

    Parameters
    ----------
    slice_
        The jobs (arrivals in seconds after the start of the run).
    slurm, site
        The cluster.
    out_dir
        Where the jobs' directories and outputs, the journal and the controller's log go.
    policy
        The controller's policy (registry name).
    say
        Progress lines.
    timeout_s
        The whole run's limit (seconds); past it, what still runs is cancelled.

    Raises
    ------
    ValidationError
        Jobs already queued (they would distort the run), the controller did not start or
        died, or the run timed out.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "jobs").mkdir(exist_ok=True)
    (out_dir / "jobs").chmod(0o755)
    others = _queue_ids(slurm)
    if others:
        raise ValidationError(
            f"the cluster already has jobs {sorted(others)[:10]}: a validation needs it to "
            "itself (cancel them, or wait)"
        )
    journal, log = out_dir / "journal.sqlite", out_dir / "controller.log"
    url = controller_url(site)
    argv = [sys.executable, "-m", "elastic_slurm", "--site", site.source or site.name]
    argv += ["controller", "run", "--policy", policy, "--journal", str(journal)]
    with open(log, "w") as fh:
        controller = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
    job_ids: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 30
        while "jobs talk to" not in log.read_text():
            if controller.poll() is not None or time.monotonic() > deadline:
                raise ValidationError(f"the controller did not start; see {log}")
            time.sleep(0.2)
        say(f"controller: policy {policy}, journal {journal}")
        t0 = time.monotonic()
        jobs = sorted(slice_.jobs, key=lambda j: (j.arrival_s, j.trace_id))
        last_note = 0.0
        pending = list(jobs)
        while pending or _queue_ids(slurm) & set(job_ids.values()):
            now = time.monotonic() - t0
            if now > timeout_s:
                raise ValidationError(f"the run took longer than {timeout_s:g} s")
            if controller.poll() is not None:
                raise ValidationError(f"the controller died; see {log}")
            while pending and pending[0].arrival_s <= now:
                job = pending.pop(0)
                job_ids[job.trace_id] = _submit(job, slurm, out_dir, url, say)
            if now - last_note >= 15:
                ours = set(job_ids.values())
                listed = [
                    j
                    for j in slurm.jobs()
                    if j.job_id in ours and j.model_state in (JobState.PENDING, JobState.RUNNING)
                ]
                running = sum(1 for j in listed if j.model_state is JobState.RUNNING)
                say(
                    f"t={now:5.0f} s: {len(job_ids)}/{len(jobs)} submitted, {running} running, "
                    f"{len(listed) - running} waiting, {len(job_ids) - len(listed)} ended"
                )
                last_note = now
            wait = pending[0].arrival_s - (time.monotonic() - t0) if pending else 1.0
            time.sleep(min(1.0, max(0.05, wait)))
        say(f"all {len(jobs)} jobs ended after {time.monotonic() - t0:.0f} s")
    finally:
        left = sorted(_queue_ids(slurm) & set(job_ids.values()))
        if left:
            say(f"cancelling jobs {left}")
            for sid in left:
                slurm.cancel_job(sid)
        if controller.poll() is None:
            controller.send_signal(signal.SIGINT)
            try:
                controller.wait(timeout=30)
            except subprocess.TimeoutExpired:
                controller.kill()
                controller.wait()
    kinds = {j.trace_id: JobKind.MALLEABLE if j.malleable else JobKind.RIGID for j in slice_.jobs}
    times = None
    deadline = time.monotonic() + 60
    while times is None:  # slurmdbd records the ends a moment later
        times = sacct_times(slurm, job_ids, kinds)
        if times is None:
            if time.monotonic() > deadline:
                raise ValidationError("Slurm's accounting has not recorded every job's end")
            time.sleep(1.0)
    origin = min(t.submit_s for t in times.values())
    times = {
        k: replace(
            t, submit_s=t.submit_s - origin, start_s=t.start_s - origin, end_s=t.end_s - origin
        )
        for k, t in times.items()
    }
    j = Journal(journal, readonly=True)
    try:
        resize_s = [
            float(r["seconds"])
            for r in j.records
            if r["kind"] == "outcome"
            and r.get("ok")
            and r.get("action") in ("expand", "shrink")
            and r.get("seconds") is not None
        ]
    finally:
        j.close()
    return LiveRun(RunTimes(times, slice_.nodes), job_ids, resize_s, journal, log)
