"""The pod source port: which pods the node runs, as the last pod listing saw them.

The CPU policy asks about a pod's phase when it places a new shared container (cpu-policy §7.3
step 3a: a Pending or unknown pod ramps up), and the periodic checkers compare the state with the
pods that exist (§12.4, §12.5). The reference asks kubelet each time; qrmd's actors ask a
``PodSource`` for its latest listing instead, so a decision never waits on kubelet, and copy
what they used into the decision's inputs (DESIGN.md, "Every decision has one shape"), so the
journal can re-run the decision without the source.

On a node the source is kubelet's ``/pods`` endpoint, polled in the background (it carries UIDs,
phases and container IDs, which kubelet's pod-resources API lacks); in the demo it is the kubelet
simulator. Without one (:class:`NoPodSource`, the default), every pod is unknown, which is how
the reference behaves when it cannot see pods: every new shared container ramps up.

A source answers with an immutable :class:`PodListSnapshot` (or ``None`` before its first
successful listing) and never raises: a listing that fails keeps the previous snapshot, whose
``fetched_at`` then shows how old it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

__all__ = ["NoPodSource", "PodListSnapshot", "PodListing", "PodSource"]


@dataclass(frozen=True, slots=True)
class PodListing:
    """One pod as the listing showed it.

    Attributes:
        uid: the pod's UID (``metadata.uid``), the key qrmd's state uses.
        namespace: ``metadata.namespace``.
        name: ``metadata.name``.
        phase: ``status.phase`` as Kubernetes spells it (``Pending``, ``Running``,
            ``Succeeded``, ``Failed``, ``Unknown``); "" when the listing had none.
        container_ids: container name → runtime container ID (``containerd://...`` with the
            scheme, as kubelet reports it), for the containers that have started; a frozen
            mapping.
    """

    uid: str
    namespace: str
    name: str
    phase: str
    container_ids: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A value shared between threads: freeze the mapping the caller passed in.
        object.__setattr__(self, "container_ids", MappingProxyType(dict(self.container_ids)))


@dataclass(frozen=True, slots=True)
class PodListSnapshot:
    """Every pod of one listing, and when it was taken.

    Attributes:
        pods: pod UID → its listing; a frozen mapping.
        fetched_at: wall time of the listing, in seconds since the epoch (the decision's
            ``now`` minus this is the snapshot's age, journaled with the decision).
    """

    pods: Mapping[str, PodListing]
    fetched_at: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "pods", MappingProxyType(dict(self.pods)))

    @staticmethod
    def of(pods: list[PodListing] | tuple[PodListing, ...], fetched_at: float) -> PodListSnapshot:
        """A snapshot keyed by UID from a list of pods (a later duplicate UID wins).

        Args:
            pods: the listed pods.
            fetched_at: wall time of the listing, seconds since the epoch.

        Returns:
            The snapshot.
        """
        return PodListSnapshot({pod.uid: pod for pod in pods}, fetched_at)

    def phase_of(self, pod_uid: str) -> str | None:
        """The listed phase of a pod, ``None`` when the listing does not hold it."""
        found = self.pods.get(pod_uid)
        return None if found is None else found.phase


class PodSource(Protocol):
    """Where actors learn which pods exist (see the module docstring)."""

    def latest(self) -> PodListSnapshot | None:
        """The newest successful listing, or ``None`` when there has been none.

        Must return at once and never raise: actors call it inside a decision's mailbox turn.
        """
        ...


class NoPodSource:
    """The default source: it never lists a pod, so every pod is unknown (the reference's
    behaviour when it cannot see pods)."""

    def latest(self) -> PodListSnapshot | None:
        """Always ``None``."""
        return None
