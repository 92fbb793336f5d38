"""Messages of the StateStore actor: the commit protocol's vocabulary (DESIGN.md).

A writer (the Allocator, later the MemoryBalancer) computes events on the state of the
``Snapshot`` it holds, sends ``Commit(events, cause)`` and waits for the answer: the new
``Snapshot`` once the record is durable and applied, or ``CommitRefused`` with state unchanged.
Readers ask ``GetSnapshot`` and use the immutable value without locks; ``GetStatus`` answers
the store's health and figures, likewise a frozen value (``actors.store_status``). A ticker tells
``CheckpointIfDue`` every few seconds, so a node that stops committing still writes the
checkpoint its time limit asks for (DESIGN.md, Journal: "every N records").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from actors.errors import ActorError
from policy.errors import ErrorKind
from policy.state.events import Event
from policy.state.sections import State

__all__ = [
    "CheckpointIfDue",
    "Commit",
    "CommitInTurn",
    "CommitRefused",
    "GetSnapshot",
    "GetStatus",
    "Snapshot",
    "StoreUnavailable",
]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The durable state after the record with sequence number ``seq`` (0: nothing yet)."""

    state: State
    seq: int


@dataclass(frozen=True, slots=True)
class Commit:
    """Append one journal record holding ``events``, then apply them.

    ``cause`` is the whole input of the decision, msgpack-able (e.g. ``{"rpc": "Allocate",
    "request": {...}}``), so forensics can re-run it through the policy.
    """

    events: tuple[Event, ...]
    cause: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CommitInTurn:
    """Ask for a committer that commits in the asking writer's own turn (the store's
    ``InTurnCommitter``): the append, the fsync and the publication run in the writer's thread,
    under the store's lock, so a commit costs no hop to the store and back. The store's actor
    keeps its checkpoints and its readers; the committer refuses once that store is stopped."""


@dataclass(frozen=True, slots=True)
class GetSnapshot:
    """Ask for the latest published snapshot."""


@dataclass(frozen=True, slots=True)
class GetStatus:
    """Ask for the store's current ``StoreStatus`` (health, commits, journal, recovery)."""


@dataclass(frozen=True, slots=True)
class CheckpointIfDue:
    """Write a checkpoint if one is due: ``checkpoint_every_records`` records or
    ``checkpoint_every_s`` seconds (on the store's own clock) since the last one, and a record
    it does not cover yet.

    Safe to ``tell``: the store never raises for it (a failure is logged and counted). Asked,
    it answers the checkpoint's path, or None when nothing was written. ``now`` is the wall
    time the ticker sent it, for the log; whether a checkpoint is due is the store's decision,
    so a tick that waited in the mailbox changes nothing.
    """

    now: float = 0.0


class CommitRefused(ActorError):  # noqa: N818 (a refusal, named as the protocol names it)
    """The commit was not persisted (I/O error, disk full, events that do not fit).

    State is unchanged; a kubelet call that needed it answers UNAVAILABLE and is retried.
    """

    kind = ErrorKind.UNAVAILABLE


class StoreUnavailable(CommitRefused):
    """The store refuses every commit (a failed truncation, or stopping); see its health."""

    kind = ErrorKind.UNAVAILABLE
