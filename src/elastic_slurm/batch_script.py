"""sbatch's language: its options, ``#SBATCH`` directives, and what a submitted file is.

``elastic-slurm submit`` reads its command line as ``sbatch`` does: options, then one file
(a batch script, a program, or a YAML job file), then that file's arguments. The options
elastic-slurm interprets (the node range, the time limit, the name...) are read; every other
sbatch option is passed to sbatch unchanged, as one argument each. To tell where an option's
value is, the grammar of sbatch 22.05's options (from ``sbatch --help`` and its
``getopt_long`` table) is kept here: which take a value, which take none, which take one only
as ``--opt=value``. Unknown long options are taken to need a value (sbatch then refuses what
it does not know, with its own message).

A batch script is read as sbatch reads it (``man sbatch``): ``#SBATCH`` lines before the
first command, options on the command line overriding the script's.

:func:`read_submission` reads ``elastic-slurm submit``'s words (and the script or job file
they name) into the values of a job spec; the Python API submits scripts through it too.
Nothing here runs a command.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, TextIO

from elastic_slurm.errors import ConfigError, InvalidRequest

#: Long sbatch options that take no value.
NO_VALUE = frozenset(
    {
        "--contiguous",
        "--help",
        "--hold",
        "--ignore-pbs",
        "--no-requeue",
        "--overcommit",
        "--oversubscribe",
        "--parsable",
        "--quiet",
        "--reboot",
        "--requeue",
        "--spread-job",
        "--test-only",
        "--usage",
        "--use-min-nodes",
        "--verbose",
        "--version",
        "--wait",
    }
)
#: Long sbatch options whose value is optional: given only as ``--opt=value``.
OPTIONAL_VALUE = frozenset(
    {"--exclusive", "--get-user-env", "--nice", "--no-kill", "--propagate", "--kill-on-invalid-dep"}
)
#: Short sbatch options and the long option each stands for.
SHORT = {
    "-a": "--array",
    "-A": "--account",
    "-b": "--begin",
    "-B": "--extra-node-info",
    "-c": "--cpus-per-task",
    "-C": "--constraint",
    "-d": "--dependency",
    "-D": "--chdir",
    "-e": "--error",
    "-F": "--nodefile",
    "-G": "--gpus",
    "-h": "--help",
    "-H": "--hold",
    "-i": "--input",
    "-J": "--job-name",
    "-k": "--no-kill",
    "-L": "--licenses",
    "-m": "--distribution",
    "-M": "--clusters",
    "-n": "--ntasks",
    "-N": "--nodes",
    "-o": "--output",
    "-O": "--overcommit",
    "-p": "--partition",
    "-q": "--qos",
    "-Q": "--quiet",
    "-s": "--oversubscribe",
    "-S": "--core-spec",
    "-t": "--time",
    "-v": "--verbose",
    "-V": "--version",
    "-w": "--nodelist",
    "-W": "--wait",
    "-x": "--exclude",
}
#: Long sbatch 22.05 options that take a value (``--mem=4G``), besides :data:`SHORT`'s.
_WITH_VALUE = frozenset(
    {
        "--acctg-freq",
        "--batch",
        "--bb",
        "--bbf",
        "--begin",
        "--chdir",
        "--clusters",
        "--cluster-constraint",
        "--comment",
        "--constraint",
        "--container",
        "--cores-per-socket",
        "--cpu-freq",
        "--cpus-per-gpu",
        "--cpus-per-task",
        "--deadline",
        "--delay-boot",
        "--dependency",
        "--distribution",
        "--error",
        "--export",
        "--export-file",
        "--gid",
        "--gpu-bind",
        "--gpu-freq",
        "--gpus",
        "--gpus-per-node",
        "--gpus-per-socket",
        "--gpus-per-task",
        "--gres",
        "--gres-flags",
        "--hint",
        "--input",
        "--job-name",
        "--licenses",
        "--mail-type",
        "--mail-user",
        "--mcs-label",
        "--mem",
        "--mem-bind",
        "--mem-per-cpu",
        "--mem-per-gpu",
        "--mincpus",
        "--network",
        "--nodefile",
        "--nodelist",
        "--nodes",
        "--ntasks",
        "--ntasks-per-core",
        "--ntasks-per-gpu",
        "--ntasks-per-node",
        "--ntasks-per-socket",
        "--open-mode",
        "--output",
        "--partition",
        "--power",
        "--priority",
        "--profile",
        "--qos",
        "--reservation",
        "--signal",
        "--sockets-per-node",
        "--switches",
        "--thread-spec",
        "--threads-per-core",
        "--time",
        "--time-min",
        "--tmp",
        "--uid",
        "--wckey",
        "--wrap",
        "--array",
        "--account",
        "--core-spec",
        "--exclude",
        "--extra-node-info",
    }
)
#: Every long sbatch option known here.
_KNOWN = NO_VALUE | OPTIONAL_VALUE | _WITH_VALUE | frozenset(SHORT.values())

#: Options elastic-slurm sets itself from the request: they cannot also be passed through.
RESERVED = frozenset(
    {
        "--nodes",
        "--ntasks-per-node",
        "--time",
        "--job-name",
        "--comment",
        "--output",
        "--partition",
        "--chdir",
        "--array",
        "--account",
        "--qos",
        "--hold",
        "--parsable",
    }
)
#: sbatch options that would break the submission (no job id printed, or sbatch blocks).
REFUSED = {
    "--comment": "--comment carries the elastic tag the controller reads; name the job with "
    "--job-name instead",
    "--test-only": "--test-only submits nothing: run sbatch --test-only for an estimate",
    "--wait": "--wait is not supported: wait with 'elastic-slurm show JOBID' or the Python API",
    "--usage": "--usage: see elastic-slurm submit --help",
    "--version": "--version: see elastic-slurm --version",
}

#: The largest batch script read (bytes): Slurm's default ``max_script_size`` (4 MB).
MAX_SCRIPT_BYTES = 4 * 1024 * 1024
#: Shells whose scripts elastic-slurm can prefix with its own lines.
SHELLS = frozenset({"sh", "bash", "dash", "ksh", "zsh", "ash"})
_YAML_SUFFIXES = (".yaml", ".yml")
_SCRIPT_SUFFIXES = (".sh", ".bash", ".sbatch", ".slurm", ".job")

FileKind = Literal["script", "yaml", "program"]


def option_name(word: str) -> str:
    """The long name of the option in ``word`` (``-N4`` and ``--nodes=4`` -> ``--nodes``).

    >>> [option_name(w) for w in ("-N4", "--nodes=2-4", "-c", "--mem")]
    ['--nodes', '--nodes', '--cpus-per-task', '--mem']
    """
    if word.startswith("--"):
        return word.split("=", 1)[0]
    return SHORT.get(word[:2], word[:2])


def takes_value(word: str) -> bool:
    """Whether option ``word`` consumes the next word as its value (``-c 4``, ``--mem 4G``).

    >>> [takes_value(w) for w in ("--mem", "--mem=4G", "-c", "-c4", "--hold", "--exclusive")]
    [True, False, True, False, False, False]
    """
    if word.startswith("--"):
        return "=" not in word and word not in NO_VALUE and word not in OPTIONAL_VALUE
    if len(word) > 2:  # -c4: the value is attached
        return False
    long = SHORT.get(word)
    return long is not None and long not in NO_VALUE and long not in OPTIONAL_VALUE


@dataclass
class CommandLine:
    """An sbatch-like command line, split.

    Attributes
    ----------
    ours
        The words of the options elastic-slurm interprets, in order (values included).
    passed
        The other sbatch options, each one word (``--mem=4G``, ``-c4``), in order.
    file
        The first word that is not an option (a batch script, program or job file), or
        ``None`` when the command line has none (or the program follows ``--``).
    rest
        The words after it: the file's arguments (or the program after ``--``).
    """

    ours: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    file: str | None = None
    rest: list[str] = field(default_factory=list)


def split_command_line(
    words: Sequence[str], ours: dict[str, bool], *, where: str = "the command line"
) -> CommandLine:
    """Split ``words`` as sbatch does: options up to the first other word, which is the file.

    Parameters
    ----------
    words
        The words after ``submit``.
    ours
        The options elastic-slurm interprets (every spelling, ``-N`` and ``--nodes``), each
        with whether it takes a value.
    where
        Where the words come from, for errors.

    Raises
    ------
    InvalidRequest
        An option that needs a value ends the words, or a refused option (:data:`REFUSED`).

    >>> cl = split_command_line(["-N", "2", "--mem", "4G", "-c4", "app.py", "-x"], {"-N": True})
    >>> cl.ours, cl.passed, cl.file, cl.rest
    (['-N', '2'], ['--mem=4G', '-c4'], 'app.py', ['-x'])
    """
    out = CommandLine()
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            out.rest = list(words[i + 1 :])
            return out
        if not word.startswith("-") or word == "-":
            out.file, out.rest = word, list(words[i + 1 :])  # verbatim, as sbatch's
            return out
        name = word.split("=", 1)[0] if word.startswith("--") else word[:2]
        if name in ours:
            needs = ours[name] and ("=" not in word if word.startswith("--") else len(word) == 2)
        else:
            long = option_name(word)
            if long in REFUSED:
                raise InvalidRequest(f"{where}: {REFUSED[long]}")
            needs = takes_value(word)
        if needs and i + 1 >= len(words):
            known = name in ours or option_name(word) in _KNOWN
            raise InvalidRequest(
                f"{where}: option {word} needs a value"
                + ("" if known else " (or is not an sbatch option: see sbatch --help)")
            )
        group = [word, words[i + 1]] if needs else [word]
        if name in ours:
            out.ours += group
        else:
            out.passed.append(_one_word(group))
        i += len(group)
    return out


def _one_word(group: list[str]) -> str:
    if len(group) == 1:
        return group[0]
    opt, value = group
    return f"{opt}={value}" if opt.startswith("--") else f"{opt}{value}"


def check_passed(options: Sequence[str], *, where: str = "sbatch_options") -> None:
    """Refuse pass-through options that elastic-slurm sets itself or that break submission.

    Raises
    ------
    InvalidRequest
        An option of :data:`RESERVED` or :data:`REFUSED`, or a word that is not an option.
    """
    for word in options:
        if not word.startswith("-") or word in ("-", "--"):
            raise InvalidRequest(f"{where}: {word[:40]!r} is not an sbatch option")
        name = option_name(word)
        if name in REFUSED:
            raise InvalidRequest(f"{where}: {REFUSED[name]}")
        if name in RESERVED:
            raise InvalidRequest(
                f"{where}: {word[:40]} is set by elastic-slurm from the request; give it as "
                f"elastic-slurm's own option ({name})"
            )


@dataclass(frozen=True)
class BatchScript:
    """A batch script and the options of its ``#SBATCH`` lines.

    Attributes
    ----------
    text
        The script as read.
    directives
        The words of its ``#SBATCH`` lines, in order, split as a shell would.
    interpreter
        The program of its ``#!`` line (``/bin/bash``; ``env bash`` gives ``bash``).
    """

    text: str
    directives: tuple[str, ...]
    interpreter: str

    @property
    def is_shell(self) -> bool:
        """True when a POSIX-like shell runs it (elastic-slurm can add lines to it)."""
        return Path(self.interpreter).name in SHELLS


def parse_script(text: str, *, where: str = "the batch script") -> BatchScript:
    r"""Read a batch script's ``#!`` line and its ``#SBATCH`` directives, as sbatch does.

    Directives are read from the ``#SBATCH`` lines before the first command (a line that is
    neither blank nor a comment); a directive's words end at a ``#`` that starts a comment.

    Raises
    ------
    ConfigError
        No ``#!`` first line (sbatch refuses such a script too), a NUL byte, or a
        directive that a shell could not split (an unclosed quote); the message names the
        line.

    >>> s = parse_script("#!/bin/bash\n#SBATCH -N 2 --mem=4G  # two nodes\nsrun app\n")
    >>> s.directives, s.interpreter, s.is_shell
    (('-N', '2', '--mem=4G'), '/bin/bash', True)
    """
    if "\0" in text:
        raise ConfigError(f"{where}: holds a NUL byte: not a batch script")
    lines = text.splitlines()
    if not lines or not lines[0].startswith("#!"):
        raise ConfigError(
            f"{where}: the first line must start with #! and name an interpreter "
            "(#!/bin/bash), as sbatch requires"
        )
    shebang = lines[0][2:].split()
    if not shebang:
        raise ConfigError(f"{where}: the #! line names no interpreter")
    interpreter = shebang[1] if Path(shebang[0]).name == "env" and len(shebang) > 1 else shebang[0]
    words: list[str] = []
    for number, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break  # the first command: sbatch reads no directive after it
        if not stripped.startswith("#SBATCH"):
            continue
        body = stripped[len("#SBATCH") :]
        if body and not body[0].isspace():
            continue  # "#SBATCHX" is a comment
        try:
            words += shlex.split(body, comments=True)
        except ValueError as exc:
            raise ConfigError(f"{where}: line {number}: {exc}: {stripped[:80]!r}") from None
    return BatchScript(text=text, directives=tuple(words), interpreter=interpreter)


def read_script(path: Path) -> BatchScript:
    """:func:`parse_script` of the file at ``path`` (at most :data:`MAX_SCRIPT_BYTES`).

    Raises
    ------
    ConfigError
        Not readable, too large, not UTF-8 text, or not a batch script.
    """
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_SCRIPT_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the batch script: {exc.strerror}") from None
    if len(data) > MAX_SCRIPT_BYTES:
        raise ConfigError(f"{path}: a batch script is at most {MAX_SCRIPT_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: is not a text file: not a batch script") from None
    return parse_script(text, where=str(path))


def classify(path: Path) -> FileKind:
    """What the file named on ``submit``'s command line is: script, job file or program.

    * ``.yaml``/``.yml``: a job file; ``.py``: a program (an MPI program run with its ranks);
    * a text file with a shell ``#!`` line, or ``#SBATCH`` lines, or a script suffix
      (``.sh``, ``.sbatch``, ...): a batch script;
    * another text file without ``#!`` that holds a YAML mapping: a job file;
    * anything else (an executable, a command on ``PATH``, a missing file): a program.

    >>> classify(Path("app.py")), classify(Path("job.yaml")), classify(Path("hostname"))
    ('program', 'yaml', 'program')
    """
    suffix = path.suffix.lower()
    if suffix in _YAML_SUFFIXES:
        return "yaml"
    if suffix == ".py":
        return "program"
    try:
        with path.open("rb") as fh:
            head = fh.read(64 * 1024)
    except OSError:  # not a file here: a command on PATH, or a program check_program refuses
        return "script" if suffix in _SCRIPT_SUFFIXES else "program"
    if b"\0" in head:
        return "program"  # a binary
    text = head.decode("utf-8", errors="replace")
    first = text.split("\n", 1)[0]
    if first.startswith("#!"):
        words = first[2:].split()
        shell = words and (
            Path(words[0]).name in SHELLS
            or (Path(words[0]).name == "env" and len(words) > 1 and words[1] in SHELLS)
        )
        if shell or "\n#SBATCH" in text or suffix in _SCRIPT_SUFFIXES:
            return "script"
        return "program"
    if suffix in _SCRIPT_SUFFIXES:
        return "script"
    return "yaml" if _is_mapping(text) else "program"


def _is_mapping(text: str) -> bool:
    from elastic_slurm import yamlsafe

    try:
        return isinstance(yamlsafe.loads(text), dict)
    except Exception:  # noqa: BLE001 - any parse failure means "not a job file"
        return False


def wrap(command: str) -> str:
    r"""The batch script sbatch's ``--wrap=COMMAND`` makes: ``COMMAND`` run by ``/bin/sh``.

    >>> wrap("hostname")
    '#!/bin/sh\n# This script was created by elastic-slurm --wrap.\n\nhostname\n'
    """
    return f"#!/bin/sh\n# This script was created by elastic-slurm --wrap.\n\n{command}\n"


# ------------------------------------------------------------- elastic-slurm submit's words
SUBMIT_DESCRIPTION = """\
Submit a job like sbatch: submit [OPTIONS] FILE [ARGS], where FILE is a batch script
(#SBATCH lines read as sbatch reads them; options given here override them), a program
(run with its ranks: nodes x --ntasks-per-node; .py files with the site's Python) or a YAML
job file; or submit [OPTIONS] -- PROGRAM [ARGS]; without either, the batch script is read
from standard input. Every other sbatch option (--mem, -c, --gres, --gpus, --constraint,
--dependency, --export, --mail-type, ...) is passed to sbatch unchanged. Prints "Submitted
batch job N" (with --parsable: N[;cluster]). Exit status as sbatch's: 0 submitted, 255 an
error in the options, script or job file, 1 Slurm refused the job."""


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises :class:`InvalidRequest` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise InvalidRequest(message)


def add_submit_options(p: argparse.ArgumentParser) -> None:
    """The options ``elastic-slurm submit`` interprets itself (the others go to sbatch)."""
    p.add_argument("-N", "--nodes", help="N, or MIN-MAX for the elastic kinds")
    p.add_argument("--kind", choices=["rigid", "moldable", "malleable", "evolving"])
    p.add_argument("--start-nodes", type=int, help="size to start at (malleable, evolving)")
    p.add_argument("--ntasks-per-node", type=int, help="MPI ranks per node")
    p.add_argument(
        "-n", "--ntasks", type=int, help="MPI ranks in all (a multiple of the node count)"
    )
    p.add_argument("-t", "--time", help="time limit (minutes, HH:MM:SS, D-HH:MM:SS)")
    p.add_argument("-p", "--partition")
    p.add_argument("-A", "--account")
    p.add_argument("-q", "--qos")
    p.add_argument("-J", "--job-name")
    p.add_argument("-o", "--output", help="output file pattern (%%j: job id)")
    p.add_argument("-D", "--chdir", dest="workdir", help="working directory (shared)")
    p.add_argument("-a", "--array", help="job array, e.g. 0-99%%8 (malleable: elastic sweep)")
    p.add_argument("-H", "--hold", action="store_true", default=None, help="submit held")
    p.add_argument("--wrap", help="run this shell command as the batch script (as sbatch's)")
    p.add_argument("--speedup", help="amdahl:P, downey:A:SIGMA or linear (moldable sizing)")
    p.add_argument(
        "--evolution-profile",
        help="evolving jobs: the sizes the application will ask for, as SECONDS:NODES steps "
        "(600:2,300:4,600:2), the first at the start size",
    )
    p.add_argument(
        "--grace-period",
        type=float,
        dest="grace_period_s",
        help="seconds the job has to follow a shrink order (finite, at most the site's "
        "controller.max_grace_period_s)",
    )
    p.add_argument(
        "--sized-by",
        choices=["slurm", "controller"],
        help="who chooses a moldable job's start size: slurm (at start, within MIN-MAX) or "
        "controller (submitted held; the controller's policy sizes it from --speedup and "
        "releases it); default: the site's controller.sizes_moldable",
    )
    p.add_argument(
        "--parsable", action="store_true", default=None, help="print only jobid[;cluster]"
    )
    p.add_argument("--json", action="store_true", default=None, help="print one JSON object")
    p.add_argument("--site", default=argparse.SUPPRESS, help="site config name or YAML path")
    p.add_argument(
        "file",
        nargs="?",
        metavar="FILE [ARGS]",
        help="a batch script, a program or a YAML job file, then its arguments",
    )


def submit_parser() -> argparse.ArgumentParser:
    """A parser of ``submit``'s own options (errors raise :class:`InvalidRequest`)."""
    p = _Parser(
        prog="elastic-slurm submit",
        description=SUBMIT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_submit_options(p)
    return p


def _spellings(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """Each spelling of ``parser``'s options, with whether it takes a value."""
    return {
        spelling: action.nargs != 0
        for action in parser._actions
        for spelling in action.option_strings
    }


#: The options whose values go into the job spec (:func:`elastic_slurm.jobspec.load_spec`).
SPEC_KEYS = (
    "nodes",
    "kind",
    "start_nodes",
    "ntasks_per_node",
    "time",
    "partition",
    "account",
    "qos",
    "job_name",
    "output",
    "workdir",
    "array",
    "speedup",
    "evolution_profile",
    "grace_period_s",
    "sized_by",
)


class MissingScript(InvalidRequest):
    """The batch script named does not exist (sbatch: "Unable to open file", exit 1)."""


@dataclass(frozen=True)
class Submission:
    """What ``elastic-slurm submit``'s words ask for, before the site is read.

    Attributes
    ----------
    job_file
        The YAML job file named, or ``None``.
    overrides
        The job spec's values from the command line, the script and its ``#SBATCH`` lines
        (``None``: not given), for :func:`elastic_slurm.jobspec.load_spec`: ``program``,
        ``script``, ``sbatch_options`` and the keys of :data:`SPEC_KEYS`.
    hold, parsable, json
        ``--hold``, ``--parsable``, ``--json`` (from the command line or ``#SBATCH`` lines).
    site
        ``--site`` given after ``submit``, or ``None``.
    """

    job_file: Path | None
    overrides: dict[str, Any]
    hold: bool = False
    parsable: bool = False
    json: bool = False
    site: str | None = None


def read_submission(words: Sequence[str], *, stdin: TextIO | None = None) -> Submission:
    """Read ``submit``'s words as sbatch reads its own: options, FILE, FILE's arguments.

    FILE (:func:`classify`) is a batch script (its ``#SBATCH`` options come first, so the
    command line's override them, as in sbatch), a program, or a YAML job file (then more
    options may follow it, and the program after ``--``). ``--wrap=COMMAND`` makes a
    ``/bin/sh`` script of COMMAND. Without FILE, program or ``--wrap``, the script is read
    from ``stdin`` (when given). A script's job is named after its file (``wrap`` for
    ``--wrap``, ``sbatch`` for standard input), as sbatch names it.

    >>> sub = read_submission(["--mem", "4G", "-N", "2", "--", "app", "-x"])
    >>> sub.overrides["program"], sub.overrides["nodes"], sub.overrides["sbatch_options"]
    (['app', '-x'], '2', ['--mem=4G'])

    Raises
    ------
    MissingScript
        A batch script (by its suffix) that does not exist.
    InvalidRequest, ConfigError
        An error in the words, the script or its ``#SBATCH`` lines; the message says which.
    """
    parser = submit_parser()
    ours = _spellings(parser)
    line = split_command_line(words, ours)
    if line.file is not None and classify(Path(line.file)) == "yaml":
        more = split_command_line(line.rest, ours)  # more options, the program after "--"
        if more.file is not None:
            raise InvalidRequest(
                f"{more.file!r} after the job file {line.file}: give the program after --: "
                "submit [OPTIONS] JOB.yaml [OPTIONS] -- PROGRAM [ARGS]"
            )
        line.ours += more.ours
        line.passed += more.passed
        line.rest = more.rest
    cli = parser.parse_args(line.ours)
    job_file: Path | None = None
    program: list[str] = list(line.rest)
    script: BatchScript | None = None
    default_name: str | None = None
    if cli.wrap is not None:
        if line.file is not None or line.rest:
            raise InvalidRequest("--wrap takes no batch script, program or arguments")
        script = parse_script(wrap(cli.wrap))
        program, default_name = ["/bin/sh"], "wrap"  # what runs the wrapped command
    elif line.file is None and not program and stdin is not None:
        text = stdin.read(MAX_SCRIPT_BYTES + 1)
        if len(text) > MAX_SCRIPT_BYTES:
            raise InvalidRequest(f"standard input: a batch script is at most {MAX_SCRIPT_BYTES} B")
        if text.strip():
            script = parse_script(text, where="standard input")
            program, default_name = [script.interpreter], "sbatch"
    elif line.file is not None:
        path = Path(line.file)
        kind = classify(path)
        if kind == "yaml":
            job_file = path
        elif kind == "script":
            if not path.is_file():
                raise MissingScript(f"unable to open the batch script {line.file}")
            script = read_script(path)
            program, default_name = [str(path.resolve()), *line.rest], path.name
        else:
            program = [line.file, *line.rest]
    directives = argparse.Namespace()
    if script is not None:
        where = str(line.file or "standard input")
        found = split_command_line(script.directives, ours, where=f"{where} (#SBATCH)")
        if found.file is not None or found.rest:
            raise InvalidRequest(
                f"{where}: #SBATCH {found.file or '--'}: not an option (an #SBATCH line holds "
                "options only)"
            )
        line.passed[:0] = found.passed  # the script's options first: the command line's win
        directives = parser.parse_args(found.ours)
    if job_file is None and not program:
        raise InvalidRequest(
            "give a batch script, a program or a YAML job file: submit [OPTIONS] FILE [ARGS], "
            "or submit [OPTIONS] -- PROGRAM [ARGS]"
        )
    given = {
        key: next(
            (v for v in (getattr(cli, key, None), getattr(directives, key, None)) if v is not None),
            None,
        )
        for key in (*SPEC_KEYS, "ntasks", "hold", "parsable", "json")
    }
    if given["job_name"] is None:
        given["job_name"] = default_name
    if given["ntasks"] is not None:
        given["ntasks_per_node"] = _per_node(given["ntasks"], given["nodes"])
    overrides: dict[str, Any] = {key: given[key] for key in SPEC_KEYS}
    overrides["program"] = program or None
    overrides["sbatch_options"] = line.passed or None
    overrides["script"] = None if script is None else script.text
    return Submission(
        job_file=job_file,
        overrides=overrides,
        hold=bool(given["hold"]),
        parsable=bool(given["parsable"]),
        json=bool(given["json"]),
        site=getattr(cli, "site", None),
    )


def _per_node(ntasks: int, nodes: str | None) -> int:
    """Ranks per node for ``--ntasks`` on ``nodes`` (every node runs as many ranks)."""
    from elastic_slurm.jobspec import parse_nodes

    lo, hi = parse_nodes(nodes or "1")
    if ntasks < 1 or lo != hi or ntasks % lo:
        raise InvalidRequest(
            f"--ntasks={ntasks} on {nodes or 1} node(s): elastic-slurm runs as many ranks on "
            "every node; give --ntasks-per-node (ranks = nodes x ntasks-per-node)"
        )
    return ntasks // lo
