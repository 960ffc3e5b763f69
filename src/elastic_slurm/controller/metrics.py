"""The controller's metrics for operators, in Prometheus' exposition format (``prometheus_client``).

Every metric lives in one registry of its own (:data:`REGISTRY`), so tests and several
controllers in one process do not collide with ``prometheus_client``'s global one. The code
records through the small functions below (one per event), never through the metric objects,
so the names and labels are defined once, here. ``controller run`` serves them when the site
config sets ``controller.metrics_address`` (:func:`serve`).

Names follow Prometheus' conventions: ``elastic_slurm_`` prefix, base units (seconds), ``_total``
for counters.
"""

from __future__ import annotations

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
except ImportError:  # a job's node without it (a flavour's chroot): recording does nothing
    from elastic_slurm.controller._nometrics import (  # type: ignore[assignment]
        CollectorRegistry,
        Counter,
        Gauge,
        Histogram,
        start_http_server,
    )

#: The registry of the controller's metrics.
REGISTRY = CollectorRegistry(auto_describe=True)

_CYCLES = Counter(
    "elastic_slurm_cycles", "Controller cycles, by result", ["result"], registry=REGISTRY
)
_CYCLE_SECONDS = Histogram(
    "elastic_slurm_cycle_seconds", "Duration of one controller cycle (seconds)", registry=REGISTRY
)
_DECISIONS = Counter(
    "elastic_slurm_decisions",
    "Policy decisions, by kind and whether they were legal",
    ["kind", "legal"],
    registry=REGISTRY,
)
_RESIZES = Counter(
    "elastic_slurm_resizes",
    "Resizes ended, by action and outcome",
    ["action", "outcome"],
    registry=REGISTRY,
)
_PHASE_SECONDS = Histogram(
    "elastic_slurm_resize_phase_seconds",
    "Duration of a resize's phases (seconds)",
    ["phase"],
    registry=REGISTRY,
)
_SLURM_SECONDS = Histogram(
    "elastic_slurm_slurm_call_seconds",
    "Latency of calls to Slurm (seconds), by operation",
    ["operation"],
    registry=REGISTRY,
)
_REFUSALS = Counter(
    "elastic_slurm_protocol_refusals",
    "Protocol requests refused, by HTTP status",
    ["status"],
    registry=REGISTRY,
)
_SKIPPED = Counter(
    "elastic_slurm_jobs_skipped",
    "Jobs left out of a cycle because their input was unusable",
    registry=REGISTRY,
)
_STRETCHED = Counter(
    "elastic_slurm_time_limits_stretched",
    "Time limits stretched after a shrink",
    registry=REGISTRY,
)
_SLURM_UP = Gauge(
    "elastic_slurm_slurm_reachable",
    "1 while slurmctld answers, 0 during an outage",
    registry=REGISTRY,
)


def cycle(duration_s: float, result: str) -> None:
    """One cycle ended after ``duration_s`` seconds; ``result``: ``ok``, ``error`` or ``outage``."""
    _CYCLES.labels(result=result).inc()
    _CYCLE_SECONDS.observe(max(0.0, duration_s))


def decision(kind: str, legal: bool) -> None:
    """The policy made a decision of ``kind`` (``Start``, ``Expand``, ...); ``legal`` or refused."""
    _DECISIONS.labels(kind=kind, legal=str(bool(legal)).lower()).inc()


def resize(action: str, outcome: str, phases_s: dict[str, float] | None = None) -> None:
    """A resize (``expand``/``shrink``) ended with ``outcome``; its phases' durations (seconds)."""
    _RESIZES.labels(action=action, outcome=outcome).inc()
    for phase, seconds in (phases_s or {}).items():
        _PHASE_SECONDS.labels(phase=phase).observe(max(0.0, float(seconds)))


def slurm_call(operation: str, seconds: float) -> None:
    """A call to Slurm (``jobs``, ``nodes``, ``shrink``, ...) took ``seconds``."""
    _SLURM_SECONDS.labels(operation=operation).observe(max(0.0, seconds))


def refusal(status: int) -> None:
    """The protocol server refused a request with HTTP ``status``."""
    _REFUSALS.labels(status=str(status)).inc()


def job_skipped() -> None:
    """A job was left out of a cycle because what it wrote is unusable."""
    _SKIPPED.inc()


def time_limit_stretched() -> None:
    """A shrunk job's time limit was stretched (:mod:`elastic_slurm.controller.stretch`)."""
    _STRETCHED.inc()


def slurm_reachable(up: bool) -> None:
    """Whether slurmctld answers (``True``) or not (``False``)."""
    _SLURM_UP.set(1 if up else 0)


def serve(address: str) -> None:
    """Serve the metrics over HTTP on ``address`` (``host:port``), in a daemon thread.

    Raises
    ------
    OSError
        When the address cannot be bound.
    """
    host, _, port = address.rpartition(":")
    start_http_server(int(port), addr=host, registry=REGISTRY)
