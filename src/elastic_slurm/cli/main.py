"""The ``elastic-slurm`` command: parse the arguments, call the library, report errors."""

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
    status,
    submit,
    validate,
)
from elastic_slurm.errors import ElasticSlurmError


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
    except ElasticSlurmError as exc:
        print(f"elastic-slurm: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("elastic-slurm: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
