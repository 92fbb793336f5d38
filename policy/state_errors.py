"""Errors of the state model, its events and its codec (spec cpu-policy §5).

An event that does not fit the state it is applied to raises :class:`StateError` and produces
no state: the StateStore then refuses the commit, so a wrong decision never reaches the
journal. A journal record or checkpoint that cannot be decoded raises :class:`CodecError`,
which names the field that is wrong.
"""

from __future__ import annotations

from policy.errors import PolicyError

__all__ = ["CodecError", "StateError"]


class StateError(PolicyError):
    """An event that does not fit the state (unknown container, missing pool, bad cpuset)."""


class CodecError(StateError):
    """An encoded event or state that is not well formed; the message names the field."""
