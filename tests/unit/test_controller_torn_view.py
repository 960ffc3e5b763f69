"""The controller never decides on a torn view: jobs and nodes are two queries, and a job
that ends between them is listed running on nodes already idle (seen in the demo: an
expansion of an ending job into its own nodes)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from elastic_slurm.adapter.fake import FakeSlurm
from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.controller.daemon import Controller
from elastic_slurm.controller.journal import Journal
from elastic_slurm.controller.observe import torn_nodes
from elastic_slurm.model.decisions import Decision
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.policy import Policy


class EndsBetweenReads(FakeSlurm):
    """Ends job ``ending`` just after the next job listing is read, before the nodes are."""

    ending: int | None = None

    def jobs(self, job_ids: Sequence[int] = ()) -> list[SlurmJob]:
        listed = super().jobs(job_ids)
        if self.ending is not None:
            job, self.ending = self.ending, None
            self.finish(job)
        return listed


class Seeing(Policy):
    """Decides nothing; keeps every snapshot."""

    name = "seeing"

    def __init__(self) -> None:
        super().__init__(None)
        self.seen: list[ClusterSnapshot] = []

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        self.seen.append(snapshot)
        return []


def idle_yet_held(snapshot: ClusterSnapshot) -> set[str]:
    held = {n for j in snapshot.running() for n in j.nodes}
    return held & set(snapshot.idle_nodes())


@pytest.mark.usefixtures("fictional_users")
def test_a_job_ending_between_the_two_reads_is_read_again(tmp_path: Path) -> None:
    slurm = EndsBetweenReads(("n1", "n2", "n3", "n4"))
    policy = Seeing()
    controller = Controller(slurm, policy, Journal(), min_resize_interval_s=0.0)
    first = slurm.sbatch(["--nodes=2", "--time=60", f"--chdir={tmp_path}"])
    second = slurm.sbatch(["--nodes=2", "--time=60", f"--chdir={tmp_path}"])
    controller.step()
    assert {j.job_id for j in policy.seen[-1].running()} == {first, second}
    slurm.ending = first  # ends after the jobs are listed, before the nodes are
    controller.step()
    seen = policy.seen[-1]
    assert idle_yet_held(seen) == set()
    assert [j.job_id for j in seen.running()] == [second]  # the job's later state
    assert len(seen.idle_nodes()) == 2


def test_torn_nodes_names_the_idle_nodes_of_running_jobs() -> None:
    slurm = FakeSlurm(("n1", "n2", "n3"))
    job = slurm.sbatch(["--nodes=2", "--time=60", "--chdir=/tmp"])
    listed, nodes = slurm.jobs(), slurm.nodes()
    assert torn_nodes(listed, nodes) == []
    slurm.finish(job)
    assert sorted(torn_nodes(listed, slurm.nodes())) == sorted(listed[0].nodes)
    assert listed[0].model_state is JobState.RUNNING
    assert torn_nodes(slurm.jobs(), slurm.nodes()) == []


@pytest.mark.usefixtures("fictional_users")
def test_a_view_still_torn_never_shows_a_held_node_idle(tmp_path: Path) -> None:
    class AlwaysTorn(FakeSlurm):
        """Lists its first job as running long after it ended (a stuck squeue answer)."""

        stale: list[SlurmJob] | None = None

        def jobs(self, job_ids: Sequence[int] = ()) -> list[SlurmJob]:
            return self.stale if self.stale is not None else super().jobs(job_ids)

    slurm = AlwaysTorn(("n1", "n2", "n3", "n4"))
    policy = Seeing()
    controller = Controller(slurm, policy, Journal(), min_resize_interval_s=0.0)
    job = slurm.sbatch(["--nodes=2", "--time=60", f"--chdir={tmp_path}"])
    slurm.stale = slurm.jobs()
    slurm.finish(job)
    controller.step()
    seen = policy.seen[-1]
    assert idle_yet_held(seen) == set()
    assert len(seen.idle_nodes()) == 2  # the two nodes no listed job holds
