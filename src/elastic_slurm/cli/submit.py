"""``elastic-slurm submit``: sbatch's command line, with the elastic options added.

``submit [OPTIONS] FILE [ARGS]`` reads its words as ``sbatch`` does: options, then FILE, then
FILE's arguments. FILE is a batch script (its ``#SBATCH`` lines read as sbatch reads them,
options on the command line overriding them), a program (launched with its ranks: ``.py``
files with the site's Python) or a YAML job file; ``submit [OPTIONS] -- PROGRAM [ARGS]``
names the program after ``--``; without either, the batch script is read from standard
input. Every sbatch option elastic-slurm does not interpret is passed to sbatch unchanged.
The words are read by :func:`elastic_slurm.batch_script.read_submission`.

Output and exit status are sbatch's: ``Submitted batch job N``, or ``N[;cluster]`` with
``--parsable``; 0 when submitted, 255 for an error in what was typed (an option, a value, a
job file: nothing was sent to Slurm), 1 when Slurm refused the job or could not be reached
(and for a program or batch script that does not exist, as sbatch's "Unable to open file").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from elastic_slurm import batch_script
from elastic_slurm.errors import ConfigError, InvalidRequest, SlurmCommandError

#: sbatch's exit status for an error in its command line or script.
EXIT_USAGE = 255
#: sbatch's exit status when the job was not submitted (refused, Slurm unreachable).
EXIT_ERROR = 1


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``submit`` subcommand (its words are read by :func:`run`)."""
    p = sub.add_parser(
        "submit",
        help="submit a rigid, moldable, malleable or evolving job (like sbatch)",
        description=batch_script.SUBMIT_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    batch_script.add_submit_options(p)
    p.set_defaults(func=run)


def _fail(message: str, status: int) -> int:
    print(f"elastic-slurm: error: {message}", file=sys.stderr)
    return status


def _one_line(exc: BaseException) -> str:
    return "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip())


def run(args: argparse.Namespace) -> int:
    """Read the command line (and script or job file), validate, submit; print the job id."""
    words: Sequence[str] = getattr(args, "submit_words", None) or []
    try:
        sub = batch_script.read_submission(
            words, stdin=None if sys.stdin is None or sys.stdin.isatty() else sys.stdin
        )
    except batch_script.MissingScript as exc:
        return _fail(str(exc), EXIT_ERROR)
    except (InvalidRequest, ConfigError) as exc:
        return _fail(_one_line(exc), EXIT_USAGE)
    return _submit(sub, sub.site or args.site)


def _submit(sub: batch_script.Submission, site_name: str | None) -> int:
    from elastic_slurm import api
    from elastic_slurm.config import load_site
    from elastic_slurm.jobspec import load_spec

    job_file = sub.job_file
    site = load_site(site_name)
    try:
        spec = load_spec(job_file, sub.overrides)
        base = job_file.parent if job_file else None
        api.prepare(spec, site, base=base)  # usage errors first
    except (InvalidRequest, ConfigError) as exc:
        return _fail(_one_line(exc), EXIT_USAGE)
    try:
        done = api.submit_spec(
            spec, site, base=job_file.parent if job_file else None, hold=sub.hold
        )
    except InvalidRequest as exc:  # the program is missing, or the cluster too small
        return _fail(_one_line(exc), EXIT_ERROR)
    except SlurmCommandError as exc:
        if exc.returncode == EXIT_USAGE:  # sbatch refused a passed-through option or value
            said = [ln.strip() for ln in exc.stderr.splitlines() if ln.strip()]
            return _fail("; ".join(said[:3]) or "sbatch refused the options", EXIT_USAGE)
        raise
    job_id, req, sized_by, workdir = done.job_id, done.request, done.sized_by, done.workdir
    cluster = _cluster(req.sbatch_options)
    if sub.json:
        print(
            json.dumps(
                {
                    "job_id": job_id,
                    "cluster": cluster,
                    "kind": req.kind.value,
                    "nodes": [req.nodes_min, req.nodes_max],
                    "sized_by": sized_by,
                    "workdir": str(workdir),
                }
            )
        )
    elif sub.parsable:
        print(f"{job_id};{cluster}" if cluster else job_id)
    else:
        print(f"Submitted batch job {job_id}" + (f" on cluster {cluster}" if cluster else ""))
        if sized_by == "controller":
            print(
                f"job {job_id} waits held until the controller chooses its size and releases it",
                file=sys.stderr,
            )
    return 0


def _cluster(options: Sequence[str]) -> str | None:
    """The cluster sbatch names after the job id: the one ``-M``/``--clusters`` gives.

    >>> _cluster(["--mem=1G", "--clusters=blue"]), _cluster(["-Mred"]), _cluster([])
    ('blue', 'red', None)
    """
    named = None
    for word in options:
        if batch_script.option_name(word) == "--clusters":
            named = word.split("=", 1)[1] if word.startswith("--") else word[2:]
    return named if named and "," not in named else None
