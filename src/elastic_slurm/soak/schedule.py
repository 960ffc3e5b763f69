"""The fault schedule of a soak: which faults, when, and for how long (pure).

The schedule is laid over the workload's window (the time during which trace jobs arrive), as
fractions of it, so the 5-minute version and the 30-minute one inject the same faults in the
same order; a fault that is due waits until the one before it is over. Durations are those of
the 30-minute soak scaled by the window, with a floor that keeps each fault long enough to
matter (a slurmctld outage shorter than the controller's Slurm retry window would not be an
outage).

>>> [(f.name, f.at_s, f.duration_s)
...  for f in fault_schedule(1800.0)]  # doctest: +NORMALIZE_WHITESPACE
[('ignoring_job', 180.0, 360.0), ('controller_kill', 360.0, 3.0),
 ('slurmd_kill', 630.0, 30.0), ('slurmctld_outage', 900.0, 120.0),
 ('hostile_jobdir', 1170.0, 180.0), ('controller_kill_in_resize', 1440.0, 3.0)]
>>> {f.name: f.duration_s for f in fault_schedule(300.0)}["slurmctld_outage"]
30.0
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic_slurm.errors import InvalidRequest

#: Every fault a soak injects, in schedule order.
FAULTS = (
    "ignoring_job",
    "controller_kill",
    "slurmd_kill",
    "slurmctld_outage",
    "hostile_jobdir",
    "controller_kill_in_resize",
)

_FULL_WINDOW_S = 1800.0


@dataclass(frozen=True)
class Fault:
    """One scheduled fault.

    Parameters
    ----------
    name
        One of :data:`FAULTS`.
    at_s
        Seconds after the start of the workload at which it is injected.
    duration_s
        How long it lasts (seconds): the outage, the time before a killed process is brought
        back, or how long a misbehaving job runs.
    what
        One line saying what is done.
    background
        It runs beside the others (a misbehaving job); every other fault begins only once
        the faults before it are over, so that one fault's verdict is not another's doing.
    """

    name: str
    at_s: float
    duration_s: float
    what: str
    background: bool = False


def _scaled(full_s: float, window_s: float, floor_s: float) -> float:
    return round(max(floor_s, full_s * window_s / _FULL_WINDOW_S), 1)


def fault_schedule(window_s: float) -> tuple[Fault, ...]:
    """The faults of a soak whose trace jobs arrive over ``window_s`` seconds, in time order.

    Raises
    ------
    InvalidRequest
        ``window_s`` shorter than 120 seconds (the faults would overlap).
    """
    if not window_s >= 120.0:
        raise InvalidRequest(f"a soak's window must be at least 120 s, got {window_s}")
    w = window_s
    return (
        Fault(
            "ignoring_job",
            0.10 * w,
            _scaled(360.0, w, 60.0),
            "a malleable job whose program never reaches a resize point (grace period 5 s)",
            background=True,
        ),
        Fault(
            "controller_kill",
            0.20 * w,
            3.0,
            "the controller is SIGKILLed and restarted on the same journal",
        ),
        Fault(
            "slurmd_kill",
            0.35 * w,
            _scaled(30.0, w, 10.0),
            "the slurmd of a node that runs a job is SIGKILLed, then started again",
        ),
        Fault(
            "slurmctld_outage",
            0.50 * w,
            _scaled(120.0, w, 30.0),
            "slurmctld is stopped (SIGTERM), then started again on its saved state",
        ),
        Fault(
            "hostile_jobdir",
            0.65 * w,
            _scaled(180.0, w, 45.0),
            "three jobs' directories turned hostile: orders/ a symlink to a file outside, "
            "a FIFO as secret, an order numbered 999999999999",
        ),
        Fault(
            "controller_kill_in_resize",
            0.80 * w,
            3.0,
            "the controller is SIGKILLed while a resize is open in its journal, and restarted",
        ),
    )
