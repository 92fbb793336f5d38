"""Messages of the StateStore actor: the commit protocol's vocabulary (DESIGN.md).

A writer (the Allocator, later the MemoryBalancer) computes events on the state of the
``Snapshot`` it holds, sends ``Commit(events, cause)`` and waits for the answer: the new
``Snapshot`` once the record is durable and applied, ``CommitRefused`` when nothing of it was
persisted, or ``CommitOutcomeUnknown`` when the store cannot say (its journal could not cut a
failed write back, so the record may be on disk and replayed at the next start).
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
    "CommitOutcomeUnknown",
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
    """The store refuses every commit (its journal's tail is unknown since a failed write could
    not be cut back, or it is stopping); nothing of this commit was written. See its health."""

    kind = ErrorKind.UNAVAILABLE


class CommitOutcomeUnknown(ActorError):  # noqa: N818 (an outcome, like CommitRefused)
    """A commit that may or may not have been persisted: the writer must assume neither.

    Two ways to get it: the store did not answer (the ask timed out, or the store stopped with
    the commit in its mailbox; ``actors.ports.commit``), or it answered that the journal could
    not cut the failed write back (``journal.WriteOutcomeUnknown``): the record may be on disk
    and would then be replayed at the next start, though the published state does not hold it.
    The writer re-reads the durable state (``Committer.latest()``) before deciding again.

    Not a ``CommitRefused``, which promises that nothing was persisted. A kubelet call that
    needed it answers UNAVAILABLE, which asks for a retry without claiming the call had no
    effect; the retry is safe because every kubelet call is idempotent (a re-sent Allocate of
    a container the restarted store holds answers its stored allocation, spec cpu-policy §7.1
    step 8).
    """

    kind = ErrorKind.UNAVAILABLE
