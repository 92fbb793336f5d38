"""The committer port: how a writer makes its events durable (DESIGN.md, the commit protocol).

A writer (the Allocator, the MemoryBalancer) holds a ``Snapshot`` of the durable state,
computes events on it and hands them to a ``Committer``, which answers with the next durable
``Snapshot`` or refuses; ``AdoptedSnapshot`` is that holding, shared by both writers.
``StateStoreCommitter`` is the real one: it asks the StateStore actor and waits. That wait is
the one place an actor blocks on another, safe because the StateStore never calls anyone, so
no cycle of waits can form.

Three outcomes, kept apart because they leave the writer in different places:

* the new snapshot: the record is durable and applied;
* ``CommitRefused`` (or its ``StoreUnavailable``): nothing was persisted, the state is what
  the writer holds;
* ``CommitOutcomeUnknown``: the store did not answer (timeout, or it died with the commit in
  its mailbox), or it answered that its journal could not cut the failed write back (the
  record may be on disk and be replayed at the next start, while the store refuses every
  later commit); the writer must re-read the durable state with ``latest()`` before its next
  decision rather than trust the snapshot it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import pykka

from actors.ports.actor_ref import ActorRef
from actors.store_messages import (
    Commit,
    CommitOutcomeUnknown,
    CommitRefused,
    GetSnapshot,
    Snapshot,
    StoreUnavailable,
)
from policy.state.events import Event

__all__ = [
    "DEFAULT_COMMIT_TIMEOUT_S",
    "AdoptedSnapshot",
    "CommitOutcomeUnknown",
    "Committer",
    "GroupCommitter",
    "StateStoreCommitter",
]

#: How long a writer waits for the store. Generous: an fsync on a loaded disk takes seconds,
#: and kubelet's own deadline (the gRPC handler's ask) bounds the RPC anyway.
DEFAULT_COMMIT_TIMEOUT_S = 10.0


class Committer(Protocol):
    """Makes events durable and says what the durable state now is."""

    def commit(self, events: tuple[Event, ...], cause: Mapping[str, Any]) -> Snapshot:
        """Journal one record of ``events`` with its ``cause``, apply it, return the new snapshot.

        Raises:
            CommitRefused: nothing was persisted; the durable state is unchanged.
            CommitOutcomeUnknown: no answer, or the store cannot say (its journal could not cut
                a failed write back); re-read the state with ``latest()``.
        """
        ...

    def latest(self) -> Snapshot:
        """The latest durable snapshot, after every commit sent before this call.

        Raises:
            StoreUnavailable: the store cannot answer.
        """
        ...


@runtime_checkable
class GroupCommitter(Committer, Protocol):
    """A ``Committer`` that can also commit a group of records with one fsync.

    Inside ``group()``, ``commit`` writes the record and answers the state after it without
    making it durable; ``sync`` then makes every record of the group durable at once and
    answers the published snapshot. A failed write or sync cuts every record of the group back
    (``CommitRefused``); ``broken`` then says the group's earlier records are gone. If the cut
    itself fails, the group's records may or may not be on disk (``CommitOutcomeUnknown``);
    ``broken`` then says they are not durable as far as anyone can tell.
    """

    def group(self) -> AbstractContextManager[None]:
        """Hold the store for one group; leaving it unsynced cuts the group back."""
        ...

    def sync(self) -> Snapshot:
        """Make the group durable; see the class docstring.

        Raises:
            CommitRefused: nothing of the group was persisted.
            CommitOutcomeUnknown: the group could not be cut back; it may be on disk.
        """
        ...

    @property
    def broken(self) -> bool:
        """Whether a failed write cut the current group's earlier records back (or failed to,
        leaving their outcome unknown): either way none of them may be answered as durable."""
        ...


class AdoptedSnapshot:
    """A writer's copy of the durable state: commit, adopt the answer, re-read after silence.

    The Allocator and the MemoryBalancer both hold one; each maps the two exceptions to its
    own "unavailable" error.

    Args:
        committer: where events are made durable.
        snapshot: the durable state to start from.
    """

    def __init__(self, committer: Committer, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._committer = committer
        # Set when a commit went unanswered: the snapshot may be behind the disk.
        self._stale = False

    def commit(self, events: tuple[Event, ...], cause: Mapping[str, Any]) -> None:
        """Commit ``events`` and adopt the snapshot the store answers.

        Raises:
            CommitRefused: nothing was persisted; the held snapshot is still right.
            CommitOutcomeUnknown: no answer, or the store cannot say; the next
                ``resync_if_stale`` re-reads the state.
        """
        try:
            self.snapshot = self._committer.commit(events, cause)
        except CommitOutcomeUnknown:
            self._stale = True
            raise

    def resync_if_stale(self) -> None:
        """After an unanswered commit, re-read the durable state (before deciding again).

        Raises:
            CommitRefused: the store cannot answer (``StoreUnavailable``); still stale.
        """
        if not self._stale:
            return
        self.snapshot = self._committer.latest()
        self._stale = False


class StateStoreCommitter:
    """A ``Committer`` that asks the StateStore actor (``Commit`` / ``GetSnapshot``).

    Args:
        store: the StateStore's ``ActorRef``.
        timeout_s: how long to wait for each answer.
    """

    def __init__(self, store: ActorRef, timeout_s: float = DEFAULT_COMMIT_TIMEOUT_S) -> None:
        if not timeout_s > 0:
            raise ValueError(f"commit timeout must be positive, got {timeout_s} s")
        self._store = store
        self._timeout_s = timeout_s

    def commit(self, events: tuple[Event, ...], cause: Mapping[str, Any]) -> Snapshot:
        """Ask the store to commit; see ``Committer.commit``.

        Raises:
            CommitRefused: the store refused (its exception, unchanged), or it was not running
                when asked, so the commit never reached it (``StoreUnavailable``).
            CommitOutcomeUnknown: the store answered so (its exception, unchanged: the journal
                could not cut a failed write back), no answer within the timeout, or the store
                stopped with the commit in its mailbox.
        """
        try:
            # Blocking ask from inside an actor: the StateStore never calls anyone, so this
            # wait cannot be part of a cycle (DESIGN.md, the commit protocol step 1).
            reply = self._store.ask(Commit(events, cause), timeout=self._timeout_s)
        except (CommitRefused, CommitOutcomeUnknown):
            raise
        except pykka.Timeout as err:
            raise CommitOutcomeUnknown(
                f"the state store did not answer a commit of {len(events)} events "
                f"within {self._timeout_s} s"
            ) from err
        except pykka.ActorDeadError as err:
            raise CommitOutcomeUnknown(f"the state store stopped during a commit: {err}") from err
        return _expect_snapshot(reply, "Commit")

    def latest(self) -> Snapshot:
        """Ask the store for its latest snapshot; see ``Committer.latest``.

        Raises:
            StoreUnavailable: no answer within the timeout, or the store is not running.
        """
        try:
            # Blocking for the same reason as ``commit``: the store never calls back.
            reply = self._store.ask(GetSnapshot(), timeout=self._timeout_s)
        except (pykka.Timeout, pykka.ActorDeadError) as err:
            raise StoreUnavailable(f"the state store did not answer GetSnapshot: {err!r}") from err
        return _expect_snapshot(reply, "GetSnapshot")


def _expect_snapshot(reply: object, asked: str) -> Snapshot:
    if not isinstance(reply, Snapshot):
        raise TypeError(
            f"the state store answered {asked} with {type(reply).__name__}, not Snapshot"
        )
    return reply
