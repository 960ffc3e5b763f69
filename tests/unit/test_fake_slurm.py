"""The in-memory Slurm's faults and driving (its contract is in test_backend_contract.py)."""

from __future__ import annotations

import pytest

from elastic_slurm.adapter.fake import FakeSlurm
from elastic_slurm.errors import ResizeError, SlurmCommandError, SlurmUnavailableError

PRIMITIVES = [
    ("version", ()),
    ("jobs", ()),
    ("nodes", ()),
    ("steps", (1000,)),
    ("allocation_history", (1000,)),
    ("release", (1000,)),
    ("cancel", (1000,)),
    ("requeue", (1000,)),
    ("update_nodelist", (1000, ["n1"])),
    ("update_numnodes", (1000, 1)),
    ("set_array_throttle", (1000, 1)),
    ("select_type", ()),
    ("reconfigure", ()),
]


@pytest.mark.parametrize(("name", "args"), PRIMITIVES)
def test_a_controller_that_does_not_answer(name: str, args: tuple) -> None:
    slurm = FakeSlurm()
    job = slurm.sbatch(["--nodes=2"])
    assert job == 1000
    slurm.down = True
    with pytest.raises(SlurmUnavailableError, match="did not answer"):
        getattr(slurm, name)(*args)
    slurm.down = False
    assert slurm.store[job].state == "RUNNING" and len(slurm.store[job].nodes) == 2


def test_down_is_not_an_empty_cluster() -> None:
    slurm = FakeSlurm()
    slurm.sbatch(["--nodes=1"])
    slurm.down = True
    with pytest.raises(SlurmUnavailableError):
        slurm.jobs()
    with pytest.raises(SlurmUnavailableError):
        slurm.grow(1000, 1)
    slurm.down = False
    assert [j.job_id for j in slurm.jobs()] == [1000]


def test_a_call_that_fails_once() -> None:
    slurm = FakeSlurm()
    job = slurm.sbatch(["--nodes=3"])
    slurm.fail("update_nodelist")
    with pytest.raises(ResizeError, match="injected failure"):
        slurm.shrink(job, ["n1"])
    assert slurm.store[job].nodes == ["n1", "n2", "n3"]  # nothing changed
    assert slurm.shrink(job, ["n1"]) == ("n1",)  # the next call works
    assert ("update_nodelist", (job, ("n1",))) in slurm.calls


def test_an_injected_error_of_the_tests_choice() -> None:
    slurm = FakeSlurm()
    slurm.fail("nodes", SlurmCommandError(["sinfo"], 1, "", "boom"), times=2)
    for _ in range(2):
        with pytest.raises(SlurmCommandError, match="boom"):
            slurm.nodes()
    assert len(slurm.nodes()) == 4


def test_jobs_end_only_when_told_and_nodes_can_fail() -> None:
    slurm = FakeSlurm()
    first = slurm.sbatch(["--nodes=2", "--time=5"])
    second = slurm.sbatch(["--nodes=3"])
    assert slurm.store[second].state == "PENDING" and slurm.store[second].reason == "Resources"
    slurm.finish(first)
    assert slurm.store[first].state == "COMPLETED" and slurm.store[second].state == "RUNNING"
    (node,) = [n for n in slurm.store[second].nodes if n != slurm.store[second].batch_host][:1]
    slurm.set_node_state(node, "down")
    assert slurm.store[second].state == "NODE_FAIL"
    assert {n.name: n.state for n in slurm.nodes()}[node] == "down"
    history = slurm.allocation_history(first)
    assert [(r.state, len(r.nodes)) for r in history] == [("COMPLETED", 2)]


def test_a_requeued_job_waits_before_it_starts_again() -> None:
    now = [1000.0]
    slurm = FakeSlurm(clock=lambda: now[0])
    job = slurm.sbatch(["--nodes=1"])
    slurm.requeue(job)
    assert (slurm.store[job].state, slurm.store[job].reason) == ("PENDING", "BeginTime")
    now[0] += slurm.requeue_delay_s + 1
    slurm.jobs()
    assert slurm.store[job].state == "RUNNING"


def test_merge_needs_permit_job_expansion() -> None:
    slurm = FakeSlurm(permit_job_expansion=False)
    job = slurm.sbatch(["--nodes=1", "--time=60"])
    with pytest.raises(ResizeError, match="permit_job_expansion"):
        slurm.grow(job, 1, path="merge")
    assert slurm.grow(job, 1, path="sibling").path == "sibling"


def test_unknown_sbatch_options_are_refused() -> None:
    slurm = FakeSlurm()
    with pytest.raises(SlurmCommandError, match="unrecognized option '--gpus=1'"):
        slurm.sbatch(["--gpus=1"])
    with pytest.raises(SlurmCommandError, match="not available"):
        slurm.sbatch(["--nodes=9"])
    assert slurm.store == {}


def test_a_merge_never_brings_nodes_before_the_batch_host() -> None:
    # Slurm 22.05 moves a job's batch host to its first node after a merge, then refuses the
    # job's completion from the node its script ran on (seen in the soak): an expander must not
    # hold a node that comes before the batch host
    from elastic_slurm.errors import ResizeError

    slurm = FakeSlurm(("n1", "n2", "n3", "n4", "n5"))
    first = slurm.sbatch(["--nodes=2", "--time=60"])  # n1, n2
    job = slurm.sbatch(["--nodes=2", "--time=60"])  # n3, n4
    slurm.cancel(first)  # n1, n2 idle, ahead of job's batch host n3
    assert slurm.job(job).batch_host == "n3"
    grown = slurm.grow(job, 1, path="merge")
    assert grown.added == ("n5",)
    assert slurm.job(job).batch_host == "n3"
    with pytest.raises(ResizeError, match="before its batch host n3"):
        slurm.grow(job, 1, path="merge")  # only n1, n2 are idle now
    allocations = [args for name, args in slurm.calls if name == "allocate"]
    assert len(allocations) == 1  # the second grow was refused before asking Slurm
    assert allocations[0][-1] == ("n1", "n2")  # the first left them out
