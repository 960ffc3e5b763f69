"""Reproduce the papers' published results with the simulator: ``elastic-slurm reproduce``.

Each paper has a module here with ``reproduce(out_dir, *, quick, progress) -> Section``: it
runs the simulations, writes its figures into ``out_dir``, and returns a section of
``docs/reproduction.md`` that puts each number beside the paper's and explains differences.
:func:`build_report` runs every module and writes the report. ``quick`` runs a reduced
version (fewer jobs, tests, or repetitions) that finishes in seconds, for the test suite.

The traces (SDSC-SP2, KTH-SP2 from the Parallel Workloads Archive, and a Lublin-model trace)
are read from :func:`trace_dir`: the folder given to :func:`build_report` (``reproduce
--traces DIR``), else ``ELASTIC_SLURM_WORKLOADS``, else ``shared/workloads`` beside a source
checkout. A paper whose reproduction fails gets a failed check in the report, with the
error's one-line message; the traceback goes to the progress output, never into the report.
"""

from __future__ import annotations

import importlib
import os
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from elastic_slurm import envvars

#: The papers, in the order of the report (module names in this package).
PAPERS = ("klein_perez", "ghafoor", "huang", "lina")
#: The papers that read the shared traces (Klein and Perez's workloads are generated).
NEEDS_TRACES = frozenset({"ghafoor", "huang", "lina"})
#: The environment variable that names the traces' folder.
TRACES_VARIABLE = envvars.PREFIX + "WORKLOADS"


def trace_dir() -> Path:
    """Where the traces are: ``ELASTIC_SLURM_WORKLOADS``, else beside the source checkout.

    The checkout's folder is ``shared/workloads`` next to it, which does not exist for an
    installed wheel: :func:`find_traces` checks.
    """
    given = envvars.get_str("WORKLOADS")
    if given:
        return Path(given)
    return Path(__file__).resolve().parents[5] / "shared" / "workloads"


def find_traces(given: Path | None = None) -> Path:
    """The traces' folder: ``given``, else :func:`trace_dir`; it must exist.

    Raises
    ------
    FileNotFoundError
        The folder does not exist; the one-line message says where it looked and how to
        give another (``--traces DIR`` or ``ELASTIC_SLURM_WORKLOADS``).
    """
    folder = given if given is not None else trace_dir()
    if not folder.is_dir():
        how = "given with --traces" if given is not None else f"{TRACES_VARIABLE} or the checkout's"
        raise FileNotFoundError(
            f"no traces folder at {folder} ({how}): give the folder of the SWF traces "
            f"(SDSC-SP2, KTH-SP2, lublin_256; see docs/reproduction.md) with --traces DIR or "
            f"{TRACES_VARIABLE}"
        )
    return folder


@contextmanager
def _traces(folder: Path | None) -> Iterator[None]:
    """Point :func:`trace_dir` (in this process and its workers) at ``folder`` for a while."""
    if folder is None:
        yield
        return
    old = os.environ.get(TRACES_VARIABLE)
    os.environ[TRACES_VARIABLE] = str(folder)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(TRACES_VARIABLE, None)
        else:
            os.environ[TRACES_VARIABLE] = old


@dataclass
class Check:
    """One number beside the paper's: ``agrees`` says whether it reproduces the finding."""

    what: str
    ours: str
    paper: str
    agrees: bool
    note: str = ""


@dataclass
class Section:
    """One paper's part of the report."""

    title: str
    markdown: str
    figures: list[Path] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0
    failed: bool = False


def _check_table(checks: Sequence[Check]) -> str:
    if not checks:
        return ""
    rows = ["| result | ours | paper | reproduced | note |", "|---|---|---|---|---|"]
    rows += [
        f"| {c.what} | {c.ours} | {c.paper} | {'yes' if c.agrees else 'no'} | {c.note} |"
        for c in checks
    ]
    return "\n".join(rows) + "\n"


def failed_section(name: str, exc: BaseException) -> Section:
    """The section of a paper whose reproduction raised ``exc``: one failed check.

    >>> s = failed_section("huang", FileNotFoundError("no trace x.swf"))
    >>> s.failed, s.checks[0].ours
    (True, 'did not run: FileNotFoundError: no trace x.swf')
    """
    message = " ".join(str(exc).split()) or "no message"
    why = f"{type(exc).__name__}: {message}"
    return Section(
        name,
        f"The reproduction of `{name}` did not run ({why}); its results are missing from this "
        "report. The traceback was printed with the progress output.",
        checks=[Check(f"the reproduction of `{name}` runs", f"did not run: {why}", "runs", False)],
        failed=True,
    )


def build_report(
    out: Path,
    *,
    quick: bool = False,
    papers: Sequence[str] = PAPERS,
    progress: Callable[[str], None] | None = None,
    traces: Path | None = None,
    command: str = "elastic-slurm reproduce",
) -> list[Section]:
    """Run each paper's reproduction and write the Markdown report ``out``.

    The figures go beside it, into the folder ``reproduction``.

    Parameters
    ----------
    out
        The report's path (its folder is created).
    quick
        The reduced runs.
    papers
        Module names from :data:`PAPERS`.
    progress
        Called with one line of text per step (and a failed paper's traceback).
    traces
        The traces' folder (default :func:`trace_dir`).
    command
        The command that made the report, named in its first paragraph.

    A paper whose module is missing or fails gets a section with one failed check naming the
    error (:func:`failed_section`), so one broken reproduction does not hide the others.
    """
    say = progress or (lambda line: None)
    figures = out.parent / "reproduction"
    figures.mkdir(parents=True, exist_ok=True)
    sections = []
    for name in papers:
        say(f"reproducing {name}{' (quick)' if quick else ''}")
        t0 = time.monotonic()
        try:
            with _traces(traces):
                module = importlib.import_module(f"{__name__}.{name}")
                section = module.reproduce(figures, quick=quick, progress=say)
        except Exception as exc:  # a failed check in the document, the traceback on stderr
            say("".join(traceback.format_exception(exc)).rstrip())
            section = failed_section(name, exc)
        section.seconds = time.monotonic() - t0
        sections.append(section)
    lines = [
        "# Reproducing the papers' results",
        "",
        f"Generated by `{command}{' --quick' if quick else ''}` (do not edit by hand). Each "
        "number is beside the paper's; where they differ, the text says why. Nothing is tuned "
        "to one trace. The traces are the Parallel Workloads Archive's SDSC-SP2 "
        "(`SDSC-SP2-1998-4.2-cln.swf.gz`) and KTH-SP2 (`KTH-SP2-1996-2.1-cln.swf.gz`) logs and "
        "a Lublin-Feitelson model trace (`lublin_256.swf.gz`), read from the folder given "
        f"with `reproduce --traces DIR` (default: `{TRACES_VARIABLE}`, else `shared/workloads` "
        "beside the source checkout).",
        "",
    ]
    for s in sections:
        lines += [f"## {s.title}", "", s.markdown.strip(), "", _check_table(s.checks)]
        for fig in s.figures:
            lines.append(f"![{fig.stem}]({fig.parent.name}/{fig.name})")
        lines += ["", f"_Ran in {s.seconds:.0f} s._", ""]
    out.write_text("\n".join(lines))
    return sections
