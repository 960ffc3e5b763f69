"""The operator's report of a controller journal: ``controller/report.py``, ``cli/report.py``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from elastic_slurm.cli import report as cli_report
from elastic_slurm.controller.journal import Journal
from elastic_slurm.controller.report import (
    Interval,
    average_utilization,
    draw_report,
    job_events,
    job_spans,
    summary,
    summary_line,
    utilization_series,
)

T0 = 1_700_000_000.0  # the journal's first record, seconds since the epoch


def job(job_id: int, state: str, nodes: list[str], name: str = "", kind: str = "malleable"):
    return {
        "job_id": job_id,
        "name": name or f"j{job_id}",
        "kind": kind,
        "state": state,
        "nodes": nodes,
    }


def sizes(t: float, *jobs: dict[str, Any], total: int = 4) -> dict[str, Any]:
    return {"t": T0 + t, "kind": "sizes", "nodes_total": total, "jobs": list(jobs)}


N2 = ["n1", "n2"]
N4 = ["n1", "n2", "n3", "n4"]


def known_sequence() -> list[dict[str, Any]]:
    """4 nodes. Job 1 runs on 2 nodes from t=0 and grows to 4 at t=10; job 2 waits from t=5;
    at t=20 job 1 shrinks to 2 and job 2 starts on the other 2; both end at t=30."""
    return [
        sizes(0, job(1, "running", N2, "heat")),
        sizes(5, job(1, "running", N2, "heat"), job(2, "pending", [], "x", "rigid")),
        {"t": T0 + 9, "kind": "decision", "decision": "Expand", "job_id": 1, "count": 2},
        {
            "t": T0 + 10,
            "kind": "outcome",
            "job_id": 1,
            "seq": 1,
            "action": "expand",
            "ok": True,
            "seconds": 1.5,
            "nodes": N4,
            "strategy": "block",
        },
        sizes(10, job(1, "running", N4, "heat"), job(2, "pending", [], "x", "rigid")),
        {
            "t": T0 + 20,
            "kind": "outcome",
            "job_id": 1,
            "seq": 2,
            "action": "shrink",
            "ok": True,
            "seconds": 2.0,
            "nodes": N2,
        },
        sizes(20, job(1, "running", N2, "heat"), job(2, "running", ["n3", "n4"], "x", "rigid")),
        # an old-style failed outcome: no seq, seconds, nodes or strategy
        {
            "t": T0 + 25,
            "kind": "outcome",
            "job_id": 1,
            "action": "expand",
            "ok": False,
            "message": "no grant",
        },
        {"t": T0 + 26, "kind": "overdue", "job_id": 1, "seq": 3, "message": "late"},
        sizes(30),
    ]


def test_intervals_of_a_known_sequence() -> None:
    spans = job_spans(known_sequence())
    assert [(s.job_id, s.label) for s in spans] == [(1, "1 heat (malleable)"), (2, "2 x (rigid)")]
    one, two = spans
    assert [(i.start_s, i.end_s, i.nodes_held, i.state) for i in one.intervals] == [
        (0.0, 10.0, 2, "running"),  # the record at t=5 left job 1 as it was: one interval
        (10.0, 20.0, 4, "running"),
        (20.0, 30.0, 2, "running"),
    ]
    assert [(i.start_s, i.end_s, i.nodes_held, i.state) for i in two.intervals] == [
        (5.0, 20.0, 0, "pending"),
        (20.0, 30.0, 2, "running"),
    ]
    assert two.intervals[1].nodes == ("n3", "n4")
    assert (one.start_s, one.end_s, one.max_nodes) == (0.0, 30.0, 4)


def test_utilisation_of_a_known_sequence() -> None:
    times, values = utilization_series(known_sequence())
    assert times == [0.0, 5.0, 10.0, 20.0, 30.0, 30.0]
    assert values == [0.5, 0.5, 1.0, 1.0, 0.0, 0.0]
    # by hand: 2/4 for 10 s, 4/4 for 10 s, (2+2)/4 for 10 s -> (5 + 10 + 10) / 30
    assert average_utilization(known_sequence()) == pytest.approx(25 / 30)


def test_last_jobs_last_until_the_journal_ends() -> None:
    # job 1 still runs on 2 of 4 nodes when the journal ends with a note at t=40
    records = [
        sizes(0, job(1, "running", N4)),
        sizes(10, job(1, "running", N2)),
        {"t": T0 + 40, "kind": "note", "message": "controller stopped"},
    ]
    (span,) = job_spans(records)
    assert [(i.start_s, i.end_s, i.nodes_held) for i in span.intervals] == [
        (0.0, 10.0, 4),
        (10.0, 40.0, 2),
    ]
    # (1.0 * 10 + 0.5 * 30) / 40
    assert average_utilization(records) == pytest.approx(25 / 40)


def test_a_job_that_leaves_and_comes_back_has_a_gap() -> None:
    records = [
        sizes(0, job(1, "pending", [])),
        sizes(10),
        sizes(15, job(1, "running", N2)),
        sizes(20),
    ]
    (span,) = job_spans(records)
    assert [(i.start_s, i.end_s, i.state) for i in span.intervals] == [
        (0.0, 10.0, "pending"),
        (15.0, 20.0, "running"),
    ]
    times, values = utilization_series(records)
    assert values == [0.0, 0.0, 0.5, 0.0, 0.0]
    assert average_utilization(records) == pytest.approx(0.5 * 5 / 20)


def test_shared_nodes_count_once_and_pending_hold_none() -> None:
    records = [
        sizes(0, job(1, "running", N2), job(2, "running", ["n2", "n3"]), job(3, "pending", []))
    ]
    assert utilization_series(records) == ([0.0, 0.0], [0.75, 0.75])
    assert average_utilization(records) == 0.75  # zero span: the instantaneous value


def test_clock_stepping_back_gives_no_negative_interval() -> None:
    records = [sizes(0, job(1, "running", N2)), sizes(-3, job(1, "running", N4)), sizes(10)]
    (span,) = job_spans(records)
    assert [(i.start_s, i.end_s, i.nodes_held) for i in span.intervals] == [
        (0.0, 0.0, 2),
        (0.0, 10.0, 4),
    ]


def test_events_of_a_known_sequence() -> None:
    events = job_events(known_sequence())
    assert [(e.t_s, e.job_id, e.what) for e in events] == [
        (10.0, 1, "expand"),
        (20.0, 1, "shrink"),
        (25.0, 1, "failed"),
        (26.0, 1, "overdue"),
    ]
    expand, shrink, failed, overdue = events
    assert (expand.seconds, expand.nodes_after, expand.strategy) == (1.5, 4, "block")
    assert (shrink.seconds, shrink.nodes_after, shrink.strategy) == (2.0, 2, None)
    assert (failed.action, failed.seconds, failed.nodes_after) == ("expand", None, None)
    assert failed.message == "no grant"
    assert overdue.message == "late"


def test_summary_of_a_known_sequence() -> None:
    s = summary(known_sequence())
    assert s == {
        "records": 10,
        "jobs": 2,
        "resizes_done": 2,
        "resizes_failed": 1,
        "resizes_by_user": 0,
        "overdue": 1,
        "recoveries": 0,
        "span_s": 30.0,
        "utilization": pytest.approx(25 / 30),
        "start": T0,
        "end": T0 + 30,
        # job 1 ran before the journal began: only job 2 is measured, waiting 5 -> 20 s,
        # running 20 -> 30 s: bounded slowdown 25 / max(10, 10)
        "jobs_measured": 1,
        "avg_wait_s": 15.0,
        "p95_wait_s": 15.0,
        "avg_turnaround_s": 25.0,
        "avg_bounded_slowdown": 2.5,
    }


def test_a_resize_by_a_user_is_an_event_like_the_policy_s() -> None:
    records = [
        *known_sequence(),
        {
            "t": T0 + 31,
            "kind": "outcome",
            "job_id": 1,
            "seq": 0,
            "action": "shrink",
            "ok": True,
            "nodes": ["a"],
            "by": "user",
            "message": "resized outside elastic-slurm (scontrol or Slurm itself)",
        },
    ]
    events = job_events(records)
    assert [(e.what, e.by) for e in events] == [
        ("expand", "policy"),
        ("shrink", "policy"),
        ("failed", "policy"),
        ("overdue", ""),
        ("shrink", "user"),
    ]
    s = summary(records)
    assert (s["resizes_done"], s["resizes_by_user"]) == (3, 1)
    assert "3 resize(s) done, 1 failed (1 by users)" in summary_line(s)


def test_a_skipped_job_is_an_event_with_its_reason(tmp_path: Path) -> None:
    records = [
        *known_sequence(),
        {"t": T0 + 29, "kind": "skipped", "job_id": 2, "reason": "requests/000001.json: not JSON"},
    ]
    (skipped,) = [e for e in job_events(records) if e.what == "skipped"]
    assert (skipped.job_id, skipped.message) == (2, "requests/000001.json: not JSON")
    assert draw_report(records, tmp_path / "r.png").is_file()


def test_summary_without_sizes_has_no_utilisation() -> None:
    s = summary([{"t": T0, "kind": "note", "message": "x"}])
    assert (s["jobs"], s["utilization"], s["span_s"]) == (0, None, 0.0)
    assert summary([])["start"] is None


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_draw_report_writes_the_figure(tmp_path: Path, suffix: str) -> None:
    out = draw_report(known_sequence(), tmp_path / "sub" / f"report{suffix}")
    assert out == tmp_path / "sub" / f"report{suffix}"
    data = out.read_bytes()
    assert len(data) > 10_000
    if suffix == ".png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    else:
        text = data.decode()
        assert "<svg" in text
        # the job labels are drawn (as text in the SVG: glyph ids differ, so look for the
        # rendered characters' comments matplotlib writes for each text)
        assert "heat" in text and "rigid" in text


def test_draw_report_over_a_long_journal_and_many_jobs(tmp_path: Path) -> None:
    records = [
        sizes(600 * k, *(job(i, "running", [f"n{i}"]) for i in range(k, k + 5)), total=100)
        for k in range(40)
    ]
    out = draw_report(records, tmp_path / "long.png", max_jobs=10)
    assert out.stat().st_size > 10_000


def test_draw_report_of_a_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import elastic_slurm.controller.report as report

    records = [
        sizes(600 * k, *(job(i, "running", [f"n{i}"]) for i in range(k, k + 5)), total=100)
        for k in range(40)
    ]
    seen = []
    real = report.draw_gantt

    def spy(ax, spans, events, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.append(({s.job_id for s in spans}, kw["xlim"]))
        return real(ax, spans, events, **kw)

    monkeypatch.setattr(report, "draw_gantt", spy)
    draw_report(records, tmp_path / "w.png", window_s=(6000.0, 7200.0))
    ((ids, xlim),) = seen
    assert xlim == (6000.0, 7200.0)
    assert ids == set(range(9, 17))  # job i is seen from 600 (i - 4) s to 600 (i + 1) s
    with pytest.raises(ValueError, match="window must end after"):
        draw_report(records, tmp_path / "w.png", window_s=(10.0, 10.0))


def test_draw_report_refuses_another_suffix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.png or \.svg, not \.pdf"):
        draw_report(known_sequence(), tmp_path / "r.pdf")
    assert not (tmp_path / "r.pdf").exists()


def test_no_sizes_record_is_a_clear_error(tmp_path: Path) -> None:
    records = [{"t": T0, "kind": "decision", "decision": "Expand", "job_id": 1, "count": 1}]
    for call in (job_spans, utilization_series, average_utilization):
        with pytest.raises(ValueError, match="no 'sizes' record"):
            call(records)
    with pytest.raises(ValueError, match="no 'sizes' record"):
        draw_report(records, tmp_path / "r.png")
    with pytest.raises(ValueError, match="no 'sizes' record"):
        draw_report([], tmp_path / "r.png")
    assert not (tmp_path / "r.png").exists()


# ---------------------------------------------------------------------------------- the CLI
def cli_args(journal: Path, output: Path | None = None, as_json: bool = False):
    parser = argparse.ArgumentParser()
    cli_report.add_parser(parser.add_subparsers())
    words = ["report", str(journal), *(["-o", str(output)] if output else [])]
    args = parser.parse_args([*words, *(["--json"] if as_json else [])])
    assert args.func is cli_report.run
    return args


def real_journal(path: Path) -> Path:
    journal = Journal(path)
    journal.write("sizes", nodes_total=4, jobs=[job(7, "running", N2, "heat")])
    journal.write("outcome", job_id=7, seq=1, action="expand", ok=True, seconds=0.1, nodes=N4)
    journal.write("sizes", nodes_total=4, jobs=[job(7, "running", N4, "heat")])
    journal.write("outcome", job_id=7, action="shrink", ok=False, message="refused")
    journal.close()
    return path


def test_cli_draws_next_to_the_journal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = real_journal(tmp_path / "j.sqlite")
    assert cli_report.run(cli_args(path)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"wrote {tmp_path / 'j.png'}"
    assert out[1].startswith("1 job(s), 1 resize(s) done, 1 failed, over ")
    assert "average utilisation" in out[1]
    assert (tmp_path / "j.png").read_bytes().startswith(b"\x89PNG")


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = real_journal(tmp_path / "j.sqlite")
    assert cli_report.run(cli_args(path, tmp_path / "fig" / "r.svg", as_json=True)) == 0
    (line,) = capsys.readouterr().out.splitlines()
    got = json.loads(line)
    assert got["figure"] == str(tmp_path / "fig" / "r.svg")
    assert (got["jobs"], got["resizes_done"], got["resizes_failed"]) == (1, 1, 1)
    # 2 of 4 nodes until the second sizes record, then 4 of 4 until the last record
    assert 0.5 <= got["utilization"] <= 1.0
    assert (tmp_path / "fig" / "r.svg").stat().st_size > 10_000


def test_cli_missing_journal_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "j.sqlite"
    assert cli_report.run(cli_args(missing)) == 2
    err = capsys.readouterr().err
    assert f"no journal at {missing}" in err
    assert not missing.parent.exists()
    assert list(tmp_path.iterdir()) == []


def test_cli_journal_without_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "old.sqlite"
    Journal(path).write("note", message="from an older controller")
    assert cli_report.run(cli_args(path)) == 2
    assert "no 'sizes' record" in capsys.readouterr().err
    assert not (tmp_path / "old.png").exists()


def test_cli_not_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_text('{"t": 1, "kind": "note"}\n' * 50)
    assert cli_report.run(cli_args(path)) == 2
    assert "is not a journal" in capsys.readouterr().err
    assert not (tmp_path / "journal.png").exists()


def test_cli_bad_output_suffix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = real_journal(tmp_path / "j.sqlite")
    assert cli_report.run(cli_args(path, tmp_path / "r.jpg")) == 2
    assert ".png or .svg" in capsys.readouterr().err


def test_interval_duration() -> None:
    assert Interval(2.0, 5.5, 1, "running").duration_s == 3.5
