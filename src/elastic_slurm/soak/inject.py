"""Carry out the fault schedule during a soak, one tick at a time, and record what was done.

:class:`Injector` is ticked by the soak's loop (about once a second) and never blocks it for
long: each fault is a small state machine (``waiting`` -> ``active`` -> ``over``) that begins
when due, ends after its duration, and leaves a :class:`FaultRecord` saying whether it was
really injected and what was seen.
"""

from __future__ import annotations

import logging
import math
import signal
import sqlite3
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from elastic_slurm import api
from elastic_slurm.adapter import commands
from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.parse import slurmctld_up
from elastic_slurm.errors import ElasticSlurmError
from elastic_slurm.model.request import ElasticRequest
from elastic_slurm.model.snapshot import JobState
from elastic_slurm.soak import misbehave
from elastic_slurm.soak.controller import ControllerError, ControllerProcess
from elastic_slurm.soak.daemons import Daemons
from elastic_slurm.soak.schedule import Fault
from elastic_slurm.waiting import DeadlineExceeded, wait_for

log = logging.getLogger(__name__)
Say = Callable[[str], None]


@dataclass
class FaultRecord:
    """What became of one scheduled fault.

    ``injected``: the fault really happened (the process was killed, the directory changed);
    ``ok``: what had to hold during and after it held (``None`` until it is over); ``notes``:
    what was seen, one line each.
    """

    fault: Fault
    state: str = "waiting"
    injected: bool = False
    ok: bool | None = None
    began_s: float | None = None
    ends_s: float | None = None
    notes: list[str] = field(default_factory=list)
    job_ids: list[int] = field(default_factory=list)
    #: For the slurmctld outage: when it was stopped and when it answered again (epoch s).
    down_epoch_s: tuple[float, float] | None = None


def may_begin(records: list[FaultRecord], i: int, now_s: float) -> bool:
    """Whether fault ``i`` of ``records`` begins at ``now_s`` (seconds into the workload).

    It must be waiting and due, and, unless it runs in the background, every fault before it
    that does not run in the background must be over.

    >>> from elastic_slurm.soak.schedule import fault_schedule
    >>> recs = [FaultRecord(f) for f in fault_schedule(300.0)]  # due at 30, 60, 105 s...
    >>> may_begin(recs, 1, 59.0), may_begin(recs, 1, 60.0)
    (False, True)
    >>> recs[0].state = recs[1].state = "active"  # the background job does not hold others
    >>> may_begin(recs, 2, 200.0)
    False
    >>> recs[1].state = "over"
    >>> may_begin(recs, 2, 200.0)
    True
    """
    rec = records[i]
    if rec.state != "waiting" or now_s < rec.fault.at_s:
        return False
    if rec.fault.background:
        return True
    return all(r.state == "over" for r in records[:i] if not r.fault.background)


def open_resizes(journal: Path) -> list[tuple[int, int]]:
    """``(job id, seq)`` of the resizes open in ``journal`` (read-only; ``[]`` if none yet)."""
    if not journal.exists():
        return []
    try:
        db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=5)
        try:
            return [tuple(r) for r in db.execute("SELECT job_id, seq FROM resizes WHERE open = 1")]
        finally:
            db.close()
    except sqlite3.Error:
        return []


def journal_size(journal: Path) -> int:
    """How many records ``journal`` holds (read-only; 0 if unreadable)."""
    try:
        db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=5)
        try:
            return int(db.execute("SELECT count(*) FROM records").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def health_s(url: str, timeout_s: float = 5.0) -> float | None:
    """Seconds the controller's ``/v1/health`` took to answer, ``None`` if it did not."""
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(f"{url}/v1/health", timeout=timeout_s) as r:
            r.read()
    except OSError:
        return None
    return time.monotonic() - t0


class Injector:
    """Injects ``faults`` into a running soak.

    Parameters
    ----------
    faults
        The schedule (:func:`~elastic_slurm.soak.schedule.fault_schedule`).
    controller
        The controller process.
    daemons
        The cluster's daemons.
    slurm
        The cluster's backend.
    out_dir
        The soak's directory (jobs under ``jobs/``, the bait under ``outside/``).
    controller_url, python, nodes, mpi_env
        What the misbehaving jobs are submitted with.
    say
        Progress lines.
    """

    def __init__(
        self,
        faults: tuple[Fault, ...],
        controller: ControllerProcess,
        daemons: Daemons,
        slurm: SlurmBackend,
        out_dir: Path,
        *,
        controller_url: str,
        python: str,
        nodes: int,
        say: Say,
        mpi_env: dict[str, str] | None = None,
    ) -> None:
        self.records = [FaultRecord(f) for f in faults]
        self.controller = controller
        self.daemons = daemons
        self.slurm = slurm
        self.out_dir = out_dir
        self.url = controller_url
        self.python = python
        self.mpi_env = dict(mpi_env or {})
        self.nodes = nodes
        self.say = say
        self.bait = misbehave.bait(out_dir)
        #: the controller is down on purpose (do not restart it behind the fault's back)
        self.controller_held = False
        #: slurmctld is down on purpose (the soak's own calls to Slurm wait)
        self.slurmctld_down = False
        self._hostile: dict[str, int] = {}
        self._slurmd: str | None = None
        self._health: list[float | None] = []
        self._records_at_attack = 0
        self._cycles_at_attack: int | None = None

    # ------------------------------------------------------------------ the loop
    @property
    def over(self) -> bool:
        """True once every fault has ended."""
        return all(r.state == "over" for r in self.records)

    @property
    def misbehaving_jobs(self) -> list[int]:
        """Slurm ids of the jobs the faults submitted."""
        return [j for r in self.records for j in r.job_ids]

    def tick(self, now_s: float) -> None:
        """Begin what is due, advance what is under way, end what has lasted long enough."""
        for i, rec in enumerate(self.records):
            try:
                if may_begin(self.records, i, now_s):
                    rec.state, rec.began_s = "active", now_s
                    rec.ends_s = now_s + rec.fault.duration_s
                    self.say(f"t={now_s:5.0f} s: fault {rec.fault.name}: {rec.fault.what}")
                if rec.state == "active":
                    getattr(self, f"_{rec.fault.name}")(rec, now_s)
            except ElasticSlurmError as exc:
                # Slurm or the controller misbehaved while a fault was being injected: note it
                # and try again next tick (the fault is not over)
                rec.notes.append(f"t={now_s:.0f}: {exc}".splitlines()[0])
                log.info("fault %s: %s", rec.fault.name, exc)

    def _end(self, rec: FaultRecord, ok: bool, note: str = "") -> None:
        rec.state, rec.ok = "over", ok
        if note:
            rec.notes.append(note)
        self.say(
            f"fault {rec.fault.name} over: {'ok' if ok else 'NOT OK'}{f' ({note})' if note else ''}"
        )

    def _submit(self, rec: FaultRecord, req: ElasticRequest) -> int:
        job_id = api.submit(
            req,
            self.slurm,
            workdir=self.out_dir / "jobs",
            output=str(self.out_dir / "jobs" / "%j.out"),
            python=self.python,
            controller=self.url,
            mpi_env=self.mpi_env,
        )
        rec.job_ids.append(job_id)
        return job_id

    # ------------------------------------------------------------------ the faults
    def _ignoring_job(self, rec: FaultRecord, now_s: float) -> None:
        if not rec.job_ids:
            req = misbehave.ignoring_request(self.out_dir, self.nodes, rec.fault.duration_s)
            job_id = self._submit(rec, req)
            rec.injected = True
            rec.notes.append(f"job {job_id} submitted")
        if now_s >= (rec.ends_s or 0):
            # judged at the end of the soak (orders it got, overdue records); here: it ran
            self._end(rec, True)

    def _controller_kill(self, rec: FaultRecord, now_s: float) -> None:
        if not rec.injected:
            self.controller_held = True
            self.controller.kill()
            rec.injected = True
            rec.notes.append(f"SIGKILL at t={now_s:.0f} s")
            return
        if now_s >= (rec.ends_s or 0):
            self._restart_controller(rec)

    def _restart_controller(self, rec: FaultRecord) -> None:
        try:
            self.controller.start()
        except ControllerError as exc:
            rec.notes.append(f"restart failed: {exc}")
            return  # tried again next tick
        self.controller_held = False
        self._end(rec, True, f"restarted, pid {self.controller.pid}")

    def _controller_kill_in_resize(self, rec: FaultRecord, now_s: float) -> None:
        if not rec.injected:
            open_now = open_resizes(self.controller.journal)
            waited = now_s - (rec.began_s or now_s)
            if not open_now and waited < 90:
                rec.ends_s = now_s + rec.fault.duration_s
                return  # wait for a resize under way, up to 90 s
            self.controller_held = True
            self.controller.kill()
            rec.injected = True
            rec.notes.append(
                f"SIGKILL at t={now_s:.0f} s with open resizes {open_now}"
                if open_now
                else f"SIGKILL at t={now_s:.0f} s: no resize was open within 90 s"
            )
            return
        if now_s >= (rec.ends_s or 0):
            self._restart_controller(rec)

    def _slurmd_kill(self, rec: FaultRecord, now_s: float) -> None:
        if self._slurmd is None:
            busy = sorted(
                (node, j.job_id)
                for j in self.slurm.jobs()
                if j.model_state is JobState.RUNNING
                for node in j.nodes
            )
            node, holder = busy[-1] if busy else (f"{self._prefix()}1", None)
            self._slurmd = f"slurmd@{node}"
            self.daemons.kill(self._slurmd)
            rec.injected = True
            rec.notes.append(
                f"{self._slurmd} SIGKILLed" + (f" (node of job {holder})" if holder else "")
            )
            return
        if now_s >= (rec.ends_s or 0):
            self.daemons.start(self._slurmd)
            self._end(rec, True, f"{self._slurmd} started again")

    def _prefix(self) -> str:
        cfg = self.daemons.cluster.cfg
        return cfg.node_prefix

    def _slurmctld_outage(self, rec: FaultRecord, now_s: float) -> None:
        if not rec.injected:
            rec.down_epoch_s = (time.time(), math.inf)
            self.daemons.kill("slurmctld", signal.SIGTERM)
            self.slurmctld_down = True
            rec.injected = True
            rec.notes.append(f"slurmctld stopped at t={now_s:.0f} s")
            return
        if now_s >= (rec.ends_s or 0):
            alive = self.controller.alive()
            rec.notes.append(f"controller {'alive' if alive else 'DEAD'} at the outage's end")
            self.daemons.start("slurmctld")
            self.slurmctld_down = False
            try:
                wait_for(
                    lambda: slurmctld_up(
                        self.slurm.transport.run(commands.ping(), timeout_s=10).stdout
                    ),
                    timeout_s=60,
                    what="slurmctld to answer after its restart",
                    interval_s=0.5,
                )
            except DeadlineExceeded:
                self._end(rec, False, "slurmctld did not answer within 60 s of its restart")
                return
            if rec.down_epoch_s is not None:
                rec.down_epoch_s = (rec.down_epoch_s[0], time.time())
            self._end(rec, alive, "slurmctld started again and answers")

    def _hostile_jobdir(self, rec: FaultRecord, now_s: float) -> None:
        jobs = self.out_dir / "jobs"
        if not self._hostile:
            for kind in misbehave.ATTACKS:
                req = misbehave.hostile_request(kind, self.nodes, 2 * rec.fault.duration_s)
                self._hostile[kind] = self._submit(rec, req)
            rec.notes.append(f"jobs {self._hostile}")
            return
        if not rec.injected:
            dirs = {k: misbehave.job_dir(jobs, j) for k, j in self._hostile.items()}
            waited = now_s - (rec.began_s or now_s)
            if not all(misbehave.ready(d) for d in dirs.values()) and waited < 240:
                rec.ends_s = now_s + rec.fault.duration_s
                return  # wait until each job runs and talks to the controller
            self._records_at_attack = journal_size(self.controller.journal)
            self._cycles_at_attack = self.controller.cycles()
            attacked = 0
            for kind, d in dirs.items():
                if misbehave.ready(d):
                    rec.notes.append(misbehave.attack(kind, d, self.bait))
                    attacked += 1
                else:
                    rec.notes.append(f"{kind}: job {self._hostile[kind]} never started")
            rec.injected = attacked == len(dirs)
            if not rec.injected:
                self._end(rec, False, f"{attacked} of {len(dirs)} directories attacked")
            return
        self._health.append(health_s(self.url))
        if now_s < (rec.ends_s or 0):
            return
        answered = [h for h in self._health if h is not None]
        untouched = misbehave.bait_untouched(self.bait)
        alive = self.controller.alive()
        cycles = self.controller.cycles()
        if cycles is not None and self._cycles_at_attack is not None:
            # the loop's own count (metrics served): it went on cycling
            grew = cycles > self._cycles_at_attack + 10
            loop = f"{cycles - self._cycles_at_attack} cycles since the attacks"
        else:  # no metrics: the journal must have grown (jobs keep coming and going)
            grew = journal_size(self.controller.journal) > self._records_at_attack
            loop = f"journal {'grew' if grew else 'DID NOT GROW'} since the attacks"
        rec.notes.append(
            f"bait {'untouched' if untouched else 'CHANGED'}; /health answered "
            f"{len(answered)}/{len(self._health)} probes"
            + (f" (slowest {max(answered):.2f} s)" if answered else "")
            + f"; {loop}; controller "
            + ("alive" if alive else "DEAD")
        )
        self._end(rec, untouched and alive and grew and len(answered) == len(self._health))
