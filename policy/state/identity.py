"""Who a container is: the identity kubelet gives it in every request (cpu-policy §4.1, §5.1).

Kubelet names a container by its pod (uid, namespace, name) and its own name, type and index;
requests carry these six fields, replies echo them back (wire.md §4.3) and the state stores
them in each entry (§5.1). :class:`ContainerIdentity` is that group as one value, so code
that hands a container's identity on passes one value instead of copying six fields.

The state keys containers by ``(pod_uid, container_name)`` only; the other four fields are
carried, never interpreted, except the type (§4.7: INIT containers get nothing, sidecars follow
their main container). Stored entries keep the six fields flat, as the reference's
AllocationInfo does (§5.1) and as the journal and checkpoints encode them, with the type as
its name (``"MAIN"``); :class:`StoredIdentity` is that form, so an entry's identity is copied
into another record in one step (``AllocationInfo(**stored_identity(entry), ...)``) and the
type checker still sees every field.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, TypedDict

__all__ = ["ContainerIdentity", "ContainerType", "StoredIdentity", "stored_identity"]


class ContainerType(enum.IntEnum):
    """QRM container type; its ``.name`` is the string stored in state (§4.7, §5.1)."""

    INIT = 0
    MAIN = 1
    SIDECAR = 2
    EPHEMERAL = 3


@dataclass(frozen=True, slots=True)
class ContainerIdentity:
    """A container as kubelet names it.

    Attributes:
        pod_uid: the pod's UID, the state's key.
        pod_namespace: the pod's namespace.
        pod_name: the pod's name.
        container_name: the container's name, unique within its pod.
        container_type: INIT, MAIN, SIDECAR or EPHEMERAL (§4.7).
        container_index: the container's position among those of its type in the pod spec.
    """

    pod_uid: str = ""
    pod_namespace: str = ""
    pod_name: str = ""
    container_name: str = ""
    container_type: ContainerType = ContainerType.INIT
    container_index: int = 0

    @property
    def key(self) -> tuple[str, str]:
        """``(pod_uid, container_name)``, the state's key for the container."""
        return (self.pod_uid, self.container_name)

    def stored(self) -> StoredIdentity:
        """The six fields as a state entry stores them (the type by its name, §5.1)."""
        return StoredIdentity(
            pod_uid=self.pod_uid,
            pod_namespace=self.pod_namespace,
            pod_name=self.pod_name,
            container_name=self.container_name,
            container_type=self.container_type.name,
            container_index=self.container_index,
        )


class StoredIdentity(TypedDict):
    """A container's identity as state entries hold it: flat, the type by its name."""

    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str
    container_type: str
    container_index: int


class _HasStoredIdentity(Protocol):
    @property
    def pod_uid(self) -> str: ...
    @property
    def pod_namespace(self) -> str: ...
    @property
    def pod_name(self) -> str: ...
    @property
    def container_name(self) -> str: ...
    @property
    def container_type(self) -> str: ...
    @property
    def container_index(self) -> int: ...


def stored_identity(record: _HasStoredIdentity) -> StoredIdentity:
    """The identity fields of a stored record (a ``ContainerEntry`` or an ``AllocationInfo``).

    Args:
        record: anything with the six fields in their stored form.

    Returns:
        Those fields, to pass on to another record with ``**``.
    """
    return StoredIdentity(
        pod_uid=record.pod_uid,
        pod_namespace=record.pod_namespace,
        pod_name=record.pod_name,
        container_name=record.container_name,
        container_type=record.container_type,
        container_index=record.container_index,
    )
