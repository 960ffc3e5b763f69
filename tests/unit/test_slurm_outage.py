"""A slurmctld that does not answer is an outage, never an empty cluster.

Outputs recorded from Slurm 22.05 with slurmctld stopped (``tests/golden/22.05/
*_slurmctld_down.*``): ``squeue --json`` exits 0 with an ``errors`` list and no jobs, the other
commands exit non-zero with "Unable to contact slurm controller (connect failure)" (each after
19 s, slurm.conf's ``MessageTimeout``). The command-line backend runs over a scripted transport.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from elastic_slurm.adapter import factory, parse
from elastic_slurm.adapter.pyslurm_backend import command_error
from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.cli.main import main
from elastic_slurm.config import load_site
from elastic_slurm.errors import (
    InvalidRequest,
    ResizeError,
    SlurmCommandError,
    SlurmUnavailableError,
)
from elastic_slurm.model.request import ElasticRequest, JobKind

if TYPE_CHECKING:
    from conftest import Golden

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "22.05"
DOWN_JSON = (GOLDEN / "squeue_slurmctld_down.json").read_text()
UP_JSON = (GOLDEN / "squeue_running_pending_expander.json").read_text()


class Scripted(Transport):
    """Answers each command with the next ``(returncode, stdout, stderr)``, or raises it.

    The last answer is repeated once the script is used up.
    """

    def __init__(self, answers: list[tuple[int, str, str] | BaseException]) -> None:
        self.answers = list(answers)
        self.argvs: list[tuple[str, ...]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> Completed:
        self.argvs.append(tuple(argv))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        code, out, err = answer
        return Completed(tuple(argv), code, out, err, 0.0)


def _cli(answers: list, retry_s: float = 0.3) -> tuple[SlurmCLI, Scripted]:
    t = Scripted(answers)
    return SlurmCLI(t, retry_s=retry_s), t


# ---------------------------------------------------------------------------- the parser


def test_squeue_json_of_a_stopped_slurmctld_is_an_outage() -> None:
    with pytest.raises(SlurmUnavailableError, match="Failed while looking for jobs"):
        parse.parse_squeue_json(DOWN_JSON)


def test_invalid_job_id_errors_are_not_an_outage() -> None:
    data = json.loads(UP_JSON)
    data["errors"] = [
        {"error": "Invalid job id specified", "error_number": 2017, "source": "slurm_load_jobs"}
    ]
    assert len(parse.parse_squeue_json(json.dumps(data))) == len(data["jobs"])


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        ({"error": "Unable to contact slurm controller (connect failure)"}, True),
        ({"error": "x", "error_number": 1800}, True),
        ({"description": "Socket timed out on send/recv operation"}, True),
        ({"error": "Slurm backup controller in standby mode", "error_number": 2027}, True),
        ({"error": "Access/permission denied", "error_number": 2002}, False),
    ],
)
def test_squeue_json_errors(error: dict, outage: bool) -> None:
    text = json.dumps({"errors": [error], "jobs": []})
    with pytest.raises(SlurmCommandError) as err:
        parse.parse_squeue_json(text)
    assert isinstance(err.value, SlurmUnavailableError) is outage


@pytest.mark.parametrize(
    "name",
    [
        "sinfo_slurmctld_down.stderr",
        "scontrol_show_job_slurmctld_down.stderr",
        "squeue_steps_slurmctld_down.stderr",
        "scancel_slurmctld_down.stderr",
        "sbatch_slurmctld_down.stderr",
        "scontrol_release_slurmctld_down.stderr",
    ],
)
def test_recorded_messages_of_a_stopped_slurmctld_say_unavailable(
    golden: Golden, name: str
) -> None:
    assert parse.is_unavailable(golden.recorded(name))


def test_squeue_invalid_job_recording_is_not_an_outage(golden: Golden) -> None:
    assert not parse.is_unavailable(golden.recorded("squeue_invalid_job.stderr"))
    assert parse.parse_squeue_json(golden.recorded("squeue_invalid_job.json"))


# ---------------------------------------------------------------------------- the CLI backend


def test_jobs_raise_unavailable_after_the_retry_window_not_an_empty_list() -> None:
    slurm, t = _cli([(0, DOWN_JSON, "")], retry_s=0.3)
    t0 = time.monotonic()
    with pytest.raises(SlurmUnavailableError) as err:
        slurm.jobs()
    assert len(t.argvs) > 1 and time.monotonic() - t0 < 5  # retried, within the window
    assert err.value.transient and err.value.argv == ("squeue", "--json")


def test_jobs_ride_out_a_short_outage() -> None:
    slurm, t = _cli([(0, DOWN_JSON, ""), (0, DOWN_JSON, ""), (0, UP_JSON, "")], retry_s=10)
    assert len(slurm.jobs()) == len(json.loads(UP_JSON)["jobs"]) and len(t.argvs) == 3


def test_job_is_unknown_during_an_outage_not_missing() -> None:
    slurm, _ = _cli([(0, DOWN_JSON, "")], retry_s=0.2)
    with pytest.raises(SlurmUnavailableError):
        slurm.job(1)


def test_job_that_does_not_exist_is_none() -> None:
    slurm, _ = _cli([(0, UP_JSON, "")])
    assert slurm.job(999) is None


@pytest.mark.parametrize(
    ("call", "name", "code"),
    [
        (lambda s: s.nodes(), "sinfo_slurmctld_down.stderr", 1),
        (lambda s: s.steps(5), "squeue_steps_slurmctld_down.stderr", 1),
        (lambda s: s.cancel(999999), "scancel_slurmctld_down.stderr", 8),
        (lambda s: s.release(999999), "scontrol_release_slurmctld_down.stderr", 1),
    ],
)
def test_failed_commands_of_a_stopped_slurmctld_raise_unavailable(
    golden: Golden, call, name: str, code: int
) -> None:
    slurm, t = _cli([(code, "", golden.recorded(name))], retry_s=0.2)
    with pytest.raises(SlurmUnavailableError):
        call(slurm)
    assert len(t.argvs) > 1


def test_a_timeout_is_an_outage() -> None:
    timeout = SlurmCommandError(
        ["squeue", "--json"], None, "", "", transient=True, reason="timed out after 30 s"
    )
    slurm, _ = _cli([timeout], retry_s=0.2)
    with pytest.raises(SlurmUnavailableError, match="no answer: timed out after 30 s"):
        slurm.jobs()


def test_a_missing_command_is_not_an_outage() -> None:
    missing = SlurmCommandError(["squeue"], None, "", "no such file", reason="not installed")
    slurm, _ = _cli([missing])
    with pytest.raises(SlurmCommandError) as err:
        slurm.jobs()
    assert not isinstance(err.value, SlurmUnavailableError)


def _request() -> ElasticRequest:
    return ElasticRequest(program=("/bin/true",), kind=JobKind.RIGID, nodes_min=1, nodes_max=1)


def test_submit_is_sent_again_only_when_slurmctld_was_never_reached(golden: Golden) -> None:
    down = (1, "", golden.recorded("sbatch_slurmctld_down.stderr"))
    slurm, t = _cli([down, (0, "42\n", "")], retry_s=10)
    assert slurm.submit(_request(), python="python3") == 42 and len(t.argvs) == 2
    timed_out = (1, "", "sbatch: error: Batch job submission failed: Socket timed out on send/recv")
    slurm, t = _cli([timed_out, (0, "43\n", "")], retry_s=10)
    with pytest.raises(SlurmUnavailableError):
        slurm.submit(_request(), python="python3")  # it may be queued: never twice
    assert len(t.argvs) == 1


def test_salloc_of_a_stopped_slurmctld_is_an_outage_not_a_refused_grow() -> None:
    msg = "salloc: error: Job submit/allocate failed: Unable to contact slurm controller\n"
    slurm, _ = _cli([(1, "", msg)])
    with pytest.raises(SlurmUnavailableError):
        slurm.allocate(1, name="expand:3", immediate_s=5)


def test_set_retry_window_bounds() -> None:
    slurm, _ = _cli([(0, UP_JSON, "")])
    slurm.set_retry_window(7)
    assert slurm.retry_s == 7.0
    for bad in (0, -1, 3601, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            slurm.set_retry_window(bad)


# ---------------------------------------------------------------------------- pyslurm


@pytest.mark.parametrize(
    ("errno", "message", "outage"),
    [
        (1800, "Unable to contact slurm controller (connect failure)", True),
        (5004, "Socket timed out on send/recv operation", True),
        (2027, "Slurm backup controller in standby mode", True),
        (1001, "Communication connection failure", True),
        (2017, "Invalid job id specified", False),
        (-1, "Unspecified error", False),
        (2002, "Access/permission denied", False),
    ],
)
def test_pyslurm_errors(errno: int, message: str, outage: bool) -> None:
    class RPCError(Exception):
        pass

    exc = RPCError(message)
    exc.errno, exc.msg = errno, message  # type: ignore[attr-defined]
    err = command_error(("pyslurm", "Jobs.load"), exc)
    assert isinstance(err, SlurmUnavailableError) is outage
    assert err.returncode == errno


# ---------------------------------------------------------------------------- user commands


@pytest.fixture()
def site_file(tmp_path: Path) -> Path:
    """A site config like ``local`` with a 0.3 s Slurm retry window."""
    path = tmp_path / "site.yaml"
    path.write_text("name: t\ntransport: {kind: local}\ncontroller: {slurm_retry_s: 0.3}\n")
    return path


def _scripted_site(monkeypatch: pytest.MonkeyPatch, answers: list) -> Scripted:
    t = Scripted(answers)
    monkeypatch.setattr(factory, "transport_for", lambda site: t)
    return t


@pytest.mark.parametrize("command", [["queue"], ["queue", "--json"], ["cancel", "7"]])
def test_user_commands_say_the_controller_is_unreachable(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    site_file: Path,
    command: list[str],
) -> None:
    t = _scripted_site(monkeypatch, [(0, DOWN_JSON, "")])
    # main's logging.basicConfig writes to stderr only when the root logger has no handler
    monkeypatch.setattr(logging.root, "handlers", [])
    t0 = time.monotonic()
    rc = main(["--site", str(site_file), *command])
    logging.root.handlers.clear()
    out, err = capsys.readouterr()
    assert rc == 1 and out == ""
    assert err.startswith("elastic-slurm: the Slurm controller is unreachable (")
    assert "Failed while looking for jobs" in err and err.count("\n") == 1, err
    assert len(t.argvs) > 1 and time.monotonic() - t0 < 5  # the site's 0.3 s, not 20 s


def test_site_backend_takes_the_site_retry_window(
    monkeypatch: pytest.MonkeyPatch, site_file: Path
) -> None:
    from elastic_slurm.jobs import site_backend

    _scripted_site(monkeypatch, [(0, UP_JSON, "")])
    assert site_backend(load_site(str(site_file))).retry_s == 0.3


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (InvalidRequest("job 3 is rigid"), 2),
        (ResizeError("job 3 was not resized:\n  Slurm refused"), 1),
        (SlurmCommandError(["scontrol", "x"], 1, "", "scontrol: error: a\nscontrol: error: b"), 1),
        (OSError(13, "Permission denied"), 1),
    ],
)
def test_errors_are_one_line_with_a_slurm_like_exit_status(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exc: BaseException,
    status: int,
) -> None:
    def fail(args: object) -> int:
        raise exc

    from elastic_slurm.cli import queue

    monkeypatch.setattr(queue, "run", fail)
    rc = main(["queue"])
    err = capsys.readouterr().err
    assert rc == status and err.startswith("elastic-slurm: error: ") and err.count("\n") == 1


def test_checked_results_of_a_stopped_slurmctld_are_an_outage(golden: Golden) -> None:
    down = Completed(("sinfo",), 1, "", golden.recorded("sinfo_slurmctld_down.stderr"), 19.0)
    with pytest.raises(SlurmUnavailableError):
        down.check()
    refused = Completed(("scontrol", "x"), 1, "", "scontrol: error: Invalid job id specified", 0)
    with pytest.raises(SlurmCommandError) as err:
        refused.check()
    assert not isinstance(err.value, SlurmUnavailableError)


def test_a_failed_squeue_json_that_says_invalid_job_id_is_not_found() -> None:
    said = json.dumps({"errors": [{"error": "Invalid job id specified", "error_number": 2017}]})
    slurm, _ = _cli([(1, said, "")])
    assert slurm.job(12) is None


class Routed(Scripted):
    """Slurm's commands get ``answer``; the submission checks (``test``, ``sh``) succeed."""

    def __init__(self, answer: tuple[int, str, str]) -> None:
        super().__init__([answer])

    def run(self, argv: Sequence[str], **kwargs: object) -> Completed:  # type: ignore[override]
        if argv[0] in ("test", "sh"):
            return Completed(tuple(argv), 0, "", "", 0.0)
        return super().run(argv)


@pytest.mark.parametrize(
    "command",
    [
        ["queue"],
        ["show", "5"],
        ["resize", "5", "--nodes", "2"],
        ["cancel", "5"],
        ["submit", "-N", "1", "--", "/bin/true"],
    ],
)
def test_every_user_command_says_the_controller_is_unreachable(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    golden: Golden,
    site_file: Path,
    command: list[str],
) -> None:
    """``squeue --json`` answers an outage; ``sinfo`` (submit's size check) fails as 22.05's."""
    sinfo = golden.recorded("sinfo_slurmctld_down.stderr")
    t = Routed((0, DOWN_JSON, "") if command[0] != "submit" else (1, "", sinfo))
    monkeypatch.setattr(factory, "transport_for", lambda site: t)
    # commands that still build their backend with slurm_for's fixed window: keep it short
    monkeypatch.setattr(factory, "SlurmCLI", functools.partial(SlurmCLI, retry_s=0.3))
    monkeypatch.setattr(logging.root, "handlers", [])
    rc = main(["--site", str(site_file), *command])
    logging.root.handlers.clear()
    out, err = capsys.readouterr()
    assert (rc, out) == (1, "")
    assert (
        err.startswith("elastic-slurm: the Slurm controller is unreachable (")
        and err.count("\n") == 1
    ), err


def test_a_grant_that_timed_out_says_what_the_nodes_were_doing() -> None:
    waited = (
        1,
        "",
        "salloc: Pending job allocation 14\nsalloc: job 14 queued and waiting for resources\n"
        "salloc: error: Unable to allocate resources: Connection timed out\n",
    )
    sinfo = "n1|allocated|2\nn2|allocated|2\nn3|completing|2\nn4|idle|2\n"
    slurm, t = _cli([waited, (0, sinfo, ""), (0, "", "")])
    with pytest.raises(ResizeError) as err:
        slurm.allocate(2, name="expand:13", immediate_s=30)
    assert str(err.value).endswith(
        "Connection timed out; nodes then: allocated n1,n2; completing n3; idle n4"
    )
    assert t.argvs[-1][0] == "scancel" and "14" in t.argvs[-1]  # nothing left queued


def test_a_refusal_names_no_nodes_when_sinfo_fails_or_the_site_is_large() -> None:
    waited = (1, "", "salloc: Pending job allocation 9\nsalloc: error: timed out\n")
    slurm, _ = _cli([waited, (1, "", "sinfo: error: boom\n"), (0, "", "")])
    with pytest.raises(ResizeError, match=r"timed out$"):
        slurm.allocate(1, name="expand:3", immediate_s=5)
    big = "".join(f"c{i}|idle|8\n" for i in range(100)) + "c100|allocated|8\n"
    slurm, _ = _cli([waited, (0, big, ""), (0, "", "")])
    with pytest.raises(ResizeError, match=r"nodes then: allocated c100; idle 100 nodes$"):
        slurm.allocate(1, name="expand:3", immediate_s=5)
