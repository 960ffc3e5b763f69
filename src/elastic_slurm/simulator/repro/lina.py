"""Lina, Ghafoor and Hines: elastic workloads beat the rigid baseline at every elastic share.

D. H. Lina, S. Ghafoor and T. Hines, "Scheduling of Elastic Message Passing Applications on
HPC Systems", section 5: x % of a workload's jobs made elastic (section 5.1, half malleable
and half evolving; :class:`~elastic_slurm.simulator.workload.LinaConversion` with the section
5.2 parameters), x from 10 to 100, scheduled by their main algorithm with the Default,
Application and System shrink selections and six candidate priorities (our ``lina_elastic``).
The rigid baseline, the same for every comparison here, is the same policy on the unconverted
workload: EASY backfilling with the jobs' real run times as estimates (their simulator knows
run times), the dotted line of their figures. EASY with the users' time limits
(``easy_backfill``) is run beside it and reported, so that the share of a difference that comes
from the estimates, not from elasticity, is seen.

Their workloads were the first 10,000 jobs of the LLNL Atlas and KIT ForHLR II logs (and
"shrunk" versions) and a synthetic Downey-model workload (Table 1). The logs are not among our
traces; the synthetic workload is regenerated from Table 1
(:func:`~elastic_slurm.simulator.generators.downey.lina_synthetic`), and the finding is checked
on the traces we have, none of which the paper used: SDSC-SP2, KTH-SP2 and the Lublin model's
256-node trace (first 10,000 jobs each).

The paper's numbers are mostly in figures; the ones it prints are Table 3 (the largest
difference between the best and the worst candidate priority, per algorithm and metric) and
its findings, which are what the checks compare.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from elastic_slurm.plugins.policies.lina import PRIORITIES, SHRINK_SELECTIONS, LinaElastic
from elastic_slurm.simulator.generators.downey import lina_synthetic
from elastic_slurm.simulator.replay import load_workload, run
from elastic_slurm.simulator.repro import Check, Section
from elastic_slurm.simulator.repro.ghafoor import run_tasks, trace_dir
from elastic_slurm.simulator.swf import read_swf
from elastic_slurm.simulator.workload import LinaConversion, Workload

SYNTHETIC = "synthetic"
TRACES = ("SDSC-SP2-1998-4.2-cln.swf.gz", "KTH-SP2-1996-2.1-cln.swf.gz", "lublin_256.swf.gz")
METRICS = (("tat", "average turnaround (s)"), ("util", "utilisation"), ("bsld", "bounded slowdown"))
#: Table 3, Synthetic rows: ``{algorithm: {metric: (best, worst, max difference %, at %)}}``.
PAPER_TABLE3 = {
    "application": {
        "tat": ("gain", "random", 1.51, 60),
        "util": ("random", "shrinkable", 8.58, 80),
        "bsld": ("gain", "random", 6.3, 90),
    },
    "system": {
        "tat": ("gain", "remaining", 1.09, 90),
        "util": ("random", "shrinkable", 3.6, 70),
        "bsld": ("gain", "shrinkable", 5.7, 90),
    },
    "default": {
        "tat": ("gain", "random", 1.79, 90),
        "util": ("random", "shrinkable", 3.47, 70),
        "bsld": ("gain", "remaining", 5.28, 100),
    },
}
#: Largest difference between priorities in Table 3 over every workload (KIT, Default, slowdown).
PAPER_MAX_DIFFERENCE = 18.05
TABLE3_TOLERANCE_PP = 3.0
SEED = 1
#: Conversion seeds of the runs that compare Default with Application in turnaround (seeds
#: ``SEED .. SEED + SEEDS - 1``): the paper averages 10 runs per point, and the two differ by
#: a few per cent; every other run here takes the one seed :data:`SEED`.
SEEDS = 10
#: The algorithms of the sweeps: the three of the paper, and System with Algorithm 7 as printed.
ALGORITHMS = (*SHRINK_SELECTIONS, "system-printed")
#: The task of EASY backfilling with the users' time limits (``easy_backfill``), beside the
#: baseline.
USERS_ESTIMATES = "easy-users-estimates"
#: What the rigid baseline is, for the report and the figures.
BASELINE = (
    "`lina_elastic` at 0 % elastic: EASY backfilling with the jobs' real run times as estimates"
)


Getter = Callable[..., dict[str, float]]
#: ``(workload, percent elastic, algorithm)`` -> average turnaround (s) per conversion seed.
Turnarounds = Callable[[str, int, str], list[float]]
Table3Difference = Literal["relative", "of_improvements"]


@dataclass(frozen=True)
class Reading:
    """One reading of what the paper leaves open, judged on the runs already made.

    Attributes
    ----------
    what
        What it changes, in words.
    source
        Where the paper is open (section, algorithm).
    metrics
        Metric keys replaced (``{"bsld": "sld"}``: the checks judge plain slowdown instead).
    algorithms
        Algorithms replaced (``{"system": "system-printed"}``) in the sweeps at the gain
        priority, not in the comparisons of priorities (Table 3), which run the paper's three
        algorithms only.
    rigid
        The run standing for the rigid baseline (``USERS_ESTIMATES``), or ``""`` for the
        default's.
    table3
        How Table 3's "Max Difference" is computed (:func:`difference`): ``"relative"``
        (the default's) or ``"of_improvements"``.
    """

    what: str
    source: str
    metrics: Mapping[str, str] = field(default_factory=dict)
    algorithms: Mapping[str, str] = field(default_factory=dict)
    rigid: str = ""
    table3: Table3Difference = "relative"


#: Readings under test, by name: the checks are re-judged with each, and the counts reported
#: beside the default's (the sensitivity table). None needs a run of its own.
READINGS: dict[str, Reading] = {
    "plain_slowdown": Reading(
        "slowdown is the plain (Tc - Ta) / (Tc - Ts), not bounded (jobs of 0 s left out)",
        "sec. 4.1 names Ta, Ts and Tc but does not define slowdown_i",
        metrics={"bsld": "sld"},
    ),
    "util_computing": Reading(
        "utilisation counts computing node-seconds only (resizes and nodes held idle left out)",
        "sec. 4.1 (C_i, the sum of the phases' T_p P_p: 'CPU cycles used')",
        metrics={"util": "util_computing"},
    ),
    "util_from_first_start": Reading(
        "the scheduled span SS runs from the first start, not the first arrival",
        "sec. 4.1 ('scheduled span' is not defined)",
        metrics={"util": "util_start_span"},
    ),
    "system_as_printed": Reading(
        "System is Algorithm 7 as printed (no shrinking above u only while a job ends within t)",
        "sec. 4's text against Algorithm 7's pseudo-code",
        algorithms={"system": "system-printed"},
    ),
    "rigid_users_estimates": Reading(
        "the rigid baseline is EASY with the time limits users gave, not the real run times",
        "sec. 5 does not say which estimates its rigid runs use",
        rigid=USERS_ESTIMATES,
    ),
    "table3_of_improvements": Reading(
        "Table 3's 'Max Difference' is between the best and the worst priority's improvements "
        "over the rigid baseline, relative to the worst's, not between their values",
        "sec. 5.3, Table 3 ('Maximum Improvement Achieved by Using Different candidate "
        "selection techniques'; the difference is not defined)",
        table3="of_improvements",
    ),
}


def difference(
    metric: str, best: float, worst: float, rigid: float, how: Table3Difference = "relative"
) -> float:
    """Table 3's "Max Difference" between the best and the worst priority, in %.

    Lina, Ghafoor and Hines, sec. 5.3, Table 3: ``"relative"`` is ``|best - worst| / worst``
    of the metric's values (turnaround in s, utilisation as a fraction, slowdown);
    ``"of_improvements"`` is ``|i_best - i_worst| / |i_worst|`` of their improvements over the
    rigid baseline's value ``rigid`` (``i = (rigid - v) / rigid``, or ``(v - rigid) / rigid``
    for utilisation, where higher is better). An improvement of 0 divides by 1 instead.

    >>> round(difference("tat", 90.0, 95.0, 100.0), 6)
    5.263158
    >>> round(difference("tat", 90.0, 95.0, 100.0, "of_improvements"), 6)
    100.0
    >>> round(difference("util", 0.80, 0.79, 0.70, "of_improvements"), 6)
    11.111111
    """
    if how == "relative":
        return 100.0 * abs(best - worst) / abs(worst or 1.0)

    def gain(v: float) -> float:
        return ((v - rigid) if metric == "util" else (rigid - v)) / rigid

    return 100.0 * abs(gain(best) - gain(worst)) / abs(gain(worst) or 1.0)


def reading_getter(get: Getter, reading: Reading) -> Getter:
    """``get`` as ``reading`` sees it: other metric keys, algorithms or rigid baseline.

    >>> runs = {("w", 0, "default"): {"bsld": 2.0, "sld": 9.0}}
    >>> read = reading_getter(lambda w, p, s="default", prio="gain": runs[(w, p, s)],
    ...                       READINGS["plain_slowdown"])
    >>> read("w", 0)["bsld"]
    9.0
    """

    def read(w: str, p: int, s: str = "default", prio: str | None = None) -> dict[str, float]:
        # algorithms are replaced in the sweeps (no priority named: gain), never where
        # priorities are compared (Table 3), which would set one reading against the other
        if p == 0 and reading.rigid:
            r = get(w, 0, reading.rigid)
        elif prio is None:
            r = get(w, p, reading.algorithms.get(s, s))
        else:
            r = get(w, p, s, prio)
        return {**r, **{k: r[v] for k, v in reading.metrics.items()}}

    return read


def _workload(source: str, jobs: int) -> Workload:
    return _workload_in(None if source == SYNTHETIC else trace_dir(), source, jobs)


@cache
def _workload_in(folder: Path | None, source: str, jobs: int) -> Workload:
    """The workload, cached by folder too (the traces' folder can change between reports)."""
    if folder is None:
        return lina_synthetic(jobs=jobs).generate(seed=17)
    trace = read_swf(folder / source, max_jobs=jobs + 500, on_error="skip")
    return load_workload(trace, max_jobs=jobs)


def simulate(task: tuple[Any, ...]) -> dict[str, float]:
    """One run: ``(workload, jobs, percent elastic, algorithm, priority[, seed])`` -> metrics.

    ``algorithm`` is a shrink selection, ``"system-printed"`` for Algorithm 7 as printed, or
    :data:`USERS_ESTIMATES` for ``easy_backfill`` (at 0 %: EASY with the users' time limits).
    ``seed``: the elastic conversion's (default :data:`SEED`).
    """
    source, jobs, percent, algorithm, priority, *rest = task
    seed = rest[0] if rest else SEED
    if algorithm == USERS_ESTIMATES:
        return _metrics(run(_workload(source, jobs), "easy_backfill", seed=SEED))
    printed = algorithm == "system-printed"
    config = LinaElastic.Config(
        shrink_selection="system" if printed else algorithm,
        priority=priority,
        system_requires_ending_job=printed,
    )
    policy = LinaElastic(config)
    conversion = LinaConversion(elastic_fraction=percent / 100) if percent else None
    return _metrics(run(_workload(source, jobs), policy, conversion=conversion, seed=seed))


def _metrics(result: Any) -> dict[str, float]:
    m = result.metrics
    span = m.makespan_s
    first = min((r.start_s for r in result.records), default=0.0)
    last = max((r.end_s for r in result.records), default=0.0)
    return {
        "tat": m.avg_turnaround_s,
        "util": m.utilization,
        "bsld": m.avg_bounded_slowdown,
        "sld": m.avg_slowdown,
        "util_computing": (m.node_s - m.waste_node_s) / (result.nodes * span) if span else 0.0,
        "util_start_span": m.node_s / (result.nodes * (last - first)) if last > first else 0.0,
        "wait": m.avg_wait_s,
        "run": m.avg_run_s,
        "span": m.makespan_s,
        "resizes": m.expansions + m.shrinks,
        "refused": m.requests_refused,
        "nodes": result.nodes,
    }


def _better(metric: str, value: float, than: float) -> bool:
    return value > than if metric == "util" else value < than


def reproduce(
    out_dir: Path, *, quick: bool = False, progress: Callable[[str], None] | None = None
) -> Section:
    """Run the sweeps, draw the figures into ``out_dir`` and return the report section."""
    say = progress or (lambda line: None)
    if quick:
        jobs = {SYNTHETIC: 300, TRACES[0]: 300}
        percents: tuple[int, ...] = (20, 100)
        prio_percents: tuple[int, ...] = (100,)
    else:
        jobs = {SYNTHETIC: 10_000, **{t: 10_000 for t in TRACES}}
        percents = tuple(range(10, 101, 10))
        prio_percents = (20, 40, 60, 80, 100)
    workloads = [w for w in jobs if w == SYNTHETIC or (trace_dir() / w).is_file()]

    tasks = []
    for w in workloads:
        tasks.append((w, jobs[w], 0, "default", "gain"))
        tasks.append((w, jobs[w], 0, USERS_ESTIMATES, "gain"))
        tasks += [(w, jobs[w], p, s, "gain") for s in ALGORITHMS for p in percents]
    n = jobs[SYNTHETIC]
    for s in SHRINK_SELECTIONS:
        for prio in PRIORITIES:
            for p in prio_percents:
                if (SYNTHETIC, n, p, s, prio) not in tasks:
                    tasks.append((SYNTHETIC, n, p, s, prio))
    seeds = range(SEED, SEED + (2 if quick else SEEDS))  # Default against Application
    tasks += [
        (w, jobs[w], p, s, "gain", seed)
        for w in workloads
        for p in percents
        for s in ("default", "application")
        for seed in seeds[1:]
    ]
    say(f"lina: {len(tasks)} simulations on {len(workloads)} workload(s)")
    results: dict[Any, dict[str, float]] = dict(
        zip(tasks, run_tasks(tasks, simulate, workers=1 if quick else 2, say=say), strict=True)
    )

    def get(w: str, p: int, s: str = "default", prio: str = "gain") -> dict[str, float]:
        if s == USERS_ESTIMATES:
            return results[(w, jobs[w], 0, s, "gain")]
        return results[(w, jobs[w], p, s if p else "default", prio if p else "gain")]

    def turnarounds(w: str, p: int, s: str) -> list[float]:
        """Average turnaround (s) of Default or Application, one per seed of ``seeds``."""
        rest = [results[(w, jobs[w], p, s, "gain", seed)]["tat"] for seed in seeds[1:]]
        return [get(w, p, s)["tat"], *rest]

    checks = _checks(workloads, percents, prio_percents, get)
    table3 = _table3(prio_percents, get)
    sensitivity = [("default", sum(c.agrees for c in checks), len(checks))]
    fixed: dict[str, list[str]] = {c.what: [] for c in checks if not c.agrees}
    for name, reading in READINGS.items():
        read = _checks(
            workloads, percents, prio_percents, reading_getter(get, reading), reading.table3
        )
        sensitivity.append((name, sum(c.agrees for c in read), len(read)))
        for c in read:
            if c.agrees and c.what in fixed:
                fixed[c.what].append(name)

    figures = [
        _figure_sweeps(out_dir / "lina_elastic_vs_rigid.png", workloads, percents, get),
        _figure_priorities(out_dir / "lina_priorities_synthetic.png", prio_percents, get),
    ]
    markdown = _markdown(workloads, jobs, percents, prio_percents, get, table3, quick, turnarounds)
    markdown += "\n" + _sensitivity_markdown(sensitivity, fixed)
    return Section(
        "Lina, Ghafoor and Hines: elastic (malleable + evolving) against rigid",
        markdown,
        figures=figures,
        checks=checks,
    )


def _checks(
    workloads: Sequence[str],
    percents: Sequence[int],
    prio_percents: Sequence[int],
    get: Getter,
    table3: Table3Difference = "relative",
) -> list[Check]:
    """Every check of the section, judged on the runs ``get`` returns."""
    checks: list[Check] = []
    for w in workloads:
        checks += _beats_rigid_checks(w, percents, get)
    checks.append(_priorities_check(prio_percents, get))
    checks += _table3_checks(_table3(prio_percents, get, table3))
    for w in workloads:
        checks += _algorithm_checks(w, percents, get)
    return checks


def _sensitivity_markdown(
    rows: Sequence[tuple[str, int, int]], fixed: Mapping[str, Sequence[str]]
) -> str:
    lines = [
        "**Sensitivity.** Each reading under test re-judges every check above on the same runs "
        "(agreeing checks / checks):",
        "",
        "| reading | what it changes | where the paper is open | agree |",
        "|---|---|---|---|",
    ]
    for name, agree, total in rows:
        r = READINGS.get(name)
        what, where = (r.what, r.source) if r else ("the default (above)", "")
        lines.append(f"| `{name}` | {what} | {where} | {agree}/{total} |")
    if fixed:
        lines += [
            "",
            "The checks the default does not reproduce, and the readings under which they "
            "would (each reading also re-judges the others: see its count above):",
            "",
            "| check not reproduced | reproduced under |",
            "|---|---|",
        ]
        lines += [
            f"| {what} | {', '.join(f'`{n}`' for n in names) or 'no reading'} |"
            for what, names in fixed.items()
        ]
    return "\n".join(lines) + "\n"


def _algo(algorithm: str) -> str:
    return "System (as printed)" if algorithm == "system-printed" else algorithm.capitalize()


def _label(workload: str) -> str:
    if workload == SYNTHETIC:
        return "Synthetic (Downey, Table 1)"
    return workload.split("-cln")[0].replace(".swf.gz", "")


def _beats_rigid_checks(w: str, percents: Sequence[int], get: Getter) -> list[Check]:
    rigid = get(w, 0)
    checks = []
    for s in ALGORITHMS:
        counts = {
            m: sum(_better(m, get(w, p, s)[m], rigid[m]) for p in percents) for m, _ in METRICS
        }
        failed = []
        for m, c in counts.items():
            if c < len(percents):
                worse = [str(p) for p in percents if not _better(m, get(w, p, s)[m], rigid[m])]
                failed.append(f"{m} not better at {', '.join(worse)} %")
        checks.append(
            Check(
                f"{_label(w)}, {_algo(s)} (gain): elastic better than rigid at every "
                "share (turnaround / utilisation / slowdown)",
                " / ".join(f"{counts[m]}/{len(percents)}" for m, _ in METRICS),
                " / ".join(f"{len(percents)}/{len(percents)}" for _ in METRICS),
                all(c == len(percents) for c in counts.values()),
                "; ".join(failed) or "strictly better at every share",
            )
        )
    return checks


def _priorities_check(percents: Sequence[int], get: Getter) -> Check:
    rigid = get(SYNTHETIC, 0)
    combos = [(s, prio, p) for s in SHRINK_SELECTIONS for prio in PRIORITIES for p in percents]
    good = [c for c in combos if get(SYNTHETIC, c[2], c[0], c[1])["tat"] < rigid["tat"]]
    bad = sorted(set(combos) - set(good))
    return Check(
        f"{_label(SYNTHETIC)}: every algorithm and priority beats rigid on turnaround "
        f"({', '.join(str(p) for p in percents)} %)",
        f"{len(good)}/{len(combos)}",
        f'{len(combos)}/{len(combos)} ("in all cases")',
        not bad,
        "; ".join(f"{s}/{prio} at {p} %" for s, prio, p in bad[:5]),
    )


def _table3(
    percents: Sequence[int], get: Getter, how: Table3Difference = "relative"
) -> dict[str, dict[str, tuple[str, str, float, int]]]:
    """Per algorithm and metric: best and worst priority, largest difference (%) and where.

    The difference at one share is :func:`difference` (by default ``|best - worst| / worst``,
    in %).
    """
    out: dict[str, dict[str, tuple[str, str, float, int]]] = {}
    rigid = get(SYNTHETIC, 0)
    for s in SHRINK_SELECTIONS:
        out[s] = {}
        for m, _ in METRICS:
            top = ("", "", -1.0, 0)
            for p in percents:
                values = {prio: get(SYNTHETIC, p, s, prio)[m] for prio in PRIORITIES}
                ranked = sorted(values, key=lambda k: values[k], reverse=(m == "util"))
                best, worst = ranked[0], ranked[-1]
                diff = difference(m, values[best], values[worst], rigid[m], how)
                if diff > top[2]:
                    top = (best, worst, diff, p)
            out[s][m] = top
    return out


def _table3_checks(table3: dict[str, dict[str, tuple[str, str, float, int]]]) -> list[Check]:
    checks = []
    for s in SHRINK_SELECTIONS:
        for m, name in METRICS:
            best, worst, diff, at = table3[s][m]
            pbest, pworst, pdiff, pat = PAPER_TABLE3[s][m]
            names = "same best and worst" if (best, worst) == (pbest, pworst) else "other names"
            checks.append(
                Check(
                    f"Table 3, Synthetic, {s.capitalize()}, {name}: largest difference between "
                    "priorities (best / worst)",
                    f"{diff:.2f} % at {at} % ({best} / {worst})",
                    f"{pdiff:.2f} % at {pat} % ({pbest} / {pworst})",
                    abs(diff - pdiff) <= TABLE3_TOLERANCE_PP,
                    f"tolerance +-{TABLE3_TOLERANCE_PP:.0f} points; {names}",
                )
            )
    return checks


def _ranked(w: str, p: int, metric: str, get: Getter, *, best: bool) -> str:
    """The paper's algorithm (System read from the text) with the best or worst ``metric``."""
    values = {s: get(w, p, s)[metric] for s in SHRINK_SELECTIONS}
    higher_wins = (metric == "util") == best
    return (
        max(values, key=values.__getitem__) if higher_wins else min(values, key=values.__getitem__)
    )


def _algorithm_checks(w: str, percents: Sequence[int], get: Getter) -> list[Check]:
    n = len(percents)
    util_top = [p for p in percents if _ranked(w, p, "util", get, best=True) == "system"]
    tat_worst = [p for p in percents if _ranked(w, p, "tat", get, best=False) == "system"]
    tat_low = [p for p in percents if _ranked(w, p, "tat", get, best=True) == "application"]
    return [
        Check(
            f"{_label(w)}: System has the highest utilisation of the three algorithms",
            f"{len(util_top)}/{n} shares",
            "always",
            len(util_top) == n,
            "gain priority",
        ),
        Check(
            f"{_label(w)}: System has the worst turnaround of the three algorithms",
            f"{len(tat_worst)}/{n} shares",
            "worst (figures for KIT, LLNL, Synthetic)",
            2 * len(tat_worst) > n,
            "gain priority",
        ),
        Check(
            f"{_label(w)}: Application has the lowest turnaround of the three algorithms",
            f"{len(tat_low)}/{n} shares",
            "in most cases",
            2 * len(tat_low) > n,
            "gain priority; Default is within "
            + f"{_spread(w, percents, get):.1f} % of Application at every share",
        ),
    ]


def _algorithm_findings(
    workloads: Sequence[str],
    percents: Sequence[int],
    get: Getter,
    turnarounds: Turnarounds | None = None,
) -> list[str]:
    """Why the ranking of the three algorithms differs from the paper's, where it does.

    Lina, Ghafoor and Hines, sec. 6: "Algorithm System (Algorithm 7) always gets the highest
    system utilization. In most of the cases, the Algorithm Application (Algorithm 6) gets the
    lowest average TAT"; sec. 5.3 finds Application and Default "perform the same in most of
    the cases" (KIT) and "clustered together" (Synthetic). From the gain-priority sweeps.
    """
    out = []
    util_parts = []
    for w in workloads:
        short = [p for p in percents if _ranked(w, p, "util", get, best=True) != "system"]
        if not short:
            continue

        def gap(p: int, w: str = w) -> float:
            top = _ranked(w, p, "util", get, best=True)
            return get(w, p, top)["util"] - get(w, p, "system")["util"]

        p = max(short, key=gap)
        top = _ranked(w, p, "util", get, best=True)
        sy, tp = get(w, p, "system"), get(w, p, top)
        work = 100.0 * (sy["util"] * sy["span"] / (tp["util"] * tp["span"]) - 1.0)
        span = 100.0 * (sy["span"] / tp["span"] - 1.0)
        util_parts.append(
            f"on {_label(w)} at {len(short)} of {len(percents)} shares (at {p} %: "
            f"{sy['util']:.3f} against {_algo(top)}'s {tp['util']:.3f}; System's node-seconds "
            f"{work:+.1f} %, its span {span:+.1f} %)"
        )
    if util_parts:
        out.append(
            "* **System is not always the highest in utilisation**: it is below another "
            "algorithm "
            + "; ".join(util_parts)
            + ". Utilisation is work over span: where System's jobs hold fewer node-seconds, "
            "or its schedule runs longer, than another algorithm's, the ranking the paper "
            "finds everywhere does not hold. Of the readings below, only `system_as_printed` "
            "changes System's runs; the others change how the runs are measured (the table "
            "after the sensitivity counts says which, if any, reproduce these checks)."
        )
    tat_parts = []
    for w in workloads:
        low = {a: 0 for a in SHRINK_SELECTIONS}
        for p in percents:
            low[_ranked(w, p, "tat", get, best=True)] += 1
        if 2 * low["application"] > len(percents):
            continue
        diffs = sorted(
            100.0 * abs(get(w, p, "default")["tat"] / get(w, p, "application")["tat"] - 1.0)
            for p in percents
        )
        tat_parts.append(
            f"{_label(w)}: Application lowest at {low['application']}, Default at "
            f"{low['default']} of {len(percents)} shares, the two {diffs[len(diffs) // 2]:.1f} % "
            f"apart at the median share, {diffs[-1]:.1f} % at most"
        )
    if tat_parts:
        if turnarounds is not None and len(turnarounds(workloads[0], percents[0], "default")) > 1:
            seeds = _seed_summary(workloads, percents, turnarounds)
        else:
            seeds = (
                "We ran one conversion seed per point, the paper ten: whether differences of "
                "this size exceed the seed-to-seed variation was not measured. "
            )
        out.append(
            "* **Application is not the lowest in turnaround at most shares** ("
            + "; ".join(tat_parts)
            + "). Default and Application differ only in when and which running jobs they "
            "shrink to start a queued one (Algorithms 5 and 6); the paper too finds them "
            'performing "the same in most of the cases" (KIT) and "clustered together" '
            "(Synthetic) before concluding that "
            "Application is lowest in most cases. "
            + seeds
            + "No reading below changes the Default or Application runs."
        )
    return out


def _seed_summary(
    workloads: Sequence[str], percents: Sequence[int], turnarounds: Turnarounds
) -> str:
    """Default against Application in turnaround, averaged over the conversion seeds.

    Per workload, at how many shares Application's mean is the lower; over every share, the
    largest difference of the means (in % of Application's) and how many differences exceed
    twice their standard error (``sqrt(s_d^2 / n + s_a^2 / n)``, sample deviations over
    ``n`` seeds).
    """
    lows, widest, beyond, n = [], 0.0, 0, 0
    for w in workloads:
        low = 0
        for p in percents:
            d, a = turnarounds(w, p, "default"), turnarounds(w, p, "application")
            n = len(d)
            md, ma = statistics.fmean(d), statistics.fmean(a)
            low += ma < md
            widest = max(widest, 100.0 * abs(md / ma - 1.0))
            se = math.sqrt(statistics.variance(d) / n + statistics.variance(a) / len(a))
            beyond += abs(md - ma) > 2.0 * se
        lows.append(f"{low} of {len(percents)} on {_label(w)}")
    return (
        f"Averaged over {n} conversion seeds per point, as the paper averages its runs, "
        f"Application's turnaround is the lower of the two at {', '.join(lows)}; the means "
        f"differ by at most {widest:.1f} %, and {beyond} of "
        f"{len(workloads) * len(percents)} differences exceed twice their standard error "
        "(the seed-to-seed spread of a point's mean). "
    )


def _spread(w: str, percents: Sequence[int], get: Getter) -> float:
    """Largest turnaround difference between Default and Application, in % of Application."""
    return max(
        100.0 * abs(get(w, p, "default")["tat"] / get(w, p, "application")["tat"] - 1.0)
        for p in percents
    )


def _figure_sweeps(
    path: Path, workloads: Sequence[str], percents: Sequence[int], get: Getter
) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 2.6 * len(workloads) + 0.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(workloads), len(METRICS), squeeze=False)
    for row, w in zip(axes, workloads, strict=True):
        rigid = get(w, 0)
        for ax, (m, name) in zip(row, METRICS, strict=True):
            for s in ALGORITHMS:
                style = "s--" if s == "system-printed" else "o-"
                ax.plot(percents, [get(w, p, s)[m] for p in percents], style, ms=3, label=s)
            ax.axhline(rigid[m], linestyle=":", color="black", label="rigid baseline")
            users = get(w, 0, USERS_ESTIMATES)[m]
            ax.axhline(users, linestyle="-.", color="grey", label="EASY, users' limits")
            ax.set_title(f"{_label(w)}: {name}", fontsize="small")
            ax.set_xlabel("elastic jobs (%)", fontsize="small")
        row[0].legend(fontsize="x-small")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def _figure_priorities(path: Path, percents: Sequence[int], get: Getter) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(SHRINK_SELECTIONS), len(METRICS), squeeze=False)
    rigid = get(SYNTHETIC, 0)
    for row, s in zip(axes, SHRINK_SELECTIONS, strict=True):
        for ax, (m, name) in zip(row, METRICS, strict=True):
            for prio in PRIORITIES:
                values = [get(SYNTHETIC, p, s, prio)[m] for p in percents]
                ax.plot(percents, values, "o-", ms=3, label=prio)
            ax.axhline(rigid[m], linestyle=":", color="black", label="rigid baseline")
            ax.set_title(f"Synthetic, {s.capitalize()}: {name}", fontsize="small")
            ax.set_xlabel("elastic jobs (%)", fontsize="small")
        row[0].legend(fontsize="x-small")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def _markdown(
    workloads: Sequence[str],
    jobs: dict[str, int],
    percents: Sequence[int],
    prio_percents: Sequence[int],
    get: Getter,
    table3: dict[str, dict[str, tuple[str, str, float, int]]],
    quick: bool,
    turnarounds: Turnarounds | None = None,
) -> str:
    seeds = len(turnarounds(workloads[0], percents[0], "default")) if turnarounds else 1
    sizes = "; ".join(
        f"{_label(w)}, first {jobs[w]:,} jobs on {get(w, 0)['nodes']:,.0f} nodes" for w in workloads
    )
    lines = [
        "Policy `lina_elastic` (Algorithms 1-8; section 5.2's t = 5 s and u = 80 %, and x = 90 % "
        "as the paper gives none); run times known to the scheduler, as in the paper's "
        "simulator; gain priority unless said. System follows section 4's text (no shrinking "
        "above u); *System (as printed)* follows Algorithm 7's pseudo-code (no shrinking above "
        "u only while a job ends within t). Elastic conversion of section 5.1 "
        f"(`LinaConversion`, seed {SEED}). The rigid baseline of every comparison in this "
        f"section (the dotted line of the figures) is {BASELINE}, the same policy on the "
        "unconverted workload, so that a difference comes from elasticity alone; EASY "
        "backfilling with the users' time limits (`easy_backfill`, the dash-dotted line, and "
        "the default baseline of `simulate --fractions`) is shown beside it, since the "
        "estimates alone change the results. Slowdown is the bounded slowdown (10 s "
        "bound; the paper's plain slowdown explodes on the traces' few-second jobs). One "
        "conversion seed per point (the paper averages 10 runs)"
        + (
            f", except that Default and Application are also run with {seeds - 1} more "
            f"seed{'s' if seeds > 2 else ''}, for the comparison of their turnarounds."
            if seeds > 1
            else "."
        ),
        "",
        f"Workloads: {sizes}. The paper's LLNL Atlas and KIT ForHLR II logs are not among the "
        "shared traces; every trace here is one the paper did not use, and the synthetic "
        "workload is a new draw from its Table 1 parameters.",
    ]
    for w in workloads:
        rigid = get(w, 0)
        users = get(w, 0, USERS_ESTIMATES)
        change = 100.0 * (users["tat"] / rigid["tat"] - 1.0)
        lines += [
            "",
            f"**{_label(w)}**: turnaround (s) / utilisation / bounded slowdown; rigid baseline "
            f"{rigid['tat']:,.0f} / {rigid['util']:.3f} / {rigid['bsld']:.2f}; EASY with the "
            f"users' time limits {users['tat']:,.0f} / {users['util']:.3f} / "
            f"{users['bsld']:.2f} ({change:+.1f} % turnaround from the estimates alone)",
            "",
            "| % elastic | " + " | ".join(_algo(a) for a in ALGORITHMS) + " |",
            "|---|" + "---|" * len(ALGORITHMS),
        ]
        for p in percents:
            cells = []
            for a in ALGORITHMS:
                r = get(w, p, a)
                cells.append(f"{r['tat']:,.0f} / {r['util']:.3f} / {r['bsld']:.2f}")
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Table 3 (its Synthetic rows) beside ours: the largest difference between the best and "
        f"the worst priority at any of {', '.join(str(p) for p in prio_percents)} % elastic, "
        "as `|best - worst| / worst`:",
        "",
        "| algorithm | metric | ours: best / worst | ours: difference | paper: best / worst | "
        "paper: difference |",
        "|---|---|---|---|---|---|",
    ]
    for s in SHRINK_SELECTIONS:
        for m, name in METRICS:
            best, worst, diff, at = table3[s][m]
            pb, pw, pd, pat = PAPER_TABLE3[s][m]
            lines.append(
                f"| {s.capitalize()} | {name} | {best} / {worst} | {diff:.2f} % at {at} % | "
                f"{pb} / {pw} | {pd:.2f} % at {pat} % |"
            )
    lines += ["", "What the runs show, and why they differ from the paper where they do:", ""]
    lines += _findings(workloads, percents, get, table3, turnarounds)
    if quick:
        lines += [
            "",
            f"Quick mode: {jobs[SYNTHETIC]} jobs of the synthetic workload and of SDSC-SP2, "
            "two shares, the priorities at one share; the checks are the same but rest on "
            "much less evidence.",
        ]
    return "\n".join(lines)


def _findings(
    workloads: Sequence[str],
    percents: Sequence[int],
    get: Getter,
    table3: dict[str, dict[str, tuple[str, str, float, int]]],
    turnarounds: Turnarounds | None = None,
) -> list[str]:
    """The discussion, from the numbers (so that it stays true when they change)."""

    def beats(w: str, a: str, m: str) -> bool:
        rigid = get(w, 0)[m]
        return all(_better(m, get(w, p, a)[m], rigid) for p in percents)

    out = []
    good = [a for a in ("default", "application") if all(beats(w, a, "tat") for w in workloads)]
    if good:
        top = percents[-1]
        parts = []
        for w in workloads:
            rigid, elastic = get(w, 0), get(w, top, "default")
            gained = rigid["tat"] - elastic["tat"]
            if gained > 0:
                waited = 100.0 * (rigid["wait"] - elastic["wait"]) / gained
                parts.append(f"{gained:,.0f} s on {_label(w)} ({waited:.0f} % of it waiting)")
        out.append(
            f"* **{' and '.join(_algo(a) for a in good)}** lower the average turnaround below "
            "the rigid baseline at every elastic share on every workload, as the paper finds; "
            "slowdown too"
            + (
                ""
                if all(beats(w, a, "bsld") for w in workloads for a in good)
                else " on most workloads"
            )
            + ". The gain is shorter waits (shrinking malleable jobs starts queued jobs early) "
            f"and shorter runs (expansions use the nodes EASY leaves idle): at {top} % elastic "
            f"Default saves {'; '.join(parts)}."
        )
    bad = [w for w in workloads if not beats(w, "system", "bsld")]
    if bad:
        printed_ok = [w for w in bad if beats(w, "system-printed", "bsld")]
        out.append(
            "* **System, read from the text, loses to rigid on slowdown** on "
            f"{', '.join(_label(w) for w in bad)}. Idle nodes go to malleable jobs "
            "(Algorithm 1, line 7), which lifts the utilisation above u = 80 %; from then on "
            "System shrinks nothing, so a queued job that does not fit waits for jobs to end, "
            "and the nodes they free are given to expansions again. The paper ranks System "
            "last on slowdown too, but still better than rigid. "
            + (
                f"With Algorithm 7 as printed the loss disappears on {len(printed_ok)} of "
                f"these {len(bad)} workload(s), and System behaves almost like Default."
                if printed_ok
                else "Algorithm 7 as printed does not remove it."
            )
        )
    util_bad = [w for w in workloads if not beats(w, "default", "util")]
    system_top = [
        w
        for w in workloads
        if all(_ranked(w, p, "util", get, best=True) == "system" for p in percents)
    ]
    text = (
        "* **Utilisation** is node-seconds held over nodes times the schedule span (section "
        "4.1), and a job holds its nodes while it resizes and while it runs, on more nodes, "
        "with the parallel overhead of section 3. Below saturation the span is set by the "
        "last arrivals, so utilisation mostly measures how many node-seconds the jobs burn: "
        "the more expansion, the higher the figure, without any job finishing sooner. That is "
        "why elastic shares score higher"
    )
    if system_top:
        text += (
            ", why System, which expands into nodes it then refuses to take back, scores "
            f"highest on {', '.join(_label(w) for w in system_top)}"
        )
    text += (
        ", and why the priorities hardly change it (Table 3's utilisation differences of "
        f"3-9 % are not reproduced: ours are at most "
        f"{max(table3[s]['util'][2] for s in SHRINK_SELECTIONS):.1f} %)."
    )
    for w in util_bad:
        p = next(p for p in percents if not _better("util", get(w, p)["util"], get(w, 0)["util"]))
        grew = 100.0 * (get(w, p)["span"] / get(w, 0)["span"] - 1.0)
        held = 100.0 * (
            get(w, p)["util"] * get(w, p)["span"] / (get(w, 0)["util"] * get(w, 0)["span"]) - 1.0
        )
        fell = 100.0 * (1.0 - get(w, p)["tat"] / get(w, 0)["tat"])
        text += (
            f" On {_label(w)}, saturated, the schedule span is set by the work instead. At "
            f"{p} % elastic the node-seconds change by {held:+.1f} % but the span by "
            f"{grew:+.1f} %: the last job ends later (we attribute it to EASY reservations "
            "made with run times that later shrinks lengthen, which delays the wide job at the "
            "head of the queue). Utilisation, work over span, drops a little below the rigid "
            f"baseline's while the average turnaround falls by {fell:.0f} %."
        )
    out.append(text)
    out += _algorithm_findings(workloads, percents, get, turnarounds)
    names = sorted({(table3[s]["tat"][0], table3[s]["tat"][1]) for s in SHRINK_SELECTIONS})
    found = ", ".join(f"{b} best and {w} worst" for b, w in names)
    out.append(
        "* **Priorities.** Turnaround differs by at most "
        f"{max(table3[s]['tat'][2] for s in SHRINK_SELECTIONS):.1f} % between priorities "
        "(the paper: at most 1.8 % on its synthetic workload, "
        f"{PAPER_MAX_DIFFERENCE} % in slowdown over all its workloads), so, as the paper "
        "concludes, the choice of victim matters little. "
        + (
            "As in the paper, gain is best and random worst for turnaround."
            if names == [("gain", "random")]
            else f"Which one is best is not stable: for turnaround we find {found} (by "
            "algorithm), where the paper finds gain best and random worst."
        )
        + " In slowdown our largest differences between priorities are "
        + ", ".join(f"{table3[s]['bsld'][2]:.2f} % ({s.capitalize()})" for s in SHRINK_SELECTIONS)
        + ", against Table 3's "
        + ", ".join(f"{PAPER_TABLE3[s]['bsld'][2]:.2f} %" for s in SHRINK_SELECTIONS)
        + (
            ": the priorities separate the slowdowns less than in the paper."
            if all(table3[s]["bsld"][2] < PAPER_TABLE3[s]["bsld"][2] for s in SHRINK_SELECTIONS)
            else "."
        )
    )
    out.append(
        "* **Differences of set-up.** The paper's figures are for LLNL and KIT, which we do "
        "not have, and its synthetic jobs are not ours (same model and parameters, other "
        "random numbers); one conversion seed here against ten runs there; the negotiation "
        "cost of Algorithm 1, line 11 (0.005-0.05 s, negligible against run times) is not "
        "modelled; evolving request sizes are our choice (up to ``P`` nodes, "
        "`LinaConversion`), the paper gives none."
    )
    return out
