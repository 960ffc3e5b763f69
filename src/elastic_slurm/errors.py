"""The error tree of elastic-slurm.

Every error the project raises on purpose derives from :class:`ElasticSlurmError`, and every
class tells the caller what to do: fix the input (:class:`ConfigError`, :class:`InvalidRequest`),
retry (:class:`SlurmCommandError` with ``transient=True``), or give up on this resize and keep the
job at its size (:class:`ResizeError`).
"""

from __future__ import annotations

from collections.abc import Sequence


class ElasticSlurmError(Exception):
    """Root of all errors raised by elastic-slurm."""


class ConfigError(ElasticSlurmError):
    """A site config or job spec is malformed; the message names the file and the key."""


class InvalidRequest(ElasticSlurmError):
    """An elastic request is impossible (for example ``nodes_min > nodes_max``).

    Raised before anything is submitted, so nothing is left behind.
    """


class NotRootError(ElasticSlurmError):
    """An operation needs root (the local cluster creates namespaces and starts daemons)."""


class ClusterError(ElasticSlurmError):
    """The local cluster failed to start, or is not in the state an operation needs."""


class SlurmCommandError(ElasticSlurmError):
    """A Slurm command failed.

    Parameters
    ----------
    argv
        The command as run (an argument list, never a shell string).
    returncode
        Its exit status; ``None`` when it timed out or could not be started.
    stdout, stderr
        What it printed.
    transient
        True when retrying the same command later can succeed (slurmctld busy or unreachable,
        the 22.05 "DB index is being set" message, a timeout).
    """

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int | None,
        stdout: str,
        stderr: str,
        *,
        transient: bool = False,
        reason: str | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.transient = transient
        #: what went wrong in a few words (``None``: the exit status says it)
        self.reason = reason
        what = reason or (f"exit status {returncode}" if returncode is not None else "no status")
        detail = (stderr.strip() or stdout.strip() or "(no output)").splitlines()
        shown = "\n    ".join(detail[-8:])
        hint = " (transient: retrying can help)" if transient else ""
        super().__init__(f"`{' '.join(self.argv)}` failed, {what}{hint}:\n    {shown}")


class ResizeError(ElasticSlurmError):
    """A resize could not be carried out; the job stays at (or returns to) its previous size."""


class PolicyError(ElasticSlurmError):
    """A policy plugin could not be found, loaded or configured."""


class SlurmUnavailableError(SlurmCommandError):
    """slurmctld did not answer: Slurm's view is unknown, which is not the same as empty.

    Raised by a backend when a query exits non-zero because the controller is unreachable, or
    exits 0 with a non-empty ``errors`` list (``squeue --json`` does that when slurmctld is
    down), or when pyslurm returns a communication error. The controller stops deciding while
    it sees this; user commands print one line and exit with Slurm's own code for it (1).
    """

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int | None,
        stdout: str,
        stderr: str,
        *,
        reason: str | None = None,
    ) -> None:
        super().__init__(
            argv,
            returncode,
            stdout,
            stderr,
            transient=True,
            reason=reason or "the Slurm controller (slurmctld) did not answer",
        )


class JobInputError(ElasticSlurmError):
    """Something a job wrote (a file in its directory, a protocol message) is unusable.

    The controller leaves that job out of the cycle, journals and logs the reason, and goes on
    with the others. ``job_id`` names the job; the message names the file or field.
    """

    def __init__(self, job_id: int | None, message: str) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id}: {message}" if job_id is not None else message)


class SlurmOutputError(SlurmCommandError, ValueError):
    """Slurm answered, but with something that cannot be read as what was asked.

    Raised by the parsers at the boundary (a number where a string belongs, a missing field,
    a negative or absurd count, a node list that does not parse): the message names the
    command, the record and the field. Not transient: the same question gets the same answer.
    It is also a :class:`ValueError`, which the parsers raised before.
    """

    def __init__(self, argv: Sequence[str], message: str, *, output: str = "") -> None:
        self.field_message = message
        super().__init__(argv, 0, output[:2000], message, reason="its output is unusable")
