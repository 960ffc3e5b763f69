"""The one choke point through which every external command runs."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elastic_slurm.adapter.parse import is_unavailable
from elastic_slurm.errors import SlurmCommandError, SlurmUnavailableError


@dataclass(frozen=True)
class Completed:
    """A finished command: its argv, exit status, output and wall time (seconds)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float

    def check(self, *, transient: bool = False) -> Completed:
        """Return self if the command succeeded, else raise :class:`SlurmCommandError`.

        Raises
        ------
        SlurmUnavailableError
            It failed saying that slurmctld did not answer
            (:func:`~elastic_slurm.adapter.parse.is_unavailable`).
        SlurmCommandError
            It failed otherwise.
        """
        if self.returncode != 0:
            if is_unavailable(self.stderr + self.stdout):
                raise SlurmUnavailableError(self.argv, self.returncode, self.stdout, self.stderr)
            raise SlurmCommandError(
                self.argv, self.returncode, self.stdout, self.stderr, transient=transient
            )
        return self


class Transport(abc.ABC):
    """Runs argument lists somewhere (here, or on a login node).

    Implementations must never pass a command through a shell on this machine, log each
    command at DEBUG level, and turn a timeout into :class:`SlurmCommandError` with
    ``transient=True`` and ``returncode=None``.
    """

    #: True when commands run on this machine (so checks that need its files, e.g. a test
    #: spawn or pyslurm, can be made); False for a login node reached over SSH.
    is_local: bool = True

    @abc.abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> Completed:
        """Run ``argv`` and return its result without raising on a non-zero exit status.

        Parameters
        ----------
        argv
            The command and its arguments.
        timeout_s
            Seconds before the command is killed; ``None`` for the transport's default.
        env
            Variables added to (or replacing) the transport's environment.
        input_text
            Text written to the command's standard input.

        Raises
        ------
        SlurmCommandError
            The command could not be started (``returncode=None``) or timed out
            (``transient=True``).
        """
