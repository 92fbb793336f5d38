"""The reply kubelet got from the call that wrote a record, and the moves it was not told of
(``qrmd journal explain``).

**The reply** is the answer of the call that caused the record, for exactly the containers it
covered, with the values sent, read from the record itself (``policy.cpu.cause``, "The
reply"), never from a later state:

* Allocate covers the one container it was about: the ``cpu`` allocation sent, as journaled.
  Kubelet's Allocate of a shared container can name CPUs the state does not hold after the
  record (all pooled CPUs while it joined its pool, cpu-policy §15.1).
* GetResourcesAllocation covers every container of the pod: the listing is remade with the
  code that made it live (``policy.cpu.listing_parts.pod_allocations``) from the state it was
  made from — the state before the record with its lifecycle steps applied, before the pool
  adjustment the record also holds (§10.1 step 2, §15.6). The record names how many of its
  events that is.
* A record of another kind answered no kubelet call about a container: no reply.

A record written before replies were journaled says ``reply not recorded``: there is nothing
exact to show, and a later state is not what kubelet got. **A move** is a change to a container
that neither the reply covered nor the call was about (a RemovePod's own pod) — another pod's
Allocate that shrank its pool, the pool adjustment after a listing — shown as ``moved by
Allocate of ns/other (uid)/app``: kubelet hears of it only at its next listing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from journal import Record
from policy.cpu.cause import REPLY_KEY
from policy.cpu.listing_parts import pod_allocations
from policy.errors import PolicyError
from policy.state.replay import ReplayError, replay_records
from qrmd.offline.changes import ContainerChange
from qrmd.offline.renderers import cause_kind, pod_label, render_cause
from qrmd.offline.walk import ForensicsError, Step

__all__ = ["NOT_RECORDED", "Reply", "SentAllocation", "moves_of", "reply_to"]

#: The text of a reply the record does not hold (module docstring).
NOT_RECORDED = "reply not recorded"


@dataclass(frozen=True, slots=True)
class SentAllocation:
    """One container's ``cpu`` allocation as sent to kubelet (wire.md §4.3).

    ``allocation_result`` None: the answer had no allocation at all (kubelet records nothing).
    """

    allocation_result: str | None
    allocated_quantity: float | None

    def describe(self) -> str:
        """``cpuset 1,3-15 (14 CPUs)``, or what kubelet got instead of a cpuset."""
        if self.allocation_result is None:
            return "no allocation_result"
        return f"cpuset {self.allocation_result or '(empty)'} ({self.allocated_quantity:g} CPUs)"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values, named as on the wire."""
        return {
            "allocation_result": self.allocation_result,
            "allocated_quantity": self.allocated_quantity,
        }


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer of the kubelet call that caused a record, for the pod's containers it covered.

    Attributes:
        rpc: the call.
        containers: each covered container → what it was sent; None for every one when the
            record does not hold the reply (``recorded`` false) or the call failed.
        recorded: whether the record holds the reply (module docstring).
        error: the call failed with this message after committing (Allocate's finaliser).
    """

    rpc: str
    containers: dict[str, SentAllocation | None]
    recorded: bool
    error: str | None = None

    def describe(self, container: str) -> str:
        """The one line of text for a covered container."""
        if not self.recorded:
            return NOT_RECORDED
        if self.error is not None:
            return f"{self.rpc} failed: {self.error}"
        sent = self.containers[container]
        return NOT_RECORDED if sent is None else sent.describe()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {
            "rpc": self.rpc,
            "recorded": self.recorded,
            "error": self.error,
            "containers": {
                name: None if sent is None else sent.to_json()
                for name, sent in self.containers.items()
            },
        }


def reply_to(step: Step, uid: str, container: str | None) -> Reply | None:
    """The answer kubelet got from the call that caused ``step``'s record, for pod ``uid``'s
    containers it covered (all, or ``container`` only); None when the call answered nothing
    about them (module docstring).

    Raises:
        ForensicsError: the record names a listing its events cannot remake.
    """
    cause = step.record.cause
    kind = cause_kind(cause)
    journaled = cause.get(REPLY_KEY)
    if kind == "Allocate":
        request = cause.get("request")
        if not isinstance(request, Mapping) or request.get("pod_uid") != uid:
            return None
        name = str(request.get("container_name", ""))
        if container is not None and name != container:
            return None
        return _allocate_reply(name, journaled)
    if kind == "GetResourcesAllocation":
        names = [n for n in step.before.cpu.pod_containers(uid) if container in (None, n)]
        if not names:
            return None
        if not isinstance(journaled, Mapping):
            return Reply(kind, dict.fromkeys(sorted(names)), recorded=False)
        return _listing_reply(step, uid, container, journaled.get("listed_after_events"))
    return None


def _allocate_reply(name: str, journaled: object) -> Reply:
    if not isinstance(journaled, Mapping):
        return Reply("Allocate", {name: None}, recorded=False)
    if "error" in journaled:
        return Reply("Allocate", {name: None}, recorded=True, error=str(journaled["error"]))
    allocation = journaled.get("allocation")
    if not isinstance(allocation, Mapping):
        return Reply("Allocate", {name: SentAllocation(None, None)}, recorded=True)
    quantity = allocation.get("allocated_quantity")
    sent = SentAllocation(
        str(allocation.get("allocation_result", "")),
        float(quantity) if isinstance(quantity, int | float) else None,
    )
    return Reply("Allocate", {name: sent}, recorded=True)


def _listing_reply(step: Step, uid: str, container: str | None, listed_after: object) -> Reply:
    """The pod's part of the listing, remade from the state it was made from."""
    record = step.record
    if (
        isinstance(listed_after, bool)
        or not isinstance(listed_after, int)
        or not 0 <= listed_after <= len(record.events)
    ):
        raise ForensicsError(
            f"record {record.seq}: its reply names {listed_after!r} listed events of "
            f"{len(record.events)}; the record is damaged or not written by qrmd"
        )
    try:
        listed, _, _ = replay_records(
            step.before, [dataclasses.replace(record, events=record.events[:listed_after])]
        )
        allocations = pod_allocations(listed.cpu, uid) or {}
    except (ReplayError, PolicyError) as err:
        raise ForensicsError(
            f"record {record.seq}: the listing it answered cannot be remade: {err}"
        ) from err
    sent: dict[str, SentAllocation | None] = {
        name: SentAllocation(allocation.allocation_result, float(allocation.allocated_quantity))
        for name, allocation in allocations.items()
        if container in (None, name)
    }
    return Reply("GetResourcesAllocation", sent, recorded=True)


def moves_of(
    record: Record, changes: tuple[ContainerChange, ...], reply: Reply | None
) -> dict[str, str]:
    """The changes kubelet was not told of by the reply: container → ``moved by ...``.

    Not a move: what the call was about — an Allocate's container (its reply is the answer)
    and the containers of the pod a RemovePod removed (kubelet asked for exactly that) — and
    a listed container the listing shows as it is after the record.
    """
    moves = {}
    removed_pod = cause_kind(record.cause) == "RemovePod" and record.cause.get("pod_uid")
    for change in changes:
        name = change.key[1]
        if change.key[0] == removed_pod:
            continue
        if reply is not None and name in reply.containers:
            if reply.rpc == "Allocate" or not reply.recorded:
                continue
            sent = reply.containers[name]
            after = None if change.after is None else str(change.after.cpuset)
            if sent is not None and sent.allocation_result == after:
                continue
            moves[name] = f"{change.change} after the listing by {_mover(record)}"
            continue
        moves[name] = f"{change.change} by {_mover(record)}"
    return moves


def _mover(record: Record) -> str:
    """What made a move, in a few words: ``Allocate of ns/name (uid)/app``."""
    cause = record.cause
    kind = cause_kind(cause)
    request = cause.get("request")
    if kind in ("Allocate", "GetTopologyHints") and isinstance(request, Mapping):
        return f"{kind} of {pod_label(request)}/{request.get('container_name', '?')}"
    if kind == "RemovePod":
        return f"RemovePod of {cause.get('pod_uid', '?')}"
    if kind == "GetResourcesAllocation":
        return "GetResourcesAllocation's pool adjustment"
    return render_cause(record)
