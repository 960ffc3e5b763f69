"""The quick Huang et al. reproduction runs, draws its figure and returns its checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_slurm.simulator.repro import Section
from elastic_slurm.simulator.repro.huang import SDSC, reproduce, simulate, trace_dir

pytestmark = pytest.mark.skipif(
    not (trace_dir() / SDSC).is_file(), reason=f"the SDSC-SP2 trace is not in {trace_dir()}"
)


def test_quick_reproduction_returns_checks_beside_the_paper(tmp_path: Path) -> None:
    lines: list[str] = []
    section = reproduce(tmp_path, quick=True, progress=lines.append)
    assert isinstance(section, Section)
    assert lines and lines[0].startswith("huang:")
    # 3 comparisons x 2 load factors on SDSC-SP2, 2 "up to" checks, and the other traces
    sdsc = [c for c in section.checks if c.what.startswith("SDSC-SP2,")]
    assert len(sdsc) == 6
    assert any("up to 78" in c.paper for c in section.checks)
    assert any("up to 89" in c.paper for c in section.checks)
    assert any("not in the paper" in c.what for c in section.checks)
    for c in section.checks:
        assert c.ours.endswith("%") and isinstance(c.agrees, bool)
    assert [f.name for f in section.figures] == ["huang_improvement_vs_load.png"]
    assert section.figures[0].stat().st_size > 10_000
    assert "| low variance | 1 |" in section.markdown
    assert "Quick run" in section.markdown


def test_one_workload_is_deterministic() -> None:
    # the same trace prefix, model, load factor and seed give the same metrics every time
    task = (SDSC, 300, "downey_high", 2, "log_uniform", "")
    first, second = simulate(task), simulate(task)
    strip = {p: {k: v for k, v in m.items() if k != "seconds"} for p, m in first.items()}
    assert strip == {p: {k: v for k, v in m.items() if k != "seconds"} for p, m in second.items()}
    assert set(first) == {"auxiliary", "parallel", "improved", "fairshare"}
    assert all(m["jobs"] == 300 for m in first.values())
