"""``elastic-slurm submit``: sbatch's command line, with the elastic options added.

``submit [OPTIONS] FILE [ARGS]`` reads its words as ``sbatch`` does: options, then FILE, then
FILE's arguments. FILE is a batch script (its ``#SBATCH`` lines read as sbatch reads them,
options on the command line overriding them), a program (launched with its ranks: ``.py``
files with the site's Python) or a YAML job file; ``submit [OPTIONS] -- PROGRAM [ARGS]``
names the program after ``--``; without either, the batch script is read from standard
input. Every sbatch option elastic-slurm does not interpret is passed
to sbatch unchanged (:mod:`elastic_slurm.batch_script`).

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
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from elastic_slurm.errors import ConfigError, InvalidRequest, SlurmCommandError

#: sbatch's exit status for an error in its command line or script.
EXIT_USAGE = 255
#: sbatch's exit status when the job was not submitted (refused, Slurm unreachable).
EXIT_ERROR = 1

DESCRIPTION = """\
Submit a job like sbatch: submit [OPTIONS] FILE [ARGS], where FILE is a batch script
(#SBATCH lines read as sbatch reads them; options given here override them), a program
(run with its ranks: nodes x --ntasks-per-node; .py files with the site's Python) or a YAML
job file; or submit [OPTIONS] -- PROGRAM [ARGS]. Every other sbatch option (--mem, -c, --gres,
--gpus, --constraint, --dependency, --export, --mail-type, ...) is passed to sbatch unchanged.
Prints "Submitted batch job N" (with --parsable: N[;cluster]). Exit status as sbatch's: 0
submitted, 255 an error in the options, script or job file, 1 Slurm refused the job."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors exit as sbatch's do (255)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_options(p: argparse.ArgumentParser) -> None:
    """The options ``submit`` interprets itself (the others go to sbatch)."""
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


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``submit`` subcommand (its words are read by :func:`run`)."""
    p = sub.add_parser(
        "submit",
        help="submit a rigid, moldable, malleable or evolving job (like sbatch)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(p)
    p.set_defaults(func=run)


def option_parser() -> argparse.ArgumentParser:
    """A parser of ``submit``'s own options, alone (errors exit 255, as sbatch's)."""
    p = _Parser(
        prog="elastic-slurm submit",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(p)
    return p


def our_options(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """Each spelling of ``parser``'s options, with whether it takes a value."""
    return {
        spelling: action.nargs != 0
        for action in parser._actions
        for spelling in action.option_strings
    }


#: The options whose values go into the job spec, by their argparse name.
_SPEC_KEYS = (
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
    "grace_period_s",
    "sized_by",
)


def _fail(message: str, status: int) -> int:
    print(f"elastic-slurm: error: {message}", file=sys.stderr)
    return status


def run(args: argparse.Namespace) -> int:
    """Read the command line (and script or job file), validate, submit; print the job id."""
    from elastic_slurm import batch_script

    words: Sequence[str] = getattr(args, "submit_words", None) or []
    parser = option_parser()
    try:
        line = batch_script.split_command_line(words, our_options(parser))
        if line.file is not None and batch_script.classify(Path(line.file)) == "yaml":
            # after a job file come more options, and the program after "--"
            more = batch_script.split_command_line(line.rest, our_options(parser))
            if more.file is not None:
                raise InvalidRequest(
                    f"{more.file!r} after the job file {line.file}: give the program after "
                    "--: submit [OPTIONS] JOB.yaml [OPTIONS] -- PROGRAM [ARGS]"
                )
            line.ours += more.ours
            line.passed += more.passed
            line.rest = more.rest
        cli = parser.parse_args(line.ours)
        plan = _plan(line, cli, args)
    except _NoFile as exc:
        return _fail(str(exc), EXIT_ERROR)
    except (InvalidRequest, ConfigError) as exc:
        return _fail(_one_line(exc), EXIT_USAGE)
    return _submit(plan, cli, getattr(cli, "site", None) or args.site)


def _one_line(exc: BaseException) -> str:
    return "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip())


def _plan(line: Any, cli: argparse.Namespace, args: argparse.Namespace) -> dict[str, Any]:
    """What to submit: the job file, spec overrides and script, from the words read."""
    from elastic_slurm import batch_script

    job_file: Path | None = None
    program: list[str] = list(line.rest)
    script_text: str | None = None
    script_ns = argparse.Namespace()
    if cli.wrap is not None:
        if line.file is not None or line.rest:
            raise InvalidRequest("--wrap takes no batch script, program or arguments")
        script_text = batch_script.wrap(cli.wrap)
        program = ["/bin/sh"]  # what runs the wrapped command
    elif line.file is None and not program and not sys.stdin.isatty():
        # no file: the batch script comes on standard input, as sbatch reads it
        text = sys.stdin.read(batch_script.MAX_SCRIPT_BYTES + 1)
        if text.strip():
            if len(text) > batch_script.MAX_SCRIPT_BYTES:
                raise InvalidRequest(
                    f"standard input: a batch script is at most {batch_script.MAX_SCRIPT_BYTES} "
                    "bytes"
                )
            script = batch_script.parse_script(text, where="standard input")
            script_ns = _directives(script, "standard input", line)
            script_text = script.text
            program = [script.interpreter]  # what runs it (there is no file to name)
            if getattr(cli, "job_name", None) is None and script_ns.job_name is None:
                script_ns.job_name = "sbatch"  # sbatch's name for a script read from stdin
    elif line.file is not None:
        path = Path(line.file)
        kind = batch_script.classify(path)
        if kind == "yaml":
            job_file = path
        elif kind == "script":
            if not path.is_file():
                raise _NoFile(f"unable to open the batch script {line.file}")
            script = batch_script.read_script(path)
            script_ns = _directives(script, str(path), line)
            script_text = script.text
            program = [str(path.resolve()), *line.rest]
        else:
            program = [line.file, *line.rest]
    merged = {
        key: _first(getattr(cli, key, None), getattr(script_ns, key, None))
        for key in (*_SPEC_KEYS, "ntasks", "hold", "parsable", "json")
    }
    if merged["job_name"] is None and script_text is not None:  # sbatch's default name
        merged["job_name"] = "wrap" if cli.wrap is not None else Path(str(line.file)).name
    if merged["ntasks"] is not None:
        merged["ntasks_per_node"] = _per_node(merged["ntasks"], merged["nodes"])
    overrides = {key: merged[key] for key in _SPEC_KEYS}
    overrides["program"] = program or None
    overrides["sbatch_options"] = line.passed or None
    overrides["script"] = script_text
    if job_file is None and not program:
        raise InvalidRequest(
            "give a batch script, a program or a YAML job file: submit [OPTIONS] FILE [ARGS], "
            "or submit [OPTIONS] -- PROGRAM [ARGS]"
        )
    return {"job_file": job_file, "overrides": overrides, **merged}


class _NoFile(InvalidRequest):
    """A batch script that does not exist (sbatch: "Unable to open file", exit 1)."""


def _directives(script: Any, where: str, line: Any) -> argparse.Namespace:
    """The options of ``script``'s ``#SBATCH`` lines; its sbatch options go before ``line``'s."""
    from elastic_slurm import batch_script

    found = batch_script.split_command_line(
        script.directives, our_options(option_parser()), where=f"{where} (#SBATCH)"
    )
    if found.file is not None or found.rest:
        raise InvalidRequest(
            f"{where}: #SBATCH {found.file or '--'}: not an option (an #SBATCH line holds "
            "options only)"
        )
    line.passed[:0] = found.passed  # the script's options first: the command line's win
    return option_parser().parse_args(found.ours)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


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


def _submit(plan: dict[str, Any], cli: argparse.Namespace, site_name: str | None) -> int:
    from elastic_slurm import api
    from elastic_slurm.adapter.factory import job_python, slurm_for
    from elastic_slurm.config import load_site
    from elastic_slurm.jobspec import load_spec
    from elastic_slurm.protocol.address import controller_url

    job_file: Path | None = plan["job_file"]
    site = load_site(site_name)
    try:
        spec = load_spec(job_file, plan["overrides"])
        req = spec.request(max_grace_period_s=site.controller.max_grace_period_s)
        sized_by = spec.sizing(site.controller.sizes_moldable)
    except _NoFile as exc:
        return _fail(str(exc), EXIT_ERROR)
    except (InvalidRequest, ConfigError) as exc:
        return _fail(_one_line(exc), EXIT_USAGE)
    req = replace(  # the site's defaults where the user gave none
        req,
        partition=req.partition or site.partition,
        account=req.account or site.account,
        qos=req.qos or site.qos,
    )
    base = job_file.parent if job_file else Path.cwd()
    workdir = (base / spec.workdir).resolve() if spec.workdir else Path.cwd().resolve()
    try:
        job_id = api.submit(
            req,
            slurm_for(site),
            workdir=workdir,
            output=spec.output,
            sized_by=sized_by,
            python=job_python(site),
            controller=controller_url(site),  # where the site's controller listens
            hold=bool(plan["hold"]),
        )
    except InvalidRequest as exc:  # the program is missing, or the cluster too small
        return _fail(_one_line(exc), EXIT_ERROR)
    except SlurmCommandError as exc:
        if exc.returncode == EXIT_USAGE:  # sbatch refused a passed-through option or value
            said = [ln.strip() for ln in exc.stderr.splitlines() if ln.strip()]
            return _fail("; ".join(said[:3]) or "sbatch refused the options", EXIT_USAGE)
        raise
    cluster = _cluster(req.sbatch_options)
    if plan["json"]:
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
    elif plan["parsable"]:
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
    from elastic_slurm.batch_script import option_name

    named = None
    for word in options:
        if option_name(word) == "--clusters":
            named = word.split("=", 1)[1] if word.startswith("--") else word[2:]
    return named if named and "," not in named else None
