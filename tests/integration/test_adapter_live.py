"""The adapter against the real local cluster, checked with Slurm's own tools."""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from elastic_slurm import api
from elastic_slurm.adapter.hostlist import expand
from elastic_slurm.errors import InvalidRequest, ResizeError
from elastic_slurm.model import ElasticRequest, JobKind

from .helpers import (
    all_idle,
    helpers_alive,
    job_state,
    sacct_sizes,
    scontrol_job,
    scontrol_nodes,
    slurm_held,
    wait,
)

pytestmark = pytest.mark.slurm


def _next_second() -> None:
    """Let the clock pass a whole second: accounting keys a job's allocation records by the
    second of each resize, so two resizes within one second leave one record (seen on 22.05)."""
    t = time.time()
    wait(lambda: time.time() >= int(t) + 1.05, 2, "the next second")


def _sleeper(slurm, tmp: Path, nodes: int, name: str = "sleeper") -> int:
    wait(all_idle, 60, "all nodes idle before the test")
    req = ElasticRequest(
        program=("/bin/sleep", "300"),
        nodes_min=nodes,
        nodes_max=nodes,
        job_name=name,
        walltime=timedelta(minutes=10),
    )
    job = api.submit(req, slurm, workdir=tmp, output=str(tmp / "%j.out"))
    wait(lambda: job_state(job) == "RUNNING", 30, f"job {job} to start")
    return job


def test_grow_and_shrink_to_exact_nodes(transport_slurm, shared_tmp, grow_path):
    slurm = transport_slurm
    job = _sleeper(slurm, shared_tmp, 2)
    try:
        before = slurm_held(job)
        _next_second()
        grown = slurm.grow(job, 2, path=grow_path, grant_timeout_s=20)
        assert grown.path == grow_path and len(grown.added) == 2
        # Slurm itself reports the grown allocation
        assert slurm_held(job) == before | set(grown.added)
        if grow_path == "merge":
            assert scontrol_job(job)["NumNodes"] == "4"
            assert helpers_alive(job) == []  # the expander was merged
            # accounting sees each size (slurmctld tells slurmdbd asynchronously)
            wait(lambda: sacct_sizes(job)[-1][1] == 4, 20, "sacct to record 4 nodes")
        else:
            assert scontrol_job(job)["NumNodes"] == "2"  # the job itself is unchanged
            (sibling,) = helpers_alive(job)
            assert set(scontrol_nodes(sibling)) == set(grown.added)
            # it cannot outlive the job: its time limit ends no later than the job's
            assert scontrol_job(sibling)["EndTime"] <= scontrol_job(job)["EndTime"]
        _next_second()
        # shrink to a non-contiguous exact list that keeps the batch host
        batch = scontrol_job(job)["BatchHost"]
        keep = [batch, grown.added[-1]]
        assert set(slurm.shrink(job, keep)) == set(keep)
        assert slurm_held(job) == set(keep)
        if grow_path == "merge":
            assert scontrol_job(job)["NumNodes"] == "2"
            wait(lambda: sacct_sizes(job)[-1][1] == 2, 20, "sacct to record 2 nodes")
        else:
            assert set(scontrol_nodes(sibling)) == {grown.added[-1]}  # the sibling shrank
        _next_second()
        # grow again after a shrink (needs slurmdbd on 22.05)
        slurm.grow(job, 1, path=grow_path, grant_timeout_s=20)
        assert len(slurm_held(job)) == 3
        if grow_path == "merge":
            wait(lambda: sacct_sizes(job)[-1][1] == 3, 20, "sacct to record 3 nodes")
            records = sacct_sizes(job)
            assert [nn for _s, nn, _nl in records] == [2, 4, 2, 3], records
            assert [s for s, _nn, _nl in records[:3]] == ["RESIZING"] * 3
            assert set(expand(records[2][2])) == set(keep)
        # shrinking off every sibling node cancels the sibling allocations
        slurm.shrink(job, [batch])
        assert slurm_held(job) == {batch} and helpers_alive(job) == []
    finally:
        slurm.cancel_job(job)
    wait(all_idle, 30, "all nodes idle")
    assert helpers_alive(job) == []


def test_added_nodes_are_not_given_to_another_job(transport_slurm, shared_tmp, grow_path):
    slurm = transport_slurm
    job = _sleeper(slurm, shared_tmp, 2)
    other = None
    try:
        slurm.grow(job, 2, path=grow_path, grant_timeout_s=20)
        req = ElasticRequest(program=("/bin/true",), job_name="intruder")
        other = api.submit(req, slurm, workdir=shared_tmp, output=str(shared_tmp / "%j.out"))
        # once the scheduler has looked at it, it must wait for resources (with cons_tres,
        # 22.05 starts it on a merged node; a sibling is exclusive)
        reason = wait(
            lambda: (
                scontrol_job(other)["Reason"] in ("Resources", "Priority")
                or job_state(other) != "PENDING"
            ),
            20,
            "the scheduler to consider it",
        )
        assert reason is True and job_state(other) == "PENDING", scontrol_job(other)
    finally:
        slurm.cancel_job(job)
        if other:
            slurm.cancel(other)
    wait(all_idle, 30, "all nodes idle")


def test_grow_without_free_nodes_is_refused_and_leaves_nothing(
    transport_slurm, shared_tmp, grow_path
):
    slurm = transport_slurm
    job = _sleeper(slurm, shared_tmp, 3)
    try:
        with pytest.raises(ResizeError, match=r"no 2 node\(s\) granted .* within 2 s"):
            slurm.grow(job, 2, path=grow_path, grant_timeout_s=2)
        # rolled back: the job has exactly its nodes, no expander or sibling is left
        assert len(slurm_held(job)) == 3 and len(scontrol_nodes(job)) == 3
        assert helpers_alive(job) == []
        assert job_state(job) == "RUNNING"
    finally:
        slurm.cancel_job(job)
    wait(all_idle, 30, "all nodes idle")


def test_shrink_refuses_nodes_the_job_does_not_have(transport_slurm, shared_tmp):
    slurm = transport_slurm
    job = _sleeper(slurm, shared_tmp, 2)
    try:
        nodes = scontrol_nodes(job)
        foreign = next(n for n in ("n1", "n2", "n3", "n4") if n not in nodes)
        with pytest.raises(ResizeError, match="subset"):
            slurm.shrink(job, [nodes[0], foreign])
        with pytest.raises(ResizeError, match="non-empty"):
            slurm.shrink(job, [])
        assert set(scontrol_nodes(job)) == set(nodes)
        assert job_state(job) == "RUNNING"
    finally:
        slurm.cancel(job)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes_min": 3, "nodes_max": 2, "kind": JobKind.MALLEABLE}, "impossible node range 3-2"),
        ({"nodes_min": 9, "nodes_max": 9}, "at least 9 node"),
        ({"program": ("/no/such/program",)}, "does not exist"),
        ({"program": ("no-such-command-xyz",)}, "not on PATH"),
    ],
)
def test_bad_requests_are_refused_before_submission(transport_slurm, shared_tmp, kwargs, message):
    slurm = transport_slurm
    before = {j.job_id for j in slurm.jobs()}
    with pytest.raises(InvalidRequest, match=message):
        req = ElasticRequest(**{"program": ("/bin/true",), **kwargs})
        api.submit(req, slurm, workdir=shared_tmp, python=sys.executable)
    assert {j.job_id for j in slurm.jobs()} == before


def test_moldable_job_starts_within_its_range(transport_slurm, shared_tmp):
    slurm = transport_slurm
    wait(all_idle, 60, "all nodes idle before the test")
    req = ElasticRequest(
        program=("/bin/sleep", "30"),
        kind=JobKind.MOLDABLE,
        nodes_min=2,
        nodes_max=3,
        job_name="moldable",
        walltime=timedelta(minutes=5),
    )
    job = api.submit(req, slurm, workdir=shared_tmp, output=str(shared_tmp / "%j.out"))
    try:
        wait(lambda: job_state(job) == "RUNNING", 30, "the moldable job to start")
        fields = scontrol_job(job)
        assert 2 <= int(fields["NumNodes"]) <= 3  # Slurm chose the size within the range
        assert len(scontrol_nodes(job)) == int(fields["NumNodes"])
        assert slurm.job(job).comment == "elastic-slurm:kind=moldable;min=2;max=3"
    finally:
        slurm.cancel(job)
