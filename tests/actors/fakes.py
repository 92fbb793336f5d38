"""Fakes at the actors' edge: an in-memory committer, a clock, a pod source.

The committer applies each commit's events to its snapshot and keeps them, in order, with
their causes, so tests can replay them; it can be told to refuse the next commit, or to apply
it and then not answer (the store was slow and the ask timed out).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.ports.commit import CommitOutcomeUnknown
from actors.ports.pod_source import PodListing, PodListSnapshot
from actors.store_messages import CommitRefused, Snapshot
from policy.state.events import Event
from policy.state.sections import State, apply_all


class ApplyingCommitter:
    """A ``Committer`` that journals nothing but applies events."""

    def __init__(self, state: State) -> None:
        self.initial = state
        self.snapshot = Snapshot(state, 0)
        self.events: list[Event] = []
        self.causes: list[Mapping[str, Any]] = []
        self._refuse: CommitRefused | None = None
        self._silent = False

    def refuse_next(self, reason: str = "disk full") -> None:
        """The next commit persists nothing and raises ``CommitRefused(reason)``."""
        self._refuse = CommitRefused(reason)

    def apply_next_silently(self) -> None:
        """The next commit is applied, but its caller hears ``CommitOutcomeUnknown``."""
        self._silent = True

    def commit(self, events: tuple[Event, ...], cause: Mapping[str, Any]) -> Snapshot:
        if self._refuse is not None:
            refusal, self._refuse = self._refuse, None
            raise refusal
        self.snapshot = Snapshot(apply_all(self.snapshot.state, events), self.snapshot.seq + 1)
        self.events.extend(events)
        self.causes.append(cause)
        if self._silent:
            self._silent = False
            raise CommitOutcomeUnknown("no answer within 10.0 s")
        return self.snapshot

    def latest(self) -> Snapshot:
        return self.snapshot

    def replayed(self) -> State:
        """Every committed event applied, in order, to the initial state."""
        return apply_all(self.initial, self.events)


class FakeClock:
    """Wall time that moves only when told to."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakePodSource:
    """A ``PodSource`` whose listing the test sets; it counts how often it was asked."""

    def __init__(self, snapshot: PodListSnapshot | None = None) -> None:
        self.snapshot = snapshot
        self.asked = 0

    def list(self, fetched_at: float, **phases: str) -> None:
        """Set the listing to pods ``uid=phase`` (namespace ``default``, name = uid)."""
        pods = [PodListing(uid, "default", uid, phase) for uid, phase in phases.items()]
        self.snapshot = PodListSnapshot.of(pods, fetched_at)

    def latest(self) -> PodListSnapshot | None:
        self.asked += 1
        return self.snapshot
