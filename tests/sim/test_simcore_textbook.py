"""Schedule identity: the simulator's FCFS and EASY against the textbook scheduler in bench/.

``bench/textbook.py`` is the minimal heap-based scheduler that ``bench/simulate.py`` measures
the simulator against; both must start every job of a real trace slice at the same second.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from elastic_slurm.simulator import SimConfig, SimJob, Workload, from_swf, read_swf, run

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = Path("/work/shared/workloads")
TRACES = ["SDSC-SP2-1998-4.2-cln.swf.gz", "KTH-SP2-1996-2.1-cln.swf.gz", "lublin_256.swf.gz"]


def _textbook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("textbook", ROOT / "bench" / "textbook.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


textbook = _textbook()


@cache
def _slice(name: str, skip: int, count: int) -> Workload:
    trace = read_swf(WORKLOADS / name, max_jobs=skip + count + 500)
    workload = from_swf(trace, max_jobs=skip + count)
    jobs = workload.jobs[skip:]
    return Workload(jobs, workload.nodes)


def _starts(
    jobs: tuple[SimJob, ...], nodes: int, policy: str, engine: str = "auto"
) -> dict[int, float]:
    name = "fcfs" if policy == "fcfs" else "easy_backfill"
    result = run(Workload(jobs, nodes), name, config=SimConfig(engine=engine))
    assert result.engine == ("general" if engine == "general" else "compiled")
    return {r.job_id: r.start_s for r in result.records}


@pytest.mark.skipif(not WORKLOADS.is_dir(), reason=f"the shared traces are not here ({WORKLOADS})")
@pytest.mark.parametrize("policy", ["fcfs", "easy"])
@pytest.mark.parametrize("name", TRACES)
@pytest.mark.parametrize("skip", [0, 4000])
@pytest.mark.parametrize("engine", ["auto", "general"])  # the compiled engine, the general loop
def test_same_start_for_every_job_as_the_textbook_scheduler(
    name: str, policy: str, skip: int, engine: str
) -> None:
    workload = _slice(name, skip, 1500)
    ours = _starts(workload.jobs, workload.nodes, policy, engine)
    theirs = textbook.schedule(textbook.from_simjobs(workload.jobs), workload.nodes, policy)
    assert len(ours) == len(theirs) == len(workload.jobs)
    differ = [j for j in ours if ours[j] != theirs[j]]
    assert not differ, f"{len(differ)} jobs start elsewhere, first {differ[:5]}"
    # the slice is a real test: jobs wait, and EASY backfills some of them
    assert sum(1 for j in workload.jobs if ours[j.job_id] > j.submit_s) > 100


def test_textbook_easy_backfills_behind_the_head_and_fcfs_does_not() -> None:
    # 4 nodes: job 1 holds 3 until 100 (estimated 100); job 2 (4 nodes) is blocked;
    # job 3 (1 node, 50 s) fits before the shadow time and is backfilled by EASY only
    jobs = [(1, 0.0, 100.0, 3, 100.0), (2, 1.0, 10.0, 4, 10.0), (3, 2.0, 50.0, 1, 50.0)]
    fcfs = textbook.schedule(jobs, 4, "fcfs")
    easy = textbook.schedule(jobs, 4, "easy")
    assert fcfs == {1: 0.0, 2: 100.0, 3: 110.0}  # job 2 takes all 4 nodes
    assert easy == {1: 0.0, 2: 100.0, 3: 2.0}
    sim = [SimJob(j, s, r, n, walltime_s=w) for j, s, r, n, w in jobs]
    for engine in ("auto", "general"):
        assert _starts(tuple(sim), 4, "easy", engine) == easy
        assert _starts(tuple(sim), 4, "fcfs", engine) == fcfs
