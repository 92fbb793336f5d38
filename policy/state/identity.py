"""Who a container is: the identity kubelet gives it in every request (cpu-policy §4.1, §5.1).

Kubelet names a container by its pod (uid, namespace, name) and its own name, type and index;
requests carry these six fields, replies echo them back (wire.md §4.3) and the state stores
them in each entry (§5.1). :class:`ContainerIdentity` is that group as one value, so code
that hands a container's identity on passes one value instead of copying six fields.

The state keys containers by ``(pod_uid, container_name)`` only; the other four fields are
carried, never interpreted, except the type (§4.7: INIT containers get nothing, sidecars follow
their main container).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["ContainerIdentity", "ContainerType"]


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
