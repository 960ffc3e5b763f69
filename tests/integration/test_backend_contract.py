"""One contract, three backends: the in-memory Slurm, and the CLI and pyslurm backends live.

Each test runs once per backend: ``fake`` (:class:`~elastic_slurm.adapter.fake.FakeSlurm`,
always, in milliseconds, no cluster), then ``cli`` and ``pyslurm`` against the real local
cluster (marked ``slurm``). Each checks what the backend did against what the Slurm it drives
really holds (``truth``, :mod:`.contract_helpers`): for the real cluster, what Slurm's own
tools print (``scontrol``, ``squeue``, ``sinfo``); for the fake, its store. The fake passes the
very tests the real backends pass, so it cannot drift from them. The queries are also compared
field by field between the two real backends on the same jobs. The grow tests run on both grow
paths (live, ``grow_path`` toggles ``permit_job_expansion``).

Run only the fake's: ``pytest tests/integration/test_backend_contract.py -m "not slurm"``.
"""

from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path

import pytest

from elastic_slurm import api
from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.adapter.fake import FakeSlurm
from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.tags import decode
from elastic_slurm.config import load_site
from elastic_slurm.config.schema import SiteConfig, SSHTransportConfig
from elastic_slurm.errors import ConfigError, ResizeError, SlurmCommandError
from elastic_slurm.model import ElasticRequest, JobKind

from .contract_helpers import (
    UNKNOWN_JOB,
    FakeTruth,
    RealTruth,
    agree_when_stable,
    sbatch_raw,
)
from .helpers import all_idle, scontrol_job, scontrol_nodes, wait

LIVE = [
    pytest.param("cli", marks=pytest.mark.slurm),
    pytest.param("pyslurm", marks=pytest.mark.slurm),
]
BACKENDS = [pytest.param("fake"), *LIVE]


@pytest.fixture(scope="module")
def site(local_cluster) -> SiteConfig:
    """The site the tests run on (``$ELASTIC_SLURM_SITE``), with the command-line backend."""
    return load_site().model_copy(update={"backend": "cli"})


@pytest.fixture(scope="module")
def cli_ref(site) -> SlurmCLI:
    """The command-line backend: the reference the pyslurm backend is compared with."""
    backend = slurm_for(site)
    assert isinstance(backend, SlurmCLI)
    return backend


@pytest.fixture(scope="module")
def ps_backend(site) -> SlurmBackend:
    """The pyslurm backend for the same site (built by the factory)."""
    if importlib.util.find_spec("pyslurm") is None:
        pytest.skip("pyslurm is not installed (optional extra): only the CLI backend is tested")
    return slurm_for(site.model_copy(update={"backend": "pyslurm"}))


@pytest.fixture(params=BACKENDS)
def backend(request) -> SlurmBackend:
    """Each backend in turn: the in-memory Slurm, then the real ones."""
    if request.param == "fake":
        return FakeSlurm()
    if request.param == "cli":
        return request.getfixturevalue("cli_ref")
    return request.getfixturevalue("ps_backend")


@pytest.fixture()
def truth(backend) -> RealTruth | FakeTruth:
    """What the Slurm that ``backend`` drives really holds."""
    return FakeTruth(backend) if isinstance(backend, FakeSlurm) else RealTruth()


def _idle(truth) -> None:
    wait(truth.all_idle, 60, "all nodes idle before the test")


def _submit(backend: SlurmBackend, tmp: Path, **kwargs) -> int:
    req = ElasticRequest(
        **{"program": ("/bin/sleep", "300"), "walltime": timedelta(minutes=10), **kwargs}
    )
    return api.submit(req, backend, workdir=tmp, output=str(tmp / "%j.out"))


def _running(truth, job: int) -> None:
    wait(lambda: truth.state(job) == "RUNNING", 30, f"job {job} to start")


# ---------------------------------------------------------------------------- choosing


@pytest.mark.slurm
def test_factory_builds_the_backend_the_site_asks_for(site, cli_ref, ps_backend):
    from elastic_slurm.adapter.pyslurm_backend import PyslurmBackend, pyslurm_available

    version = cli_ref.version()
    ok, why = pyslurm_available(version, site.slurm_conf)
    assert ok, why
    assert f"{version[0]}.{version[1]:02d}" in why
    assert isinstance(ps_backend, PyslurmBackend)
    assert isinstance(slurm_for(site.model_copy(update={"backend": "auto"})), PyslurmBackend)
    # pyslurm drives this site's cluster, not whatever /etc/slurm/slurm.conf names
    import pyslurm  # type: ignore[import-not-found]

    assert pyslurm.config().get()["cluster_name"] == site.cluster_name
    # another Slurm major version: pyslurm must not be chosen
    ok, why = pyslurm_available((version[0] + 1, 2, 0), site.slurm_conf)
    assert not ok and "major version" in why, why
    # over SSH pyslurm is never used
    ssh = site.model_copy(
        update={
            "transport": SSHTransportConfig(
                kind="ssh",
                host="login.invalid",
                user="nobody",
                key_file=Path("/nonexistent/key"),
                known_hosts=Path("/nonexistent/known_hosts"),
            )
        }
    )
    with pytest.raises(ConfigError, match="ssh"):
        slurm_for(ssh.model_copy(update={"backend": "pyslurm"}))
    assert isinstance(slurm_for(ssh.model_copy(update={"backend": "auto"})), SlurmCLI)


# ---------------------------------------------------------------------------- queries


def test_version_is_the_running_slurm(backend, truth):
    assert backend.version() == truth.version()


@pytest.mark.slurm
def test_queries_agree_field_by_field(cli_ref, ps_backend, shared_tmp):
    truth = RealTruth()
    _idle(truth)
    rigid = _submit(cli_ref, shared_tmp, nodes_min=2, nodes_max=2, job_name="rigid")
    elastic = held = begin = None
    try:
        elastic = _submit(
            cli_ref, shared_tmp, kind=JobKind.MOLDABLE, nodes_min=1, nodes_max=2, job_name="mold"
        )
        held = sbatch_raw("--hold", "--nodes=1", "--time=5", "--job-name=held", workdir=shared_tmp)
        begin = sbatch_raw(
            "--begin=now+1hour",
            "--nodes=1-2",
            "--time=5",
            "--job-name=later",
            "--comment=elastic-slurm:kind=moldable;min=1;max=2",
            workdir=shared_tmp,
        )
        for job in (rigid, elastic):
            _running(truth, job)
        wait(lambda: scontrol_job(begin)["Reason"] == "BeginTime", 20, "a BeginTime reason")
        ids = [rigid, elastic, held, begin]
        for job in ids:
            ref, got = agree_when_stable(
                lambda j=job: cli_ref.job(j), lambda j=job: ps_backend.job(j)
            )
            assert ref is not None and got == ref, (job, ref, got)
        # and the whole queue, ended jobs of earlier tests included
        ref_all, got_all = agree_when_stable(
            lambda: {j.job_id: j for j in cli_ref.jobs()},
            lambda: {j.job_id: j for j in ps_backend.jobs()},
        )
        assert set(got_all) == set(ref_all)
        for job_id, ref in ref_all.items():
            assert got_all[job_id] == ref, (job_id, ref, got_all[job_id])
        # what Slurm itself says about them
        for job in (rigid, elastic):
            fields = scontrol_job(job)
            got = ps_backend.job(job)
            assert got.state == fields["JobState"] == "RUNNING"
            assert got.nodes == scontrol_nodes(job)
            assert got.batch_host == fields["BatchHost"]
            assert got.workdir == fields["WorkDir"] == str(shared_tmp)
            assert got.partition == fields["Partition"]
            assert got.account == fields["Account"] and got.qos == fields["QOS"]
            assert got.end_time_s and got.start_time_s and got.end_time_s > got.start_time_s
        assert decode(ps_backend.job(elastic).comment).kind is JobKind.MOLDABLE
        assert decode(ps_backend.job(rigid).comment).kind is JobKind.RIGID
        for job, reason in ((held, "JobHeldUser"), (begin, "BeginTime")):
            got = ps_backend.job(job)
            assert got.state == "PENDING" and got.nodes == () and got.start_time_s is None
            assert got.reason == scontrol_job(job)["Reason"] == reason
        assert ps_backend.job(begin).comment == "elastic-slurm:kind=moldable;min=1;max=2"
        # only the asked-for jobs (or more) come back, and unknown ones are absent
        assert {j.job_id for j in ps_backend.jobs([rigid, held])} >= {rigid, held}
        assert ps_backend.job(UNKNOWN_JOB) is None and cli_ref.job(UNKNOWN_JOB) is None
    finally:
        for job in (rigid, elastic, held, begin):
            if job:
                cli_ref.cancel_job(job)
    wait(all_idle, 30, "all nodes idle")


def test_nodes_agree_with_sinfo(backend, truth, shared_tmp):
    _idle(truth)
    job = _submit(backend, shared_tmp, nodes_min=2, nodes_max=2, job_name="nodes")
    try:
        _running(truth, job)
        states, got = agree_when_stable(
            truth.sinfo, lambda: {n.name: (n.state, n.cpus) for n in backend.nodes()}
        )
        assert got == states
        used = set(truth.nodes_of(job))
        assert {n for n, (s, _) in got.items() if s == "allocated"} == used
        assert {n for n, (s, _) in got.items() if s == "idle"} == set(states) - used
    finally:
        backend.cancel_job(job)
    wait(truth.all_idle, 30, "all nodes idle")


def test_steps(backend, truth, shared_tmp):
    _idle(truth)
    job = _submit(
        backend,
        shared_tmp,
        program=("srun", "--mpi=none", "/bin/sleep", "300"),
        nodes_min=2,
        nodes_max=2,
        job_name="steps",
    )
    held = truth.sbatch("--hold", "--time=5", workdir=shared_tmp)
    try:
        _running(truth, job)
        wait(lambda: f"{job}.0" in truth.steps(job), 30, "step 0 to start")
        steps = backend.steps(job)
        assert steps == truth.steps(job)
        assert set(steps) == {f"{job}.batch", f"{job}.0"}
        assert steps[f"{job}.0"] == truth.nodes_of(job)
        assert steps[f"{job}.batch"] == (truth.job(job)["BatchHost"],)
        assert backend.steps(held) == {}  # pending: no steps
        assert backend.steps(UNKNOWN_JOB) == {}
    finally:
        backend.cancel_job(job)
        backend.cancel(held)
    wait(lambda: truth.state(job) == "CANCELLED" and not truth.steps(job), 30, "the job to end")
    assert backend.steps(job) == {}  # ended: no steps
    wait(truth.all_idle, 30, "all nodes idle")


# ---------------------------------------------------------------------------- submit / cancel


def test_submit_rigid(backend, truth, shared_tmp):
    _idle(truth)
    out = shared_tmp / "host.txt"
    job = _submit(
        backend,
        shared_tmp,
        program=("/bin/sh", "-c", f"hostname > {out}; exec sleep 300"),
        nodes_min=2,
        nodes_max=2,
        job_name="rigid; $(touch pwned) 'q'",
        walltime=timedelta(minutes=7),
    )
    try:
        _running(truth, job)
        fields = truth.job(job)
        assert fields["NumNodes"] == "2" and len(truth.nodes_of(job)) == 2
        assert fields["TimeLimit"] == "00:07:00"
        assert fields["WorkDir"] == str(shared_tmp)
        assert fields["StdOut"] == str(shared_tmp / f"{job}.out")
        assert fields["Comment"] == "elastic-slurm:kind=rigid;min=2;max=2"
        assert backend.job(job).name == "rigid; $(touch pwned) 'q'"  # one argument, no shell
        assert not (shared_tmp / "pwned").exists()
        if truth.runs_programs:  # the program really ran, on the batch host
            wait(lambda: out.exists() and out.read_text().strip(), 20, "the program's output")
            assert out.read_text().strip() == fields["BatchHost"]
    finally:
        backend.cancel_job(job)
    wait(truth.all_idle, 30, "all nodes idle")


def test_submit_moldable(backend, truth, shared_tmp):
    _idle(truth)
    job = _submit(
        backend, shared_tmp, kind=JobKind.MOLDABLE, nodes_min=2, nodes_max=3, job_name="mold"
    )
    try:
        _running(truth, job)
        fields = truth.job(job)
        assert 2 <= int(fields["NumNodes"]) <= 3  # Slurm chose the size within the range
        assert len(truth.nodes_of(job)) == int(fields["NumNodes"])
        assert fields["Comment"] == "elastic-slurm:kind=moldable;min=2;max=3"
        assert backend.job(job).nodes == truth.nodes_of(job)
    finally:
        backend.cancel_job(job)
    wait(truth.all_idle, 30, "all nodes idle")


def test_cancel(backend, truth, shared_tmp):
    jobs = [truth.sbatch("--hold", "--time=5", workdir=shared_tmp) for _ in range(3)]
    try:
        backend.cancel(jobs[0])
        assert truth.state(jobs[0]) == "CANCELLED"
        backend.cancel(*jobs[1:])
        assert [truth.state(j) for j in jobs] == ["CANCELLED"] * 3
        backend.cancel(jobs[0], UNKNOWN_JOB)  # ended and unknown jobs are fine
        backend.cancel()
    finally:
        backend.cancel(*jobs)


def test_requeue(backend, truth, shared_tmp):
    wait(truth.all_idle, 60, "all nodes idle")
    job = truth.sbatch("--nodes=1", "--time=5", workdir=shared_tmp)
    try:
        wait(lambda: truth.state(job) == "RUNNING", 30, "the job to start")
        backend.requeue(job)
        # back in the queue (Slurm holds a requeued job's restart for a while): not running
        assert wait(lambda: truth.state(job) in ("PENDING", "REQUEUED") or None, 30, "requeued")
        with pytest.raises(SlurmCommandError):
            backend.requeue(UNKNOWN_JOB)
    finally:
        backend.cancel(job)
    wait(truth.all_idle, 30, "all nodes idle")


def test_released_nodes_stay_schedulable_after_a_shrink(backend, truth, shared_tmp):
    # Slurm 22.05 + select/linear: without the reconfigure the backend does after a node-list
    # shrink, a job started on the released nodes leaves them "busy" for 20-40 s once it ends
    wait(truth.all_idle, 60, "all nodes idle")
    first = truth.sbatch("--nodes=4", "--time=5", workdir=shared_tmp)
    jobs = [first]
    try:
        wait(lambda: truth.state(first) == "RUNNING", 30, "the 4-node job to start")
        keep = truth.nodes_of(first)[:2]
        assert set(backend.shrink(first, keep)) == set(keep)
        jobs.append(truth.sbatch("--nodes=2", "--time=5", workdir=shared_tmp))
        wait(lambda: truth.state(jobs[-1]) == "RUNNING", 30, "a job on the released nodes")
        backend.cancel(*jobs)
        wait(truth.all_idle, 30, "all nodes idle")
        jobs.append(truth.sbatch("--nodes=4", "--time=5", workdir=shared_tmp))
        wait(lambda: truth.state(jobs[-1]) == "RUNNING", 15, "a 4-node job on the idle cluster")
    finally:
        backend.cancel(*jobs)
    wait(truth.all_idle, 30, "all nodes idle")


# ---------------------------------------------------------------------------- updates


def test_set_time_limit(backend, truth, shared_tmp):
    # the controller stretches a shrunk job's limit: a running job's limit goes up, Slurm's
    # own view says so, and the backend's next query reads it back
    _idle(truth)
    job = truth.sbatch("--nodes=1", "--time=5", workdir=shared_tmp)
    try:
        _running(truth, job)
        backend.set_time_limit(job, 17)
        assert truth.job(job)["TimeLimit"] == "00:17:00"
        seen = backend.job(job)
        assert seen is not None and seen.time_limit_s == 17 * 60.0
        with pytest.raises(ValueError, match="at least 1 minute"):
            backend.set_time_limit(job, 0)
        with pytest.raises(SlurmCommandError):
            backend.set_time_limit(UNKNOWN_JOB, 10)
    finally:
        backend.cancel(job)
    wait(truth.all_idle, 30, "all nodes idle")


def test_merge_room_counts_the_idle_nodes_after_the_batch_host(backend, truth, shared_tmp):
    _idle(truth)
    first = truth.sbatch("--nodes=1", "--time=5", workdir=shared_tmp)
    jobs = [first]
    try:
        _running(truth, first)
        second = truth.sbatch("--nodes=1", "--time=5", workdir=shared_tmp)
        jobs.append(second)
        _running(truth, second)
        names = [n.name for n in backend.nodes()]
        host = truth.nodes_of(second)[0]
        after = len(names) - names.index(host) - 1  # both jobs hold one node each
        backend.cancel(first)
        wait(lambda: truth.state(first) in ("CANCELLED", "COMPLETED") or None, 30, "cancelled")
        wait(lambda: backend.merge_room(second) == after or None, 30, "the room after it")
        assert backend.merge_room(UNKNOWN_JOB) == 0
    finally:
        backend.cancel(*jobs)
    wait(truth.all_idle, 30, "all nodes idle")


def test_set_pending_size(backend, truth, shared_tmp):
    job = truth.sbatch("--hold", "--nodes=1-3", "--time=5", workdir=shared_tmp)
    running = None
    try:
        backend.set_pending_size(job, 3)
        assert truth.job(job)["NumNodes"] == "3-3"  # exactly: both ends of the range
        backend.set_pending_size(job, 2)
        assert truth.job(job)["NumNodes"] == "2-2"
        assert backend.job(job).node_count == 2
        assert truth.state(job) == "PENDING"
        _idle(truth)
        running = _submit(backend, shared_tmp, job_name="started")
        _running(truth, running)
        with pytest.raises(ResizeError, match="not pending"):
            backend.set_pending_size(running, 2)
        assert truth.job(running)["NumNodes"] == "1"
    finally:
        backend.cancel(job)
        if running:
            backend.cancel_job(running)
    wait(truth.all_idle, 30, "all nodes idle")


def test_hold_size_and_release(backend, truth, shared_tmp):
    # a moldable job sized by the controller: submitted held and marked so in its tag; sized
    # exactly, then released, it starts at that size although more nodes are idle
    _idle(truth)
    ours = api.submit(
        ElasticRequest(
            program=("/bin/sleep", "300"),
            kind=JobKind.MOLDABLE,
            nodes_min=1,
            nodes_max=4,
            walltime=timedelta(minutes=10),
            job_name="sized",
        ),
        backend,
        workdir=shared_tmp,
        output=str(shared_tmp / "%j.out"),
        sized_by="controller",
    )
    users = api.submit(
        ElasticRequest(
            program=("/bin/sleep", "300"),
            kind=JobKind.MOLDABLE,
            nodes_min=1,
            nodes_max=2,
            walltime=timedelta(minutes=10),
            job_name="users",
        ),
        backend,
        workdir=shared_tmp,
        output=str(shared_tmp / "%j.out"),
        hold=True,
    )
    try:
        for job, comment in (
            (ours, "elastic-slurm:kind=moldable;min=1;max=4;sized=controller"),
            (users, "elastic-slurm:kind=moldable;min=1;max=2"),
        ):
            fields = truth.job(job)
            assert (fields["JobState"], fields["Reason"], fields["Priority"]) == (
                "PENDING",
                "JobHeldUser",
                "0",
            )
            assert fields["Comment"] == comment
            assert backend.job(job).reason == "JobHeldUser"
        truth.pause(3)  # a scheduling pass or more: held jobs do not start on idle nodes
        assert truth.state(ours) == truth.state(users) == "PENDING"
        backend.set_pending_size(ours, 2)
        backend.release(ours)
        _running(truth, ours)
        assert truth.job(ours)["NumNodes"] == "2" and len(truth.nodes_of(ours)) == 2
        backend.release(ours)  # releasing a running job changes nothing
        assert truth.state(ours) == "RUNNING" and truth.state(users) == "PENDING"
        assert truth.job(users)["Reason"] == "JobHeldUser"
        with pytest.raises(SlurmCommandError, match="Invalid job id"):
            backend.release(UNKNOWN_JOB)
        backend.release(users)
        _running(truth, users)
    finally:
        backend.cancel_job(ours)
        backend.cancel_job(users)
    wait(truth.all_idle, 30, "all nodes idle")


def test_set_array_throttle(backend, truth, shared_tmp):
    _idle(truth)
    array = _submit(
        backend,
        shared_tmp,
        array="0-5",
        array_max_running=2,
        job_name="sweep",
    )
    try:
        assert truth.job(array)["ArrayTaskThrottle"] == "2"
        wait(lambda: _running_tasks(truth, array) == 2, 30, "2 tasks running")
        backend.set_array_throttle(array, 3)
        assert truth.job(array)["ArrayTaskThrottle"] == "3"
        wait(lambda: _running_tasks(truth, array) == 3, 30, "3 tasks running")
        backend.set_array_throttle(array, 1)
        assert truth.job(array)["ArrayTaskThrottle"] == "1"
        truth.pause(4)  # two scheduling passes: a lower throttle starts nothing new
        assert _running_tasks(truth, array) == 3
        assert len(truth.array_tasks(array)) == 6
    finally:
        backend.cancel_job(array)  # the array's id cancels every task
    wait(lambda: truth.array_tasks(array) == [], 30, "every task of the array to go")
    wait(truth.all_idle, 30, "all nodes idle")


def _running_tasks(truth, array: int) -> int:
    return sum(1 for _task, state in truth.array_tasks(array) if state == "RUNNING")


@pytest.mark.parametrize("backend", LIVE, indirect=True)
def test_grow_then_shrink_to_exact_nodes(backend, truth, shared_tmp, grow_path):
    _grow_then_shrink(backend, truth, shared_tmp, grow_path)


@pytest.mark.parametrize("grow_path", ["merge", "sibling"])
@pytest.mark.parametrize("backend", ["fake"], indirect=True)
def test_grow_then_shrink_to_exact_nodes_in_memory(backend, truth, shared_tmp, grow_path):
    # the same test on the fake; its own switch stands for permit_job_expansion
    backend.permit_job_expansion = grow_path == "merge"
    _grow_then_shrink(backend, truth, shared_tmp, grow_path)


def _grow_then_shrink(backend, truth, shared_tmp, grow_path) -> None:
    _idle(truth)
    job = _submit(backend, shared_tmp, nodes_min=2, nodes_max=2, job_name="grow")
    try:
        _running(truth, job)
        before = truth.held(job)
        truth.next_second()
        grown = backend.grow(job, 2, path=grow_path, grant_timeout_s=20)
        assert grown.path == grow_path and len(grown.added) == 2
        assert truth.held(job) == before | set(grown.added)
        if grow_path == "merge":
            assert truth.job(job)["NumNodes"] == "4"
            assert truth.helpers_alive(job) == []  # merged
        else:
            assert truth.job(job)["NumNodes"] == "2"
            (sibling,) = truth.helpers_alive(job)
            assert set(truth.nodes_of(sibling)) == set(grown.added)
        assert set(backend.elastic_nodes(job)) == truth.held(job)
        truth.next_second()
        batch = truth.job(job)["BatchHost"]
        keep = [batch, grown.added[-1]]
        assert set(backend.shrink(job, keep)) == set(keep)
        assert truth.held(job) == set(keep)
        if grow_path == "merge":
            assert truth.job(job)["NumNodes"] == "2"
            assert set(truth.nodes_of(job)) == set(keep)
        else:
            assert truth.nodes_of(job) == (batch,)
            assert set(truth.nodes_of(sibling)) == {grown.added[-1]}
        truth.next_second()
        backend.shrink(job, [batch])
        assert truth.held(job) == {batch} and truth.helpers_alive(job) == []
        assert truth.nodes_of(job) == (batch,)
    finally:
        backend.cancel_job(job)
    wait(truth.all_idle, 30, "all nodes idle")
    assert truth.helpers_alive(job) == []
