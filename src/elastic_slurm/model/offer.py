"""The negotiation's wire format: the controller's offers and a job's answers (JSON).

Before a job that registered with the controller is resized, the controller *offers* the
resize (Ghafoor's thesis, chapter 4, "negotiation"; Klein's CooRMv2 views): expand with these
hosts (already granted by Slurm and held for the job), or shrink by ``count`` nodes. The job
*accepts* (the order follows), *rejects* (nothing changes; an expansion's hosts go back to
Slurm), or *counters* with another count; the controller answers a counter-offer with a
*final* offer, which the job can only accept or reject. See ``docs/protocol.md``.
"""

from __future__ import annotations

import enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class AnswerKind(enum.StrEnum):
    """How a job answers an offer."""

    ACCEPT = "accept"
    REJECT = "reject"
    COUNTER = "counter"


class Offer(_Wire):
    """Offer ``number`` (1, 2, ... per job) of a resize that would become order ``seq``.

    Parameters
    ----------
    number
        The offer's number within the job.
    seq
        The number the resize order gets if the job accepts.
    action
        ``expand`` or ``shrink``.
    count
        Nodes added (expand) or given back (shrink), at least 1.
    hosts
        Expand: the hosts offered (Slurm already holds them for the job). Shrink: the hosts the
        controller proposes the job gives back (the job's batch host is never among them).
    final
        A final offer (the answer to a counter-offer): only accept or reject.
    issued_at, deadline_at
        When it was made, and until when an answer is awaited (seconds since the epoch).
    withdrawn
        Why the controller withdrew it (empty while it stands); a withdrawn offer can no
        longer be answered.
    reason
        The policy's reason for the resize.
    """

    number: int = Field(ge=1)
    seq: int = Field(ge=1)
    action: Literal["expand", "shrink"]
    count: int = Field(ge=1)
    hosts: tuple[str, ...] = ()
    final: bool = False
    issued_at: float
    deadline_at: float
    withdrawn: str = ""
    reason: str = ""


class Answer(_Wire):
    """A job's answer to offer ``number``.

    Parameters
    ----------
    number
        The offer answered.
    answer
        :class:`AnswerKind`.
    count
        For a counter-offer: the node count the job proposes instead (at least 1).
    reason
        The job's reason (free text, shown in the controller's log and journal).
    at
        When the job answered (seconds since the epoch; set by whoever records it).

    Raises
    ------
    pydantic.ValidationError
        A counter-offer without a count.
    """

    number: int = Field(ge=1)
    answer: AnswerKind
    count: int | None = Field(None, ge=1)
    reason: str = Field("", max_length=500)
    at: float = 0.0

    @model_validator(mode="after")
    def _counter_has_count(self) -> Answer:
        if self.answer is AnswerKind.COUNTER and self.count is None:
            raise ValueError("a counter-offer needs a count (the nodes the job proposes)")
        return self


def final_count(offer: Offer, counter: int) -> int:
    """The count of the final offer that answers a counter-offer of ``counter`` nodes.

    The controller takes a counter-offer that asks for less than it offered (at least one
    node); anything else gets the original offer back as final.

    >>> o = Offer(number=1, seq=1, action="shrink", count=3, issued_at=0, deadline_at=1)
    >>> final_count(o, 2), final_count(o, 5), final_count(o, 3)
    (2, 3, 3)
    """
    return counter if 1 <= counter <= offer.count else offer.count
