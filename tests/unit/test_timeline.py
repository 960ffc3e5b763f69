"""Jobs' sizes over time as Slurm reports them: ``demo/timeline.py``."""

from __future__ import annotations

import io

from rich.console import Console

from elastic_slurm.demo.timeline import Event, Timeline
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import JobState, JobView


def _view(job_id: int, state: JobState, nodes: tuple[str, ...] = ()) -> JobView:
    return JobView(job_id, JobKind.MALLEABLE, state, nodes, len(nodes) or 1, 1, 4, 0.0)


def _running(job_id: int, count: int) -> JobView:
    return _view(job_id, JobState.RUNNING, tuple(f"n{i}" for i in range(1, count + 1)))


def test_observe_records_changes_only() -> None:
    tl = Timeline(t0=100.0)
    tl.track(4, "malleable", 100.0)
    tl.observe({4: _view(4, JobState.PENDING)}, 101.0)
    tl.observe({4: _view(4, JobState.PENDING)}, 102.0)  # no change: no event
    tl.observe({4: _running(4, 2)}, 103.0)
    tl.observe({4: _running(4, 2)}, 104.0)
    tl.observe({4: _running(4, 3)}, 105.5)
    tl.observe({4: _running(4, 1)}, 107.0)
    tl.observe({}, 108.0)  # gone: ended
    tl.observe({}, 109.0)
    assert tl.events == [
        Event(0.0, 4, "malleable", "submitted"),
        Event(1.0, 4, "malleable", "pending"),
        Event(3.0, 4, "malleable", "running on 2 node(s)", ("n1", "n2")),
        Event(5.5, 4, "malleable", "running on 3 node(s)", ("n1", "n2", "n3")),
        Event(7.0, 4, "malleable", "running on 1 node(s)", ("n1",)),
        Event(8.0, 4, "malleable", "ended"),
    ]
    assert tl.sizes(4) == [2, 3, 1]


def test_sizes_merge_repeats_and_ignore_other_jobs() -> None:
    tl = Timeline(t0=0.0)
    tl.track(1, "a", 0.0)
    tl.track(2, "b", 0.0)
    tl.observe({1: _running(1, 2), 2: _running(2, 1)}, 1.0)
    # same size on other nodes: an event, but not a new size
    tl.observe({1: _view(1, JobState.RUNNING, ("n3", "n4")), 2: _running(2, 1)}, 2.0)
    tl.observe({1: _running(1, 4), 2: _running(2, 2)}, 3.0)
    assert [e.what for e in tl.events if e.job_id == 1] == [
        "submitted",
        "running on 2 node(s)",
        "running on 2 node(s)",
        "running on 4 node(s)",
    ]
    assert tl.sizes(1) == [2, 4]
    assert tl.sizes(2) == [1, 2]
    assert tl.sizes(99) == []


def test_a_job_never_seen_does_not_end() -> None:
    tl = Timeline(t0=0.0)
    tl.track(7, "late", 0.0)
    tl.observe({}, 1.0)
    tl.observe({8: _running(8, 1)}, 2.0)  # not watched: ignored
    assert [e.what for e in tl.events] == ["submitted"]
    tl.observe({7: _view(7, JobState.PENDING)}, 3.0)
    tl.observe({}, 4.0)
    assert [(e.t_s, e.what) for e in tl.events] == [
        (0.0, "submitted"),
        (3.0, "pending"),
        (4.0, "ended"),
    ]


def test_completing_and_unknown_states_make_no_event() -> None:
    tl = Timeline(t0=0.0)
    tl.track(1, "a", 0.0)
    tl.observe({1: _running(1, 2)}, 1.0)
    tl.observe({1: _view(1, JobState.COMPLETING, ("n1", "n2"))}, 2.0)
    tl.observe({1: _view(1, JobState.UNKNOWN)}, 3.0)
    assert [e.what for e in tl.events] == ["submitted", "running on 2 node(s)"]


def test_note_of_an_untracked_job_uses_its_id() -> None:
    tl = Timeline(t0=10.0)
    tl.note(12, "expander granted", 12.5, ["n3"])
    assert tl.events == [Event(2.5, 12, "12", "expander granted", ("n3",))]


def test_render() -> None:
    tl = Timeline(t0=0.0)
    tl.track(4, "malleable", 0.0)
    tl.observe({4: _running(4, 3)}, 1.5)
    out = io.StringIO()
    tl.render(Console(file=out, width=100, color_system=None), title="demo")
    text = out.getvalue()
    assert "demo" in text
    assert "running on 3 node(s)" in text
    assert "n[1-3]" in text
    assert "   1.5" in text and "   0.0" in text  # t formatted as 6.1f
