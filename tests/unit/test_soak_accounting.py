"""The soak's count of jobs that ended during the slurmctld outage (``ended_in_outage``)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from elastic_slurm.soak.accounting import count_jobs, ended_in_outage

RESULT = '{"runtime_s": 6.0, "ref_nodes": 1, "steps": 7, "checksum": 8191.75}\n'


class Sacct:
    """Answers ``sacct -o JobIDRaw,Start,TimelimitRaw`` with fixed rows (start, minutes)."""

    def __init__(self, rows: dict[int, tuple[float, int]]) -> None:
        self.rows = rows
        self.asked: list[list[str]] = []

    def run(self, argv, **kwargs):  # noqa: ANN001, ANN003, ANN201 - a transport's run
        self.asked.append(argv)
        text = "".join(f"{j}|{s:.0f}|{m}\n" for j, (s, m) in self.rows.items())
        return SimpleNamespace(stdout=text, returncode=0)


def _output(tmp: Path, job_id: int, text: str, mtime: float) -> None:
    p = tmp / f"{job_id}.out"
    p.write_text(text)
    os.utime(p, (mtime, mtime))


def test_only_a_result_written_in_time_during_an_outage_counts(tmp_path) -> None:
    t = 1_800_000_000.0
    outage = (t + 100, t + 220)
    rows = {
        1: (t + 90, 1),  # result at t+120: in the outage, within its 1-minute limit -> counts
        2: (t + 90, 1),  # no result line: killed mid-work -> lost
        3: (t, 1),  # result at t+130, but its limit ended at t+60 -> lost
        4: (t + 300, 5),  # result at t+320, after the outage -> lost
    }
    _output(tmp_path, 1, "elastic-slurm: layout\n" + RESULT, t + 120)
    _output(tmp_path, 2, "elastic-slurm: layout\n", t + 120)
    _output(tmp_path, 3, RESULT, t + 130)
    _output(tmp_path, 4, RESULT, t + 320)
    states = {j: "TIMEOUT" for j in rows} | {5: "COMPLETED"}
    slurm = SimpleNamespace(transport=Sacct(rows))
    seen = ended_in_outage(slurm, states, tmp_path, [outage])
    assert list(seen) == [1] and "slurmctld was down" in seen[1]
    assert slurm.transport.asked[0][slurm.transport.asked[0].index("-j") + 1] == "1,2,3,4"
    counted = count_jobs(states, [1, 2, 3, 4, 5], set(), seen)
    assert counted.completed == (5,) and set(counted.lost) == {2, 3, 4}
    assert counted.ended_in_outage == seen


def test_no_outage_no_question(tmp_path) -> None:
    slurm = SimpleNamespace(transport=Sacct({}))
    assert ended_in_outage(slurm, {1: "TIMEOUT"}, tmp_path, []) == {}
    assert ended_in_outage(slurm, {1: "COMPLETED"}, tmp_path, [(0.0, 1.0)]) == {}
    assert slurm.transport.asked == []
