"""Every rank raises the same error: how a collective step fails on all its ranks at once.

A rank that meets a problem in a collective step (arguments it refuses, a file it cannot read,
a spawn that failed on it) must not raise alone: the other ranks would wait for it in the next
collective until the job's time limit. Instead every rank reports its verdict in one small
``allgather`` (:func:`raise_together`); if any rank has a problem, or holds arguments that
differ from rank 0's, every rank raises the same exception, of the first culprit's class,
naming the culprit ranks and their problems, one line per distinct problem. The checkpoint
files (:mod:`.checkpoint`), the redistribution (:mod:`.redistribute`) and the background
spawn (:mod:`.spawn`) all fail this way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from mpi4py import MPI

#: A rank's problem: the exception class every rank raises, and this rank's message.
Problem = tuple[type[Exception], str]

#: Most distinct problems (and ranks per problem) a message lists.
MAX_LISTED = 8


def raise_together(
    comm: MPI.Intracomm,
    problem: Problem | None,
    what: str,
    *,
    signature: object = None,
    arguments: str | None = None,
    payload: object = None,
    outcome: str = "failed;",
    cause: BaseException | None = None,
) -> list[object]:
    """Exchange every rank's verdict (collective); raise the same error on all if any failed.

    Parameters
    ----------
    comm
        The ranks of the step.
    problem
        This rank's problem, or ``None``.
    what
        The step, first in the message (``save_rows``, ``spawn and merge``).
    signature
        Arguments that must be equal on every rank; one that differs from rank 0's is a
        ``ValueError`` of that rank, named by ``arguments`` (their names) when given.
    payload
        Any small picklable value, returned per rank when no rank failed (rank 0 hands out
        results this way without a second collective).
    outcome
        What the culprits did, before "every rank raises this error" in the message.
    cause
        Chained to the raised exception (``raise ... from cause``).

    Returns
    -------
    list
        Every rank's ``payload``, in rank order.

    Raises
    ------
    Exception
        Of the first culprit's class, on every rank, when any rank had a problem or a
        different ``signature``; the message is :func:`message`'s.
    """
    reports: list[tuple[Problem | None, object, object]] = comm.allgather(
        (problem, signature, payload)
    )
    culprits = [(r, p) for r, (p, _, _) in enumerate(reports) if p is not None]
    if not culprits:
        reference = reports[0][1]
        culprits = [
            (r, (ValueError, _differ(sig, reference, arguments)))
            for r, (_, sig, _) in enumerate(reports)
            if sig != reference
        ]
    if culprits:
        raise_culprits(what, len(reports), culprits, outcome=outcome, cause=cause)
    return [p for _, _, p in reports]


def raise_culprits(
    what: str,
    size: int,
    culprits: Sequence[tuple[int, Problem]],
    *,
    outcome: str = "failed;",
    cause: BaseException | None = None,
) -> NoReturn:
    """Raise the error :func:`raise_together` raises, from culprits already known.

    For a verdict that reached every rank another way (rank 0's, broadcast).
    """
    raise culprits[0][1][0](message(what, size, culprits, outcome)) from cause


def message(what: str, size: int, culprits: Sequence[tuple[int, Problem]], outcome: str) -> str:
    """The shared error message: the step, how many ranks, and each distinct problem.

    >>> print(message("save_rows", 4, [(1, (OSError, "disk full")), (3, (OSError, "disk full"))],
    ...               "failed;"))
    save_rows: 2 of 4 ranks failed; every rank raises this error:
      ranks 1, 3: disk full
    """
    lines = culprit_lines([(r, text) for r, (_, text) in culprits])
    return (
        f"{what}: {len(culprits)} of {size} ranks {outcome} every rank raises this error:\n  "
        + "\n  ".join(lines)
    )


def culprit_lines(culprits: Sequence[tuple[int, str]]) -> list[str]:
    """Format ``(rank, message)`` pairs, one line per distinct message, ranks grouped.

    >>> culprit_lines([(0, "a"), (2, "b"), (3, "a")])
    ['ranks 0, 3: a', 'rank 2: b']
    """
    by_message: dict[str, list[int]] = {}
    for rank, text in culprits:
        by_message.setdefault(text, []).append(rank)
    lines = []
    for text, ranks in list(by_message.items())[:MAX_LISTED]:
        shown = ", ".join(map(str, ranks[:MAX_LISTED])) + (
            ", ..." if len(ranks) > MAX_LISTED else ""
        )
        lines.append(f"rank{'s' if len(ranks) > 1 else ''} {shown}: {text}")
    if len(by_message) > MAX_LISTED:
        lines.append(f"... and {len(by_message) - MAX_LISTED} more distinct problems")
    return lines


def _differ(signature: object, reference: object, arguments: str | None) -> str:
    if arguments is None:
        return f"arguments {signature!r} differ from rank 0's {reference!r}"
    return f"arguments ({arguments}) = {signature} differ from rank 0's {reference}"
