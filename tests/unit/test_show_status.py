"""``show`` and ``status`` tell one story: resizes of ended jobs are closed, users' are listed.

Both commands run against a stub Slurm (``slurm_for`` replaced) and a journal in a temporary
directory, named by the site config (``controller.journal``).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from elastic_slurm.adapter.parse import SlurmJob, SlurmNode
from elastic_slurm.cli import show, status
from elastic_slurm.config.schema import ControllerConfig, SiteConfig
from elastic_slurm.controller.journal import Journal, ResizeRow
from elastic_slurm.errors import SlurmCommandError
from elastic_slurm.model.resize_order import ResizeAction, ResizeOrder
from elastic_slurm.protocol.jobdir import JobDir

pytestmark = pytest.mark.usefixtures("fictional_users")

TAG = "elastic-slurm:kind=malleable;min=1;max=4"


def _job(job_id: int, state: str, nodes: Sequence[str], workdir: Path) -> SlurmJob:
    return SlurmJob(
        job_id, "heat", state, tuple(nodes), max(1, len(nodes)), TAG, 1.0, 2.0,
        nodes[0] if nodes else None, str(workdir), "alice", "debug", "a", "normal", "None",
    )  # fmt: skip


class _Slurm:
    def __init__(self, jobs: Sequence[SlurmJob]) -> None:
        self.listed = list(jobs)

    def jobs(self, job_ids: Sequence[int] = ()) -> list[SlurmJob]:
        return self.listed

    def job(self, job_id: int) -> SlurmJob | None:
        return next((j for j in self.listed if j.job_id == job_id), None)

    def nodes(self) -> list[SlurmNode]:
        return [SlurmNode(f"n{i}", "idle", 1) for i in range(1, 5)]

    def allocation_history(self, job_id: int) -> list[object]:
        raise SlurmCommandError(["sacct"], 1, "", "no accounting")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SiteConfig:
    cfg = SiteConfig(
        name="stub", controller=ControllerConfig(journal=tmp_path / "state" / "journal.sqlite")
    )
    for module in (show, status):
        monkeypatch.setattr(module, "load_site", lambda name=None: cfg)
    return cfg


def _use(monkeypatch: pytest.MonkeyPatch, slurm: _Slurm) -> None:
    for module in (show, status):
        monkeypatch.setattr(module, "slurm_for", lambda site: slurm)


def _show(job_id: int, **kw: object) -> argparse.Namespace:
    return argparse.Namespace(site=None, job_id=job_id, journal=None, json=False, **kw)


def _status(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(site=None, journal=None, json=True, recent=10, **kw)


def _failed_job_with_an_open_resize(tmp_path: Path, site: SiteConfig) -> _Slurm:
    """Job 5 failed while following order 1 (no acknowledgement); the journal has it open."""
    JobDir.for_job(tmp_path, 5).write_order(
        ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2"), time.time())
    )
    journal = Journal(site.controller.journal)
    journal.open_resize(
        ResizeRow(5, 1, "expand", "awaiting_done", ("n1",), ("n1", "n2"), time.time(), "idle")
    )
    journal.close()
    return _Slurm([_job(5, "FAILED", [], tmp_path)])


def test_show_and_status_close_the_resize_of_a_failed_job(
    tmp_path: Path,
    site: SiteConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _use(monkeypatch, _failed_job_with_an_open_resize(tmp_path, site))
    assert show.run(_show(5)) == 0
    out = capsys.readouterr().out
    assert "1. expand to 2 node(s) n[1-2]: job_ended" in out
    assert "under way" not in out.split("Resizes:")[1]
    assert status.run(_status()) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["resizes"] == []  # none under way ...
    assert [(r["job_id"], r["outcome"]) for r in shown["recent"]] == [(5, "job_ended")]  # closed


def test_show_and_status_list_a_resize_by_a_user_like_the_policy_s(
    tmp_path: Path,
    site: SiteConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    journal = Journal(site.controller.journal)
    journal.record_observed(
        ResizeRow(7, 0, "expand", "observed", ("n1",), ("n1", "n3"), time.time(), by="user")
    )
    journal.close()
    _use(monkeypatch, _Slurm([_job(7, "RUNNING", ["n1", "n3"], tmp_path)]))
    assert show.run(_show(7)) == 0
    out = capsys.readouterr().out
    assert "0. expand to 2 node(s) n[1,3] by user: observed" in out
    assert status.run(_status()) == 0
    recent = json.loads(capsys.readouterr().out)["recent"]
    assert [(r["job_id"], r["by"], r["outcome"]) for r in recent] == [(7, "user", "observed")]


def test_status_reads_the_site_journal_by_default(
    tmp_path: Path,
    site: SiteConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    journal = Journal(site.controller.journal)
    journal.open_resize(ResizeRow(8, 1, "shrink", "awaiting_vacate", ("n1", "n2"), ("n1",), 1.0))
    journal.close()
    _use(monkeypatch, _Slurm([_job(8, "RUNNING", ["n1", "n2"], tmp_path)]))
    assert status.run(_status()) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(r["job_id"], r["by"], r["phase"]) for r in shown["resizes"]] == [
        (8, "policy", "awaiting_vacate")
    ]


def test_the_journal_s_directory_is_private(tmp_path: Path) -> None:
    path = tmp_path / "controller" / "journal.sqlite"
    Journal(path).close()
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


def test_a_journal_from_before_by_is_read_as_the_policy_s(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE resizes (id INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL,"
        " seq INTEGER NOT NULL, action TEXT NOT NULL, phase TEXT NOT NULL, before TEXT NOT NULL,"
        " target TEXT NOT NULL, decided_at REAL NOT NULL, reason TEXT NOT NULL, phases_s TEXT"
        " NOT NULL, helper INTEGER, overdue INTEGER NOT NULL DEFAULT 0, open INTEGER NOT NULL"
        " DEFAULT 1, outcome TEXT NOT NULL DEFAULT '', closed_at REAL);"
        " INSERT INTO resizes (job_id, seq, action, phase, before, target, decided_at, reason,"
        " phases_s) VALUES (3, 1, 'expand', 'granting', '[]', '[]', 1.0, '', '{}');"
    )
    db.commit()
    db.close()
    journal = Journal(path)
    (row,) = journal.resizes(open_only=True)
    assert (row.job_id, row.by) == (3, "policy")
    assert journal.has_resize(3, 1) and not journal.has_resize(3, 2)


def test_status_and_show_do_without_a_journal_they_cannot_read(
    tmp_path: Path,
    site: SiteConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    site.controller.journal.parent.mkdir(parents=True)
    site.controller.journal.write_text("not a database")
    _use(monkeypatch, _Slurm([_job(8, "RUNNING", ["n1"], tmp_path)]))
    assert status.run(_status()) == 0
    assert json.loads(capsys.readouterr().out)["resizes"] == []
    assert status.run(_with_journal(site)) == 0
    captured = capsys.readouterr()
    assert "warning: journal not read" in captured.err
    assert show.run(_show(8)) == 0
    assert "JobId=8" in capsys.readouterr().out


def _with_journal(site: SiteConfig) -> argparse.Namespace:
    args = _status()
    args.journal = site.controller.journal
    return args


def test_show_gives_the_application_s_pause_beside_the_total(
    tmp_path: Path,
    site: SiteConfig,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from elastic_slurm.model.resize_order import AckStatus, ResizeAck

    jobdir = JobDir.for_job(tmp_path, 9)
    issued = time.time() - 5
    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2"), issued))
    jobdir.write_ack(
        ResizeAck(
            1,
            AckStatus.DONE,
            ("n1", "n2"),
            issued + 1.5,
            strategy="restart",
            ranks=2,
            phases_s={"grant": 0.4, "checkpoint": 0.05, "pause": 0.21},
        )
    )
    _use(monkeypatch, _Slurm([_job(9, "RUNNING", ["n1", "n2"], tmp_path)]))
    assert show.run(_show(9)) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if "1. expand" in ln][0]
    assert "1.50 s (application paused 0.21 s) via restart" in line
    assert "pause 0.21" not in line  # not repeated among the phases
    assert show.run(argparse.Namespace(site=None, job_id=9, journal=None, json=True)) == 0
    (shown,) = json.loads(capsys.readouterr().out)["resizes"]
    assert shown["pause_s"] == 0.21 and shown["seconds"] == pytest.approx(1.5, abs=0.01)
