"""The ``elastic-slurm`` command: parse the arguments, call the library, report errors.

Only the module of the command being run is imported (:data:`COMMANDS`), so ``--help``,
``--version`` and the commands of the base install start without numpy, mpi4py or
matplotlib; a command that needs a missing extra says which one to install, in one line.

Every error the project raises on purpose is printed as one line, without a traceback, and
ends the command with a Slurm-like exit status (:func:`exit_status`): 2 for a usage error
(wrong arguments, an impossible request, a bad site config or job file: change what you
typed), 1 for everything else, as Slurm's own commands exit 1 when slurmctld does not answer.
``submit`` exits as ``sbatch`` does instead: 255 for a usage error, 1 when the job was not
submitted (:mod:`elastic_slurm.cli.submit`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType

from elastic_slurm import __version__
from elastic_slurm.errors import (
    ConfigError,
    ElasticSlurmError,
    InvalidRequest,
    NotRootError,
    SlurmUnavailableError,
)

#: Every subcommand: its module under :mod:`elastic_slurm.cli` and its one-line summary. A
#: command's module is imported only when that command runs, so ``--help`` and the commands of
#: the base install never import numpy, mpi4py or matplotlib (the extras).
COMMANDS: dict[str, str] = {
    "cluster": "build, start, inspect or remove the local Slurm cluster (root)",
    "run": "run an elastic MPI application inside its Slurm job (in a batch script)",
    "try": "force grows and shrinks of an elastic MPI app on this machine and compare (no Slurm)",
    "demo": "run heat2d as a malleable job that grows and shrinks on the local cluster",
    "controller": "run a scheduling policy against live Slurm",
    "policies": "list the scheduling policies, what each does, and load errors",
    "doctor": (
        "probe Slurm and MPI and say how jobs will grow (runs a test MPI spawn here and two "
        "one-node job steps, srun and mpirun, on the cluster)"
    ),
    "submit": "submit a rigid, moldable, malleable or evolving job (like sbatch)",
    "queue": "list jobs like squeue, with kind, size range and resize",
    "show": "one job like scontrol show job, with its resize history",
    "resize": "grow or shrink a running malleable or evolving job",
    "cancel": "cancel a job with its helper allocations",
    "simulate": "run a scheduling policy on an SWF workload trace in virtual time",
    "reproduce": "reproduce the papers' results in the simulator and write a report",
    "report": "draw a controller journal: jobs with their resizes, and utilisation (PNG/SVG)",
    "status": "nodes, elastic jobs and the controller's resizes under way, as tables",
    "validate": (
        "replay a trace slice live with the controller, simulate it, compare (Ghafoor ch. 5)"
    ),
    "soak": "replay a trace live with faults; lost and leaked must be 0",
}

#: The extra of ``pyproject.toml`` that installs each optional module.
EXTRAS = {"numpy": "sim", "matplotlib": "sim", "mpi4py": "mpi", "paramiko": "ssh"}
#: Commands whose numpy comes with the ``mpi`` extra (the MPI side), not ``sim``.
_MPI_COMMANDS = frozenset({"run", "demo", "try"})
#: The top-level options that take a value (``--site NAME``).
_VALUED = frozenset({"--site"})

#: Exit status of a usage error (as argparse's): the command line, request or config is wrong.
EXIT_USAGE = 2
#: Exit status of every other error (Slurm's commands exit 1 when slurmctld does not answer).
EXIT_ERROR = 1
_USAGE_ERRORS = (InvalidRequest, ConfigError, NotRootError)


def exit_status(exc: BaseException) -> int:
    """The exit status for an error: :data:`EXIT_USAGE` for a usage error, else 1.

    >>> exit_status(InvalidRequest("x")), exit_status(SlurmUnavailableError(["squeue"], 1, "", ""))
    (2, 1)
    """
    return EXIT_USAGE if isinstance(exc, _USAGE_ERRORS) else EXIT_ERROR


def one_line(exc: BaseException) -> str:
    r"""The message of an error on one line (Slurm's quoted output joined by ``; ``).

    >>> one_line(SlurmUnavailableError(["squeue"], 1, "", "squeue: error: a\nb\n"))
    'the Slurm controller is unreachable (squeue: error: a; b)'
    """
    if isinstance(exc, SlurmUnavailableError):
        said = [ln.strip() for ln in (exc.stderr or exc.stdout).splitlines() if ln.strip()]
        detail = "; ".join(said[-3:]) or exc.reason or "no answer"
        return f"the Slurm controller is unreachable ({detail[:300]})"
    return "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip())


def command_module(name: str) -> ModuleType:
    """The module of subcommand ``name`` (imported now, on first use)."""
    return importlib.import_module(f"elastic_slurm.cli.{name}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; ``command``'s own options are registered, the others by name only.

    Every subcommand also takes ``--site`` after its name (``elastic-slurm queue --site X``);
    given twice, the one after the subcommand wins.

    Parameters
    ----------
    command
        The subcommand to register in full (its module is imported); ``None``: none (enough
        for ``--help``, ``--version`` and the list of commands).
    """
    parser = argparse.ArgumentParser(
        prog="elastic-slurm",
        description="Elastic (moldable, malleable, evolving) MPI jobs on stock Slurm.",
    )
    parser.add_argument("--version", action="version", version=f"elastic-slurm {__version__}")
    parser.add_argument(
        "--site",
        default=None,
        help="site config name or YAML path (default: $ELASTIC_SLURM_SITE, else local); "
        "also accepted after the command",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, summary in COMMANDS.items():
        if name != command:
            sub.add_parser(name, help=summary, add_help=False)
            continue
        command_module(name).add_parser(sub)
        _accept_site(sub.choices[name])
    return parser


def _accept_site(p: argparse.ArgumentParser) -> None:
    """Let ``p`` and its own subcommands (``controller run``) take ``--site`` too."""
    if "--site" not in p._option_string_actions:
        p.add_argument(
            "--site",
            default=argparse.SUPPRESS,
            help="site config name or YAML path (as before the command)",
        )
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _accept_site(child)


def find_command(words: Sequence[str]) -> int | None:
    """The index of the subcommand in ``words`` (after the top-level options), or ``None``.

    >>> find_command(["--site", "x", "-v", "queue", "--all"])
    3
    >>> find_command(["--site=x", "--help"]) is None
    True
    """
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return None
        if not word.startswith("-"):
            return i
        i += 2 if word in _VALUED else 1
    return None


def missing_extra(exc: ModuleNotFoundError, command: str | None) -> str | None:
    """The one-line hint for an optional module that is not installed, else ``None``.

    >>> missing_extra(ModuleNotFoundError("x", name="matplotlib.pyplot"), "report")
    "report needs matplotlib, which is not installed: pip install 'elastic-slurm[sim]'"
    >>> missing_extra(ModuleNotFoundError("x", name="numpy"), "run")
    "run needs numpy, which is not installed: pip install 'elastic-slurm[mpi]'"
    """
    top = (exc.name or "").split(".")[0]
    if top not in EXTRAS:
        return None
    extra = "mpi" if top == "numpy" and command in _MPI_COMMANDS else EXTRAS[top]
    return (
        f"{command or 'this command'} needs {top}, which is not installed: "
        f"pip install 'elastic-slurm[{extra}]'"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``elastic-slurm`` console script; returns the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    at = find_command(words)
    command = words[at] if at is not None and words[at] in COMMANDS else None
    try:
        parser = build_parser(command)
    except ModuleNotFoundError as exc:
        hint = missing_extra(exc, command)
        if hint is None:
            raise
        print(f"elastic-slurm: error: {hint}", file=sys.stderr)
        return EXIT_ERROR
    tail: list[str] = []
    if command == "submit":  # sbatch's grammar: the words after the script are its arguments
        assert at is not None
        args = parser.parse_args(words[: at + 1])
        args.submit_words = words[at + 1 :]
    else:
        # everything after the first "--" is a program and its arguments, never our options
        if "--" in words:
            cut = words.index("--")
            words, tail = words[:cut], words[cut + 1 :]
        args = parser.parse_args(words)
    args.program_words = tail
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except SlurmUnavailableError as exc:
        print(f"elastic-slurm: {one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except ElasticSlurmError as exc:
        print(f"elastic-slurm: error: {one_line(exc)}", file=sys.stderr)
        return exit_status(exc)
    except ModuleNotFoundError as exc:
        hint = missing_extra(exc, command)
        if hint is None:
            raise
        print(f"elastic-slurm: error: {hint}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # `... | head`: the reader left; stop quietly, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes at exit
        return 128 + signal.SIGPIPE
    except OSError as exc:  # a file that cannot be read or written, a port in use...
        print(f"elastic-slurm: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("elastic-slurm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
