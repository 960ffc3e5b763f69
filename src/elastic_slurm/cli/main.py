"""The ``elastic-slurm`` command: parse the arguments, call the library, report errors.

Every error the project raises on purpose is printed as one line, without a traceback, and
ends the command with a Slurm-like exit status (:func:`exit_status`): 2 for a usage error
(wrong arguments, an impossible request, a bad site config or job file: change what you
typed), 1 for everything else, as Slurm's own commands exit 1 when slurmctld does not answer.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from elastic_slurm import __version__
from elastic_slurm.cli import (
    cancel,
    cluster,
    controller,
    demo,
    doctor,
    policies,
    queue,
    report,
    reproduce,
    resize,
    run,
    show,
    simulate,
    soak,
    status,
    submit,
    validate,
)
from elastic_slurm.errors import (
    ConfigError,
    ElasticSlurmError,
    InvalidRequest,
    NotRootError,
    SlurmUnavailableError,
)

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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="elastic-slurm",
        description="Elastic (moldable, malleable, evolving) MPI jobs on stock Slurm.",
    )
    parser.add_argument("--version", action="version", version=f"elastic-slurm {__version__}")
    parser.add_argument(
        "--site",
        default=None,
        help="site config name or YAML path (default: $ELASTIC_SLURM_SITE, else local)",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cluster.add_parser(sub)
    run.add_parser(sub)
    demo.add_parser(sub)
    controller.add_parser(sub)
    policies.add_parser(sub)
    doctor.add_parser(sub)
    submit.add_parser(sub)
    queue.add_parser(sub)
    show.add_parser(sub)
    resize.add_parser(sub)
    cancel.add_parser(sub)
    simulate.add_parser(sub)
    reproduce.add_parser(sub)
    report.add_parser(sub)
    status.add_parser(sub)
    validate.add_parser(sub)
    soak.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``elastic-slurm`` console script; returns the exit status."""
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    # everything after the first "--" is a program and its arguments, never our options
    tail: list[str] = []
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
    except OSError as exc:  # a file that cannot be read or written, a port in use...
        print(f"elastic-slurm: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("elastic-slurm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
