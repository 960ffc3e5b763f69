"""Klein and Pérez's synthetic evolution profiles (section 5.1), as simulator jobs.

C. Klein and C. Pérez, "Towards Scheduling Evolving Applications", CoreGRID/ERCIM Workshop,
2011, section 5.1 (Klein's thesis, section 5.4.1): "a test case is made of a uniform random
choice of the number of applications, their number of steps, as well as the duration and
requested node-count of each step": 15 to 20 applications per test, 1 to 10 steps per
application, 500 to 3600 s per step, 1 to 75 nodes per step, all submitted at once.

Choices the paper leaves open:

* **Draws.** Integers, uniform and inclusive (``random.randint``), in this order: the number
  of applications; then for each application its number of steps, then each step's duration
  and node count.
* **Machine size.** The paper does not give it. 100 nodes (:data:`DEFAULT_NODES`) reproduces
  its rigid baseline (40 % effective utilisation on average; the reproduction reports ours).
* **Equal neighbours.** Two consecutive steps with the same node count are merged into one
  (the application asks for nothing at that border; the simulator has no zero-node request).
  It happens at about one border in 75.

As simulator jobs (:func:`evolving_jobs`), an application is an evolving
:class:`~elastic_slurm.simulator.workload.SimJob` that starts at its first step's node count,
runs for the sum of its step durations whatever its size (speedup ``Amdahl(0.0)``, so
``S(n) = 1``: a step's duration is set by the profile, not by its nodes), and asks, with a
*blocking* :class:`~elastic_slurm.simulator.workload.EvolvingEvent` at the end of each step, for
the node change to the next (section 3.2: it makes no progress until served). Its time limit is
its run time (fully predictable), its range the smallest and largest step. The ``rigid``
baseline of section 5.1 sees each application as one step at its largest node count for the
sum of its durations (:func:`rigid_jobs`).

>>> p = KleinProfiles().draw(random.Random(1))
>>> len(p), len(p[0]), p[0][:2]
(16, 10, ((758.0, 33), (982.0, 64)))
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.speedup import Amdahl
from elastic_slurm.plugins.policies.klein_perez import merge_steps
from elastic_slurm.simulator.workload import EvolvingEvent, SimJob, Workload

Step = tuple[float, int]
"""One step: ``(duration_s, nodes)``."""

Profile = tuple[Step, ...]
"""An evolution profile: the steps in order."""

DEFAULT_NODES = 100
"""Machine size used for the paper's tests (the paper does not state it; see the module)."""


@dataclass(frozen=True)
class KleinProfiles:
    """The test-case generator of section 5.1 (ranges inclusive; see the module docstring).

    Parameters
    ----------
    apps_range
        Fewest and most applications per test.
    steps_range
        Fewest and most steps per application (before merging equal neighbours).
    duration_range_s
        Shortest and longest step, seconds (whole seconds are drawn).
    nodes_range
        Fewest and most nodes per step.
    nodes
        Machine size; every step must fit (``nodes_range[1] <= nodes``).

    Raises
    ------
    InvalidRequest
        For an empty range, a range below 1, or steps wider than the machine.
    """

    apps_range: tuple[int, int] = (15, 20)
    steps_range: tuple[int, int] = (1, 10)
    duration_range_s: tuple[int, int] = (500, 3600)
    nodes_range: tuple[int, int] = (1, 75)
    nodes: int = DEFAULT_NODES

    def __post_init__(self) -> None:
        for name in ("apps_range", "steps_range", "duration_range_s", "nodes_range"):
            lo, hi = getattr(self, name)
            if not 1 <= lo <= hi:
                raise InvalidRequest(f"{name} must satisfy 1 <= low <= high, got {lo}..{hi}")
        if self.nodes_range[1] > self.nodes:
            raise InvalidRequest(
                f"steps of up to {self.nodes_range[1]} nodes do not fit a machine of "
                f"{self.nodes}; give more nodes or a smaller nodes_range"
            )

    def draw(self, rng: random.Random) -> list[Profile]:
        """One test: the applications' profiles, in submission order."""
        out = []
        for _ in range(rng.randint(*self.apps_range)):
            steps = [
                (float(rng.randint(*self.duration_range_s)), rng.randint(*self.nodes_range))
                for _ in range(rng.randint(*self.steps_range))
            ]
            out.append(merge_steps(steps))
        return out

    def tests(self, count: int, seed: int) -> list[list[Profile]]:
        """``count`` tests drawn from ``random.Random(seed)`` one after the other."""
        rng = random.Random(seed)
        return [self.draw(rng) for _ in range(count)]

    def generate(self, seed: int) -> Workload:
        """One test as a simulator workload of evolving jobs (:func:`evolving_jobs`)."""
        return Workload(evolving_jobs(self.draw(random.Random(seed))), self.nodes)


def evolving_jobs(
    profiles: Sequence[Profile], *, submit_s: float = 0.0, first_id: int = 1
) -> tuple[SimJob, ...]:
    """Evolving jobs that follow ``profiles`` exactly (see the module docstring).

    Job ``first_id + i`` is application ``i``; all are submitted at ``submit_s``.

    Raises
    ------
    InvalidRequest
        For an empty profile, a non-positive duration or a node count below 1.

    >>> job = evolving_jobs([((100.0, 2), (300.0, 5))])[0]
    >>> job.runtime_s, job.nodes_requested, job.nodes_max, job.evolving
    (400.0, 2, 5, (EvolvingEvent(at_work=0.25, delta_nodes=3, blocking=True),))
    """
    jobs = []
    for i, raw in enumerate(profiles):
        steps = merge_steps(raw)
        if not steps or any(d <= 0 or n < 1 for d, n in steps):
            raise InvalidRequest(f"application {i}: steps need a positive duration and nodes")
        total = sum(d for d, _ in steps)
        events = []
        done = 0.0
        for (d, n), (_, n_next) in zip(steps, steps[1:], strict=False):
            done += d
            events.append(EvolvingEvent(done / total, n_next - n, blocking=True))
        sizes = [n for _, n in steps]
        jobs.append(
            SimJob(
                job_id=first_id + i,
                submit_s=submit_s,
                runtime_s=total,
                nodes_requested=sizes[0],
                kind=JobKind.EVOLVING,
                nodes_min=min(sizes),
                nodes_max=max(sizes),
                walltime_s=total,
                speedup=Amdahl(0.0),
                evolving=tuple(events),
                evolution_profile=tuple((float(d), int(n)) for d, n in steps),
            )
        )
    return tuple(jobs)


def rigid_jobs(
    profiles: Sequence[Profile], *, submit_s: float = 0.0, first_id: int = 1
) -> tuple[SimJob, ...]:
    """The ``rigid`` baseline's view: each application at its peak for its total duration.

    >>> rigid_jobs([((100.0, 2), (300.0, 5))])[0].nodes_requested
    5
    """
    return tuple(
        SimJob(
            job_id=first_id + i,
            submit_s=submit_s,
            runtime_s=sum(d for d, _ in p),
            nodes_requested=max(n for _, n in p),
            walltime_s=sum(d for d, _ in p),
        )
        for i, p in enumerate(profiles)
    )


def profiles_of(jobs: Sequence[SimJob]) -> dict[int, Profile]:
    """The evolution profiles of evolving jobs, by job id (for policies that are given them).

    Rebuilt from each job's run time and blocking events; other jobs are left out.

    >>> profiles_of(evolving_jobs([((100.0, 2), (300.0, 5))]))
    {1: ((100.0, 2), (300.0, 5))}
    """
    out: dict[int, Profile] = {}
    for job in jobs:
        if job.kind is not JobKind.EVOLVING:
            continue
        steps = []
        size = job.nodes_requested
        done = 0.0
        for event in job.evolving:
            steps.append((round((event.at_work - done) * job.runtime_s, 6), size))
            done = event.at_work
            size += event.delta_nodes
        steps.append((round((1.0 - done) * job.runtime_s, 6), size))
        out[job.job_id] = tuple(steps)
    return out


def as_mapping(profiles: Sequence[Profile], first_id: int = 1) -> Mapping[int, Profile]:
    """Profiles by the job ids :func:`evolving_jobs` gives them."""
    return {first_id + i: p for i, p in enumerate(profiles)}


__all__ = [
    "DEFAULT_NODES",
    "KleinProfiles",
    "Profile",
    "Step",
    "as_mapping",
    "evolving_jobs",
    "merge_steps",
    "profiles_of",
    "rigid_jobs",
]
