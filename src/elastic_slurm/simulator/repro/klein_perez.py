"""Klein and Pérez 2011, Tables 1 and 2: ``fit`` variants against ``rigid`` on 1000 tests.

C. Klein and C. Pérez, "Towards Scheduling Evolving Applications", CoreGRID/ERCIM Workshop,
2011, section 5 (Klein's thesis, section 5.4). Each test draws 15-20 fully-predictably evolving
applications (:mod:`~elastic_slurm.simulator.generators.klein_profiles`); ``rigid`` sees each as
one step at its peak for its total duration and schedules them by conservative backfilling;
the five variants of Algorithm 1 (:mod:`~elastic_slurm.plugins.policies.klein_perez`) schedule
the evolution profiles. Both are offline: every application is submitted at time 0.

How the numbers are obtained:

* **Tables 1 and 2** come from Algorithm 1 itself (:func:`~elastic_slurm.plugins.policies.
  klein_perez.schedule`), run on every test as the paper's own simulator did; ``rigid`` is the
  same algorithm on one-step profiles (list scheduling in order, each job at its earliest
  hole: conservative backfilling with exact estimates).
* **The policy in the simulator.** On a subset of the tests, the
  :class:`~elastic_slurm.plugins.policies.klein_perez.KleinPerez` policy runs in the
  discrete-event simulator (jobs that really wait on blocking requests, decisions checked by
  the virtual cluster) and ``rigid`` runs as the registry's ``conservative_backfill``; every
  job's start and end are compared with the offline schedule. The simulator calls a policy
  only on events, while the schedule may start a job between two events (a delayed first
  step); the run here also calls it at :attr:`~elastic_slurm.plugins.policies.klein_perez.
  Plan.next_action_s`, as a controller with timers would. Without that, the difference is
  measured and reported.
* A short CooRMv2 paragraph (Klein's thesis, chapter 6) runs the ``coorm_equipartition``
  policy on the same kind of tests; the thesis gives its results only as figures, so these
  checks are qualitative.

Metric definitions (the paper's, section 5.1, with our reading where it is terse): waste is
node-seconds held but not computing, as a percentage of node-seconds computed (the only reading
that allows the paper's values above 100 %); utilisation is node-seconds held, relative to
``rigid``'s; effective utilisation is node-seconds computed over ``nodes x makespan``; ACT and
AWT are the test's mean completion and start times (all submitted at 0), relative to
``rigid``'s; an application is expanded when one of its steps lasts longer than asked; its
expansion is the time it spent waiting between steps over its total duration; per-application
waste is its waste over its computed node-seconds. Per-test metrics have min/avg/max over the
tests; the three per-application ones over all applications of all tests.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elastic_slurm.model.decisions import Decision
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot
from elastic_slurm.model.speedup import Linear
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.policies.coorm import EquiPartition
from elastic_slurm.plugins.policies.klein_perez import KleinPerez, ScheduledEP, schedule
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.simulator.cluster import SimulationError
from elastic_slurm.simulator.engine import EventKind, EventQueue
from elastic_slurm.simulator.generators.klein_profiles import (
    DEFAULT_NODES,
    KleinProfiles,
    Profile,
    as_mapping,
    evolving_jobs,
    rigid_jobs,
)
from elastic_slurm.simulator.replay import SimConfig, SimResult, Simulation, run
from elastic_slurm.simulator.repro import Check, Section
from elastic_slurm.simulator.workload import SimJob

SEED = 2011
"""Seed of the tests (``random.Random(SEED)``, drawn one after the other)."""

VARIANTS = ("noX", "2X", "2X+c", "infX", "infX+c")
ROWS = ("rigid", *VARIANTS)
_EPS = None  # the paper's "epsilon": below one unit

# The paper's Table 1 and Table 2: (min, avg, max) per algorithm and metric.
TABLE1: dict[str, dict[str, tuple[float | None, ...]]] = {
    "rigid": {
        "waste": (43, 70, 116),
        "util": (1, 1, 1),
        "eff": (30, 40, 51),
        "makespan": (1, 1, 1),
        "sched": (4.64, 6.2, 9.41),
    },
    "noX": {
        "waste": (0, 0, 0),
        "util": (0.46, 0.58, 0.69),
        "eff": (49, 61, 73),
        "makespan": (0.49, 0.65, 0.82),
        "sched": (11.4, 24.7, 55.8),
    },
    "2X": {
        "waste": (0, 2, 11),
        "util": (0.47, 0.60, 0.71),
        "eff": (50, 63, 75),
        "makespan": (0.48, 0.64, 0.82),
        "sched": (11.4, 24.4, 45.4),
    },
    "2X+c": {
        "waste": (0, _EPS, 4),
        "util": (0.46, 0.59, 0.70),
        "eff": (53, 63, 75),
        "makespan": (0.48, 0.63, 0.82),
        "sched": (17.1, 36.7, 88.6),
    },
    "infX": {
        "waste": (0, 7, 22),
        "util": (0.49, 0.63, 0.78),
        "eff": (52, 64, 73),
        "makespan": (0.49, 0.63, 0.78),
        "sched": (11.4, 23.4, 49.2),
    },
    "infX+c": {
        "waste": (0, 1, 11),
        "util": (0.46, 0.59, 0.71),
        "eff": (55, 64, 74),
        "makespan": (0.47, 0.62, 0.78),
        "sched": (17.6, 36, 124),
    },
}
TABLE2: dict[str, dict[str, tuple[float | None, ...]]] = {
    "rigid": {
        "act": (1, 1, 1),
        "awt": (1, 1, 1),
        "nexp": (0, 0, 0),
        "appexp": (0, 0, 0),
        "appwaste": (0, 67, 681),
    },
    "noX": {
        "act": (0.42, 0.61, 0.84),
        "awt": (0.36, 0.55, 0.81),
        "nexp": (0, 0, 0),
        "appexp": (0, 0, 0),
        "appwaste": (0, 0, 0),
    },
    "2X": {
        "act": (0.45, 0.61, 0.84),
        "awt": (0.36, 0.54, 0.80),
        "nexp": (0, 22, 56),
        "appexp": (0, 4, 76),
        "appwaste": (0, 2, 75),
    },
    "2X+c": {
        "act": (0.44, 0.60, 0.84),
        "awt": (0.37, 0.54, 0.81),
        "nexp": (0, 7, 40),
        "appexp": (0, _EPS, 60),
        "appwaste": (0, _EPS, 41),
    },
    "infX": {
        "act": (0.43, 0.62, 0.81),
        "awt": (0.27, 0.53, 0.76),
        "nexp": (0, 26, 62),
        "appexp": (0, 19, 884),
        "appwaste": (0, 6, 360),
    },
    "infX+c": {
        "act": (0.44, 0.60, 0.81),
        "awt": (0.35, 0.53, 0.76),
        "nexp": (0, 13, 47),
        "appexp": (0, 5, 1354),
        "appwaste": (0, 1, 119),
    },
}

#: metric -> (column title, kind); kind "rel" (relative to rigid), "pct" or "ms"
METRICS: dict[str, tuple[str, str]] = {
    "waste": ("Waste (%)", "pct"),
    "util": ("Utilisation (relative)", "rel"),
    "eff": ("Eff. util. (%)", "pct"),
    "makespan": ("Makespan (relative)", "rel"),
    "sched": ("Sch. time (ms)", "ms"),
    "act": ("Avg. ACT (relative)", "rel"),
    "awt": ("Avg. AWT (relative)", "rel"),
    "nexp": ("Num. expanded (%)", "pct"),
    "appexp": ("App expansion (%)", "pct"),
    "appwaste": ("Per-app. waste (%)", "pct"),
}
PER_APP = ("appexp", "appwaste")

REL_TOL = 0.03
PCT_TOL = 3.0
PCT_REL_TOL = 0.25
TOLERANCE_TEXT = (
    "An average agrees when it is within 0.03 of the paper's for relative metrics, and within "
    "3 percentage points or 25 % of the paper's value (the larger) for percentages; the "
    "paper's ε (a value that rounds to 0) agrees with anything below 1. Scheduling times "
    "depend on the machine: ours agrees when it is no slower than the paper's 2011 laptop "
    "(Core 2 Duo, 2.53 GHz). Minima and maxima, extremes of 1000 random draws, are shown "
    "but not judged."
)


@dataclass
class _Stats:
    """Per-test values and per-application values of every metric, for one algorithm."""

    per_test: dict[str, list[float]]
    per_app: dict[str, list[float]]

    def triple(self, metric: str) -> tuple[float, float, float]:
        values = self.per_app[metric] if metric in PER_APP else self.per_test[metric]
        return min(values), statistics.fmean(values), max(values)


def _test_metrics(
    eps: Sequence[ScheduledEP], used: Sequence[float], nodes: int
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Absolute per-test metrics of one schedule, and per-application values.

    ``used`` is each application's computed node-seconds (its requested EP's area; for
    ``rigid`` the evolving profile's, not the rigid rectangle's).
    """
    alloc = [e.allocated_node_s for e in eps]
    total_used = sum(used)
    makespan = max(e.end_s for e in eps)
    durations = [sum(d for d, _ in e.steps) for e in eps]
    test = {
        "waste": 100.0 * (sum(alloc) - total_used) / total_used,
        "alloc": sum(alloc),
        "eff": 100.0 * total_used / (nodes * makespan),
        "makespan": makespan,
        "act": statistics.fmean(e.end_s for e in eps),
        "awt": statistics.fmean(e.start_s for e in eps),
        "nexp": 100.0 * sum(1 for e in eps if e.expanded) / len(eps),
    }
    apps = {
        "appexp": [100.0 * e.expansion_s / d for e, d in zip(eps, durations, strict=True)],
        "appwaste": [100.0 * (a - u) / u for a, u in zip(alloc, used, strict=True)],
    }
    return test, apps


def _offline(
    tests: Sequence[Sequence[Profile]], nodes: int, say: Callable[[str], None]
) -> dict[str, _Stats]:
    """Run ``rigid`` and the five variants offline on every test."""
    stats = {row: _Stats({m: [] for m in METRICS}, {m: [] for m in PER_APP}) for row in ROWS}
    for index, profiles in enumerate(tests):
        if index and index % 200 == 0:
            say(f"klein_perez: {index}/{len(tests)} tests")
        used = [sum(d * n for d, n in p) for p in profiles]
        rigid_profiles = [((sum(d for d, _ in p), max(n for _, n in p)),) for p in profiles]
        t0 = time.perf_counter()
        rigid = schedule(rigid_profiles, nodes)
        rigid_ms = 1000.0 * (time.perf_counter() - t0)
        base, apps = _test_metrics(rigid, used, nodes)
        # the rigid job runs the evolving profile inside its rectangle: expansion is 0
        apps["appexp"] = [0.0] * len(profiles)
        _add(stats["rigid"], base, base, apps, rigid_ms)
        for variant in VARIANTS:
            t0 = time.perf_counter()
            eps = schedule(profiles, nodes, fit_name=variant)
            ms = 1000.0 * (time.perf_counter() - t0)
            test, apps = _test_metrics(eps, used, nodes)
            _add(stats[variant], test, base, apps, ms)
    return stats


def _add(
    stats: _Stats,
    test: dict[str, float],
    base: dict[str, float],
    apps: dict[str, list[float]],
    sched_ms: float,
) -> None:
    pt = stats.per_test
    pt["waste"].append(test["waste"])
    pt["util"].append(test["alloc"] / base["alloc"])
    pt["eff"].append(test["eff"])
    pt["makespan"].append(test["makespan"] / base["makespan"])
    pt["sched"].append(sched_ms)
    pt["act"].append(test["act"] / base["act"])
    pt["awt"].append(test["awt"] / base["awt"] if base["awt"] > 0 else 1.0)
    pt["nexp"].append(test["nexp"])
    for metric in PER_APP:
        stats.per_app[metric].extend(apps[metric])


# ---------------------------------------------------------------------------- in the simulator


class _TimerQueue(EventQueue):
    """An event queue that keeps only the timer ticks pushed by :func:`run_with_timers`.

    ``Simulation`` pushes its own periodic ticks (payload ``None``); they are dropped, and the
    ticks asked for by the policy's plan (payload ``"timer"``) are kept. ``__bool__`` is
    defined because ``Simulation`` takes ``queue or EventQueue()``, and an empty queue is
    false (see the reproduction's notes).
    """

    def __bool__(self) -> bool:
        return True

    def push(self, time_s: float, priority: int, payload: Any) -> None:
        if priority == EventKind.PERIODIC and payload is None:
            return
        super().push(time_s, priority, payload)


class _Timed(Policy):
    """Runs a :class:`KleinPerez` and keeps its last plan's next start (for timer cycles)."""

    def __init__(self, inner: KleinPerez) -> None:
        super().__init__(None)
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]
        self.next_action_s = math.inf

    def prepare(self) -> None:
        self.inner.prepare()

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        plan = self.inner.plan(snapshot)
        self.next_action_s = plan.next_action_s
        return list(plan.decisions)


def run_with_timers(jobs: Sequence[SimJob], policy: KleinPerez, nodes: int) -> SimResult:
    """Simulate ``policy``, also calling it at each plan's :attr:`Plan.next_action_s`.

    The simulator calls policies only on events; this adds the cycles a controller with
    timers would run, at the times the schedule starts something between two events. The
    plan of an instant's last cycle still holds once its decisions are carried out (they
    follow it), so its next start is where the next timer goes.

    Raises
    ------
    SimulationError, PolicyError
        As :meth:`Simulation.run`.
    """
    queue = _TimerQueue()
    timed = _Timed(policy)
    sim = Simulation(jobs, timed, nodes, config=SimConfig(periodic_s=1.0), queue=queue)
    while sim.step():
        upcoming = queue.peek_time_s()
        if upcoming is not None and upcoming <= sim.now_s:
            continue  # this instant is not over
        wake = timed.next_action_s
        if wake < math.inf and (upcoming is None or wake < upcoming):
            queue.push(max(wake, sim.now_s), EventKind.PERIODIC, "timer")
            timed.next_action_s = math.inf
    return sim.run()


@dataclass
class _SimCheck:
    tests: int
    max_dev_s: dict[str, float]
    late_act: dict[str, float]  # mean ACT without timers / offline ACT


def _in_simulator(
    tests: Sequence[Sequence[Profile]], nodes: int, timers_off: Sequence[str]
) -> _SimCheck:
    """Compare the simulator's runs with the offline schedules, job by job."""
    dev = dict.fromkeys(ROWS, 0.0)
    late: dict[str, list[float]] = {v: [] for v in timers_off}
    for profiles in tests:
        rigid_offline = schedule(
            [((sum(d for d, _ in p), max(n for _, n in p)),) for p in profiles], nodes
        )
        result = run(rigid_jobs(profiles), "conservative_backfill", nodes)
        dev["rigid"] = max(dev["rigid"], _deviation(result, rigid_offline))
        jobs = evolving_jobs(profiles)
        for variant in VARIANTS:
            offline = schedule(profiles, nodes, fit_name=variant)
            policy = KleinPerez(KleinPerez.Config(fit=variant), profiles=as_mapping(profiles))
            dev[variant] = max(
                dev[variant], _deviation(run_with_timers(jobs, policy, nodes), offline)
            )
            if variant in late:
                plain = run(jobs, policy, nodes)
                act = statistics.fmean(r.end_s for r in plain.records)
                late[variant].append(act / statistics.fmean(e.end_s for e in offline))
    return _SimCheck(len(tests), dev, {v: statistics.fmean(x) for v, x in late.items() if x})


def _deviation(result: SimResult, offline: Sequence[ScheduledEP]) -> float:
    """The largest difference (seconds) between a simulated and a scheduled start or end."""
    worst = 0.0
    for record, ep in zip(sorted(result.records, key=lambda r: r.job_id), offline, strict=True):
        worst = max(worst, abs(record.start_s - ep.start_s), abs(record.end_s - ep.end_s))
    return worst


# ---------------------------------------------------------------------------- CooRMv2


@dataclass
class _CoormCheck:
    tests: int
    makespan_vs_rigid: float  # evolving apps alone, pre-allocations
    waste_pct: float  # evolving apps alone
    evolving_delayed: int  # tests where a filler delayed an evolving application
    util_alone: float
    util_filled: float
    util_smart: float
    util_strict: float
    deadlocks: int  # tests stuck without pre-allocations

    def delayed_text(self) -> str:
        """How many tests had an evolving application delayed by a filler, in words."""
        return f"{self.evolving_delayed} of {self.tests} test(s)"


def _filler(job_id: int, work_node_s: float, nodes: int, nodes_max: int) -> SimJob:
    """A malleable parameter sweep (thesis section 6.6.1): 1 to ``nodes_max`` nodes, linear."""
    return SimJob(
        job_id=job_id,
        submit_s=0.0,
        runtime_s=work_node_s,
        nodes_requested=1,
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=min(nodes_max, nodes),
        walltime_s=work_node_s,
        speedup=Linear(),
    )


def _busy_until(result: SimResult, until_s: float, nodes: int) -> float:
    """Fraction of ``nodes x until_s`` held by jobs before ``until_s`` (from the timeline)."""
    held: dict[int, int] = {}
    area = 0.0
    last = 0.0
    total = 0
    for t, job_id, count in result.timeline:
        t = min(t, until_s)
        area += total * (t - last)
        last = t
        total += count - held.get(job_id, 0)
        held[job_id] = count
    area += total * max(0.0, until_s - last)
    return area / (nodes * until_s)


def _coorm(tests: Sequence[Sequence[Profile]], nodes: int) -> _CoormCheck:
    smart = EquiPartition(EquiPartition.Config(smart=True))
    strict = EquiPartition(EquiPartition.Config(smart=False))
    probable = EquiPartition(EquiPartition.Config(preallocate=False))
    mk, waste, delayed, deadlocks = [], [], 0, 0
    alone, filled, u_smart, u_strict = [], [], [], []
    for profiles in tests:
        jobs = evolving_jobs(profiles)
        area = sum(d * n for p in profiles for d, n in p)
        rigid = run(rigid_jobs(profiles), "conservative_backfill", nodes)
        res = run(jobs, smart, nodes)
        end = res.metrics.makespan_s
        mk.append(end / rigid.metrics.makespan_s)
        waste.append(100.0 * res.metrics.waste_node_s / max(1e-9, area))
        ends = {r.job_id: r.end_s for r in res.records}
        wide = _filler(10_000, area, nodes, nodes)
        with_filler = run([*jobs, wide], smart, nodes)
        if any(r.end_s > ends[r.job_id] + 1e-6 for r in with_filler.records if r.job_id in ends):
            delayed += 1
        alone.append(_busy_until(res, end, nodes))
        filled.append(_busy_until(with_filler, end, nodes))
        narrow = _filler(10_001, area, nodes, 10)
        two = [*jobs, wide, narrow]
        u_smart.append(_busy_until(run(two, smart, nodes), end, nodes))
        u_strict.append(_busy_until(run(two, strict, nodes), end, nodes))
        try:
            run(jobs, probable, nodes)
        except SimulationError:
            deadlocks += 1
    mean = statistics.fmean
    return _CoormCheck(
        len(tests),
        mean(mk),
        mean(waste),
        delayed,
        mean(alone),
        mean(filled),
        mean(u_smart),
        mean(u_strict),
        deadlocks,
    )


# ---------------------------------------------------------------------------- report


def _fmt(value: float | None, kind: str) -> str:
    if value is None:
        return "ε"
    if kind == "rel":
        return f"{value:.2f}"
    if kind == "ms":
        return f"{value:.3g}"
    return f"{value:.0f}" if abs(value) >= 1 or value == 0 else f"{value:.1f}"


def _agrees(ours: float, paper: float | None, kind: str) -> bool:
    if paper is None:
        return ours < 1.0
    if kind == "rel":
        return abs(ours - paper) <= REL_TOL + 1e-9
    if kind == "ms":
        return ours <= paper
    return abs(ours - paper) <= max(PCT_TOL, PCT_REL_TOL * paper) + 1e-9


def _table(stats: dict[str, _Stats], metrics: Sequence[str], table: dict[str, Any]) -> str:
    head = "| Name | " + " | ".join(f"{METRICS[m][0]} ours | paper" for m in metrics) + " |"
    rows = [head, "|---" * (1 + 2 * len(metrics)) + "|"]
    for row in ROWS:
        cells = [f"**{row}**"]
        for m in metrics:
            kind = METRICS[m][1]
            ours = "/".join(_fmt(v, kind) for v in stats[row].triple(m))
            paper = "/".join(_fmt(v, kind) for v in table[row][m])
            cells += [ours, paper]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def _checks(stats: dict[str, _Stats]) -> list[Check]:
    out = []
    for table in (TABLE1, TABLE2):
        for row in ROWS:
            for metric, paper in table[row].items():
                title, kind = METRICS[metric]
                ours = stats[row].triple(metric)
                note = ""
                if row == "rigid" and kind == "rel":
                    note = "1 by definition"
                elif kind == "ms":
                    note = "machine-dependent"
                out.append(
                    Check(
                        what=f"{row}: {title}, min/avg/max",
                        ours="/".join(_fmt(v, kind) for v in ours),
                        paper="/".join(_fmt(v, kind) for v in paper),
                        agrees=_agrees(ours[1], paper[1], kind),
                        note=note,
                    )
                )
    return out


def _findings(stats: dict[str, _Stats]) -> list[Check]:
    avg = {row: {m: stats[row].triple(m)[1] for m in METRICS} for row in ROWS}
    better = all(
        avg[v]["act"] < 1 and avg[v]["makespan"] < 1 and avg[v]["waste"] < avg["rigid"]["waste"]
        for v in VARIANTS
    )
    every_test = all(
        max(stats[v].per_test["act"]) < 1 and max(stats[v].per_test["makespan"]) <= 1
        for v in VARIANTS
    )
    compact = all(avg[f"{b}+c"]["waste"] <= avg[b]["waste"] for b in ("2X", "infX"))
    order = avg["noX"]["waste"] <= avg["2X"]["waste"] <= avg["infX"]["waste"]
    awt = avg["infX"]["awt"] <= avg["noX"]["awt"]
    spread_mk = max(avg[v]["makespan"] for v in VARIANTS) - min(
        avg[v]["makespan"] for v in VARIANTS
    )
    spread_w = max(avg[v]["waste"] for v in VARIANTS) - min(avg[v]["waste"] for v in VARIANTS)
    gain = avg["noX"]["act"] - min(avg[v]["act"] for v in VARIANTS)

    def pct(x: float) -> str:
        return f"{x:.1f} %"

    return [
        Check(
            "every variant beats rigid on average ACT, makespan and waste",
            "yes" if better else "no",
            "yes (5.2: rigid is outperformed by all other strategies)",
            better,
        ),
        Check(
            "every variant improves ACT and makespan in every test",
            "yes" if every_test else "no",
            "yes (max ACT .84, max makespan .82)",
            every_test,
        ),
        Check(
            "noX wastes nothing; waste grows with the expand limit (noX <= 2X <= infX)",
            f"{pct(avg['noX']['waste'])} <= {pct(avg['2X']['waste'])} <= "
            f"{pct(avg['infX']['waste'])}",
            "0 <= 2 <= 7",
            order and avg["noX"]["waste"] == 0,
        ),
        Check(
            "compacting reduces waste (2X+c <= 2X, infX+c <= infX)",
            f"{pct(avg['2X+c']['waste'])} <= {pct(avg['2X']['waste'])}, "
            f"{pct(avg['infX+c']['waste'])} <= {pct(avg['infX']['waste'])}",
            "ε <= 2, 1 <= 7",
            compact,
        ),
        Check(
            "unlimited expansion starts applications earlier (infX AWT <= noX AWT)",
            f"{avg['infX']['awt']:.3f} <= {avg['noX']['awt']:.3f}",
            ".53 <= .55",
            awt,
        ),
        Check(
            "makespan differs less between variants than waste (spread of the averages)",
            f"makespan {spread_mk:.3f} (relative), waste {spread_w:.1f} points",
            "makespan .03, waste 7 points",
            spread_mk * 100 < spread_w,
        ),
        Check(
            "expanding has limited benefit: best variant's ACT within 0.02 of noX",
            f"noX {avg['noX']['act']:.3f}, best {avg['noX']['act'] - gain:.3f}",
            "noX .61, best .60",
            gain <= 0.02,
        ),
    ]


def _figure(stats: dict[str, _Stats], out_dir: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    left, middle, right = fig.subplots(1, 3)
    left.boxplot([stats[v].per_test["act"] for v in VARIANTS], tick_labels=list(VARIANTS))
    left.set_title("Avg. ACT relative to rigid (per test)")
    left.axhline(1.0, color="grey", lw=0.8, ls="--")
    middle.boxplot([stats[v].per_test["makespan"] for v in VARIANTS], tick_labels=list(VARIANTS))
    middle.set_title("Makespan relative to rigid")
    middle.axhline(1.0, color="grey", lw=0.8, ls="--")
    right.boxplot([stats[r].per_test["waste"] for r in ROWS], tick_labels=list(ROWS))
    right.set_title("Waste, % of node-seconds computed")
    for ax in (left, middle, right):
        ax.tick_params(axis="x", labelrotation=30)
    out = out_dir / "klein_perez.png"
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out


def reproduce(
    out_dir: Path, *, quick: bool = False, progress: Callable[[str], None] | None = None
) -> Section:
    """Reproduce Tables 1 and 2 (and a CooRMv2 paragraph); figures go to ``out_dir``.

    ``quick``: 40 tests instead of 1000, one test in the simulator instead of 20 (seconds).
    """
    say = progress or (lambda line: None)
    nodes = DEFAULT_NODES
    count, in_sim = (40, 1) if quick else (1000, 20)
    tests = KleinProfiles(nodes=nodes).tests(count, SEED)
    say(f"klein_perez: {count} tests offline")
    stats = _offline(tests, nodes, say)
    say(f"klein_perez: {in_sim} test(s) in the simulator")
    sim = _in_simulator(tests[:in_sim], nodes, () if quick else ("noX", "infX+c"))
    say("klein_perez: CooRMv2")
    coorm = _coorm(tests[:in_sim], nodes)
    checks = _checks(stats) + _findings(stats)
    checks.append(
        Check(
            f"the klein_perez policy in the simulator follows Algorithm 1 ({sim.tests} test(s), "
            "5 variants; rigid: conservative_backfill)",
            f"largest start/end difference {max(sim.max_dev_s.values()):.2g} s",
            "(ours only)",
            max(sim.max_dev_s.values()) < 1e-3,
        )
    )
    checks += _coorm_checks(coorm)
    figures = []
    try:
        figures.append(_figure(stats, out_dir))
    except ImportError:  # pragma: no cover - matplotlib is installed with the sim extra
        pass
    markdown = _markdown(stats, sim, coorm, count, nodes)
    return Section(
        "Klein & Pérez 2011: scheduling evolving applications (Tables 1 and 2)",
        markdown,
        figures,
        checks,
    )


def _coorm_checks(c: _CoormCheck) -> list[Check]:
    return [
        Check(
            "CooRMv2: growth inside a pre-allocation is always served at once (a malleable "
            "filler never delays an evolving application)",
            f"delayed in {c.delayed_text()}",
            "qualitative (thesis 6.6.2: the RMS guarantees their timely allocation)",
            c.evolving_delayed == 0,
        ),
        Check(
            "CooRMv2: pre-allocated but unused nodes are filled by a malleable application",
            f"nodes held {100 * c.util_alone:.0f} % -> {100 * c.util_filled:.0f} %",
            "qualitative (thesis 6.1, 6.6.2)",
            c.util_filled > c.util_alone,
        ),
        Check(
            "CooRMv2: smart equi-partitioning uses more nodes than strict (one narrow filler)",
            f"{100 * c.util_smart:.0f} % vs {100 * c.util_strict:.0f} %",
            "qualitative (thesis 6.6.4, Fig. 6.14)",
            c.util_smart > c.util_strict,
        ),
        Check(
            "without pre-allocations, blocking growth can deadlock (Klein & Pérez, section 2)",
            f"stuck in {c.deadlocks} of {c.tests} test(s)",
            "qualitative (the Moab example)",
            c.deadlocks > 0,
        ),
    ]


def _markdown(
    stats: dict[str, _Stats], sim: _SimCheck, coorm: _CoormCheck, count: int, nodes: int
) -> str:
    t1 = _table(stats, ("waste", "util", "eff", "makespan", "sched"), TABLE1)
    t2 = _table(stats, ("act", "awt", "nexp", "appexp", "appwaste"), TABLE2)
    judged = [
        (row, m)
        for table in (TABLE1, TABLE2)
        for row in ROWS
        for m in table[row]
        if METRICS[m][1] != "ms"
    ]
    agreed = sum(
        _agrees(stats[row].triple(m)[1], {**TABLE1[row], **TABLE2[row]}[m][1], METRICS[m][1])
        for row, m in judged
    )
    speed = statistics.fmean(
        TABLE1[v]["sched"][1] / max(1e-9, stats[v].triple("sched")[1])  # type: ignore[operator]
        for v in VARIANTS
    )
    inf_max = stats["infX"].triple("appexp")[2]
    infc_max = stats["infX+c"].triple("appexp")[2]
    judged_count = len(judged)
    flip = ": the order of the two is reversed" if inf_max > infc_max else ""
    sched = {v: stats[v].triple("sched")[1] for v in VARIANTS}
    costly = sched["2X+c"] > sched["2X"] and sched["infX+c"] > sched["infX"]
    compact_cost = "; compacting costs extra time, as in the paper" if costly else ""
    late = ", ".join(f"{v} {100 * (x - 1):+.1f} %" for v, x in sim.late_act.items())
    late_text = (
        f" Without those timer cycles (events only), jobs start late and the average ACT "
        f"grows against the offline schedule by {late} on the same tests."
        if late
        else ""
    )
    return f"""
{count} tests of 15-20 applications (1-10 steps, 500-3600 s and 1-75 nodes per step, drawn
uniformly as whole numbers, seed {SEED}) on {nodes} nodes, all submitted at time 0, as in
section 5.1. The paper does not give the machine size. We tried 75 nodes (the widest step)
and {nodes}: {nodes} gives ``rigid`` the paper's effective utilisation (40 % on average),
while with 75 wide rigid jobs can hardly run side by side, ``rigid`` reaches about 52 % and
every relative gain shrinks (noX's relative ACT is then about 0.75 instead of 0.61). We kept
{nodes} for every number below; nothing else was adjusted.

Algorithm 1 with Algorithm 2 (``fit``) and compacting are
`elastic_slurm.plugins.policies.klein_perez` (`schedule`, `fit`, `compact`); ``rigid`` is the
same list scheduling on one-step profiles (the peak for the total duration), i.e.
conservative backfilling with exact estimates. Where the pseudo-code is ambiguous or wrong as
printed (line 17's ``i > 0``; compacting has no pseudo-code), the module docstring says what we
chose. Waste is a percentage of the node-seconds computed (the paper's "percent of total
resources" cannot be a share of the machine: its ``rigid`` row reaches 116 %). Tables: ours
then the paper's, each as min/avg/max. {TOLERANCE_TEXT}

**Table 1 (system-centric).**

{t1}
**Table 2 (user-centric).** App expansion and per-application waste are over all
applications of all tests; the other columns over tests.

{t2}
**The policy in the simulator.** On {sim.tests} of these tests the ``klein_perez`` policy ran in
the discrete-event simulator for each variant, the applications really waiting on blocking
requests, and every job started and ended within {max(sim.max_dev_s.values()):.2g} s of the
offline schedule (``rigid`` as the registry's ``conservative_backfill``: within
{sim.max_dev_s["rigid"]:.2g} s). The policy re-runs Algorithm 1 at every cycle on what is left;
since ``fit`` returns the earliest feasible placement, the schedule it finds is the one made at
time 0. The simulator calls a policy only on events, and a schedule can start a job between two
events (the first step is delayed so that the next ones need not wait); these runs add a cycle
at the plan's next start, as a controller with a timer would.{late_text}

**Differences.** {agreed} of the {judged_count} averages (scheduling times apart) agree
with the paper's within the tolerances above. Scheduling times are about {speed:.0f} times
shorter than the paper's (a 2011 laptop against today's machine){compact_cost}. Minima and
maxima are extremes of random draws and move from one set of tests to another: the
per-application maxima are single applications (the largest expansion is {inf_max:.0f} % for
infX and {infc_max:.0f} % for infX+c, against the paper's 884 % and 1354 %{flip}), and are
not judged.

**CooRMv2 (Klein's thesis, chapter 6).** The thesis reports CooRMv2 only in figures (6.11-6.14,
one AMR application with one or two parameter sweeps), so there is no number to set beside
ours; we check its claims qualitatively with ``coorm_equipartition`` on {coorm.tests} of the
tests above. Each evolving application pre-allocates its peak ("sure execution"): it starts
when ``rigid`` would (makespan {coorm.makespan_vs_rigid:.2f} of rigid's, against noX's
{stats["noX"].triple("makespan")[1]:.2f}: a pre-allocation ignores the profile) but holds only
the nodes it uses (waste {coorm.waste_pct:.0f} % against rigid's
{stats["rigid"].triple("waste")[1]:.0f} %). A malleable parameter sweep (1 to {nodes} nodes,
linear speedup) fills what is pre-allocated but unused, the machine being held
{100 * coorm.util_alone:.0f} % of the time before and {100 * coorm.util_filled:.0f} % after,
without delaying any evolving application in {coorm.delayed_text()}. With a second, narrow
sweep (at most 10 nodes), smart equi-partitioning holds {100 * coorm.util_smart:.0f} % and
strict {100 * coorm.util_strict:.0f} % (thesis 6.6.4). Without pre-allocations ("probable
execution") the blocking requests deadlock in {coorm.deadlocks} of {coorm.tests} test(s): the
situation of Klein & Pérez's section 2, where two evolving applications each wait for the
other's nodes.
"""
