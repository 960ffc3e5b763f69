"""Triggers are raised the same way live and simulated (the policy contract's ``trigger``).

One scenario, played twice: in the simulator, and by the controller on the in-memory Slurm
(:class:`~elastic_slurm.adapter.fake.FakeSlurm`, held to the same contract tests as real Slurm)
with the job's side written into its job directory. An evolving job starts; a rigid job comes
and ends; the evolving job asks for a node (a request no policy serves); then it ends. A
policy that records its triggers must see the same events, about the same jobs, in the same
order, in both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_slurm.adapter.fake import FakeSlurm
from elastic_slurm.adapter.tags import ElasticTag
from elastic_slurm.controller.daemon import Controller
from elastic_slurm.controller.journal import Journal
from elastic_slurm.model.decisions import Decision
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot
from elastic_slurm.model.speedup import Linear
from elastic_slurm.model.triggers import Trigger, TriggerKind
from elastic_slurm.plugins.policies.fcfs import FCFS
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.simulator.replay import Simulation
from elastic_slurm.simulator.workload import EvolvingEvent, SimJob

K = TriggerKind


class Recording(FCFS):
    """FCFS (it starts what the simulator holds; live, Slurm starts jobs), noting triggers."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Trigger] = []

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        self.seen.append(trigger)
        return list(super().decide(snapshot, trigger))


def events(seen: list[Trigger], names: dict[int, str]) -> list[tuple[frozenset, tuple[str, ...]]]:
    """The triggers that report an event (periodic cycles left out), jobs by name."""
    return [
        (t.kinds, tuple(sorted(names[j] for j in t.job_ids)))
        for t in seen
        if t.kinds != {K.PERIODIC}
    ]


EXPECTED = [
    (frozenset({K.JOB_SUBMITTED}), ("evolving",)),
    (frozenset({K.JOB_SUBMITTED}), ("rigid",)),
    (frozenset({K.JOB_ENDED}), ("rigid",)),
    (frozenset({K.EVOLVING_REQUEST}), ("evolving",)),
    (frozenset({K.JOB_ENDED}), ("evolving",)),
]


def test_the_simulator_raises_the_scenarios_triggers() -> None:
    jobs = [
        SimJob(
            1,
            0.0,
            100.0,
            2,
            JobKind.EVOLVING,
            1,
            4,
            speedup=Linear(),
            evolving=(EvolvingEvent(0.5, +1),),
        ),
        SimJob(2, 10.0, 20.0, 1),
    ]
    policy = Recording()
    Simulation(jobs, policy, 4).run()
    assert events(policy.seen, {1: "evolving", 2: "rigid"}) == EXPECTED


@pytest.mark.usefixtures("fictional_users")
def test_the_controller_raises_the_same_triggers_live(tmp_path: Path) -> None:
    slurm = FakeSlurm(("n1", "n2", "n3", "n4"))
    policy = Recording()
    controller = Controller(slurm, policy, Journal(), min_resize_interval_s=0.0)

    def submit(nodes: int, tag: str) -> int:
        return slurm.sbatch([f"--nodes={nodes}", "--time=60", f"--chdir={tmp_path}", tag])

    evolving = submit(2, f"--comment={ElasticTag(JobKind.EVOLVING, 1, 4).encode()}")
    controller.step()
    controller.step()  # nothing happened: periodic
    rigid = submit(1, "--job-name=rigid")
    controller.step()
    slurm.finish(rigid)
    controller.step()
    JobDir.for_job(tmp_path, evolving).write_request(1, +1, ranks=2)
    controller.step()
    controller.step()  # the same request, still open: no new event
    slurm.finish(evolving)
    controller.step()
    assert events(policy.seen, {evolving: "evolving", rigid: "rigid"}) == EXPECTED
