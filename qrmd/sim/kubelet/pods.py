"""The simulator's pods: what a kubelet knows about a pod before it asks the QRM plugin.

A pod has QoS annotations (`katalyst.kubewharf.io/qos_level`, the JSON enhancement annotations,
wire.md §12.3), labels, init containers and app containers, each with at most one CPU request.
The kubelet sends these facts to the plugin in a ``ResourceRequest`` (wire.md §4.3); this module
describes them and derives what the kubelet derives: the container type (INIT, MAIN, SIDECAR:
the MAIN container is the one named by ``kubernetes.io/main-container-name``, else the first
app container), the order in which containers are admitted (init containers first, then app
containers, one at a time, wire.md §9.1), and each container's request as the plain
``policy.cpu.request.ResourceRequest`` value that ``wire.kubelet_client`` puts on the wire.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

from policy.cpu.request import ContainerType, ResourceRequest, TopologyHint

__all__ = [
    "CPU",
    "MAIN_CONTAINER_ANNOTATION",
    "MEMORY_ENHANCEMENT_ANNOTATION",
    "POD_ROLE_LABEL",
    "POD_TYPE_ANNOTATION",
    "QOS_LEVEL_ANNOTATION",
    "RECLAIMED_MILLICPU",
    "Container",
    "ContainerKind",
    "ContainerSlot",
    "Pod",
    "dedicated_pod",
    "reclaimed_pod",
    "resource_request",
    "shared_pod",
]

CPU = "cpu"
RECLAIMED_MILLICPU = "resource.katalyst.kubewharf.io/reclaimed_millicpu"
QOS_LEVEL_ANNOTATION = "katalyst.kubewharf.io/qos_level"
MEMORY_ENHANCEMENT_ANNOTATION = "katalyst.kubewharf.io/memory_enhancement"
MAIN_CONTAINER_ANNOTATION = "kubernetes.io/main-container-name"
POD_ROLE_LABEL = "katalyst.kubewharf.io/pod_role"
POD_TYPE_ANNOTATION = "katalyst.kubewharf.io/pod_type"


class ContainerKind(Enum):
    """The kubelet's container type (wire.md §4.2); name and value are ``ContainerType``'s."""

    INIT = 0
    MAIN = 1
    SIDECAR = 2


@dataclass(frozen=True, slots=True)
class Container:
    """One container and its single resource request.

    Attributes:
        name: the container name, unique within its pod.
        request: ``(resource name, quantity)``; ``cpu`` in cores (``1.5`` for ``1500m``),
            ``reclaimed_millicpu`` in millicores. ``None``: the container requests nothing
            the QRM plugin manages, so the kubelet never asks the plugin about it.
    """

    name: str
    request: tuple[str, float] | None = None

    @property
    def requests_resource(self) -> bool:
        """Whether the kubelet sends this container to the plugin (a non-zero request)."""
        return self.request is not None and self.request[1] > 0


@dataclass(frozen=True, slots=True)
class ContainerSlot:
    """A container in its pod, as the kubelet addresses it in a ``ResourceRequest``."""

    container: Container
    kind: ContainerKind
    index: int  # in spec.initContainers for INIT, in spec.containers otherwise (wire.md §4.3)


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod as the kubelet sees it at admission.

    Attributes:
        uid: the pod UID (the plugin's key for the pod).
        name: the pod name.
        namespace: the pod namespace.
        containers: the app containers, in ``spec.containers`` order.
        init_containers: the init containers, in ``spec.initContainers`` order.
        annotations: all pod annotations (copied into every request).
        labels: all pod labels (copied into every request).
        native_qos_class: ``Guaranteed``, ``Burstable`` or ``BestEffort``.
    """

    uid: str
    name: str
    namespace: str
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    native_qos_class: str = "Guaranteed"

    def __post_init__(self) -> None:
        if not self.containers:
            raise ValueError(f"pod {self.namespace}/{self.name} has no app containers")
        names = [c.name for c in (*self.init_containers, *self.containers)]
        if len(set(names)) != len(names):
            raise ValueError(f"pod {self.namespace}/{self.name} repeats a container name: {names}")

    @property
    def qos_level(self) -> str:
        """The QoS level annotation, ``shared_cores`` when absent (wire.md §12.3)."""
        return self.annotations.get(QOS_LEVEL_ANNOTATION, "shared_cores")

    @property
    def main_container_name(self) -> str:
        """The MAIN container: the annotated one, else the first app container (wire.md §4.2)."""
        return self.annotations.get(MAIN_CONTAINER_ANNOTATION, self.containers[0].name)

    def admission_order(self) -> Iterator[ContainerSlot]:
        """Every container in the kubelet's admission order: init containers, then app ones."""
        for index, container in enumerate(self.init_containers):
            yield ContainerSlot(container, ContainerKind.INIT, index)
        main = self.main_container_name
        for index, container in enumerate(self.containers):
            kind = ContainerKind.MAIN if container.name == main else ContainerKind.SIDECAR
            yield ContainerSlot(container, kind, index)

    def app_containers(self) -> Iterator[ContainerSlot]:
        """The app containers only: the ones the kubelet reconciles (wire.md §9.2)."""
        return (s for s in self.admission_order() if s.kind is not ContainerKind.INIT)


def resource_request(
    pod: Pod, slot: ContainerSlot, resource_name: str, hint: TopologyHint | None
) -> ResourceRequest:
    """The request the kubelet sends for one container (wire.md §4.3, §9.1).

    Args:
        pod: the pod.
        slot: the container, its type and index.
        resource_name: the plugin's resource name (``cpu``), after name mapping.
        hint: the chosen affinity for ``Allocate``; ``None`` leaves ``hint`` unset, as in
            ``GetTopologyHints``.

    Returns:
        The request, with the pod's labels and annotations and its QoS class.

    Raises:
        ValueError: the container requests nothing.
    """
    if slot.container.request is None:
        raise ValueError(f"container {pod.name}/{slot.container.name} requests no resource")
    requested_name, quantity = slot.container.request
    return ResourceRequest(
        pod_uid=pod.uid,
        pod_namespace=pod.namespace,
        pod_name=pod.name,
        container_name=slot.container.name,
        container_type=ContainerType[slot.kind.name],
        container_index=slot.index,
        resource_name=resource_name,
        resource_requests={requested_name: quantity},
        pod_role=pod.labels.get(POD_ROLE_LABEL, ""),
        pod_type=pod.annotations.get(POD_TYPE_ANNOTATION, ""),
        hint=hint,
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
        native_qos_class=pod.native_qos_class,
    )


def _enhancement(**flags: bool) -> str:
    return json.dumps({key: "true" for key, on in flags.items() if on}, separators=(",", ":"))


def dedicated_pod(
    uid: str,
    name: str,
    cpus: float,
    *,
    numa_exclusive: bool,
    sidecars: Mapping[str, float] | None = None,
    namespace: str = "default",
) -> Pod:
    """A dedicated_cores pod bound to NUMA nodes (``numa_binding``), exclusive or not.

    Args:
        uid: pod UID.
        name: pod name; its app container is called ``main``.
        cpus: the main container's CPU request in cores.
        numa_exclusive: whether the pod takes whole NUMA nodes (``numa_exclusive``).
        sidecars: extra app containers (name → CPU request), which mirror the main one.
        namespace: pod namespace.

    Returns:
        The pod, annotated as Katalyst expects (wire.md §12.3).
    """
    sidecar_containers = tuple(Container(n, (CPU, q)) for n, q in (sidecars or {}).items())
    return Pod(
        uid=uid,
        name=name,
        namespace=namespace,
        containers=(Container("main", (CPU, cpus)), *sidecar_containers),
        annotations={
            QOS_LEVEL_ANNOTATION: "dedicated_cores",
            MEMORY_ENHANCEMENT_ANNOTATION: _enhancement(
                numa_binding=True, numa_exclusive=numa_exclusive
            ),
        },
    )


def shared_pod(
    uid: str,
    name: str,
    cpus: float,
    *,
    init: Mapping[str, float] | None = None,
    sidecars: Mapping[str, float] | None = None,
    namespace: str = "default",
) -> Pod:
    """A shared_cores pod (the default QoS level), with optional init and sidecar containers.

    Args:
        uid: pod UID.
        name: pod name; its main app container is called ``app``.
        cpus: the main container's CPU request in cores.
        init: init containers (name → CPU request), admitted first.
        sidecars: extra app containers (name → CPU request).
        namespace: pod namespace.

    Returns:
        The pod, annotated ``shared_cores``.
    """
    return Pod(
        uid=uid,
        name=name,
        namespace=namespace,
        init_containers=tuple(Container(n, (CPU, q)) for n, q in (init or {}).items()),
        containers=(
            Container("app", (CPU, cpus)),
            *(Container(n, (CPU, q)) for n, q in (sidecars or {}).items()),
        ),
        annotations={QOS_LEVEL_ANNOTATION: "shared_cores"},
        native_qos_class="Burstable",
    )


def reclaimed_pod(uid: str, name: str, millicpu: float, *, namespace: str = "default") -> Pod:
    """A reclaimed_cores pod requesting ``reclaimed_millicpu`` (mapped onto the cpu plugin).

    Args:
        uid: pod UID.
        name: pod name; its container is called ``worker``.
        millicpu: the request in millicores.
        namespace: pod namespace.

    Returns:
        The pod, annotated ``reclaimed_cores``.
    """
    return Pod(
        uid=uid,
        name=name,
        namespace=namespace,
        containers=(Container("worker", (RECLAIMED_MILLICPU, millicpu)),),
        annotations={QOS_LEVEL_ANNOTATION: "reclaimed_cores"},
        native_qos_class="BestEffort",
    )
