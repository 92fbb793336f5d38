"""Why a pod has its CPUs: every record that touched it, directly or through its pool.

A record touches a pod when it changed one of the pod's containers as kubelet sees it (its
cpuset, pool, placement or ramp-up flag — ``qrmd.forensics.changes``), which covers pool
resizes, advisor responses and residual removal, or when its cause or events name the pod's
UID anywhere (an Allocate, a balance round offering it for eviction, an eviction answer, any
kind a later qrmd writes): the search is over the record's plain data, so it needs no
knowledge of the kind. For each, the CPUs before → after per container, the reply kubelet got
and the moves kubelet did not hear of.

**The reply** is the answer of the call that caused the record, for exactly the containers it
covered, with the values sent, read from the record itself (``actors.allocator_cause``, "The
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
the reply did not cover — another pod's Allocate that shrank its pool, the pool adjustment
after a listing — shown as ``moved by Allocate of ns/other (uid)/app``: kubelet hears of it
only at its next listing.

A pod is named by UID, ``namespace/name`` or name; a name several pods had is an error listing
them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from actors.allocator_cause import REPLY_KEY
from actors.state_replay import ReplayError, replay_records
from journal import Record
from policy.cpu.listing_parts import pod_allocations
from policy.errors import PolicyError
from qrmd.forensics.changes import ContainerChange, container_changes
from qrmd.forensics.renderers import cause_kind, pod_label, render_cause, render_event
from qrmd.forensics.replay import ForensicsError, Step
from qrmd.journal_view import format_time, mentions

__all__ = [
    "Explanation",
    "KnownPod",
    "Reply",
    "SentAllocation",
    "explain",
    "known_pods",
    "known_pods_in_records",
    "match_pod",
    "mentions",
]

#: The text of a reply the record does not hold (module docstring).
NOT_RECORDED = "reply not recorded"


@dataclass(frozen=True, slots=True)
class KnownPod:
    """A pod the journal's states or causes mention."""

    uid: str
    namespace: str
    name: str

    def describe(self) -> str:
        """``namespace/name (uid)``, or the UID alone when no name was ever seen."""
        if not self.name:
            return self.uid
        return f"{self.namespace}/{self.name} ({self.uid})"


def known_pods(steps: Iterable[Step]) -> dict[str, KnownPod]:
    """Every pod with an entry in some state of the walk (UID → names last seen)."""
    pods: dict[str, KnownPod] = {}
    for step in steps:
        cpu = step.after.cpu
        if step.before.cpu.pods is cpu.pods:
            continue
        for uid, containers in cpu.pods.items():
            if uid in pods and pods[uid].name:
                continue
            for entry in containers.values():
                pods[uid] = KnownPod(uid, entry.pod_namespace, entry.pod_name)
                break
    return pods


def known_pods_in_records(records: Iterable[Record]) -> dict[str, KnownPod]:
    """Every pod the records' causes or container entries name, read without replaying.

    For filters that do not replay (``show --pod NAME``): a pod appears in an Allocate's
    request and in its ``ContainerAllocated`` entry with its namespace and name.
    """
    pods: dict[str, KnownPod] = {}
    for record in records:
        places: list[Any] = [record.cause, record.cause.get("request")]
        places.extend(raw.get("entry") for raw in record.events if isinstance(raw, dict))
        for place in places:
            if not isinstance(place, dict):
                continue
            uid = place.get("pod_uid")
            if not isinstance(uid, str) or not uid:
                continue
            name, namespace = place.get("pod_name"), place.get("pod_namespace")
            if isinstance(name, str) and name:
                pods[uid] = KnownPod(uid, str(namespace or ""), name)
            else:
                pods.setdefault(uid, KnownPod(uid, "", ""))
    return pods


def match_pod(query: str, pods: dict[str, KnownPod]) -> KnownPod:
    """The one pod ``query`` names: by UID, then ``namespace/name``, then name.

    Raises:
        ForensicsError: no pod or several pods match; the message lists them.
    """
    if query in pods:
        return pods[query]
    if "/" in query:
        namespace, _, name = query.partition("/")
        found = [p for p in pods.values() if p.namespace == namespace and p.name == name]
    else:
        found = [p for p in pods.values() if p.name == query]
    if len(found) == 1:
        return found[0]
    if found:
        listed = ", ".join(sorted(p.describe() for p in found))
        raise ForensicsError(f"pod {query!r} is ambiguous: it names {listed}; pass a UID")
    some = ", ".join(sorted(p.describe() for p in pods.values())[:10]) or "none"
    raise ForensicsError(
        f"no pod {query!r} in the journal (by UID, namespace/name or name); pods it has: {some}"
    )


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


@dataclass(frozen=True, slots=True)
class Explanation:
    """One record that touched the pod.

    Attributes:
        record: the record.
        how: how it touched the pod (names it, through its pool, ...).
        changes: the pod's containers it changed, before → after.
        reply: the answer of the call that caused it, where that call answered kubelet about
            the pod's containers (module docstring); None for other records.
        moves: container → ``moved by ...`` for each change the reply did not tell kubelet.
        events: its events, rendered.
    """

    record: Record
    how: str
    changes: tuple[ContainerChange, ...]
    reply: Reply | None
    moves: dict[str, str]
    events: tuple[str, ...]

    @property
    def replies(self) -> dict[str, str]:
        """Covered container → the reply's one line of text."""
        if self.reply is None:
            return {}
        return {name: self.reply.describe(name) for name in self.reply.containers}

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {
            "seq": self.record.seq,
            "time": format_time(self.record.wall_time),
            "kind": cause_kind(self.record.cause),
            "cause": self.record.cause,
            "summary": render_cause(self.record),
            "how": self.how,
            "changes": [c.to_json() for c in self.changes],
            "replies": self.replies,
            "reply": None if self.reply is None else self.reply.to_json(),
            "moves": self.moves,
            "events": list(self.events),
        }


def explain(steps: Iterable[Step], pod: KnownPod, container: str | None) -> Iterator[Explanation]:
    """Every record among ``steps`` that touched ``pod`` (module docstring), in order.

    Args:
        steps: the walk's steps.
        pod: the pod, from :func:`match_pod`.
        container: only this container of it; None for all.

    Yields:
        The explanations.

    Raises:
        ForensicsError: a record's reply names a listing that cannot be remade from it.
    """
    for step in steps:
        keys = {
            (pod.uid, name)
            for state in (step.before, step.after)
            for name in state.cpu.pod_containers(pod.uid)
            if container is None or name == container
        }
        changes = tuple(container_changes(step.before.cpu, step.after.cpu, keys))
        record = step.record
        direct = mentions(record.cause, pod.uid) or mentions(record.events, pod.uid)
        if not changes and not direct:
            continue
        if (
            direct
            and container is not None
            and not changes
            and _names_other_container(record, container)
        ):
            continue
        reply = reply_to(step, pod.uid, container)
        yield Explanation(
            record,
            _how(step, changes, direct),
            changes,
            reply,
            _moves(record, changes, reply),
            tuple(_events_about(record, pod.uid, changes, every=direct)),
        )


def _names_other_container(record: Record, container: str) -> bool:
    request = record.cause.get("request")
    named = request.get("container_name") if isinstance(request, dict) else None
    return isinstance(named, str) and bool(named) and named != container


def _how(step: Step, changes: tuple[ContainerChange, ...], direct: bool) -> str:
    if direct:
        return "names the pod"
    pools = sorted(
        {c.before.pool for c in changes if c.before and c.before.pool}
        | {c.after.pool for c in changes if c.after and c.after.pool}
    )
    resized = [p for p in pools if step.before.cpu.pools.get(p) != step.after.cpu.pools.get(p)]
    if resized:
        return f"through its pool {', '.join(resized)}"
    if step.before.cpu.ramp_cpus != step.after.cpu.ramp_cpus:
        return "through the ramp-up cpuset"
    return "changed it without naming it"


# -- the reply -----------------------------------------------------------------------------


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


def _moves(
    record: Record, changes: tuple[ContainerChange, ...], reply: Reply | None
) -> dict[str, str]:
    """The changes kubelet was not told of by the reply: container → ``moved by ...``."""
    moves = {}
    for change in changes:
        name = change.key[1]
        if reply is not None and name in reply.containers:
            if reply.rpc == "Allocate" or not reply.recorded:
                continue  # the call's own container: its reply is the answer
            sent = reply.containers[name]
            after = None if change.after is None else str(change.after.cpuset)
            if sent is not None and sent.allocation_result == after:
                continue  # listed as it now is
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
        return "GetResourcesAllocation's pool adjustment (ramp-ups that ended joined their pools)"
    return render_cause(record)


def _events_about(
    record: Record, uid: str, changes: tuple[ContainerChange, ...], *, every: bool
) -> Iterator[str]:
    """The record's events: all of them for a record about the pod (they are its decision),
    else those that name it or resize its pools."""
    pools = {v.pool for c in changes for v in (c.before, c.after) if v is not None and v.pool}
    for raw in record.events:
        if every or mentions(raw, uid) or (isinstance(raw, dict) and raw.get("name") in pools):
            yield render_event(raw)
