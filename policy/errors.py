"""The root of the policy package's errors.

Every error the pure domain raises on purpose derives from ``PolicyError``, so the layers
above can tell a refused decision (bad input, not enough CPUs) from a bug, and the wire layer
can map each subclass to one gRPC status in one place. It is a ``ValueError`` because every
such refusal is about the value the caller passed in.

Subclasses live next to the rule that raises them (``policy.request.RequestError``,
``policy.selection.SelectionError``, ``policy.state_errors.StateError``,
``policy.reserve.ReserveError``, ...).
"""

from __future__ import annotations

__all__ = ["PolicyError"]


class PolicyError(ValueError):
    """A policy decision refused because of its input; the message names the numbers.

    A policy call that raises leaves every value it was given unchanged: decisions are pure,
    so nothing needs undoing.
    """
