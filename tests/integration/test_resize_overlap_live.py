"""The overlapped resize path on the real cluster: a waiting successor, a short pause.

heat2d with ranks on several nodes is grown 2 -> 4 and shrunk 4 -> 2 by hand-written orders
(as ``test_runtime_live.py`` does); the next generation must have been started while the old
one computed (a ``launch`` event with ``successor_of``), the application's pause must be well
below the resize's total, the vacated nodes empty before they are given back, and the result
identical to the serial computation. A successor that is not ready in time is discarded: the
job goes on at its size with its data, and the controller gives the grant back.
"""

from __future__ import annotations

import time

import pytest

from elastic_slurm.adapter.capabilities import cached_probe
from elastic_slurm.model.resize_order import AckStatus, ResizeAction

from .helpers import all_idle, job_state, pids_in_node, slurm_held, wait
from .test_runtime_live import _heat2d, _order, _shrink, _summary

pytestmark = pytest.mark.slurm


def test_a_waiting_successor_takes_over_grow_and_shrink(slurm, shared_tmp):
    job, jobdir = _heat2d(slurm, shared_tmp, start=2, iterations=1500)
    try:
        start_nodes = sorted(slurm_held(job))
        path = cached_probe(slurm.transport, "local", refresh=True).grow_path
        grown = slurm.grow(job, 2, path=path, grant_timeout_s=20)
        _order(jobdir, 1, ResizeAction.EXPAND, grown.nodes)
        ack = wait(lambda: jobdir.final_ack(1), 90, "order 1 to be done")
        assert ack.status is AckStatus.DONE and ack.strategy == "restart", ack
        assert ack.ranks == 4 and set(ack.nodes) == slurm_held(job)
        assert {"pause", "successor", "checkpoint", "restore"} <= set(ack.phases_s), ack
        assert ack.phases_s["pause"] < 1.0, ack.phases_s  # the sequential relaunch took 2-3 s
        _shrink(slurm, jobdir, job, 2, start_nodes)  # checks the vacated nodes are empty
        ack = wait(lambda: jobdir.final_ack(2), 90, "order 2 to be done")
        assert ack.status is AckStatus.DONE and ack.ranks == 2, ack
        assert ack.phases_s["pause"] < 1.0, ack.phases_s
        wait(lambda: job_state(job) == "COMPLETED", 240, "heat2d to complete")
    finally:
        slurm.cancel_job(job)
    launches = [e for e in jobdir.events() if e["event"] == "launch"]
    assert [e.get("successor_of") for e in launches] == [None, 1, 2]
    # while each successor started, the old ranks computed at a lower priority (voted at a
    # resize point, so on every rank): its start went first where they shared cores
    yielded = [(e["seq"], e["nice"]) for e in jobdir.events() if e["event"] == "yielded"]
    assert yielded == [(1, 10), (2, 10)], yielded
    summary = _summary(shared_tmp, job)
    assert summary["resizes"] == 2 and summary["ranks"] == 2
    assert summary["max_abs_error"] <= 1e-12 and summary["matches_reference"] is True
    wait(all_idle, 30, "all nodes idle")


def test_a_successor_not_ready_in_time_is_discarded_and_the_grant_given_back(slurm, shared_tmp):
    from elastic_slurm.controller.actuate import Actuator
    from elastic_slurm.controller.journal import Journal
    from elastic_slurm.model.decisions import Expand

    # 3,000 paced iterations: at least 30 s, so that the job still runs when the grant is
    # given back. Stopping a successor caught while its daemons start takes 3 s here (mpirun's
    # orderly shutdown; up to 5 s before SIGKILL), and with a slow grant 12 s were too few once.
    job, jobdir = _heat2d(
        slurm,
        shared_tmp,
        start=2,
        iterations=3000,
        env={"ELASTIC_SLURM_SUCCESSOR_TIMEOUT_S": "0.3"},  # no generation starts that fast
    )
    before = slurm_held(job)
    t0 = time.monotonic()
    try:
        path = cached_probe(slurm.transport, "local", refresh=True).grow_path
        actuator = Actuator(slurm, Journal(), grow_path=path, grant_timeout_s=20)
        listed = {j.job_id: j for j in slurm.jobs()}
        actuator.apply([Expand(job, 2, "test")], listed, {job: tuple(before)})
        granted_s = time.monotonic() - t0
        assert job in actuator.in_flight and len(slurm_held(job)) == 4  # granted
        added = slurm_held(job) - before
        outcome = wait(
            lambda: actuator.poll({j.job_id: j for j in slurm.jobs()}), 90, "the order to fail"
        )[0]
        failed_s = time.monotonic() - t0
        assert outcome.ok is False and "not ready" in outcome.message, outcome
        # the grant was given back
        assert slurm_held(job) == before, (
            f"job {job} is {job_state(job)}; granted after {granted_s:.1f} s, the order failed "
            f"after {failed_s:.1f} s; events: {jobdir.events()}"
        )
        assert job_state(job) == "RUNNING"
        # the discarded successor had left the nodes before they were given back
        for node in added:
            assert not [c for c in pids_in_node(node) if "heat2d" in c], pids_in_node(node)
        events = [e for e in jobdir.events() if e.get("successor_of") == 1]
        assert [e["event"] for e in events] == ["launch", "exit"], events
        wait(lambda: job_state(job) == "COMPLETED", 240, "heat2d to complete")
    finally:
        slurm.cancel_job(job)
    summary = _summary(shared_tmp, job)
    assert summary["matches_reference"] is True and summary["ranks"] == 2
    assert summary["resizes"] == 0  # it never changed size
    wait(all_idle, 60, "all nodes idle")
