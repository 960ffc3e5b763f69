"""SlurmCLI retries transient Slurm errors with backoff and raises the others at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.errors import SlurmCommandError


class Scripted(Transport):
    """Answers each call with the next (returncode, stderr) of a script."""

    def __init__(self, answers: list[tuple[int, str]]) -> None:
        self.answers = list(answers)
        self.calls = 0

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> Completed:
        self.calls += 1
        code, err = self.answers.pop(0)
        return Completed(tuple(argv), code, "ok\n" if code == 0 else "", err, 0.0)


DB_INDEX = "Job update not available right now, the DB index is being set, try again in a bit"


def test_transient_errors_are_retried_until_success() -> None:
    t = Scripted([(1, DB_INDEX), (1, "Socket timed out on send/recv operation"), (0, "")])
    res = SlurmCLI(t, retry_s=10).run(["scontrol", "update", "JobId=1", "NumNodes=2"])
    assert (res.stdout, t.calls) == ("ok\n", 3)


def test_permanent_errors_are_raised_at_once() -> None:
    t = Scripted([(1, "Requested operation not supported on this system"), (0, "")])
    with pytest.raises(SlurmCommandError) as err:
        SlurmCLI(t, retry_s=10).run(["scontrol", "update", "JobId=1", "NumNodes=ALL"])
    assert (err.value.transient, err.value.returncode, t.calls) == (False, 1, 1)
    assert "not supported" in str(err.value)


def test_transient_errors_give_up_after_the_retry_time() -> None:
    t = Scripted([(1, DB_INDEX)] * 50)
    with pytest.raises(SlurmCommandError) as err:
        SlurmCLI(t, retry_s=0.5).run(["scontrol", "update", "JobId=1", "NumNodes=2"])
    assert err.value.transient is True and 1 < t.calls < 50
    assert "retrying can help" in str(err.value)


def test_no_retry_when_asked() -> None:
    t = Scripted([(1, DB_INDEX), (0, "")])
    with pytest.raises(SlurmCommandError):
        SlurmCLI(t, retry_s=10).run(["sbatch"], retry=False)
    assert t.calls == 1
