"""An evolving job's evolution profile, from the user's words to what a policy sees live.

``model/evolution.py`` (text form and bounds), the request's checks, the elastic tag it travels
in, and ``controller/observe.job_view``, which gives it to the policies as the simulator does.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.adapter.render import sbatch_argv
from elastic_slurm.adapter.tags import ElasticTag, decode
from elastic_slurm.batch_script import read_submission
from elastic_slurm.controller.observe import job_view
from elastic_slurm.errors import InvalidRequest
from elastic_slurm.jobspec import load_spec
from elastic_slurm.model.evolution import MAX_STEPS, format_profile, parse_profile
from elastic_slurm.model.request import ElasticRequest, JobKind

steps = st.lists(
    st.tuples(st.integers(1, 365 * 86400_000).map(lambda ms: ms / 1000), st.integers(1, 1_000_000)),
    min_size=1,
    max_size=MAX_STEPS,
).map(tuple)


@given(steps)
def test_the_text_form_reads_back_what_was_written(profile) -> None:
    assert parse_profile(format_profile(profile)) == profile


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("600", "step 1 '600' is not DURATION:NODES"),
        ("600:2,x:3", "step 2 'x:3' is not DURATION:NODES"),
        ("inf:2", "is not DURATION:NODES"),
        ("1e3:2", "is not DURATION:NODES"),
        ("600:-2", "is not DURATION:NODES"),
        ("0:2", "a duration is more than 0"),
        ("99999999999:2", "at most 3.1536e+07 s"),
        ("600:0", "nodes must be 1 to 1000000"),
        (",".join(["1:1"] * (MAX_STEPS + 1)), f"at most {MAX_STEPS}"),
    ],
)
def test_a_bad_profile_is_refused_naming_the_step(text: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match="evolution profile") as err:
        parse_profile(text)
    assert message in str(err.value)


def request(**kw: object) -> ElasticRequest:
    fields: dict[str, object] = {
        "program": ("app.py",),
        "kind": JobKind.EVOLVING,
        "nodes_min": 1,
        "nodes_max": 4,
        "nodes_start": 2,
        "walltime": timedelta(hours=1),
    }
    fields.update(kw)
    return ElasticRequest(**fields)  # type: ignore[arg-type]


def test_the_request_checks_the_profile_against_the_job() -> None:
    assert request(evolution_profile=[(600, 2), (60, 4)]).evolution_profile == (
        (600.0, 2),
        (60.0, 4),
    )
    with pytest.raises(InvalidRequest, match="a malleable job has no evolution profile"):
        request(kind=JobKind.MALLEABLE, evolution_profile=((600.0, 2),))
    with pytest.raises(InvalidRequest, match="step 2 is at 5 node"):
        request(evolution_profile=((600.0, 2), (60.0, 5)))
    with pytest.raises(InvalidRequest, match="starts at 1 node.* the job starts at 2"):
        request(evolution_profile=((600.0, 1),))


def test_the_profile_travels_in_the_tag_and_reaches_the_policies_live() -> None:
    req = request(evolution_profile=((600.0, 2), (60.0, 4), (600.0, 1)))
    argv = sbatch_argv(req)
    (comment,) = [w.split("=", 1)[1] for w in argv if w.startswith("--comment=")]
    assert comment.endswith(";profile=600:2,60:4,600:1")
    tag = decode(comment)
    assert tag is not None and tag.evolution_profile == req.evolution_profile
    job = SlurmJob(
        job_id=7,
        name="evo",
        state="RUNNING",
        nodes=("n1", "n2"),
        node_count=2,
        comment=comment,
        submit_time_s=1.0,
        start_time_s=2.0,
        batch_host="n1",
        workdir="",
        user="u",
        partition="p",
        account="a",
        qos="normal",
        reason="",
    )
    assert job_view(job).evolution_profile == req.evolution_profile
    # a profile written by hand into the comment is checked like the user's
    bad = ElasticTag(JobKind.EVOLVING, 1, 2, evolution_profile=((60.0, 1),)).encode()
    for text in (bad + ",60:3", bad.replace("evolving", "malleable"), bad + ",x"):
        assert decode(text) is None, text


def test_submit_takes_the_profile_from_the_command_line_and_job_files(tmp_path: Path) -> None:
    words = ["--kind", "evolving", "-N", "1-4", "--evolution-profile", "600:1,60:4", "--", "a.py"]
    spec = load_spec(None, read_submission(words).overrides)
    assert spec.request().evolution_profile == ((600.0, 1), (60.0, 4))
    job = tmp_path / "job.yaml"
    job.write_text("program: [a.py]\nkind: evolving\nnodes: 2-4\nevolution_profile: 600:2,60:4\n")
    assert load_spec(job, {}).request().evolution_profile == ((600.0, 2), (60.0, 4))
