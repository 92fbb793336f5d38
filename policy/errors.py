"""The root of the policy's errors.

Every error a policy decision raises is a :class:`PolicyError`; modules add their own
subclasses (``RequestError``, ``QoSError``, ...) next to the rule they enforce. The wire layer
maps each subclass to one gRPC status code, in one place; the daemon treats any other
exception escaping ``policy/`` as a bug.
"""

from __future__ import annotations

__all__ = ["PolicyError"]


class PolicyError(ValueError):
    """Root of policy errors; the wire layer maps subclasses to gRPC codes.

    A policy call that raises leaves every value it was given unchanged: decisions are pure,
    so nothing needs undoing.
    """
