"""Klein and Pérez's Tables 1 and 2: the quick reproduction, and the policy in the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_slurm.plugins.policies.klein_perez import KleinPerez, schedule
from elastic_slurm.simulator import run
from elastic_slurm.simulator.generators.klein_profiles import (
    KleinProfiles,
    as_mapping,
    evolving_jobs,
    profiles_of,
    rigid_jobs,
)
from elastic_slurm.simulator.repro import Section
from elastic_slurm.simulator.repro.klein_perez import (
    ROWS,
    SEED,
    VARIANTS,
    _offline,
    reproduce,
    run_with_timers,
)

# The worked example of tests/unit/test_policy_klein_perez.py: on 4 nodes, A (1 node, 4 s) and
# C (2 nodes, 10 s) start at 0; B's steps are (2 s, 1), (3 s, 2), (2 s, 4). noX starts B at 5,
# 2X at 2 (its second step then waits 3 s on 2 nodes); both end at 12.
EXAMPLE = [((4.0, 1),), ((10.0, 2),), ((2.0, 1), (3.0, 2), (2.0, 4))]


@pytest.fixture(scope="module")
def section(tmp_path_factory: pytest.TempPathFactory) -> Section:
    return reproduce(tmp_path_factory.mktemp("repro"), quick=True)


def test_quick_reproduction_returns_the_tables_and_checks(section: Section):
    # 6 rows x 10 metrics, 7 findings, the simulator cross-check, 4 CooRMv2 checks
    assert len(section.checks) == 60 + 7 + 1 + 4
    assert all(c.ours and c.paper for c in section.checks)
    assert "Table 1" in section.markdown and "Table 2" in section.markdown
    assert [f.name for f in section.figures] == ["klein_perez.png"]
    assert all(Path(f).stat().st_size > 0 for f in section.figures)


def test_quick_reproduction_findings_hold(section: Section):
    # the paper's findings (section 5.2) on the quick set: every variant beats rigid, noX
    # wastes nothing, compacting reduces waste, and the policy in the simulator follows the
    # offline schedule exactly
    by_what = {c.what: c for c in section.checks}
    for what in (
        "every variant beats rigid on average ACT, makespan and waste",
        "noX wastes nothing; waste grows with the expand limit (noX <= 2X <= infX)",
        "compacting reduces waste (2X+c <= 2X, infX+c <= infX)",
    ):
        assert by_what[what].agrees, by_what[what]
    sim = next(c for c in section.checks if c.what.startswith("the klein_perez policy"))
    assert sim.agrees, sim


def test_offline_runs_are_deterministic_and_rigid_is_worst():
    tests = KleinProfiles().tests(4, SEED)
    first = _offline(tests, 100, lambda line: None)
    again = _offline(tests, 100, lambda line: None)
    for row in ROWS:
        for metric, values in first[row].per_test.items():
            if metric != "sched":  # wall-clock time
                assert values == again[row].per_test[metric]
    for variant in VARIANTS:
        assert max(first[variant].per_test["act"]) < 1.0
        assert max(first[variant].per_test["makespan"]) <= 1.0
    assert first["noX"].per_test["waste"] == [0.0] * 4


@pytest.mark.parametrize(("variant", "b_start"), [("noX", 5.0), ("2X", 2.0), ("2X+c", 5.0)])
def test_policy_in_the_simulator_follows_the_worked_example(variant, b_start):
    jobs = evolving_jobs(EXAMPLE)
    policy = KleinPerez(KleinPerez.Config(fit=variant), profiles=as_mapping(EXAMPLE))
    result = run_with_timers(jobs, policy, 4)
    records = {r.job_id: r for r in result.records}
    assert (records[3].start_s, records[3].end_s) == (b_start, 12.0)
    assert records[3].waste_node_s == (6.0 if variant == "2X" else 0.0)
    offline = schedule(EXAMPLE, 4, fit_name=variant)
    assert [(r.start_s, r.end_s) for r in sorted(records.values(), key=lambda r: r.job_id)] == [
        (e.start_s, e.end_s) for e in offline
    ]


def test_without_timers_a_delayed_start_waits_for_the_next_event():
    # noX plans B at 5, between the events at 4 (A ends) and 10 (C ends): the simulator calls
    # the policy only on events, so B starts at 10 and ends at 17
    policy = KleinPerez(profiles=as_mapping(EXAMPLE))
    records = {r.job_id: r for r in run(evolving_jobs(EXAMPLE), policy, 4).records}
    assert (records[3].start_s, records[3].end_s) == (10.0, 17.0)


def test_generator_jobs_round_trip_and_rigid_view():
    profiles = KleinProfiles().tests(2, 5)[1]
    jobs = evolving_jobs(profiles)
    assert profiles_of(jobs) == as_mapping(profiles)
    rigid = rigid_jobs(profiles)
    assert [j.nodes_requested for j in rigid] == [max(n for _, n in p) for p in profiles]
    assert [j.runtime_s for j in rigid] == [sum(d for d, _ in p) for p in profiles]
