"""Who the StateStore tells what it publishes: its snapshots and its statuses (DESIGN.md, Actors).

Both are frozen values, told as each is published, from the thread that published it (the
store's own, or a writer's committing in its turn under the store's lock). A subscriber
must not block (an actor ref's ``tell``, or keeping the value in an attribute, is the usual
one); one that raises is logged with the seq it was told about and changes nothing — never a
failed commit, never a dead store, and the other subscribers are still told.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Subscribers"]

_log = logging.getLogger("actors.state_store")

Value = TypeVar("Value")


class Subscribers(Generic[Value]):
    """The subscribers to one kind of published value.

    Args:
        what: the value's name in the log line of a failing subscriber (``snapshot``).
        seq: the seq a value is about, for that log line.
    """

    def __init__(self, what: str, seq: Callable[[Value], int]) -> None:
        self._what = what
        self._seq = seq
        self._subscribers: list[Callable[[Value], None]] = []

    def add(self, subscriber: Callable[[Value], None], *, current: Value | None = None) -> None:
        """Tell ``subscriber`` every value from now on, and ``current`` at once if given."""
        self._subscribers.append(subscriber)
        if current is not None:
            self._tell_one(subscriber, current)

    def tell(self, value: Value) -> None:
        """Tell every subscriber ``value``; never raises (module rules)."""
        for subscriber in self._subscribers:
            self._tell_one(subscriber, value)

    def _tell_one(self, subscriber: Callable[[Value], None], value: Value) -> None:
        try:
            subscriber(value)
        except Exception:
            _log.exception("a %s subscriber failed at seq %d", self._what, self._seq(value))
