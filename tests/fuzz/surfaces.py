"""The input surfaces of elastic-slurm, each with a hypothesis strategy and how to judge a case.

One :class:`Surface` per place where the project reads what someone else wrote: job specs (YAML
text and option dicts), site configs, SWF traces, job-directory files, protocol messages and
Slurm's outputs. :func:`classify` runs one case under a time bound and says what happened:

* ``accepted``: the reader returned, and the result passed the surface's validity check;
* ``refused``: the reader raised the project's error for that surface, with a message;
* ``uncaught``: any other exception, a refusal without a message, or an invalid result;
* ``hung``: the case took longer than the bound.

The tests under ``tests/fuzz/`` and ``scripts/fuzz.py`` share these strategies.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import pwd
import re
import shutil
import signal
import string
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from elastic_slurm.errors import ConfigError, InvalidRequest, JobInputError, SlurmCommandError

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "22.05"
BOUND_S = 2.0
"""Time bound of one case (seconds): every reader answers a small input in milliseconds."""


class Hung(BaseException):
    """Raised inside a case that ran past its time bound (a BaseException: not swallowed)."""


@dataclass(frozen=True)
class Outcome:
    """What one case did: ``kind`` is accepted, refused, uncaught or hung."""

    kind: str
    detail: str = ""


@dataclass(frozen=True)
class Surface:
    """An input surface.

    Parameters
    ----------
    name
        Short name (``jobspec-yaml``).
    strategy
        Hypothesis strategy of cases.
    run
        Reads one case; returns the result, or raises.
    refusals
        The error types that count as a clear refusal.
    valid
        Checks an accepted result; returns why it is invalid, or ``None``.
    """

    name: str
    strategy: st.SearchStrategy[Any]
    run: Callable[[Any], Any]
    refusals: tuple[type[BaseException], ...]
    valid: Callable[[Any], str | None] = lambda _result: None


@contextlib.contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """Raise :class:`Hung` in the block after ``seconds`` (main thread; elsewhere: no alarm)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _alarm(_signum: int, _frame: Any) -> None:
        raise Hung(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def classify(surface: Surface, case: Any, bound_s: float = BOUND_S) -> Outcome:
    """Run ``case`` on ``surface`` under a time bound; never raises (but KeyboardInterrupt)."""
    started = time.monotonic()
    try:
        with time_bound(bound_s):
            result = surface.run(case)
    except Hung as exc:
        return Outcome("hung", str(exc))
    except surface.refusals as exc:
        if time.monotonic() - started > bound_s:
            return Outcome("hung", f"refused after {time.monotonic() - started:.1f} s")
        if not str(exc).strip():
            return Outcome("uncaught", f"{type(exc).__name__} without a message")
        return Outcome("refused", f"{type(exc).__name__}: {str(exc)[:200]}")
    except Exception as exc:  # noqa: BLE001 - the point: any other exception is a finding
        return Outcome("uncaught", f"{type(exc).__name__}: {str(exc)[:200]}")
    if time.monotonic() - started > bound_s:
        return Outcome("hung", f"answered after {time.monotonic() - started:.1f} s")
    why = surface.valid(result)
    if why is not None:
        return Outcome("uncaught", f"accepted an invalid result: {why}")
    return Outcome("accepted")


def suite_settings(cases: int | None = None) -> settings:
    """Hypothesis settings of the fuzz tests: ``cases`` examples (default: a few hundred).

    ``ELASTIC_SLURM_FUZZ_CASES`` sets the default. No example database (nothing is written
    into the checkout) and no shrinking: a failing case is printed as found, and a case that
    hangs would make shrinking slow.
    """
    return settings(
        max_examples=cases or int(os.environ.get("ELASTIC_SLURM_FUZZ_CASES", "200")),
        deadline=None,
        database=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
    )


def check(surface: Surface, case: Any) -> None:
    """Assert that ``case`` is accepted or refused (the property of every fuzz test)."""
    outcome = classify(surface, case)
    assert outcome.kind in ("accepted", "refused"), f"{outcome.kind}: {outcome.detail}"


# ---------------------------------------------------------------- shared pieces of strategies

#: Numbers at and beyond the edges: what bounds must catch.
NASTY_NUMBERS = (
    0,
    -1,
    1,
    -7,
    2**31,
    2**63,
    10**30,
    1e308,
    -1e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    0.5,
    -0.0,
    5e-324,
)

#: Scalars that YAML 1.1 reads as something else than they look, and other traps.
YAML_SCALARS = (
    "1:00:00",
    "60:00",
    "1-02:00:00",
    "010",
    "0x10",
    "0o17",
    "0b101",
    "1_000",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "~",
    "null",
    "true",
    "False",
    ".inf",
    "-.inf",
    ".nan",
    "1e3",
    "1.5",
    "1e400",
    "-1",
    "0",
    "4",
    "2-8",
    "8-2",
    "2024-01-01",
    "2001-12-14t21:59:43.10-05:00",
    "'quoted: yes'",
    '"tab\\there"',
    "!!binary aGVsbG8=",
    "!!python/name:os.system",
    "!!python/object/apply:os.system [id]",
    "!!int 0x1f",
    "!!float nan",
    "!!bool maybe",
    "!!set {a, b}",
    "!!timestamp 2001-12-14",
    "&anchor value",
    "*anchor",
    "<<",
    "[]",
    "{}",
    "[a, b, 3]",
    "{a: 1, b: [2]}",
    "9" * 400,
    "café",
    "\u0663",
    "x\\u0000y",
    "amdahl:0.9",
    "downey:nan:1",
    "0-99%4",
    "0-3%\u00b2",
    "head:99999",
    "head:7717",
    "/bin/true",
)

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12).map(
    lambda t: json.dumps(t)
)  # a quoted YAML (JSON) string: always well-formed


def _plain_scalar() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(YAML_SCALARS),
        st.integers(-(10**20), 10**20).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        _TEXT,
        st.text(alphabet=string.ascii_letters + string.digits + ":-_.%/ ", max_size=10),
    )


@st.composite
def _yaml_value(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.integers(0, 9))
    if kind <= 5 or depth > 2:
        return draw(_plain_scalar())
    if kind == 6:
        items = draw(st.lists(_plain_scalar(), max_size=4))
        return "[" + ", ".join(items) + "]"
    if kind == 7:
        # deep flow nesting: refused by depth, not recursion (PyYAML's scanner looks at most
        # 1024 characters ahead, so even 64 KiB of "[" costs under 0.1 s)
        n = draw(st.one_of(st.integers(1, 40), st.sampled_from((200, 3000))))
        return "[" * n + "x" + "]" * draw(st.integers(0, n))
    if kind == 8:
        keys = draw(st.lists(st.sampled_from(("a", "b", "on", "yes", "1", "<<")), max_size=3))
        inner = [f"{k}: {draw(_yaml_value(depth + 1))}" for k in keys]
        return "{" + ", ".join(inner) + "}"
    # an alias bomb: each level repeats the previous one ten times
    levels = draw(st.integers(1, 9))
    bomb = ["&l0 [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [f"&l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "[" + ", ".join(bomb) + "]"


def _mangle(draw: st.DrawFn, data: bytes) -> bytes:
    """Sometimes damage the bytes: a Latin-1 or NUL byte, a cut, a BOM, a huge tail."""
    how = draw(st.integers(0, 14))  # two cases in three are left whole
    if how == 0 and data:
        at = draw(st.integers(0, len(data)))
        return (
            data[:at] + draw(st.sampled_from((b"\xe9", b"\x00", b"\xff\xfe", b"\xc3"))) + data[at:]
        )
    if how == 1:
        return data[: draw(st.integers(0, len(data)))]
    if how == 2:
        return b"\xef\xbb\xbf" + data
    if how == 3:
        return data + b"# " + b"x" * draw(st.sampled_from((10, 70_000))) + b"\n"
    if how == 4:
        return draw(st.binary(max_size=200))
    return data


@st.composite
def yaml_documents(
    draw: st.DrawFn,
    keys: tuple[str, ...],
    nested: dict[str, tuple[str, ...]],
    good: dict[str, tuple[str, ...]],
    base: str = "",
) -> bytes:
    """YAML text over ``keys`` (and ``nested`` sections), with every trap of YAML_SCALARS.

    Most documents start with ``base`` (what makes one valid) and take plausible values from
    ``good`` (by key, ``section.key`` for nested ones), so that the reader gets past the
    first error and the later checks are reached too.
    """
    lines = [base] if base and draw(st.integers(0, 4)) else []

    def value(key: str) -> str:
        if key in good and draw(st.integers(0, 3)):
            return draw(st.sampled_from(good[key]))
        return draw(_yaml_value())

    unique = draw(st.integers(0, 3)) > 0  # a key given twice, one document in four
    chosen = st.lists(st.sampled_from(keys + ("bogus", "<<")), max_size=6, unique=unique)
    for key in draw(chosen):
        if key in nested and draw(st.integers(0, 3)):
            lines.append(f"{key}:")
            subs = draw(st.lists(st.sampled_from(nested[key] + ("bogus",)), max_size=5))
            lines += [f"  {sub}: {value(f'{key}.{sub}')}" for sub in subs]
        else:
            lines.append(f"{key}: {value(key)}")
    return _mangle(draw, ("\n".join(lines) + "\n").encode())


def _write(data: bytes, name: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="es-fuzz-"))
    path = folder / name
    path.write_bytes(data)
    return path


@contextlib.contextmanager
def _scratch(data: bytes, name: str) -> Iterator[Path]:
    path = _write(data, name)
    try:
        yield path
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)


# ---------------------------------------------------------------- job specs


def _valid_request(req: Any) -> str | None:
    from elastic_slurm.model.request import (
        MAX_GRACE_PERIOD_S,
        MAX_NODES,
        MAX_TASKS_PER_NODE,
        MAX_WALLTIME,
    )

    if not 1 <= req.nodes_min <= req.nodes_max <= MAX_NODES:
        return f"node range {req.nodes_min}-{req.nodes_max}"
    if not 1 <= req.ntasks_per_node <= MAX_TASKS_PER_NODE:
        return f"ntasks_per_node {req.ntasks_per_node}"
    if not req.walltime.total_seconds() > 0 or req.walltime > MAX_WALLTIME:
        return f"walltime {req.walltime}"
    grace = req.grace_period_s
    if grace is not None and not (math.isfinite(grace) and 0 < grace <= MAX_GRACE_PERIOD_S):
        return f"grace period {grace}"
    return None


JOBSPEC_KEYS = (
    "program",
    "kind",
    "nodes",
    "start_nodes",
    "ntasks_per_node",
    "time",
    "job_name",
    "partition",
    "account",
    "qos",
    "output",
    "workdir",
    "array",
    "speedup",
    "grace_period_s",
    "sized_by",
    "env",
)


def _spec_to_request(spec: Any) -> Any:
    spec.sizing(False)
    return spec.request(max_grace_period_s=3600.0)


def _run_jobspec_yaml(data: bytes) -> Any:
    from elastic_slurm.jobspec import load_spec

    with _scratch(data, "job.yaml") as path:
        return _spec_to_request(load_spec(path, {}))


def _run_jobspec_dict(overrides: dict[str, Any]) -> Any:
    from elastic_slurm.jobspec import load_spec

    return _spec_to_request(load_spec(None, overrides))


_JSONISH = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.sampled_from(NASTY_NUMBERS),
        st.integers(),
        st.floats(),
        st.text(max_size=20),
        st.sampled_from(YAML_SCALARS),
    ),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


def _jobspec_dicts() -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(JOBSPEC_KEYS + ("bogus",)), _JSONISH, max_size=8).map(
        lambda d: {"program": ["app"], **d}
    )


JOBSPEC_GOOD = {
    "kind": ("rigid", "moldable", "malleable", "evolving"),
    "nodes": ("1", "4", "010", "2-4", "1-8", "'2-8'"),
    "start_nodes": ("1", "2", "3"),
    "ntasks_per_node": ("1", "2", "64"),
    "time": ("1:00:00", "30", "010", "1-0", "0:30", "2-12:00:00"),
    "job_name": ("sweep", "no", "on"),
    "array": ("0-9", "0-99%4", "1,3,5-7"),
    "speedup": ("amdahl:0.9", "linear", "downey:8:0.5"),
    "grace_period_s": ("60", "30.5", "3600", "7200"),
    "sized_by": ("slurm", "controller"),
    "env.PATH": ("/usr/bin", "yes"),
    "env.A": ("1", "~"),
}


def _jobspec_yaml() -> st.SearchStrategy[bytes]:
    return yaml_documents(
        JOBSPEC_KEYS,
        {"env": ("PATH", "1X", "A", "on")},
        JOBSPEC_GOOD,
        "program: [app, --n, '8']",
    )


JOBSPEC_YAML = Surface(
    "jobspec-yaml",
    _jobspec_yaml(),
    _run_jobspec_yaml,
    (ConfigError, InvalidRequest),
    _valid_request,
)
JOBSPEC_DICT = Surface(
    "jobspec-dict",
    _jobspec_dicts(),
    _run_jobspec_dict,
    (ConfigError, InvalidRequest),
    _valid_request,
)


_INTISH = st.one_of(st.sampled_from(NASTY_NUMBERS), st.integers(-5, 70_000), st.integers())


def _request_kwargs() -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments of ElasticRequest as an API caller could pass them."""
    from elastic_slurm.model.request import JobKind
    from elastic_slurm.model.speedup import Amdahl

    return st.fixed_dictionaries(
        {"program": st.one_of(st.just(("app",)), st.lists(st.text(max_size=5), max_size=3))},
        optional={
            "kind": st.one_of(st.sampled_from(list(JobKind)), st.sampled_from(("rigid", 1))),
            "nodes_min": _INTISH,
            "nodes_max": _INTISH,
            "nodes_start": st.one_of(st.none(), _INTISH),
            "walltime": st.one_of(st.timedeltas(), st.sampled_from((60, "1:00:00"))),
            "ntasks_per_node": _INTISH,
            "job_name": st.one_of(st.text(max_size=10), st.none(), st.just(7)),
            "partition": st.one_of(st.none(), st.text(max_size=10)),
            "extra_env": st.one_of(
                st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=3).map(
                    tuple
                ),
                st.just((("A",),)),
            ),
            "array": st.one_of(st.none(), st.sampled_from(("0-9", "0-9999999", "x", "1,3,5-7"))),
            "array_max_running": st.one_of(st.none(), _INTISH),
            "speedup": st.one_of(st.none(), st.just(Amdahl(0.9)), st.just("amdahl:0.9")),
            "grace_period_s": st.one_of(st.none(), st.sampled_from(NASTY_NUMBERS), st.floats()),
        },
    )


def _run_request(kwargs: dict[str, Any]) -> Any:
    from elastic_slurm.model.request import ElasticRequest

    return ElasticRequest(**kwargs)


REQUEST = Surface("request", _request_kwargs(), _run_request, (InvalidRequest,), _valid_request)


# ---------------------------------------------------------------- site configs

SITE_KEYS = (
    "name",
    "cluster_name",
    "partition",
    "partitions",
    "account",
    "qos",
    "grow_path",
    "backend",
    "slurm_conf",
    "transport",
    "controller",
    "local_cluster",
    "python",
)
SITE_NESTED = {
    "controller": (
        "poll_interval_s",
        "resize_timeout_s",
        "grant_timeout_s",
        "min_resize_interval_s",
        "on_overdue",
        "address",
        "offer_cooldown_s",
        "operators",
        "sizes_moldable",
        "policy",
        "journal",
        "max_grace_period_s",
        "slurm_retry_s",
        "max_body_bytes",
        "metrics_address",
        "log_level",
        "tls_cert",
    ),
    "transport": ("kind", "command_timeout_s", "host", "port", "user", "remote_env"),
    "local_cluster": (
        "nodes",
        "cpus_per_node",
        "real_memory_mib",
        "node_prefix",
        "state_dir",
        "slurmd_port",
        "network",
        "scheduler",
        "start_timeout_s",
        "flavour",
    ),
}


def _valid_site(cfg: Any) -> str | None:
    for addr in (cfg.controller.address, cfg.controller.metrics_address):
        if addr is not None and not 1 <= int(addr.rsplit(":", 1)[1]) <= 65535:
            return f"address {addr}"
    for name, value in cfg.controller:
        if isinstance(value, float) and not math.isfinite(value):
            return f"controller.{name} = {value}"
    return None


def _run_site(data: bytes) -> Any:
    from elastic_slurm.config import load_site

    with _scratch(data, "site.yaml") as path:
        return load_site(str(path))


SITE_GOOD = {
    "cluster_name": ("elastic", "no"),
    "partition": ("debug", "on"),
    "grow_path": ("auto", "merge", "sibling"),
    "backend": ("cli", "auto"),
    "controller.poll_interval_s": ("0.5", "2", ".inf", "1e9"),
    "controller.address": ("head:7717", "head:99999", "head:0", "0.0.0.0:80"),
    "controller.metrics_address": ("head:9100", "head:65536"),
    "controller.max_grace_period_s": ("600", "3600.0", "1e7"),
    "controller.sizes_moldable": ("yes", "no", "true", "maybe"),
    "controller.operators": ("[root, alice]", "root"),
    "controller.on_overdue": ("keep", "force", "requeue"),
    "controller.journal": ("/var/lib/es/journal.sqlite",),
    "controller.max_body_bytes": ("65536", "0", "1e12"),
    "transport.kind": ("local", "ssh"),
    "transport.command_timeout_s": ("30", "1e300", ".nan"),
    "local_cluster.nodes": ("4", "010", "64", "65"),
    "local_cluster.slurmd_port": ("6818", "99999"),
    "local_cluster.state_dir": ("/var/lib/x", "relative"),
}

SITE_CONFIG = Surface(
    "site-config",
    yaml_documents(SITE_KEYS, SITE_NESTED, SITE_GOOD, "cluster_name: fuzz"),
    _run_site,
    (ConfigError,),
    _valid_site,
)


# ---------------------------------------------------------------- SWF traces

SWF_TOKENS = (
    "-1",
    "0",
    "1",
    "-5",
    "-0.5",
    "1.5",
    "3600",
    "inf",
    "-inf",
    "nan",
    "NaN",
    "Infinity",
    "1e400",
    "1e12",
    "1000000000001",
    "9" * 30,
    "9" * 5000,
    "1_000",
    "\u0661\u0662",
    "0x10",
    "+4",
    "--4",
    ".5",
    "5.",
    "x",
    "",
)


@st.composite
def swf_cases(draw: st.DrawFn) -> tuple[bytes, str, bool]:
    """(trace bytes, on_error mode, read from a file) with nasty tokens and field counts."""
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 4)) == 0:
            key = draw(
                st.sampled_from(("MaxProcs", "MaxNodes", "TimeZone", "UnixStartTime", "Note"))
            )
            lines.append(f"; {key}: {draw(st.sampled_from(SWF_TOKENS))}")
            continue
        count = draw(st.sampled_from((18, 18, 18, 17, 19, 0, 1, 600)))
        tokens = [
            draw(st.one_of(st.sampled_from(SWF_TOKENS), st.integers(-3, 10**13).map(str)))
            for _ in range(min(count, 40))
        ] + ["1"] * max(0, count - 40)
        lines.append(" ".join(t for t in tokens if t) if count != 600 else " ".join(tokens))
    data = ("\n".join(lines) + "\n").encode()
    as_file = draw(st.booleans())
    if as_file:
        data = _mangle(draw, data)
    return data, draw(st.sampled_from(("raise", "skip"))), as_file


def _valid_trace(trace: Any) -> str | None:
    from elastic_slurm.simulator.swf import MAX_VALUE

    for job in trace.jobs:
        for value in job:
            if not (value == -1 or 0 <= value <= MAX_VALUE):
                return f"job {job.job_number} has {value}"
    return None


def _run_swf(case: tuple[bytes, str, bool]) -> Any:
    from elastic_slurm.simulator.swf import read_swf

    data, mode, as_file = case
    if as_file:
        with _scratch(data, "trace.swf") as path:
            return read_swf(path, on_error=mode)  # type: ignore[arg-type]
    return read_swf(io.StringIO(data.decode()), on_error=mode)  # type: ignore[arg-type]


def _swf_surface() -> Surface:
    from elastic_slurm.simulator.swf import TraceError

    return Surface("swf", swf_cases(), _run_swf, (TraceError,), _valid_trace)


SWF = _swf_surface()


# ---------------------------------------------------------------- job-directory files


def _jobdir_class() -> Any:
    from elastic_slurm.protocol.jobdir import JobDir

    return JobDir


JOBDIR_FILES = (
    "orders/000001.json",
    "orders/999999999999.json",
    "orders/00x001.json",
    "offers/000001.json",
    "offers/000001.answer.json",
    "acks/000001.done.json",
    "acks/000001.failed.json",
    "acks/000001.vacated.json",
    "secret",
    "registered.json",
    "requests/000001.json",
    "requests/000001.answer.json",
    "restart.json",
    "events.jsonl",
)

JOBDIR_READERS = (
    "read_order",
    "last_order_seq",
    "open_order",
    "read_offer",
    "last_offer_number",
    "open_offer",
    "read_answer",
    "read_secret",
    "registration",
    "read_ack_done",
    "read_ack_failed",
    "read_ack_vacated",
    "final_ack",
    "request_answer",
    "requests",
    "events",
    "take_restart",
)

_ORDERISH = st.fixed_dictionaries(
    {},
    optional={
        "seq": _JSONISH,
        "number": _JSONISH,
        "kind": st.sampled_from(("expand", "shrink", "grow", 1)),
        "nodes": st.one_of(_JSONISH, st.lists(st.text(max_size=6), max_size=3)),
        "hosts": _JSONISH,
        "status": st.sampled_from(("done", "failed", "vacated", "?")),
        "action": st.sampled_from(("expand", "shrink", "grow", 1, None)),
        "issued_at": _JSONISH,
        "phases_s": _JSONISH,
        "strategy": _JSONISH,
        "reason": _JSONISH,
        "accept": _JSONISH,
        "nodes_wanted": _JSONISH,
        "delta": _JSONISH,
        "ranks": _JSONISH,
        "granted": _JSONISH,
        "withdrawn": _JSONISH,
        "deadline": _JSONISH,
        "at": _JSONISH,
        "by_job": st.one_of(st.booleans(), _JSONISH),
        "count": _JSONISH,
        "grow_path": st.one_of(st.sampled_from(("merge", "sibling", "")), _JSONISH),
        "grant_timeout_s": _JSONISH,
    },
)


@st.composite
def _file_content(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(("bytes", "json", "orderish", "deep", "fifo", "symlink", "dir")))
    if kind == "bytes":
        return kind, draw(st.binary(max_size=300))
    if kind == "json":
        return kind, json.dumps(draw(_JSONISH), allow_nan=True).encode()
    if kind == "orderish":
        return kind, json.dumps(draw(_ORDERISH), allow_nan=True).encode()
    if kind == "deep":
        n = draw(st.sampled_from((10, 100, 1000, 100_000)))
        return kind, b"[" * n + b"]" * n
    return kind, b""


@st.composite
def jobdir_cases(draw: st.DrawFn) -> tuple[list[tuple[str, str, bytes]], str]:
    """(files to write into a job directory, the reader to call)."""
    files = [
        (name, *draw(_file_content()))
        for name in draw(
            st.lists(st.sampled_from(JOBDIR_FILES), min_size=1, max_size=4, unique=True)
        )
    ]
    return files, draw(st.sampled_from(JOBDIR_READERS))


def _call_reader(jobdir: Any, reader: str) -> Any:
    from elastic_slurm.model.resize_order import AckStatus

    if reader.startswith("read_ack_"):
        return jobdir.read_ack(1, AckStatus(reader.removeprefix("read_ack_")))
    method = getattr(jobdir, reader)
    if reader in ("read_order", "read_offer", "read_answer", "final_ack", "request_answer"):
        return method(1)
    return method()


def _run_jobdir(case: tuple[list[tuple[str, str, bytes]], str]) -> Any:
    files, reader = case
    base = Path(tempfile.mkdtemp(prefix="es-fuzz-jobdir-"))
    try:
        jobdir = _jobdir_class().for_job(base, 12)
        outside = base / "outside.json"
        outside.write_text('{"seq": 1, "kind": "shrink", "nodes": ["n1"]}')
        for name, kind, data in files:
            path = jobdir.path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "fifo":
                os.mkfifo(path)
            elif kind == "symlink":
                path.symlink_to(outside)
            elif kind == "dir":
                path.mkdir()
            else:
                path.write_bytes(data)
        return _call_reader(jobdir, reader)
    finally:
        shutil.rmtree(base, ignore_errors=True)


JOBDIR = Surface("jobdir", jobdir_cases(), _run_jobdir, (JobInputError,))


# ---------------------------------------------------------------- protocol messages

SECRET = "s3cret-of-job-12"


class _Protocol:
    """A Flask test client over a Gateway whose only job (12, alice) lives in a temp dir."""

    def __init__(self) -> None:
        from elastic_slurm.protocol.gateway import Gateway, JobRecord
        from elastic_slurm.protocol.identity import Credential, IdentityError
        from elastic_slurm.protocol.server import create_app

        self.base = Path(tempfile.mkdtemp(prefix="es-fuzz-proto-"))
        owner = pwd.getpwuid(os.geteuid()).pw_name  # the job's files are this process's
        jobs = {12: JobRecord(12, owner, str(self.base), True)}

        def verify(credential: str, _socket: str | None) -> Credential:
            # "cred-USER[:PAYLOAD]" stands for a credential MUNGE decoded
            if credential.startswith("cred-"):
                user, _, payload = credential.removeprefix("cred-").partition(":")
                return Credential(owner if user == "alice" else user, payload)
            raise IdentityError(f"not a credential: {credential[:20]!r}")

        _jobdir_class().for_job(self.base, 12).write_secret(SECRET)
        self.app = create_app(Gateway(jobs.get, operators=("root",), verify=verify))
        self.app.logger.disabled = True  # a 500 is counted, not printed
        self.client = self.app.test_client()

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


_PROTOCOL: list[_Protocol] = []


def _protocol() -> _Protocol:
    if not _PROTOCOL:
        _PROTOCOL.append(_Protocol())
    return _PROTOCOL[0]


ENDPOINTS = (
    ("GET", "/v1/health"),
    ("POST", "/v1/jobs/{job}/register"),
    ("GET", "/v1/jobs/{job}/next?seq={n}"),
    ("GET", "/v1/jobs/{job}/next"),
    ("POST", "/v1/jobs/{job}/offers/{n}/answer"),
    ("POST", "/v1/jobs/{job}/acks"),
    ("POST", "/v1/jobs/{job}/requests"),
    ("GET", "/v1/jobs/{job}/requests/{n}"),
    ("GET", "/v1/jobs/{job}/../../etc/passwd"),
)


@st.composite
def protocol_cases(draw: st.DrawFn) -> dict[str, Any]:
    """One HTTP request: method, path, headers and body, mostly well aimed at job 12.

    Most requests carry the job's secret and its user's credential, so that the body is
    read and judged; the rest probe the refusals in front of it.
    """
    method, path = draw(st.sampled_from(ENDPOINTS))
    if not draw(st.integers(0, 5)):
        method = draw(st.sampled_from(("GET", "POST", "PUT", "DELETE")))
    job = draw(st.sampled_from(("12",) * 6 + ("13", "0", "-1", "99999999999999999999", "x")))
    n = draw(st.sampled_from(("1", "1", "2", "0", "-3", "999999999999", "nan", "1e9", "")))
    headers = {}
    if draw(st.integers(0, 5)):
        secret = draw(st.sampled_from((SECRET,) * 4 + ("wrong", "", "x" * 5000, "\u00e9")))
        headers["Authorization"] = draw(st.sampled_from(("Bearer ",) * 4 + ("Basic ", ""))) + secret
    if draw(st.integers(0, 4)):
        headers["X-Munge-Credential"] = draw(
            st.sampled_from(("cred-alice",) * 3 + ("cred-root", "cred-mallory", "garbage", ""))
        )
    if draw(st.integers(0, 4)):
        headers["Content-Type"] = draw(
            st.sampled_from(
                ("application/json",) * 3 + ("text/plain", "application/json; charset=latin-1")
            )
        )
    body_kind = draw(st.integers(0, 9))
    if body_kind == 0:
        body = draw(st.binary(max_size=200))
    elif body_kind == 1:
        body = json.dumps(draw(_JSONISH), allow_nan=True).encode()
    elif body_kind == 2:
        depth = draw(st.sampled_from((10, 100, 1000, 50_000)))
        body = b'{"a":' * depth + b"1" + b"}" * depth
    elif body_kind == 3:
        body = b'{"pad": "' + b"x" * draw(st.sampled_from((10, 100_000, 2_000_000))) + b'"}'
    else:
        body = json.dumps(draw(_ORDERISH), allow_nan=True).encode()
    bind = draw(st.integers(0, 5)) > 0  # a few credentials made for another message
    path = path.format(job=job, n=n)
    return {"method": method, "path": path, "headers": headers, "body": body, "bind": bind}


class ServerError(Exception):
    """The protocol answered 5xx: an unexpected error inside the server."""


def _bound(case: dict[str, Any]) -> dict[str, str]:
    """The case's headers, its credential bound to its own request (as the client binds it)."""
    from elastic_slurm.protocol.identity import request_digest

    headers = dict(case["headers"])
    cred = headers.get("X-Munge-Credential", "")
    match = re.fullmatch(r"/v1/jobs/(\d{1,12})/.*", case["path"].partition("?")[0])
    if cred.startswith("cred-") and match and case.get("bind", True):
        digest = request_digest(
            case["method"], case["path"].partition("?")[0], int(match[1]), case["body"]
        )
        headers["X-Munge-Credential"] = f"{cred}:{digest}"
    return headers


def _run_protocol(case: dict[str, Any]) -> int:
    proto = _protocol()
    response = proto.client.open(
        case["path"], method=case["method"], headers=_bound(case), data=case["body"]
    )
    if response.status_code >= 500:
        said = response.get_data()[:120]
        raise ServerError(f"{case['method']} {case['path']}: {response.status_code} {said!r}")
    return response.status_code


PROTOCOL = Surface("protocol", protocol_cases(), _run_protocol, ())


# ---------------------------------------------------------------- Slurm outputs

SHIFTED_VALUES = (
    None,
    True,
    False,
    -1,
    0,
    2**64,
    1e308,
    "",
    "x",
    "n[1-3]",
    "n[",
    "n[3-1]",
    "(null)",
    [],
    ["RUNNING", "COMPLETING"],
    {},
    {"set": True, "number": 7},
    {"set": True, "infinite": True, "number": 0},
    {"set": False},
    {"number": "NaN"},
    "NaN",
    "Infinity",
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replace(value[path[0]], path[1:], new)
    return copy


def _golden_json() -> list[Any]:
    return [json.loads(p.read_text()) for p in sorted(GOLDEN.glob("squeue_*.json"))]


TEXT_JUNK = ("|", "\n", "x", "", "-1", "999999999999999999999", "\u0663", "|||", "(null)")

_TEXT_OUTPUTS = {
    "sinfo_nodes.txt": "parse_sinfo_nodes",
    "scontrol_show_job.txt": "parse_scontrol_oneline",
    "scontrol_version.txt": "parse_version",
    "squeue_steps.txt": "parse_squeue_steps",
    "sacct_allocations.txt": "parse_sacct_allocations",
    "salloc_granted.stderr": "parse_salloc_job_id",
}


@st.composite
def slurm_output_cases(draw: st.DrawFn) -> tuple[str, str]:
    """(parser name, text): recorded 22.05 outputs, type-shifted (JSON) or mangled (text)."""
    if draw(st.booleans()):
        doc = draw(st.sampled_from(_golden_json()))
        for _ in range(draw(st.integers(1, 4))):
            path = draw(st.sampled_from(_paths(doc)))
            parent = _get(doc, path[:-1]) if path else None
            if isinstance(parent, dict) and draw(st.integers(0, 5)) == 0:  # drop the key
                doc = _replace(doc, path[:-1], {k: v for k, v in parent.items() if k != path[-1]})
            else:
                doc = _replace(doc, path, draw(st.sampled_from(SHIFTED_VALUES)))
        return "parse_squeue_json", json.dumps(doc, allow_nan=True)
    name = draw(st.sampled_from(sorted(_TEXT_OUTPUTS)))
    text = (GOLDEN / name).read_text()
    if text and draw(st.booleans()):
        at = draw(st.integers(0, len(text)))
        junk = draw(st.sampled_from(TEXT_JUNK))
        text = text[:at] + junk + text[at + draw(st.integers(0, 5)) :]
    return _TEXT_OUTPUTS[name], text


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def _run_slurm_output(case: tuple[str, str]) -> Any:
    from elastic_slurm.adapter import parse

    name, text = case
    if name == "parse_sacct_allocations":
        return parse.parse_sacct_allocations(text, 4)
    return getattr(parse, name)(text)


SLURM_OUTPUTS = Surface(
    "slurm-outputs", slurm_output_cases(), _run_slurm_output, (SlurmCommandError,)
)


SURFACES: dict[str, Surface] = {
    s.name: s
    for s in (
        JOBSPEC_YAML,
        JOBSPEC_DICT,
        REQUEST,
        SITE_CONFIG,
        SWF,
        JOBDIR,
        PROTOCOL,
        SLURM_OUTPUTS,
    )
}
"""Every surface by name, in the order the fuzz command runs them."""
