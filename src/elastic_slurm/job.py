"""Jobs as Python objects: submit, read the state, wait, resize, cancel, read the history.

In the style of submitit and PSI/J::

    import elastic_slurm

    job = elastic_slurm.submit(
        program=["examples/heat2d.py", "--iterations", "2000"],
        kind="malleable",
        nodes="1-4",
        start_nodes=2,
    )
    job.state                  # 'PENDING', 'RUNNING', ... asked of Slurm each time
    job.resize(4)              # grow to 4 nodes, as ``elastic-slurm resize`` does
    job.wait(timeout=600)      # the final state, e.g. 'COMPLETED'
    job.history                # every resize, as ``elastic-slurm show`` lists them
    job.stdout.read_text()

A job is named by its Slurm job id; :meth:`Job.from_id` makes the object of any job the user
can see. Every operation asks Slurm (through the site's backend, over SSH too) and reuses what
the ``elastic-slurm`` commands do: :mod:`elastic_slurm.api` submits, :mod:`elastic_slurm.jobs`
resizes and cancels, and the history is ``show``'s. Errors are those of
:mod:`elastic_slurm.errors`; :meth:`Job.wait` raises a :class:`TimeoutError`
(:class:`~elastic_slurm.waiting.DeadlineExceeded`) when its deadline passes.
"""

from __future__ import annotations

import getpass
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastic_slurm import api, jobs
from elastic_slurm.adapter.parse import job_state
from elastic_slurm.errors import ConfigError, InvalidRequest, ResizeError, SlurmCommandError
from elastic_slurm.model.snapshot import JobState
from elastic_slurm.protocol import address
from elastic_slurm.waiting import wait_for

if TYPE_CHECKING:
    from elastic_slurm.adapter.backend import GrowPath, SlurmBackend
    from elastic_slurm.cli.show import ShownResize
    from elastic_slurm.config.schema import SiteConfig
    from elastic_slurm.controller.actuate import ResizeOutcome

#: Slurm's default output file pattern (``sbatch`` without ``--output``), and an array's.
DEFAULT_OUTPUT = "slurm-%j.out"
DEFAULT_ARRAY_OUTPUT = "slurm-%A_%a.out"


def _site(site: SiteConfig | str | Path | None) -> SiteConfig:
    """A site config from a config, a name, a path, or ``None`` (the default site)."""
    from elastic_slurm.config import load_site
    from elastic_slurm.config.schema import SiteConfig

    if isinstance(site, SiteConfig):
        return site
    return load_site(None if site is None else str(site))


class Job:
    """One Slurm job submitted through elastic-slurm (or any job the user can see).

    Parameters
    ----------
    job_id
        Slurm's job id.
    site
        The site config, or its name or path; ``None``: ``$ELASTIC_SLURM_SITE``, else
        ``local`` (as the commands' ``--site``).
    slurm
        The backend to ask; ``None``: the site's
        (:func:`~elastic_slurm.jobs.site_backend`, which retries an unreachable slurmctld for
        the site's ``controller.slurm_retry_s`` seconds).
    workdir
        The job's working directory, when known (it locates the output files and the job's
        directory once Slurm has forgotten the job).
    output
        The output file pattern the job was submitted with (``None``: Slurm's default).

    Notes
    -----
    The object holds no state of the job: each property asks Slurm again. Creating one does
    not check that the job exists; :meth:`from_id` does.
    """

    def __init__(
        self,
        job_id: int,
        *,
        site: SiteConfig | str | Path | None = None,
        slurm: SlurmBackend | None = None,
        workdir: Path | str | None = None,
        output: str | None = None,
    ) -> None:
        if isinstance(job_id, bool) or not isinstance(job_id, int) or job_id <= 0:
            raise InvalidRequest(f"a job id is a positive integer, got {job_id!r}")
        self.job_id = job_id
        self.site = _site(site)
        self._slurm = slurm
        self.workdir = Path(workdir) if workdir is not None else None
        self.output = output

    # ------------------------------------------------------------------ making one
    @classmethod
    def from_id(
        cls,
        job_id: int | str,
        *,
        site: SiteConfig | str | Path | None = None,
        slurm: SlurmBackend | None = None,
    ) -> Job:
        """The job with Slurm job id ``job_id``, checked to exist.

        Parameters
        ----------
        job_id
            Slurm's job id (an integer, or its decimal text as ``squeue`` prints it).
        site, slurm
            As for :class:`Job`.

        Raises
        ------
        InvalidRequest
            ``job_id`` is not a job id, or neither slurmctld nor accounting knows the job.
        SlurmUnavailableError
            slurmctld did not answer: whether the job exists is unknown.
        """
        text = str(job_id).strip()
        if not re.fullmatch(r"[0-9]{1,12}", text):
            raise InvalidRequest(f"a job id is a positive integer, got {str(job_id)[:40]!r}")
        job = cls(int(text), site=site, slurm=slurm)
        found = job.slurm.job(job.job_id)
        if found is None:
            job.state  # noqa: B018 - raises InvalidRequest when accounting does not know it
        elif found.workdir:
            job.workdir = Path(found.workdir)
        return job

    # ------------------------------------------------------------------ reading
    @property
    def slurm(self) -> SlurmBackend:
        """The backend this job is asked about (made on first use)."""
        if self._slurm is None:
            self._slurm = jobs.site_backend(self.site)
        return self._slurm

    @property
    def state(self) -> str:
        """The job's state as Slurm names it (``PENDING``, ``RUNNING``, ``COMPLETED``...).

        Asked of slurmctld each time; once slurmctld has forgotten an ended job
        (``MinJobAge``), the state of its last record in accounting.

        Raises
        ------
        InvalidRequest
            Neither slurmctld nor accounting knows the job.
        SlurmUnavailableError
            slurmctld did not answer within the site's retry window.
        """
        found = self.slurm.job(self.job_id)
        if found is not None:
            return found.state.split()[0] if found.state.strip() else found.state
        try:
            records = self.slurm.allocation_history(self.job_id)
        except SlurmCommandError as exc:
            if exc.transient:
                raise
            records = []  # no accounting on this site
        if not records:
            raise InvalidRequest(
                f"job {self.job_id} does not exist (or has left slurmctld's memory, and "
                "accounting has no record of it)"
            )
        return records[-1].state

    def done(self) -> bool:
        """Whether the job has ended (completed, failed, cancelled, timed out...).

        Raises
        ------
        InvalidRequest, SlurmUnavailableError
            As :attr:`state`.
        """
        return job_state(self.state) is JobState.ENDED

    def info(self) -> jobs.JobInfo:
        """The job as ``elastic-slurm queue`` and ``show`` see it: kind, range, nodes, resize.

        Raises
        ------
        InvalidRequest
            slurmctld does not know the job (any more).
        SlurmUnavailableError
            slurmctld did not answer.
        """
        from elastic_slurm.controller.observe import held_nodes

        job = jobs.find_job(self.slurm, self.job_id)
        return jobs.job_info(job, held_nodes(self.slurm.jobs()).get(job.job_id))

    @property
    def history(self) -> list[ShownResize]:
        """Every resize of the job, oldest first, as ``elastic-slurm show`` lists them.

        From the job's directory (orders and acknowledgements) and, when this user can read
        it, the controller's journal (the site's ``controller.journal``): who asked, how it
        ended, how long it took (seconds) and its phases. Empty for a job that never resized.

        Raises
        ------
        InvalidRequest
            slurmctld has forgotten the job and its working directory is unknown.
        SlurmUnavailableError
            slurmctld did not answer.
        """
        from elastic_slurm.cli.show import journal_rows, merge_history
        from elastic_slurm.protocol.jobdir import JobDir

        found = self.slurm.job(self.job_id)
        if found is not None:
            workdir = found.workdir
            user = found.user or None
            running = found.model_state is JobState.RUNNING
        elif self.workdir is not None:
            workdir, user, running = str(self.workdir), getpass.getuser(), False
        else:
            raise InvalidRequest(
                f"job {self.job_id} has left slurmctld's memory and its working directory is "
                "unknown: make the Job with workdir= to read its history"
            )
        recorded = (
            jobs.resize_history(JobDir.for_job(workdir, self.job_id, user=user)) if workdir else []
        )
        rows = journal_rows(None, self.site.controller.journal, self.job_id)
        return merge_history(recorded, rows, running)

    @property
    def stdout(self) -> Path | None:
        """The file the job's standard output goes to (``None`` when it cannot be known).

        The pattern the job was submitted with (``%j``, ``%x``, ``%u``, ``%A``, ``%a``,
        ``%%`` replaced), relative to its working directory; for a job made with
        :meth:`from_id`, what slurmctld reports (``StdOut``) while it knows the job.
        """
        return self._stream("StdOut")

    @property
    def stderr(self) -> Path | None:
        """The file the job's standard error goes to: the output file, as sbatch's default.

        elastic-slurm submits without ``--error``, so both streams go to one file; for a job
        made with :meth:`from_id`, what slurmctld reports (``StdErr``).
        """
        return self._stream("StdErr")

    def _stream(self, key: str) -> Path | None:
        if self.output is None:  # not submitted here: ask slurmctld
            from elastic_slurm.adapter import commands

            res = self.slurm.transport.run(commands.scontrol_show_job(self.job_id), timeout_s=30)
            value = scontrol_field(res.stdout, key) if res.returncode == 0 else ""
            if value:
                return Path(value)
            if self.workdir is None:
                return None
        return self._expand(self.output or DEFAULT_OUTPUT)

    def _expand(self, pattern: str) -> Path:
        found = self.slurm.job(self.job_id)
        name = found.name if found is not None else ""
        user = (found.user if found is not None else "") or getpass.getuser()
        array_id = (found.array_job_id if found is not None else None) or self.job_id
        path = expand_output_pattern(
            pattern, job_id=self.job_id, name=name, user=user, array_job_id=array_id
        )
        base = self.workdir or Path.cwd()
        return path if path.is_absolute() else base / path

    # ------------------------------------------------------------------ acting
    def wait(
        self,
        timeout: float | None = None,
        *,
        interval_s: float = 0.5,
        max_interval_s: float = 5.0,
    ) -> str:
        """Wait until the job ends; return its final state (``COMPLETED``, ``FAILED``...).

        Slurm is asked every ``interval_s`` seconds at first, then less and less often (the
        interval doubles up to ``max_interval_s``).

        Parameters
        ----------
        timeout
            Give up after this many seconds; ``None``: wait as long as it takes.
        interval_s, max_interval_s
            The first and the longest pause between two questions to Slurm (seconds).

        Raises
        ------
        DeadlineExceeded
            A :class:`TimeoutError`: the job had not ended after ``timeout`` seconds (it goes
            on running).
        InvalidRequest
            Neither slurmctld nor accounting knows the job.
        SlurmUnavailableError
            slurmctld did not answer within the site's retry window.
        """
        if timeout is not None and not (math.isfinite(timeout) and timeout >= 0):
            raise InvalidRequest(f"timeout must be a finite number of seconds >= 0, got {timeout}")
        final: list[str] = []

        def ended() -> bool:
            state = self.state
            if job_state(state) is JobState.ENDED:
                final.append(state)
                return True
            return False

        wait_for(
            ended,
            timeout_s=math.inf if timeout is None else timeout,
            what=f"job {self.job_id} to end",
            interval_s=interval_s,
            max_interval_s=max_interval_s,
        )
        return final[-1]

    def resize(
        self, nodes: int, *, timeout: float = 300.0, grow_path: GrowPath | None = None
    ) -> ResizeOutcome:
        """Grow or shrink the running job to ``nodes`` nodes, as ``elastic-slurm resize``.

        Returns when the application has followed the order (its ranks run on the new
        nodes, or have left the nodes given back).

        Parameters
        ----------
        nodes
            The size to go to (nodes), within the job's range.
        timeout
            Seconds to wait for the application to follow the order.
        grow_path
            How to grow: ``merge`` or ``sibling``; ``None``: what the site allows, probed once
            and cached (as ``elastic-slurm resize`` and ``doctor`` do).

        Returns
        -------
        ResizeOutcome
            The resize: ``before``/``after`` node tuples, ``seconds``, ``strategy`` and
            ``phases_s``.

        Raises
        ------
        InvalidRequest
            The job is not running, is rigid or moldable, ``nodes`` is outside its range or
            is its size, or it is another user's job. Nothing was changed.
        ResizeError
            Slurm refused, the application refused or failed (the job keeps its size), or it
            did not finish within ``timeout`` seconds.
        """
        site = self.site
        path = grow_path
        if path is None:
            from elastic_slurm.adapter.capabilities import cached_probe

            path = cached_probe(
                self.slurm.transport, site.name, preference=site.grow_path
            ).grow_path
        outcome = jobs.resize(
            self.slurm,
            self.job_id,
            nodes,
            grow_path=path,
            grant_timeout_s=site.controller.grant_timeout_s,
            timeout_s=timeout,
            controller=address.service_controller(site),
        )
        if not outcome.ok:
            raise ResizeError(
                f"job {self.job_id}: {outcome.action} to {nodes} node(s) failed: "
                f"{outcome.message or 'no reason given'}"
            )
        return outcome

    def cancel(self) -> list[int]:
        """Cancel the job with its expander and sibling allocations (``scancel``).

        Returns
        -------
        list of int
            The job ids cancelled (the job's first; of a job that has already ended, only its
            helper allocations still pending or running).

        Raises
        ------
        InvalidRequest
            slurmctld does not know the job, it is another user's, or it has already ended
            with no helper allocation left.
        """
        return jobs.cancel(self.slurm, self.job_id)

    def __repr__(self) -> str:
        return f"Job({self.job_id}, site={self.site.name!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Job):
            return NotImplemented
        return (self.job_id, self.site.name) == (other.job_id, other.site.name)

    def __hash__(self) -> int:
        return hash((self.job_id, self.site.name))


def scontrol_field(text: str, key: str) -> str:
    """The value of ``key`` in ``scontrol --oneliner show job`` output (``""`` if absent).

    A value runs up to the next ``Key=`` (values may hold single spaces, as paths can).

    >>> scontrol_field("JobId=7 StdErr=/w/slurm-7.out StdIn=/dev/null", "StdErr")
    '/w/slurm-7.out'
    """
    m = re.search(rf"(?:^|\s){re.escape(key)}=(.*?)(?=\s+[A-Za-z/:]+=|\s*$)", text, re.M)
    return m.group(1).strip() if m else ""


def expand_output_pattern(
    pattern: str, *, job_id: int, name: str = "", user: str = "", array_job_id: int | None = None
) -> Path:
    """An sbatch file name pattern with the job's values (``%j``, ``%x``, ``%u``, ``%A``...).

    ``%a`` (the array task) is left as it is: it names one file per task.

    >>> str(expand_output_pattern("out/%x-%j.%%.log", job_id=7, name="heat"))
    'out/heat-7.%.log'
    """
    values = {
        "j": str(job_id),
        "x": name,
        "u": user,
        "A": str(array_job_id or job_id),
        "%": "%",
    }
    return Path(re.sub(r"%([jxuA%])", lambda m: values[m.group(1)], pattern))


def submit(
    spec: str | Path | Mapping[str, Any] | None = None,
    program: Sequence[str] | str | None = None,
    *,
    script: str | Path | None = None,
    script_args: Sequence[str] = (),
    site: SiteConfig | str | Path | None = None,
    hold: bool = False,
    slurm: SlurmBackend | None = None,
    **options: Any,
) -> Job:
    """Submit a rigid, moldable, malleable or evolving job; return its :class:`Job`.

    The job is described as ``elastic-slurm submit`` takes it: a YAML job file or a mapping of
    its keys, a program, and options (the job file's keys) that override the file's values.

    Parameters
    ----------
    spec
        A YAML job file's path, or a mapping of its keys (``program``, ``kind``, ``nodes``...;
        ``docs/user-guide.md``); ``None``: the program and options say everything.
    program
        The command and its arguments (a list, or a string split as a shell would, without
        running one); for malleable and evolving jobs an mpi4py program, which the elastic
        launcher runs on every node.
    script
        A batch script with ``#SBATCH`` lines, as ``sbatch script`` takes it (rigid and moldable
        jobs): its ``#SBATCH`` options apply, ``options`` override them, and sbatch options the
        project does not interpret pass through to sbatch
        (:func:`elastic_slurm.batch_script.read_submission`). Give one of ``spec``,
        ``program`` and ``script``.
    script_args
        The script's arguments (``$1``...).
    site
        The site config, its name or path (``None``: ``$ELASTIC_SLURM_SITE``, else
        ``local``).
    hold
        Submit the job held: it waits until released (``scontrol release``).
    slurm
        The backend to submit through (``None``: the site's).
    **options
        Any job-file key: ``kind`` (``rigid``, ``moldable``, ``malleable``, ``evolving``),
        ``nodes`` (``4``, ``"2-8"`` or ``(2, 8)``), ``start_nodes``, ``ntasks_per_node``,
        ``time`` (``"30"`` minutes, ``"1:00:00"``), ``job_name``, ``partition``, ``account``,
        ``qos``, ``output``, ``workdir``, ``array``, ``speedup`` (``"amdahl:0.95"``),
        ``grace_period_s``, ``sized_by``, ``env`` (a mapping).

    Returns
    -------
    Job
        The submitted job.

    Raises
    ------
    ConfigError
        The job file is missing or malformed, or a key or value is wrong; the message names
        the file (or ``submit()``) and the key.
    InvalidRequest
        Nothing was submitted: an impossible request, a missing program, or more nodes than
        the cluster has.
    SlurmCommandError
        sbatch refused the job; nothing was queued.

    Examples
    --------
    A rigid job on 2 nodes, and a job file with its name overridden::

        job = submit(program="sleep 60", nodes=2)
        job = submit("job.yaml", job_name="run-7")
        job = submit(script="run.sh", script_args=["input.dat"], time="10")
    """
    from elastic_slurm.jobspec import load_spec

    if script is not None and (spec is not None or program is not None):
        raise InvalidRequest("submit(): give one of spec, program and script, not several")

    config = _site(site)
    overrides = dict(options)
    if program is not None:
        overrides["program"] = shlex.split(program) if isinstance(program, str) else list(program)
    nodes = overrides.get("nodes")
    if isinstance(nodes, tuple | list) and len(nodes) == 2:
        overrides["nodes"] = f"{nodes[0]}-{nodes[1]}"
    elif isinstance(nodes, int) and not isinstance(nodes, bool):
        overrides["nodes"] = str(nodes)
    if isinstance(overrides.get("time"), int) and not isinstance(overrides["time"], bool):
        overrides["time"] = str(overrides["time"])
    base: Path | None = None
    if script is not None:
        from elastic_slurm.batch_script import classify, read_submission

        if classify(Path(script)) != "script":
            raise InvalidRequest(
                f"submit(): {script} is not a batch script (a shell script, '#!' first); "
                "give a program with program=..."
            )
        sub = read_submission([str(script), *script_args])
        data = {k: v for k, v in sub.overrides.items() if v is not None}
        data.update({k: v for k, v in overrides.items() if v is not None})
        job_spec = load_spec(None, data)
        hold = hold or sub.hold
    elif spec is None or isinstance(spec, Mapping):
        data = {**dict(spec or {}), **{k: v for k, v in overrides.items() if v is not None}}
        if isinstance(data.get("program"), str):
            data["program"] = shlex.split(data["program"])
        try:
            job_spec = load_spec(None, data)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("the command line:", "submit():")) from exc
    else:
        path = Path(spec)
        job_spec = load_spec(path, overrides)
        base = path.parent
    done = api.submit_spec(job_spec, config, base=base, slurm=slurm, hold=hold)
    return Job(
        done.job_id,
        site=config,
        slurm=slurm,
        workdir=done.workdir,
        output=done.output
        or (DEFAULT_ARRAY_OUTPUT if done.request.array is not None else DEFAULT_OUTPUT),
    )
