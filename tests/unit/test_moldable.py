"""Moldable jobs sized by the controller: the tag, the sbatch command, specs, the CLI, and what
the controller does with a Start for them (``adapter/tags.py``, ``adapter/render.py``,
``jobspec.py``, ``cli/submit.py``, ``controller/starts.py``).

The live side (Slurm really holds, sizes and releases the job) is in
``tests/integration/test_moldable_live.py`` and ``test_backend_contract.py``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from elastic_slurm.adapter import commands, render
from elastic_slurm.adapter.parse import SlurmJob, SlurmNode
from elastic_slurm.adapter.pyslurm_backend import submit_description
from elastic_slurm.adapter.tags import ElasticTag, check_sized_by, decode
from elastic_slurm.cli.main import main
from elastic_slurm.config import load_site
from elastic_slurm.config.schema import ControllerConfig
from elastic_slurm.controller.journal import Journal
from elastic_slurm.controller.observe import snapshot
from elastic_slurm.controller.starts import Starts, awaits_controller
from elastic_slurm.errors import ConfigError, InvalidRequest, ResizeError, SlurmCommandError
from elastic_slurm.jobspec import JobSpec, load_spec
from elastic_slurm.model.decisions import Start
from elastic_slurm.model.request import ElasticRequest, JobKind
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.registry import make_policy

ROOT = Path(__file__).resolve().parents[2]
MOLDABLE = ElasticRequest(
    program=("/bin/sleep", "60"),
    kind=JobKind.MOLDABLE,
    nodes_min=1,
    nodes_max=4,
    walltime=timedelta(minutes=5),
    job_name="mold",
)


# ---------------------------------------------------------------------------- the tag


def test_tag_marks_controller_sized_jobs_and_reads_them_back() -> None:
    tag = ElasticTag(JobKind.MOLDABLE, 1, 4, "amdahl:0.9", sized_by="controller")
    text = tag.encode()
    assert text == "elastic-slurm:kind=moldable;min=1;max=4;speedup=amdahl:0.9;sized=controller"
    assert decode(text) == tag
    # Slurm's own sizing is the default and is not written
    assert ElasticTag(JobKind.MOLDABLE, 1, 4).encode() == "elastic-slurm:kind=moldable;min=1;max=4"
    assert decode("elastic-slurm:kind=moldable;min=1;max=4").sized_by == "slurm"
    assert decode("elastic-slurm:kind=moldable;min=1;max=4;sized=slurm").sized_by == "slurm"


@pytest.mark.parametrize(
    "text",
    [
        "elastic-slurm:kind=malleable;min=1;max=4;sized=controller",  # only moldable jobs
        "elastic-slurm:kind=rigid;min=2;max=2;sized=controller",
        "elastic-slurm:kind=moldable;min=1;max=4;sized=user",  # unknown value
        "elastic-slurm:kind=moldable;min=1;max=4;sized=Controller",
    ],
)
def test_malformed_sizing_marks_are_no_tag(text: str) -> None:
    assert decode(text) is None


@pytest.mark.parametrize(
    ("kind", "sized_by", "array", "message"),
    [
        (JobKind.RIGID, "controller", False, "a rigid job cannot be sized by the controller"),
        (JobKind.MALLEABLE, "controller", False, "a malleable job cannot be sized"),
        (JobKind.EVOLVING, "controller", False, "an? evolving job cannot be sized"),
        (JobKind.MOLDABLE, "controller", True, "a job array cannot be sized by the controller"),
        (JobKind.MOLDABLE, "user", False, "choose one of slurm, controller"),
    ],
)
def test_check_sized_by_refuses(kind: JobKind, sized_by: str, array: bool, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        check_sized_by(kind, sized_by, array=array)


def test_check_sized_by_accepts() -> None:
    assert check_sized_by(JobKind.MOLDABLE, "controller") == "controller"
    for kind in JobKind:
        assert check_sized_by(kind, "slurm", array=True) == "slurm"


# ---------------------------------------------------------------------------- rendering


def test_render_holds_and_tags_a_controller_sized_job() -> None:
    argv = render.sbatch_argv(MOLDABLE, hold=True, sized_by="controller")
    assert "--hold" in argv
    assert "--nodes=1-4" in argv  # the range stays: the controller narrows it before release
    tag = decode(next(a for a in argv if a.startswith("--comment=")).split("=", 1)[1])
    assert tag == ElasticTag(JobKind.MOLDABLE, 1, 4, sized_by="controller")


def test_render_hold_alone_is_a_users_hold() -> None:
    argv = render.sbatch_argv(MOLDABLE, hold=True)
    assert argv[-1] == "--hold"
    assert "--comment=elastic-slurm:kind=moldable;min=1;max=4" in argv  # no sizing mark
    assert "--hold" not in render.sbatch_argv(MOLDABLE)
    assert (
        commands.sbatch(nodes="2", time_limit=timedelta(minutes=1), job_name="x", hold=True)[-1]
        == "--hold"
    )


def test_render_refuses_what_cannot_be_sized_by_the_controller() -> None:
    with pytest.raises(ValueError, match="must be submitted held"):
        render.sbatch_argv(MOLDABLE, sized_by="controller")
    rigid = ElasticRequest(program=("/bin/true",), nodes_min=2, nodes_max=2)
    with pytest.raises(InvalidRequest, match="rigid job cannot be sized by the controller"):
        render.sbatch_argv(rigid, hold=True, sized_by="controller")
    array = ElasticRequest(
        program=("/bin/true",), kind=JobKind.MOLDABLE, nodes_min=1, nodes_max=2, array="0-3"
    )
    with pytest.raises(InvalidRequest, match="job array"):
        render.sbatch_argv(array, hold=True, sized_by="controller")


def test_pyslurm_submits_a_hold_as_priority_zero() -> None:
    argv = render.sbatch_argv(MOLDABLE, hold=True, sized_by="controller")
    options = submit_description(argv)
    assert options["priority"] == 0
    assert options["comment"].endswith(";sized=controller")
    assert "priority" not in submit_description(render.sbatch_argv(MOLDABLE))


def test_release_command() -> None:
    assert commands.release(42) == ["scontrol", "release", "42"]


# ---------------------------------------------------------------------------- specs, site, CLI


def test_spec_sizing_follows_the_site_for_moldable_jobs_only() -> None:
    mold = JobSpec(program=["x"], kind="moldable", nodes="1-4")
    assert mold.sizing(site_sizes_moldable=False) == "slurm"
    assert mold.sizing(site_sizes_moldable=True) == "controller"
    rigid = JobSpec(program=["x"], kind="rigid", nodes="2")
    assert rigid.sizing(site_sizes_moldable=True) == "slurm"
    sweep = JobSpec(program=["x"], kind="moldable", nodes="1-2", array="0-3")
    assert sweep.sizing(site_sizes_moldable=True) == "slurm"
    # the user's word wins over the site's
    explicit = JobSpec(program=["x"], kind="moldable", nodes="1-4", sized_by="slurm")
    assert explicit.sizing(site_sizes_moldable=True) == "slurm"
    explicit = JobSpec(program=["x"], kind="moldable", nodes="1-4", sized_by="controller")
    assert explicit.sizing(site_sizes_moldable=False) == "controller"


def test_spec_refuses_controller_sizing_for_other_kinds() -> None:
    spec = JobSpec(program=["x"], kind="malleable", nodes="1-4", sized_by="controller")
    with pytest.raises(InvalidRequest, match="malleable job cannot be sized by the controller"):
        spec.request()
    with pytest.raises(InvalidRequest, match="malleable job cannot be sized"):
        spec.sizing()


def test_job_file_key(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("program: /bin/sleep 5\nkind: moldable\nnodes: 1-4\nsized_by: controller\n")
    spec = load_spec(job, {})
    assert spec.sized_by == "controller" and spec.sizing() == "controller"
    assert load_spec(job, {"sized_by": "slurm"}).sizing(site_sizes_moldable=True) == "slurm"
    job.write_text("program: /bin/sleep 5\nkind: moldable\nnodes: 1-4\nsized_by: scheduler\n")
    with pytest.raises(ConfigError, match=r"job.yaml: sized_by"):
        load_spec(job, {})


def test_site_config_field() -> None:
    assert ControllerConfig().sizes_moldable is False
    assert ControllerConfig(sizes_moldable=True).sizes_moldable is True
    for name in ("local", "example-site"):
        site = load_site(ROOT / "site_configs" / f"{name}.yaml")
        assert site.controller.sizes_moldable is False


def test_cli_refuses_controller_sizing_for_a_rigid_job(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = main(["submit", "-N", "2", "--sized-by", "controller", "--", "/bin/true"])
    err = capsys.readouterr().err
    assert rc == 255  # sbatch's exit status for a usage error
    assert "rigid job cannot be sized by the controller" in err
    assert "--kind moldable" in err  # says what to do instead


def test_cli_refuses_unknown_sizing(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["submit", "--kind", "moldable", "-N", "1-4", "--sized-by", "me", "--", "x"])
    assert rc == 255  # sbatch's exit status for a usage error
    assert "invalid choice: 'me'" in capsys.readouterr().err


# ---------------------------------------------------------------------------- the controller


def _job(
    job_id: int, comment: str, reason: str = "JobHeldUser", state: str = "PENDING", **kw: object
) -> SlurmJob:
    fields: dict[str, object] = {
        "job_id": job_id,
        "name": f"j{job_id}",
        "state": state,
        "nodes": (),
        "node_count": 1,
        "comment": comment,
        "submit_time_s": float(job_id),
        "start_time_s": None,
        "batch_host": None,
        "workdir": "/w",
        "user": "u",
        "partition": "p",
        "account": "a",
        "qos": "normal",
        "reason": reason,
        "time_limit_s": 600.0,
    }
    fields.update(kw)
    return SlurmJob(**fields)  # type: ignore[arg-type]


OURS = "elastic-slurm:kind=moldable;min=1;max=4;speedup=downey:2:0.1;sized=controller"
USERS = "elastic-slurm:kind=moldable;min=1;max=4;speedup=downey:2:0.1"


class Recorder:
    """A stand-in for the two Slurm calls a Start makes: it records them, or refuses."""

    def __init__(self, refuse: Exception | None = None) -> None:
        self.calls: list[tuple[str, int, int | None]] = []
        self.refuse = refuse

    def set_pending_size(self, job_id: int, nodes: int) -> None:
        self.calls.append(("size", job_id, nodes))
        if self.refuse is not None:
            raise self.refuse

    def release(self, job_id: int) -> None:
        self.calls.append(("release", job_id, None))


def test_awaits_controller_only_for_our_held_jobs() -> None:
    assert awaits_controller(_job(1, OURS))
    assert not awaits_controller(_job(1, USERS))  # held by its user
    assert not awaits_controller(_job(1, OURS, reason="JobHeldAdmin"))  # held by an operator
    assert not awaits_controller(_job(1, OURS, reason="Resources"))  # released already
    assert not awaits_controller(_job(1, OURS, reason="None", state="RUNNING"))
    assert not awaits_controller(_job(1, "a user's comment"))


def test_start_sizes_and_releases_a_controller_sized_job() -> None:
    slurm, journal = Recorder(), Journal()
    starts = Starts(slurm, journal)  # type: ignore[arg-type]
    starts.apply(Start(5, 3, "fits"), _job(5, OURS))
    assert slurm.calls == [("size", 5, 3), ("release", 5, None)]
    decision, outcome = journal.records
    assert (decision["kind"], decision["decision"], decision["count"]) == ("decision", "Start", 3)
    assert (outcome["kind"], outcome["action"], outcome["ok"], outcome["count"]) == (
        "outcome",
        "start",
        True,
        3,
    )
    assert starts.released == {5: 3}
    # once released the job is Slurm's to start: a repeated decision changes nothing
    starts.apply(Start(5, 3, "fits"), _job(5, OURS, reason="Resources"))
    assert len(slurm.calls) == 2 and len(journal.records) == 2


def test_start_never_releases_a_users_hold() -> None:
    slurm, journal = Recorder(), Journal()
    starts = Starts(slurm, journal)  # type: ignore[arg-type]
    starts.apply(Start(6, 2, "fits"), _job(6, USERS))
    starts.apply(Start(7, 2, "fits"), _job(7, OURS, reason="JobHeldAdmin"))
    starts.apply(Start(8, 2, "fits"), _job(8, "", reason="JobHeldUser"))  # not ours at all
    assert slurm.calls == []
    assert [r["kind"] for r in journal.records] == ["decision"] * 3  # expectations only


@pytest.mark.parametrize(
    "error",
    [
        ResizeError("job 5 is not pending: its size can no longer be chosen"),
        SlurmCommandError(("scontrol",), 1, "", "Invalid job id specified"),
    ],
)
def test_start_errors_are_journaled_not_raised(error: Exception) -> None:
    slurm, journal = Recorder(refuse=error), Journal()
    starts = Starts(slurm, journal, retry_after_s=3600)  # type: ignore[arg-type]
    starts.apply(Start(5, 3, "fits"), _job(5, OURS))
    assert slurm.calls == [("size", 5, 3)]  # not released after a failed sizing
    outcome = journal.records[-1]
    assert outcome["kind"] == "outcome" and outcome["ok"] is False
    assert str(error) in outcome["message"]
    starts.apply(Start(5, 3, "fits"), _job(5, OURS))  # within the retry delay: not tried
    assert len(slurm.calls) == 1 and starts.released == {}


def test_start_outside_the_range_is_refused() -> None:
    slurm, journal = Recorder(), Journal()
    Starts(slurm, journal).apply(Start(5, 6, "too many"), _job(5, OURS))  # type: ignore[arg-type]
    assert slurm.calls == []
    assert "outside the job's range 1-4" in journal.records[-1]["message"]


def test_huang_moldable_sizes_a_held_job_from_its_speedup_tag() -> None:
    # Downey's low-variance model with A = 2 gains nothing beyond 2A - 1 = 3 nodes: Huang et
    # al.'s policy (capped at the size of highest speedup) chooses 3 of the 4 idle nodes, where
    # Slurm alone would start the job on all 4
    nodes = [SlurmNode(f"n{i}", "idle", 1) for i in range(1, 5)]
    snap = snapshot([_job(5, OURS)], nodes, now_s=100.0)
    (view,) = snap.pending()
    assert view.kind is JobKind.MOLDABLE and (view.nodes_min, view.nodes_max) == (1, 4)
    assert view.speedup is not None
    policy = make_policy("huang_moldable")
    decisions = policy.decide(snap, Trigger.periodic())
    assert [(type(d), d.job_id, d.nodes) for d in decisions] == [(Start, 5, 3)]
    # with a linear model it would take every idle node
    linear = snapshot([_job(5, OURS.replace("downey:2:0.1", "linear"))], nodes, now_s=100.0)
    assert [d.nodes for d in policy.decide(linear, Trigger.periodic())] == [4]
