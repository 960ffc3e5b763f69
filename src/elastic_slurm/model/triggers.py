"""Why a policy is asked to decide (ElastiSim's invocation types, in our terms)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class TriggerKind(enum.StrEnum):
    """The events that start a scheduling cycle."""

    PERIODIC = "periodic"
    JOB_SUBMITTED = "job_submitted"
    JOB_ENDED = "job_ended"
    EVOLVING_REQUEST = "evolving_request"
    RESIZE_DONE = "resize_done"


@dataclass(frozen=True)
class Trigger:
    """One or more coalesced events; ``job_ids`` names the jobs concerned (may be empty)."""

    kinds: frozenset[TriggerKind]
    job_ids: tuple[int, ...] = ()

    @classmethod
    def periodic(cls) -> Trigger:
        """A trigger for a cycle with no particular event."""
        return cls(frozenset({TriggerKind.PERIODIC}))
