"""The soak's output directory: its own, empty, or the soak refuses to start."""

from __future__ import annotations

import pytest

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.soak import command
from elastic_slurm.soak.run import fresh_out_dir


def test_a_missing_output_directory_is_made(tmp_path):
    out = tmp_path / "a" / "soak"
    fresh_out_dir(out)
    assert out.is_dir()
    fresh_out_dir(out)  # made and still empty: fine


def test_a_previous_soaks_directory_is_refused_by_name(tmp_path):
    (tmp_path / "journal.sqlite").write_bytes(b"")
    with pytest.raises(InvalidRequest, match=r"not empty \(it holds journal\.sqlite\)"):
        fresh_out_dir(tmp_path)


def test_a_file_is_refused(tmp_path):
    path = tmp_path / "soak.json"
    path.write_text("{}")
    with pytest.raises(InvalidRequest, match="cannot use"):
        fresh_out_dir(path)


def test_the_command_says_so_in_one_line_and_starts_nothing(tmp_path, capsys):
    (tmp_path / "controller.log").write_text("an earlier run\n")
    status = command.main(["--out", str(tmp_path), "--minutes", "5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1 and err[0].startswith(f"soak: {tmp_path} is not empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["controller.log"]
