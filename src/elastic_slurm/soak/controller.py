"""The controller under test, as the operator runs it: ``elastic-slurm controller run``.

:class:`ControllerProcess` starts it on a journal, SIGKILLs it and starts it again on the same
journal, notices when it died without being killed, and measures it from the outside:
resident memory (``VmHWM``, the peak, from ``/proc/PID/status``), CPU time (``utime + stime``
from ``/proc/PID/stat``) and, when the site config serves them
(``controller.metrics_address``), its Prometheus metrics, of which the cycle-time histogram
``elastic_slurm_cycle_seconds`` is kept per incarnation (a restarted controller starts its
counters at zero).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from elastic_slurm.errors import ElasticSlurmError

_TICKS = os.sysconf("SC_CLK_TCK")
_STARTED = "jobs talk to"  # the line `controller run` prints once it serves


class ControllerError(ElasticSlurmError):
    """The controller did not start."""


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of ``pid`` (seconds), ``None`` when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def peak_rss_bytes(pid: int) -> int | None:
    """The peak resident set size of ``pid`` (``VmHWM``, bytes), ``None`` when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def histogram_buckets(text: str, name: str) -> dict[float, float]:
    r"""Cumulative bucket counts (upper bound in seconds -> count) of histogram ``name``.

    ``text`` is Prometheus' exposition format.

    >>> t = 'x_seconds_bucket{le="0.1"} 3.0\nx_seconds_bucket{le="+Inf"} 4.0\n'
    >>> t = "# TYPE x_seconds histogram\n" + t + "x_seconds_count 4.0\nx_seconds_sum 1.0\n"
    >>> histogram_buckets(t, "x_seconds")
    {0.1: 3.0, inf: 4.0}
    """
    out: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != name:
            continue
        for sample in family.samples:
            if sample.name == f"{name}_bucket":
                out[float(sample.labels["le"])] = float(sample.value)
    return out


@dataclass
class ControllerProcess:
    """``elastic-slurm --site SITE controller run --policy POLICY --journal JOURNAL``.

    Parameters
    ----------
    site_file
        The site config (its ``controller`` section sets the rest).
    policy
        The policy's registry name.
    journal, log
        The journal (kept across restarts) and the log every incarnation appends to.
    metrics_address
        ``host:port`` of its Prometheus metrics, ``None`` when the site serves none.
    run_as
        A command prefix that runs it as another user (``setpriv ... --``), or empty.
    env
        Its environment variables on top of the soak's (``HOME``, ``XDG_CACHE_HOME`` of
        that user).
    """

    site_file: Path
    policy: str
    journal: Path
    log: Path
    metrics_address: str | None = None
    run_as: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    #: SIGKILLs sent by the soak
    kills: int = 0
    #: exits nobody asked for (exit status each)
    unexpected_exits: list[int] = field(default_factory=list)
    #: the highest VmHWM seen over every incarnation (bytes)
    peak_rss: int = 0
    #: starts that failed (it exited, or did not serve in time)
    failed_starts: int = 0
    #: when it was last started (``time.monotonic()``)
    last_start: float = 0.0
    #: per incarnation, the last cycle-time buckets scraped
    cycle_buckets: list[dict[float, float]] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The running controller's PID."""
        return self.proc.pid if self.proc is not None else None

    def start(self, timeout_s: float = 60.0) -> None:
        """Start it and wait until it serves jobs.

        Raises
        ------
        ControllerError
            It exited, or did not say it serves within ``timeout_s`` seconds.
        """
        argv = [*self.run_as, sys.executable, "-m", "elastic_slurm", "--site", str(self.site_file)]
        argv += ["controller", "run", "--policy", self.policy, "--journal", str(self.journal)]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                argv,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env} if self.env else None,
                cwd="/" if self.run_as else None,  # the soak's may be closed to the user
            )
        self.last_start = time.monotonic()
        self.cycle_buckets.append({})
        deadline = time.monotonic() + timeout_s
        while True:
            with open(self.log, "rb") as fh:
                fh.seek(offset)
                if _STARTED.encode() in fh.read():
                    return
            if self.proc.poll() is not None:
                self.proc = None
                self.failed_starts += 1
                raise ControllerError(f"the controller exited at start; see {self.log}")
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                self.proc = None
                self.failed_starts += 1
                raise ControllerError(f"the controller did not start in {timeout_s:g} s")
            time.sleep(0.2)

    def alive(self) -> bool:
        """True while it runs; an exit nobody asked for is recorded."""
        if self.proc is None:
            return False
        rc = self.proc.poll()
        if rc is None:
            return True
        self.unexpected_exits.append(rc)
        self.proc = None
        return False

    def sample(self) -> None:
        """Record its peak memory and, when served, its cycle-time histogram."""
        if self.proc is None:
            return
        rss = peak_rss_bytes(self.proc.pid)
        if rss is not None:
            self.peak_rss = max(self.peak_rss, rss)
        if self.metrics_address is None:
            return
        try:
            with urllib.request.urlopen(f"http://{self.metrics_address}/metrics", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return  # not served (yet), or busy: the last scrape stands
        buckets = histogram_buckets(text, "elastic_slurm_cycle_seconds")
        if buckets:
            self.cycle_buckets[-1] = buckets

    def cycles(self) -> int | None:
        """Cycles the running incarnation has counted (``None``: its metrics are not served)."""
        self.sample()
        last = self.cycle_buckets[-1] if self.proc is not None and self.cycle_buckets else {}
        return int(max(last.values())) if last else None

    def kill(self) -> None:
        """SIGKILL it (after a last sample) and reap it."""
        if self.proc is None:
            return
        self.sample()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None
        self.kills += 1

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop it as an operator would (SIGTERM, then SIGINT, then SIGKILL)."""
        if self.proc is None:
            return
        self.sample()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout_s / 2)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def idle_cpu(self, window_s: float) -> float | None:
        """Its CPU use over the next ``window_s`` seconds, in percent of one core."""
        pid = self.pid
        if pid is None:
            return None
        t0, c0 = time.monotonic(), cpu_seconds(pid)
        time.sleep(window_s)
        t1, c1 = time.monotonic(), cpu_seconds(pid)
        if c0 is None or c1 is None:
            return None
        return 100.0 * (c1 - c0) / (t1 - t0)
