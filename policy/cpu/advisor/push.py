"""What qrmd tells sys-advisor about its containers (cpu-policy §7.2, §11.3; wire.md §5.2).

``ContainerMetadata`` is ``advisorsvc.ContainerMetadata`` as a plain value: the stored
identity, the normalised labels and annotations, the QoS level and a whole request quantity,
and Katalyst v0.5.47's request in milli-CPUs with ``use_milli_quantity`` (``pushCPUAdvisor``
and Allocate's ``AddContainer`` at tag v0.5.47: ``uint64(request × 1000)``, ``true``). The
metadata always carries them; a link at v0.5.3 leaves them off the wire
(``wire.advisor_convert.metadata_to_proto``).

* :func:`push_list` — ``push_cpu_advisor`` (§11.3): one ``AddContainer`` per stored non-pool
  container, by pod uid then container name, with ``request_quantity = trunc(stored
  request)`` (the reference truncates here but rounds up in Allocate, §15.5). A container
  whose stored type is not an enum name cannot be sent; it is listed as a
  :class:`PushRefusal` with the reference's message, and qrmd skips it (the reference aborts
  the whole push at it; qrmd logs and skips refused containers so one cannot keep the link
  down).
* :func:`allocated_metadata` — the Allocate finaliser's ``AddContainer`` (§7.2), with
  ``request_quantity = ceil(request)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from policy.state.cpu_state import CPUState
from policy.state.entries import ContainerEntry

__all__ = [
    "CONTAINER_TYPES",
    "ContainerMetadata",
    "PushRefusal",
    "allocated_metadata",
    "metadata_of",
    "push_failure_message",
    "push_list",
]

#: ``resourceplugin.v1alpha1.ContainerType`` by name (wire.md §4.2).
CONTAINER_TYPES: Final = {"INIT": 0, "MAIN": 1, "SIDECAR": 2, "EPHEMERAL": 3}


@dataclass(frozen=True, slots=True)
class ContainerMetadata:
    """``advisorsvc.ContainerMetadata`` (wire.md §5.2); ``container_type`` is the enum name."""

    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str
    container_type: str
    container_index: int
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    qos_level: str = ""
    request_quantity: int = 0
    #: Katalyst v0.5.47's fields 11-12 (sent at v0.5.47 only).
    request_milli_quantity: int = 0
    use_milli_quantity: bool = False


@dataclass(frozen=True, slots=True)
class PushRefusal:
    """A stored container that cannot be sent; ``message`` is the reference's error."""

    pod_uid: str
    container_name: str
    message: str


def _milli(cores: float) -> int:
    """``uint64(cores * 1000)``: truncated toward zero; absurd values cannot be stored."""
    return max(int(cores * 1000), 0) if math.isfinite(cores) else 0


def metadata_of(
    entry: ContainerEntry, request_quantity: int, request_cores: float | None = None
) -> ContainerMetadata:
    """A stored entry's metadata with this request quantity (``request_cores``, by default
    the stored request, gives the milli quantity)."""
    cores = entry.request_quantity if request_cores is None else request_cores
    return ContainerMetadata(
        pod_uid=entry.pod_uid,
        pod_namespace=entry.pod_namespace,
        pod_name=entry.pod_name,
        container_name=entry.container_name,
        container_type=entry.container_type,
        container_index=entry.container_index,
        labels=dict(entry.labels or {}),
        annotations=dict(entry.annotations or {}),
        qos_level=entry.qos_level,
        request_quantity=request_quantity,
        request_milli_quantity=_milli(cores),
        use_milli_quantity=True,
    )


def push_list(cpu: CPUState) -> list[ContainerMetadata | PushRefusal]:
    """The ``AddContainer`` calls of ``push_cpu_advisor`` (§11.3), in pod then container order.

    Args:
        cpu: the CPU state to push.

    Returns:
        One item per stored container: its metadata, or a refusal for a container whose
        type is not a ``ContainerType`` name.
    """
    out: list[ContainerMetadata | PushRefusal] = []
    for entry in cpu.entries():
        if entry.container_type not in CONTAINER_TYPES:
            out.append(
                PushRefusal(
                    entry.pod_uid,
                    entry.container_name,
                    f"sync pod: {entry.pod_namespace}/{entry.pod_name}, container: "
                    f"{entry.container_name} to cpu advisor failed with error: containerType: "
                    f"{entry.container_type} not found",
                )
            )
            continue
        quantity = entry.request_quantity
        # uint64(float) in Go truncates toward zero; negative or absurd values cannot be stored.
        out.append(metadata_of(entry, max(int(quantity), 0) if math.isfinite(quantity) else 0))
    return out


def allocated_metadata(entry: ContainerEntry, request_cores: float) -> ContainerMetadata:
    """The Allocate finaliser's ``AddContainer`` (§7.2): ``request_quantity = ceil(request)``.

    Args:
        entry: the container's stored entry after the Allocate.
        request_cores: the request's cores (``reqFloat``, §4.2).
    """
    quantity = max(math.ceil(request_cores), 0) if math.isfinite(request_cores) else 0
    return metadata_of(entry, quantity, request_cores)


def push_failure_message(item: ContainerMetadata, error: str) -> str:
    """The reference's message for an ``AddContainer`` that failed during the push."""
    return (
        f"sync pod: {item.pod_namespace}/{item.pod_name}, container: {item.container_name} "
        f"to cpu advisor failed with error: {error}"
    )
