"""The one shape of every decision (DESIGN.md, "Every decision has one shape").

A decision is a pure function in ``policy`` of ``(state, inputs, settings, now)`` that returns a
:class:`Decision`: the events to commit, the reply or the error, and the effects the actor
carries out after the commit. ``inputs`` is plain data holding everything the decision read
(the request, the pod source's answer, metric samples, an advisor response), journaled as the
record's cause, so the decision can be re-run from the journal alone.

An ``Event`` is one committed state change. Each belongs to one state section (``section``):
the CPU section's events are in ``policy.state.events``, the memory balancer's in
``policy.balance.events``. The StateStore journals a decision's events with the decision's
inputs as the record's cause, then applies them; replaying them needs no policy code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from policy.errors import PolicyError

__all__ = ["Decision", "Effect", "Event"]

R = TypeVar("R")


class Event:
    """A committed state change. ``section`` names the state section that applies it."""

    __slots__ = ()

    section: ClassVar[str]


class Effect:
    """Something the actor does after the decision's events are durable (a page migration, a
    call to sys-advisor). Effects are values: the decision names them, the actor runs them."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Decision(Generic[R]):
    """What one decision decided.

    Attributes:
        events: commit these (in order) before replying; empty for reads.
        reply: the answer (``None`` where there is none).
        error: set when the decision fails after events that must still be committed (the
            Allocate finaliser, spec cpu-policy §7.2): commit the events, then fail with it.
        warnings: problems that did not fail the decision, for the caller to log.
        effects: what to carry out once the events are durable, in order.
    """

    events: tuple[Event, ...]
    reply: R
    error: PolicyError | None = None
    warnings: tuple[str, ...] = ()
    effects: tuple[Effect, ...] = ()
