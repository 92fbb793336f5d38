"""What every decision emits: the events a commit journals (DESIGN.md, one decision shape).

An ``Event`` is one committed state change. Each belongs to one state section (``section``):
the CPU section's events are in ``policy.state.events``, the memory balancer's in
``policy.balance.events``. The StateStore journals a decision's events with the decision's
inputs as the record's cause, then applies them; replaying them needs no policy code.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["Event"]


class Event:
    """A committed state change. ``section`` names the state section that applies it."""

    __slots__ = ()

    section: ClassVar[str]
