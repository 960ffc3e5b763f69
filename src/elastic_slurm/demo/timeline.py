"""Record jobs' sizes over time as Slurm reports them, and print them as a table."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from elastic_slurm.adapter.hostlist import compress
from elastic_slurm.model.snapshot import JobState, JobView


@dataclass(frozen=True)
class Event:
    """Something seen at ``t_s`` seconds after the timeline started."""

    t_s: float
    job_id: int
    label: str
    what: str
    nodes: tuple[str, ...] = ()


class Timeline:
    """Watches labelled jobs through successive observations.

    Parameters
    ----------
    t0
        The start time (seconds since the epoch).
    """

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.labels: dict[int, str] = {}
        self.events: list[Event] = []
        self._last: dict[int, tuple[JobState, tuple[str, ...]]] = {}

    def track(self, job_id: int, label: str, now: float) -> None:
        """Start watching ``job_id`` under ``label``."""
        self.labels[job_id] = label
        self.note(job_id, "submitted", now)

    def note(self, job_id: int, what: str, now: float, nodes: Iterable[str] = ()) -> None:
        """Add an event."""
        self.events.append(
            Event(now - self.t0, job_id, self.labels.get(job_id, str(job_id)), what, tuple(nodes))
        )

    def observe(self, jobs: Mapping[int, JobView], now: float) -> None:
        """Compare the watched jobs with their last observation and record what changed.

        A watched job missing from ``jobs`` has ended.
        """
        for job_id in self.labels:
            view = jobs.get(job_id)
            current = (view.state, view.nodes) if view else (JobState.ENDED, ())
            if self._last.get(job_id) == current:
                continue
            if job_id not in self._last and current[0] is JobState.ENDED:
                continue  # not seen yet
            self._last[job_id] = current
            state, nodes = current
            if state is JobState.RUNNING:
                self.note(job_id, f"running on {len(nodes)} node(s)", now, nodes)
            elif state is JobState.PENDING:
                self.note(job_id, "pending", now)
            elif state is JobState.ENDED:
                self.note(job_id, "ended", now)

    def sizes(self, job_id: int) -> list[int]:
        """The job's node counts in the order Slurm reported them (repeats merged)."""
        out: list[int] = []
        for e in self.events:
            if e.job_id == job_id and e.nodes and (not out or out[-1] != len(e.nodes)):
                out.append(len(e.nodes))
        return out

    def render(self, console: Console, title: str = "timeline") -> None:
        """Print the events as a table."""
        table = Table(title=title)
        table.add_column("t (s)", justify="right")
        table.add_column("job")
        table.add_column("event")
        table.add_column("nodes (Slurm)")
        for e in self.events:
            table.add_row(f"{e.t_s:6.1f}", e.label, e.what, compress(e.nodes) if e.nodes else "")
        console.print(table)
