"""Read and write the Standard Workload Format (SWF) of the Parallel Workloads Archive.

An SWF file (Feitelson et al., "Experience with using the Parallel Workloads Archive", and the
archive's format page) has header comments starting with ``;`` and one line per job of 18
whitespace-separated numbers; ``-1`` means missing. Header comments of the form
``; Key: value`` are directives (``MaxProcs``, ``MaxNodes``, ``UnixStartTime`` ...); other
comment lines (continuations, notes) are kept as they are. Files whose name ends in ``.gz``
are read and written compressed.

How bad input is handled (``on_error``):

* ``"raise"`` (the default, strict): the first malformed line raises :class:`TraceError`
  naming the file, the line number and the field;
* ``"skip"``: malformed lines are left out, each recorded in :attr:`SWFTrace.skipped` with its
  line number and reason, and one warning is logged with their count.

A line is malformed when it does not have exactly 18 fields, when a field is not a decimal
number (``nan``, ``inf``, ``1_000`` are not), when a field is neither ``-1`` (missing) nor
between 0 and :data:`MAX_VALUE` (negative or huge), when it is longer than :data:`MAX_LINE`
characters, or when a numeric directive (``MaxProcs``, ``MaxNodes``, ...) has a value that is
not such an integer.
Values are kept as read (``int``, or ``float`` for a field written with a decimal point), so
that writing a trace back gives the same numbers.

Header lines are never malformed lines. As the format defines them, numeric directives may
say ``N/A`` (also ``NA``, any case): the directive is kept, and its number is unknown
(:meth:`SWFHeader.get_int` gives ``None``), as for ``-1``. Any other value that is not such
an integer raises :class:`TraceError` with ``on_error="raise"``; with ``"skip"`` the directive
is ignored (kept as a comment line only, so the machine size is not taken from it) and one
warning names it, apart from the count of malformed job lines.

Two options of :func:`read_swf` select records: ``max_records`` keeps the first ``K`` records
(job lines, malformed ones included, counted before any filter), and ``drop_zero_runtime``
leaves out jobs whose run time (field 4) is 0, counted in
:attr:`SWFTrace.dropped_zero_runtime` and logged.

>>> import io
>>> text = "; MaxProcs: 8" + chr(10) + "1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 1 -1 -1 -1"
>>> trace = read_swf(io.StringIO(text))
>>> trace.header.max_procs, trace.jobs[0].run_time, trace.jobs[0].requested_processors
(8, 100, 4)
"""

from __future__ import annotations

import gzip
import io
import logging
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal, NamedTuple

from elastic_slurm.errors import ElasticSlurmError

log = logging.getLogger(__name__)

FIELDS: tuple[str, ...] = (
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
)
"""The 18 SWF fields, in file order (field ``i`` of the format is ``FIELDS[i - 1]``)."""

NUMERIC_DIRECTIVES = frozenset(
    {
        "maxjobs",
        "maxrecords",
        "unixstarttime",
        "timezone",
        "maxnodes",
        "maxprocs",
        "maxruntime",
        "maxmemory",
        "maxqueues",
        "maxpartitions",
    }
)
"""Directives whose value must be an integer (compared case-insensitively)."""

_DIRECTIVE = re.compile(r";\s*([A-Za-z][A-Za-z0-9_]*):(?:\s+(.*?)|)\s*$")

Number = int | float


class TraceError(ElasticSlurmError):
    """A workload trace is malformed; the message names the file, the line and the field."""


class SWFJob(NamedTuple):
    """One job line of an SWF file: the 18 fields, in order, ``-1`` where missing.

    Times are in seconds (``submit_time`` from the start of the log), memory in kilobytes,
    as the format defines them. ``status``: 1 completed, 0 failed, 5 cancelled (and a few
    codes for checkpointed jobs).
    """

    job_number: Number
    submit_time: Number
    wait_time: Number
    run_time: Number
    allocated_processors: Number
    average_cpu_time: Number
    used_memory: Number
    requested_processors: Number
    requested_time: Number
    requested_memory: Number
    status: Number
    user_id: Number
    group_id: Number
    executable: Number
    queue: Number
    partition: Number
    preceding_job: Number
    think_time: Number

    @property
    def processors(self) -> Number:
        """Processors of the job: requested (field 8), else allocated (field 5); -1 if neither.

        AccaSim and most simulators make the same choice (``PEERS.md``).
        """
        if self.requested_processors > 0:
            return self.requested_processors
        if self.allocated_processors > 0:
            return self.allocated_processors
        return -1


@dataclass(frozen=True)
class SWFHeader:
    """The header of an SWF file.

    Parameters
    ----------
    lines
        Every comment line of the header as read (with its ``;``), in order; the writer emits
        them unchanged.
    directives
        ``(key, value)`` for each ``; Key: value`` line, in order (keys may repeat: ``Note``,
        ``Queue``).
    """

    lines: tuple[str, ...] = ()
    directives: tuple[tuple[str, str], ...] = ()

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of the first directive named ``key`` (case-insensitive)."""
        low = key.lower()
        for k, v in self.directives:
            if k.lower() == low:
                return v
        return default

    def get_int(self, key: str) -> int | None:
        """The integer value of directive ``key``; ``None`` when absent, ``-1`` or ``N/A``."""
        value = self.get(key)
        if value is None:
            return None
        first = value.split()[0] if value.split() else ""
        if not _INTEGER.fullmatch(first):
            return None
        number = int(first)
        return None if number < 0 else number

    @property
    def max_procs(self) -> int | None:
        """``MaxProcs``: processors in the machine."""
        return self.get_int("MaxProcs")

    @property
    def max_nodes(self) -> int | None:
        """``MaxNodes``: nodes in the machine."""
        return self.get_int("MaxNodes")

    @property
    def unix_start_time(self) -> int | None:
        """``UnixStartTime``: the epoch second that ``submit_time`` 0 stands for."""
        return self.get_int("UnixStartTime")

    @classmethod
    def from_directives(cls, directives: Iterable[tuple[str, object]]) -> SWFHeader:
        """A header made of ``; Key: value`` lines only."""
        pairs = tuple((str(k), str(v)) for k, v in directives)
        return cls(tuple(f"; {k}: {v}" for k, v in pairs), pairs)


@dataclass(frozen=True)
class SWFTrace:
    """A parsed SWF file.

    Parameters
    ----------
    header
        The header comments and directives.
    jobs
        The job lines, in file order.
    source
        Where it was read from (for messages).
    skipped
        With ``on_error="skip"``: ``(line_number, reason)`` of each job line left out.
    dropped_zero_runtime
        Jobs left out by ``drop_zero_runtime`` (run time 0).
    ignored_directives
        With ``on_error="skip"``: ``(line_number, reason)`` of each numeric directive ignored
        because its value is not an integer (header lines are never counted in ``skipped``).
    """

    header: SWFHeader
    jobs: tuple[SWFJob, ...]
    source: str = "<memory>"
    skipped: tuple[tuple[int, str], ...] = field(default=())
    dropped_zero_runtime: int = 0
    ignored_directives: tuple[tuple[int, str], ...] = field(default=())


MAX_VALUE = 10**12
"""Largest value of a field or numeric directive (seconds: 30,000 years; kilobytes: 1 PB)."""

MAX_LINE = 1000
"""Longest job line (characters); real ones are under 150."""

_INTEGER = re.compile(r"[-+]?[0-9]{1,13}")
_NOT_APPLICABLE = frozenset({"n/a", "na"})

_TOKEN = re.compile(r"[-+]?(?:[0-9]{1,30}(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")


def _number(token: str) -> Number:
    """An ``int`` for an integer token, else a ``float``; ``ValueError`` for anything else.

    Decimal ASCII only (no ``1_000``, no other scripts' digits, no ``nan``/``inf``), and
    ``-1`` (missing) or ``0`` to :data:`MAX_VALUE`.
    """
    if not _TOKEN.fullmatch(token):
        raise ValueError(f"{token[:40]!r}, not a number")
    value: Number = int(token) if token.lstrip("+-").isdigit() else float(token)
    if not (value == -1 or 0 <= value <= MAX_VALUE):
        raise ValueError(f"{token!r}, not -1 (missing) or 0 to {MAX_VALUE}")
    return value


def _int_or_float(token: str) -> Number:
    return int(token) if token.lstrip("+-").isdigit() else float(token)


def _open_text(path: Path, mode: Literal["rt", "wt"]) -> IO[str]:
    """``path`` as text (``.gz``: compressed).

    Read: a leading UTF-8 byte-order mark is dropped, and bytes that are not UTF-8 (a Latin-1
    comment in an old header) become U+FFFD rather than making the trace unreadable (the
    fields are ASCII numbers: a line damaged so is malformed, and said to be). Written: UTF-8.
    """
    if mode == "rt":
        encoding, errors = "utf-8-sig", "replace"
    else:
        encoding, errors = "utf-8", "strict"
    if path.suffix == ".gz":
        return gzip.open(path, mode, encoding=encoding, errors=errors)  # type: ignore[return-value]
    return open(path, mode[0], encoding=encoding, errors=errors)


def _parse_line(line: str) -> SWFJob:
    """Parse one job line; raise ``ValueError`` naming the field that is wrong."""
    if len(line) > MAX_LINE:
        raise ValueError(f"{len(line)} characters, more than {MAX_LINE}")
    tokens = line.split()
    if len(tokens) != 18:
        raise ValueError(f"{len(tokens)} fields, expected 18")
    if line.isascii() and "_" not in line:  # int() would take 1_000 and other scripts' digits
        try:
            values: list[Number] = list(map(int, tokens))  # the common case, at C speed
            if min(values) >= -1 and max(values) <= MAX_VALUE:  # for integers: -1 or 0 to MAX
                return SWFJob._make(values)
        except ValueError:
            try:  # a decimal point somewhere; nan and inf fail the bounds below
                values = [int(t) if t.isdigit() or t == "-1" else _int_or_float(t) for t in tokens]
            except ValueError:
                values = []
            if values and all(v == -1 or 0 <= v <= MAX_VALUE for v in values):
                return SWFJob._make(values)
    numbers = []
    for i, token in enumerate(tokens):
        try:
            numbers.append(_number(token))
        except ValueError as exc:
            raise ValueError(f"field {i + 1} ({FIELDS[i]}) is {exc}") from None
    return SWFJob._make(numbers)


def iter_swf_lines(
    lines: Iterable[str], source: str = "<memory>", on_error: Literal["raise", "skip"] = "raise"
) -> Iterator[tuple[int, str | SWFJob | tuple[str, str] | ValueError]]:
    """Classify each line: ``(line_number, item)``, 1-based.

    ``item`` is a comment line (``str``), a directive ``(key, value)`` (it is also a comment
    line: both are yielded, the directive first), a job (:class:`SWFJob`), or, with
    ``on_error="skip"``, the ``ValueError`` of a malformed job line, or a
    :class:`BadDirective` (then the comment line follows too). Blank lines yield nothing.

    Raises
    ------
    TraceError
        With ``on_error="raise"``, at the first malformed line.
    """
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(";"):
            m = _DIRECTIVE.match(line)
            if m is not None:
                key, value = m.group(1), m.group(2) or ""
                if key.lower() in NUMERIC_DIRECTIVES:
                    first = value.split()[0] if value.split() else ""
                    lowest = -MAX_VALUE if key.lower() == "timezone" else -1  # UTC offset
                    if first.lower() not in _NOT_APPLICABLE and (
                        not _INTEGER.fullmatch(first) or not lowest <= int(first) <= MAX_VALUE
                    ):
                        why = (
                            f"directive {key} is {value[:40]!r}, not an integer from {lowest} "
                            f"to {MAX_VALUE} or N/A"
                        )
                        if on_error == "raise":
                            raise TraceError(f"{source}:{number}: {why}") from None
                        yield number, BadDirective(why)
                        yield number, raw.rstrip("\r\n")
                        continue
                yield number, (key, value)
            yield number, raw.rstrip("\r\n")
            continue
        try:
            yield number, _parse_line(line)
        except ValueError as exc:
            if on_error == "raise":
                raise TraceError(
                    f"{source}:{number}: malformed job line: {exc}: {line[:120]!r}"
                ) from None
            yield number, exc


class BadDirective(str):
    """Why a numeric directive was ignored (``on_error="skip"``): a header line, not a job."""


def read_swf(
    source: str | Path | IO[str],
    *,
    on_error: Literal["raise", "skip"] = "raise",
    max_records: int | None = None,
    drop_zero_runtime: bool = False,
    max_jobs: int | None = None,
) -> SWFTrace:
    """Read an SWF trace from a path (``.swf`` or ``.swf.gz``) or an open text stream.

    Parameters
    ----------
    source
        A file path, or a text stream (then ``.gz`` is not detected).
    on_error
        ``"raise"`` (strict) or ``"skip"``: see the module docstring.
    max_records
        Read only the first ``max_records`` records of the file (job lines, malformed ones
        included; header lines do not count), counted before ``drop_zero_runtime`` and any
        filter of :func:`~elastic_slurm.simulator.workload.from_swf`; the rest of the file is
        not read. ``None`` for all.
    drop_zero_runtime
        Leave out jobs whose run time (field 4) is 0; how many is in
        :attr:`SWFTrace.dropped_zero_runtime` and logged.
    max_jobs
        The former name of ``max_records`` (give one or the other).

    Returns
    -------
    SWFTrace
        Header comments seen after the first job line are kept with the header.

    Raises
    ------
    TraceError
        For a malformed line (``on_error="raise"``), naming the file, the 1-based line number
        and the field; for a file that cannot be read or decompressed.
    ValueError
        For an unknown ``on_error``, a negative ``max_records`` or both ``max_records`` and
        ``max_jobs``.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if max_jobs is not None:
        if max_records is not None:
            raise ValueError("give max_records or max_jobs (its former name), not both")
        max_records = max_jobs
    if max_records is not None and max_records < 0:
        raise ValueError(f"max_records must be at least 0, got {max_records}")
    options = (on_error, max_records, drop_zero_runtime)
    if isinstance(source, (str, Path)):
        path = Path(source)
        name = str(path)
        if path.exists() and not path.is_file():  # a FIFO would block the reader
            raise TraceError(f"{name}: cannot read the trace: not a regular file")
        try:
            with _open_text(path, "rt") as stream:
                return _read(stream, name, *options)
        except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
            raise TraceError(f"{name}: cannot read the trace: {exc}") from exc
    name = getattr(source, "name", "<stream>")
    return _read(source, str(name), *options)


def _read(
    stream: IO[str],
    name: str,
    on_error: Literal["raise", "skip"],
    max_records: int | None,
    drop_zero_runtime: bool,
) -> SWFTrace:
    comments: list[str] = []
    directives: list[tuple[str, str]] = []
    jobs: list[SWFJob] = []
    skipped: list[tuple[int, str]] = []
    ignored: list[tuple[int, str]] = []
    records = 0
    zero = 0
    if max_records == 0:
        stream = iter(())  # type: ignore[assignment]
    for number, item in iter_swf_lines(stream, name, on_error):
        if isinstance(item, SWFJob):
            if drop_zero_runtime and item.run_time == 0:
                zero += 1
            else:
                jobs.append(item)
        elif isinstance(item, BadDirective):
            ignored.append((number, str(item)))
            continue
        elif isinstance(item, str):
            comments.append(item)
            continue
        elif isinstance(item, tuple):
            directives.append(item)
            continue
        else:
            skipped.append((number, str(item)))
        records += 1
        if max_records is not None and records >= max_records:
            break
    if ignored:
        first = ", ".join(f"line {n}: {why}" for n, why in ignored[:3])
        log.warning("%s: ignored %d header directive(s) (%s)", name, len(ignored), first)
    if skipped:
        first = ", ".join(f"line {n}: {why}" for n, why in skipped[:3])
        log.warning("%s: skipped %d malformed line(s) (%s ...)", name, len(skipped), first)
    if zero:
        log.warning("%s: dropped %d job(s) whose run time is 0", name, zero)
    return SWFTrace(
        SWFHeader(tuple(comments), tuple(directives)),
        tuple(jobs),
        name,
        tuple(skipped),
        zero,
        tuple(ignored),
    )


def format_job(job: SWFJob) -> str:
    """One SWF job line (fields separated by single spaces).

    >>> format_job(SWFJob(*([1, 0, 5, 100, 4] + [-1] * 13)))
    '1 0 5 100 4 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1'
    """
    return " ".join(repr(v) if isinstance(v, float) else str(v) for v in job)


def write_swf(
    target: str | Path | IO[str], jobs: Iterable[SWFJob], header: SWFHeader | None = None
) -> None:
    """Write an SWF trace: the header lines, then one line per job.

    Parameters
    ----------
    target
        A path (compressed when it ends in ``.gz``) or a text stream.
    jobs
        The jobs, written in the order given.
    header
        Written first, line for line; ``None`` for no header.

    Raises
    ------
    ValueError
        When a header line does not start with ``;`` (it would be read back as a job).
    """
    header = header or SWFHeader()
    for line in header.lines:
        if not line.lstrip().startswith(";"):
            raise ValueError(f"header line {line!r} does not start with ';'")
    if isinstance(target, (str, Path)):
        with _open_text(Path(target), "wt") as stream:
            _write(stream, jobs, header)
    else:
        _write(target, jobs, header)


def _write(stream: IO[str], jobs: Iterable[SWFJob], header: SWFHeader) -> None:
    out = io.StringIO()
    for line in header.lines:
        out.write(line)
        out.write("\n")
    for job in jobs:
        out.write(format_job(job))
        out.write("\n")
    stream.write(out.getvalue())


__all__ = [
    "FIELDS",
    "BadDirective",
    "MAX_LINE",
    "MAX_VALUE",
    "SWFHeader",
    "SWFJob",
    "SWFTrace",
    "TraceError",
    "format_job",
    "iter_swf_lines",
    "read_swf",
    "write_swf",
]
