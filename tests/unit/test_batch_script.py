"""sbatch's grammar and ``#SBATCH`` reader (``batch_script.py``), and how a request with a
script or passed-through options is rendered (``adapter/render.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_slurm.adapter import render
from elastic_slurm.batch_script import (
    check_passed,
    classify,
    option_name,
    parse_script,
    split_command_line,
    takes_value,
)
from elastic_slurm.errors import ConfigError, InvalidRequest
from elastic_slurm.jobspec import load_spec
from elastic_slurm.model.request import ElasticRequest, JobKind

OURS = {"-N": True, "--nodes": True, "--parsable": False, "-H": False}


def test_options_end_at_the_first_other_word() -> None:
    line = split_command_line(
        ["-N", "2", "--mem", "4G", "-c", "8", "--exclusive", "run.sh", "-N", "9", "--mem=1"], OURS
    )
    assert line.ours == ["-N", "2"]
    assert line.passed == ["--mem=4G", "-c8", "--exclusive"]
    assert (line.file, line.rest) == ("run.sh", ["-N", "9", "--mem=1"])


def test_double_dash_names_the_program() -> None:
    line = split_command_line(["--parsable", "--", "srun", "-n", "2", "app"], OURS)
    assert (line.ours, line.file, line.rest) == (["--parsable"], None, ["srun", "-n", "2", "app"])


def test_attached_values_and_optional_values() -> None:
    line = split_command_line(
        ["-N2", "--nodes=3", "-c4", "--nice=5", "--nice", "--get-user-env", "app"], OURS
    )
    assert line.ours == ["-N2", "--nodes=3"]
    assert line.passed == ["-c4", "--nice=5", "--nice", "--get-user-env"]
    assert line.file == "app"


@pytest.mark.parametrize(
    ("word", "name", "value"),
    [
        ("--mem", "--mem", True),
        ("-G", "--gpus", True),
        ("-O", "--overcommit", False),
        ("--exclusive", "--exclusive", False),  # only --exclusive=user takes one
        ("--brand-new-option", "--brand-new-option", True),  # unknown: a value, sbatch judges
    ],
)
def test_option_grammar(word: str, name: str, value: bool) -> None:
    assert (option_name(word), takes_value(word)) == (name, value)


def test_an_option_without_its_value_is_an_error() -> None:
    with pytest.raises(InvalidRequest, match="option --mem needs a value"):
        split_command_line(["--mem"], OURS)


@pytest.mark.parametrize("word", ["--nodes=2", "-N2", "-t10", "--job-name=x", "--hold"])
def test_options_the_request_sets_are_not_passed_through(word: str) -> None:
    with pytest.raises(InvalidRequest, match="set by elastic-slurm"):
        check_passed([word])


@pytest.mark.parametrize("word", ["--comment=x", "--test-only", "-W"])
def test_options_that_break_a_submission_are_refused(word: str) -> None:
    with pytest.raises(InvalidRequest):
        check_passed([word])


def test_script_directives_stop_at_the_first_command() -> None:
    script = parse_script(
        "#!/usr/bin/env bash\n"
        "\n"
        "# plain comment\n"
        "#SBATCH -N 2 --job-name='a b'  # comment\n"
        "#SBATCH--mem=1G\n"  # no space: a comment, as in sbatch
        "   #SBATCH --mem=2G\n"
        "module load x\n"
        "#SBATCH --mem=3G\n"
    )
    assert script.directives == ("-N", "2", "--job-name=a b", "--mem=2G")
    assert script.interpreter == "bash" and script.is_shell


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("srun app\n", "must start with #!"),
        ("", "must start with #!"),
        ("#!/bin/sh\n#SBATCH -J 'open\n", "line 2"),
        ("#!/bin/sh\0\n", "NUL"),
    ],
)
def test_bad_scripts_are_named(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_script(text)


@given(st.lists(st.text(min_size=1, max_size=8), max_size=6))
def test_splitting_never_loses_or_invents_words(words: list[str]) -> None:
    try:
        line = split_command_line(words, OURS)
    except InvalidRequest:
        return
    rebuilt = len(line.ours) + len(line.passed) + (line.file is not None) + len(line.rest)
    assert rebuilt <= len(words)  # passed options may join with their value
    assert all(w.startswith("-") for w in line.passed)


@pytest.mark.parametrize(
    ("name", "text", "kind"),
    [
        ("app.py", "#!/usr/bin/env python3\n#SBATCH -N 2\n", "program"),
        ("job.yaml", "program: [x]\n", "yaml"),
        ("job", "program: [x]\nnodes: 2\n", "yaml"),
        ("run.sh", "#!/bin/bash\nsrun app\n", "script"),
        ("run", "#!/bin/bash\nsrun app\n", "script"),
        ("run", "#!/usr/bin/perl\n#SBATCH -N 2\nprint 1\n", "script"),
        ("tool", "#!/usr/bin/perl\nprint 1\n", "program"),
        ("a.out", "\x7fELF\0\0\0", "program"),
        ("notes", "just words", "program"),
    ],
)
def test_classify_by_content_and_suffix(tmp_path: Path, name: str, text: str, kind: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert classify(path) == kind


def test_classify_a_command_on_path() -> None:
    assert classify(Path("hostname")) == "program"


# ---------------------------------------------------------------------------------- rendering
SCRIPT = "#!/bin/bash\n#SBATCH -N 2\nsrun hostname\n"


def test_a_script_request_renders_the_script_after_our_lines() -> None:
    req = ElasticRequest(
        program=("/home/u/run.sh", "a b", "$(x)"), nodes_min=2, nodes_max=2, script=SCRIPT
    )
    text = render.batch_script(req, python="py", env={"ELASTIC_SLURM_JOB_SECRET": "s"})
    assert text == (
        "#!/bin/bash\n"
        "# elastic-slurm: rigid job, nodes 2 (batch script /home/u/run.sh; its #SBATCH lines "
        "were read at submission)\n"
        "export ELASTIC_SLURM_JOB_SECRET=s\n"
        "set -- 'a b' '$(x)'\n"
        "#SBATCH -N 2\n"
        "srun hostname\n"
    )


def test_passed_options_follow_ours_unchanged() -> None:
    req = ElasticRequest(program=("app",), sbatch_options=("--mem=4G", "-c2", "--gres=gpu:1"))
    argv = render.sbatch_argv(req)
    assert argv[-3:] == ["--mem=4G", "-c2", "--gres=gpu:1"]


@pytest.mark.parametrize(
    ("program", "kind", "array", "launched"),
    [
        (("app.py", "-x"), JobKind.RIGID, None, ["srun", "py", "app.py", "-x"]),
        (("./a.out",), JobKind.MOLDABLE, None, ["srun", "./a.out"]),
        (
            ("/usr/bin/mpirun", "-n", "4", "a"),
            JobKind.RIGID,
            None,
            ["/usr/bin/mpirun", "-n", "4", "a"],
        ),
        (("srun", "a"), JobKind.RIGID, None, ["srun", "a"]),
        (("task.sh",), JobKind.RIGID, "0-3", ["srun", "task.sh"]),
        (("task.sh",), JobKind.MALLEABLE, "0-3", ["task.sh"]),  # an elastic sweep's task
    ],
)
def test_launch(program, kind, array, launched) -> None:  # noqa: ANN001
    hi = 2 if kind is JobKind.MOLDABLE or kind.resizable else 1
    req = ElasticRequest(program=program, kind=kind, nodes_max=hi, array=array, with_ranks=True)
    assert render.launch_argv(req, "py") == launched
    if not kind.resizable:  # without with_ranks: once, as given
        once = ElasticRequest(program=program, kind=kind, nodes_max=hi, array=array)
        assert render.launch_argv(once, "py") == list(program)


def test_a_resizable_job_takes_no_script() -> None:
    with pytest.raises(InvalidRequest, match="not a batch script"):
        ElasticRequest(program=("run.sh",), kind=JobKind.MALLEABLE, nodes_max=2, script=SCRIPT)


def test_a_script_for_another_interpreter_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="takes shell scripts"):
        ElasticRequest(program=("x",), script="#!/usr/bin/python3\nprint(1)\n")


def test_job_specs_run_programs_with_their_ranks_unless_told() -> None:
    assert load_spec(None, {"program": ["x"]}).request().with_ranks is True
    spec = load_spec(None, {"program": ["x"], "with_ranks": False})
    assert spec.request().with_ranks is False


def test_job_file_options_are_split_into_words() -> None:
    spec = load_spec(
        None, {"program": ["x"], "sbatch_options": ["--mem 4G", "-c 2", "--exclusive"]}
    )
    assert spec.request().sbatch_options == ("--mem=4G", "-c2", "--exclusive")


def test_job_file_options_refuse_what_the_request_sets() -> None:
    with pytest.raises(ConfigError, match="Value error, --nodes=3 is set by elastic-slurm"):
        load_spec(None, {"program": ["x"], "sbatch_options": ["--nodes=3"]})


# ------------------------------------------------------------------- read_submission (API)
def test_read_submission_of_a_script_for_the_python_api(tmp_path: Path) -> None:
    from elastic_slurm.batch_script import read_submission

    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\n#SBATCH -N 2 --mem=1G -H\nsrun app\n")
    sub = read_submission(["--mem=2G", str(script), "x"])
    assert sub.hold is True and sub.job_file is None
    assert sub.overrides["program"] == [str(script.resolve()), "x"]
    assert sub.overrides["sbatch_options"] == ["--mem=1G", "--mem=2G"]
    assert (sub.overrides["nodes"], sub.overrides["job_name"]) == ("2", "run.sh")
    spec = load_spec(sub.job_file, sub.overrides)
    assert spec.request().script == script.read_text()


def test_read_submission_errors_are_exceptions_not_exits() -> None:
    from elastic_slurm.batch_script import read_submission

    with pytest.raises(InvalidRequest, match="invalid choice: 'sometimes'"):
        read_submission(["--kind", "sometimes", "--", "x"])
