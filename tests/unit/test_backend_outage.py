"""An outage during a shrink or a moldable start is an outage, not a refused resize.

A job that ends during its shrink is reported as ended, not as a shrink Slurm got wrong.

The command-line backend over a scripted transport whose ``scontrol update`` answers with what
Slurm 22.05 prints when slurmctld is stopped (``tests/golden/22.05``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.errors import ResizeError, SlurmUnavailableError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "22.05"
#: what ``scontrol`` prints when slurmctld is stopped
DOWN = (GOLDEN / "scontrol_show_job_slurmctld_down.stderr").read_text()


class Answers(Transport):
    """Every command exits with ``code`` and prints ``stderr``."""

    def __init__(self, code: int, stderr: str) -> None:
        self.code, self.stderr = code, stderr
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
        return Completed(tuple(argv), self.code, "", self.stderr, 0.0)


def _job(state: str, nodes: tuple[str, ...]) -> SlurmJob:
    return SlurmJob(
        7, "app", state, nodes, len(nodes), "", 0.0, None, nodes[0] if nodes else None,
        "/tmp", "root", "batch", "", "", "",
    )  # fmt: skip


class Known(SlurmCLI):
    """The CLI backend with the job's state known (the queries are not under test)."""

    def __init__(self, transport: Transport, job: SlurmJob) -> None:
        super().__init__(transport, retry_s=0.2)
        self._job = job

    def job(self, job_id: int) -> SlurmJob | None:
        return self._job

    def elastic_nodes(self, job_id: int) -> dict[str, int]:
        return {n: job_id for n in self._job.nodes}


@pytest.mark.parametrize(
    ("code", "stderr", "raised"),
    [
        (1, DOWN, SlurmUnavailableError),
        (1, "scontrol: error: Requested node configuration is not available\n", ResizeError),
    ],
    ids=["outage", "refused"],
)
def test_shrink(code, stderr, raised):
    t = Answers(code, stderr)
    backend = Known(t, _job("RUNNING", ("n1", "n2", "n3")))
    with pytest.raises(raised) as err:
        backend.shrink(7, ["n1"])
    assert type(err.value) is raised
    assert t.argvs[0][:2] == ("scontrol", "update")


class EndsDuringShrink(Known):
    """The job runs when the shrink starts, and has ended once Slurm applied it."""

    def __init__(self, transport: Transport, job: SlurmJob) -> None:
        super().__init__(transport, job)
        self.asked = 0

    def elastic_nodes(self, job_id: int) -> dict[str, int]:
        self.asked += 1
        return super().elastic_nodes(job_id) if self.asked == 1 else {}


def test_a_job_that_ends_during_its_shrink_is_reported_as_ended_at_once():
    backend = EndsDuringShrink(Answers(0, ""), _job("RUNNING", ("n1", "n2", "n3")))
    backend._shrink_needs_reconfigure = False
    with pytest.raises(ResizeError, match=r"job 7 ended while it was being shrunk to \['n1'\]"):
        backend.shrink(7, ["n1"])
    assert backend.asked == 2  # not asked again for the 10 s a resize may take to show


@pytest.mark.parametrize(
    ("code", "stderr", "raised"),
    [
        (1, DOWN, SlurmUnavailableError),
        (1, "scontrol: error: Invalid node count specified\n", ResizeError),
    ],
    ids=["outage", "refused"],
)
def test_set_pending_size(code, stderr, raised):
    t = Answers(code, stderr)
    backend = Known(t, _job("PENDING", ()))
    with pytest.raises(raised) as err:
        backend.set_pending_size(7, 3)
    assert type(err.value) is raised
