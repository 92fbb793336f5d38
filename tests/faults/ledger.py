"""What a client was told, and the one check every fault test ends with (the fault suite).

Each operation is recorded as the caller saw it: **acknowledged** (answered with success),
**refused** (answered with an error the daemon chose: nothing may have been committed), or
**in doubt** (no answer: the connection broke or the deadline passed while the call was in
flight; it may or may not have been committed, as kubelet's retry will find out). After the
fault and a restart, the durable state must hold every acknowledged operation and none of the
refused ones; an in-doubt one may be either.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class Ledger:
    """Thread-safe record of operations by key (a pod UID)."""

    acknowledged: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)
    in_doubt: set[str] = field(default_factory=set)
    reasons: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, key: str) -> None:
        with self._lock:
            self.acknowledged.add(key)

    def refuse(self, key: str, reason: str) -> None:
        with self._lock:
            self.refused.add(key)
            self.reasons[key] = reason

    def doubt(self, key: str, reason: str) -> None:
        with self._lock:
            self.in_doubt.add(key)
            self.reasons[key] = reason

    def check(self, durable: Iterable[str]) -> None:
        """Nothing acknowledged is lost; nothing refused appears.

        Raises:
            AssertionError: naming the keys and what was said about them.
        """
        present = set(durable)
        lost = sorted(self.acknowledged - present)
        appeared = sorted(self.refused & present)
        assert not lost, f"acknowledged but lost after the restart: {lost}"
        assert not appeared, "refused but present after the restart: " + ", ".join(
            f"{k} ({self.reasons.get(k, '')})" for k in appeared
        )
        unknown = present - self.acknowledged - self.in_doubt - self.refused
        assert not unknown, f"present but never sent: {sorted(unknown)}"
