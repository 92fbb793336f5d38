"""Messages between the AdvisorLink, the Allocator and the link's own threads (DESIGN.md
"Actors and messages"; cpu-policy §11.5).

To the Allocator (``actors.allocator_advisor`` serves them):

* :class:`ApplyAdvice` — one ListAndWatch response to decide on with
  ``policy.cpu.advisor.decision.apply_advice`` and commit with ``response_cause``; the
  Allocator tracks the last applied one for ``fall_back_when_silent``.
* :class:`AdvisorLinkChanged` — the link entered a state; while it is not ``watching``,
  Allocate and RemovePod answer without calling the advisor.
* :class:`CheckAdvisorSilence` — a ticker's tick: time to compare the silence since the last
  applied response with ``--cpu-advisor-unhealthy-after`` (``fall_back_when_silent``).

To the AdvisorLink:

* :class:`StartLink`, :class:`StopLink` — from the composition root.
* :class:`RetryLink`, :class:`CheckReceive` — its timers (back-off over; a stuck check due).
* :class:`PollAdvice` — its timer at Katalyst v0.5.47: time for the next ``GetAdvice``.
* :class:`StreamReceived`, :class:`StreamEnded` — from the thread reading the stream.
* :class:`ReportSickAdvisor` — the Allocator met a sick advisor in AddContainer or RemovePod.
* :class:`GetLinkStatus` — the link's state and figures, for health and metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

from policy.cpu.advisor.response import AdvisorResponse

__all__ = [
    "AdvisorLinkChanged",
    "ApplyAdvice",
    "CheckAdvisorSilence",
    "CheckReceive",
    "GetLinkStatus",
    "LinkCommand",
    "PollAdvice",
    "ReportSickAdvisor",
    "RetryLink",
    "StartLink",
    "StopLink",
    "StreamEnded",
    "StreamReceived",
]


@dataclass(frozen=True, slots=True)
class ApplyAdvice:
    """Apply one calculation result (to the Allocator).

    Attributes:
        response: the response as received.
        received_at: the monotonic time it was received (the fallback's silence clock).
    """

    response: AdvisorResponse
    received_at: float


@dataclass(frozen=True, slots=True)
class AdvisorLinkChanged:
    """The link is now in ``state`` (a ``machines.advisor_link`` state), since ``at``."""

    state: str
    at: float


@dataclass(frozen=True, slots=True)
class CheckAdvisorSilence:
    """Check how long no response was applied (to the Allocator, from a ticker).

    Attributes:
        now: the wall time of the tick (the Allocator decides on its own clock's time).
    """

    now: float


@dataclass(frozen=True, slots=True)
class StartLink:
    """Start the link: dial, push, watch."""


@dataclass(frozen=True, slots=True)
class StopLink:
    """Stop the link and any stream it reads."""


@dataclass(frozen=True, slots=True)
class RetryLink:
    """The back-off started at attempt ``attempt`` is over: dial again."""

    attempt: int


@dataclass(frozen=True, slots=True)
class CheckReceive:
    """Time for the receive-stuck check (§11.2 step 7)."""


@dataclass(frozen=True, slots=True)
class PollAdvice:
    """Attempt ``attempt``'s ``--cpu-resource-plugin-advisor-interval`` is over: GetAdvice."""

    attempt: int


@dataclass(frozen=True, slots=True)
class StreamReceived:
    """The stream of attempt ``attempt`` delivered ``response``."""

    attempt: int
    response: AdvisorResponse


@dataclass(frozen=True, slots=True)
class StreamEnded:
    """The stream of attempt ``attempt`` ended with ``error`` (the reference's message)."""

    attempt: int
    error: str


@dataclass(frozen=True, slots=True)
class ReportSickAdvisor:
    """A call outside the stream found the advisor sick (``reason``)."""

    reason: str


@dataclass(frozen=True, slots=True)
class GetLinkStatus:
    """Ask for the link's ``LinkStatus``."""


LinkCommand = (
    StartLink
    | StopLink
    | RetryLink
    | CheckReceive
    | PollAdvice
    | StreamReceived
    | StreamEnded
    | ReportSickAdvisor
    | GetLinkStatus
)
