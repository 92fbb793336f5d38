"""The root of the policy package's errors.

Every error the pure domain raises on purpose derives from ``PolicyError``, so the layers
above can tell a refused decision (bad input, not enough CPUs) from a bug, and the wire layer
can map each subclass to one gRPC status in one place. It is a ``ValueError`` because every
such refusal is about the value the caller passed in.

Subclasses live next to the rule that raises them (``policy.cpu.request.RequestError``,
``policy.topology.selection.SelectionError``, ``StateError``,
``policy.cpu.reserve.ReserveError``, ...).
"""

from __future__ import annotations

__all__ = ["CodecError", "PolicyError", "StateError"]


class PolicyError(ValueError):
    """A policy decision refused because of its input; the message names the numbers.

    A policy call that raises leaves every value it was given unchanged: decisions are pure,
    so nothing needs undoing.
    """


class StateError(PolicyError):
    """An event that does not fit the state (unknown container, missing pool, bad cpuset).

    Applying it produces no state: the StateStore then refuses the commit, so a wrong decision
    never reaches the journal (spec cpu-policy §5).
    """


class CodecError(StateError):
    """An encoded event or state that is not well formed; the message names the field."""
