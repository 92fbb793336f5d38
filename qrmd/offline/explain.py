"""Why a pod has its CPUs: every record that touched it, directly or through its pool.

A record touches a pod when it changed one of the pod's containers as kubelet sees it (its
cpuset, pool, placement or ramp-up flag — ``qrmd.offline.changes``), which covers pool
resizes, advisor responses and residual removal, or when its cause or events name the pod's
UID anywhere (an Allocate, a balance round offering it for eviction, an eviction answer, any
kind a later qrmd writes): the search is over the record's plain data, so it needs no
knowledge of the kind. For each, the CPUs before → after per container, the reply kubelet got
and the moves kubelet did not hear of.

The reply is the answer of the call that wrote the record, for exactly the containers it
covered, as sent; a move is a change kubelet was not answered about
(``qrmd.offline.replies``).

A pod is named by UID, ``namespace/name`` or name; a name several pods had is an error listing
them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from journal import Record
from qrmd.offline.changes import ContainerChange, container_changes
from qrmd.offline.journal_view import format_time, mentions
from qrmd.offline.renderers import cause_kind, render_cause, render_event
from qrmd.offline.replies import Reply, moves_of, reply_to
from qrmd.offline.walk import ForensicsError, Step

__all__ = [
    "Explanation",
    "KnownPod",
    "explain",
    "known_pods",
    "known_pods_in_records",
    "match_pod",
    "mentions",
]


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
            moves_of(record, changes, reply),
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


def _events_about(
    record: Record, uid: str, changes: tuple[ContainerChange, ...], *, every: bool
) -> Iterator[str]:
    """The record's events: all of them for a record about the pod (they are its decision),
    else those that name it or resize its pools."""
    pools = {v.pool for c in changes for v in (c.before, c.after) if v is not None and v.pool}
    for raw in record.events:
        if every or mentions(raw, uid) or (isinstance(raw, dict) and raw.get("name") in pools):
            yield render_event(raw)
