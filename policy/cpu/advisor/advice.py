"""Katalyst v0.5.47's ``GetAdvice``: what the CPU plugin asks sys-advisor, and the feature-gate
negotiation of the answer (``policy_advisor_handler.go`` at tag v0.5.47).

* :func:`advice_request` — ``createGetAdviceRequest`` (:233-330): every stored entry, pools
  included, keyed as GetCheckpoint keys them (pool name or pod uid, then ``""`` or the container
  name), each with its metadata and its allocation:

  - the metadata as ``AddContainer`` sends it, with ``request_quantity = trunc(request)``,
    ``request_milli_quantity = trunc(request × 1000)`` and ``use_milli_quantity``; a pool entry
    has no container type (``INIT``, the enum's zero, which the wire leaves out); a pool of
    shared pods bound to a NUMA node (``<base>-NUMA<id>``) is sent as shared cores with
    ``numa_binding: "true"``, the tags the reference gives such a pool entry when it places
    SNB containers in it (``policy_advisor_handler.go``:1230-1237,
    ``policy_allocation_handlers.go``:1330-1337);
  - a sidecar with an empty owner pool is given its main container's pool, and the
    annotations its main container has and it lacks (:287-300);
  - the allocation: ramp-up, owner pool, and the NUMA assignments for pools and for every
    container but shared ones (:303-307; reclaimed containers have theirs, unlike v0.5.3's
    GetCheckpoint).

  A container whose type is no ``ContainerType`` name makes the whole request fail, as in
  the reference (:273-276): nothing is sent that round.
* :func:`negotiate` — ``GetWantedButNotSupportedFeatureGates`` and the must-be-mutually-
  supported check (:351-372).

qrmd wants no feature gate: the only one v0.5.47 defines for the CPU plugin,
``feature_gate_quota_ctrl_knob``, is wanted only with the CPU-quota control knob on cgroup v2
(``featuregatenegotiation/finders/feature_cpu/quota_ctrl_knob.go``), a knob qrmd does not apply.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from policy.cpu.advisor.checkpoint import CheckpointEntry, allocation_entry
from policy.cpu.advisor.push import CONTAINER_TYPES, ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse
from policy.cpu.snb import numa_of_pool
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_state import CPUState
from policy.state.entries import ANNOTATION_NUMA_BINDING, SHARED_CORES, AllocationInfo

__all__ = [
    "WANTED_CPU_FEATURE_GATES",
    "AdviceReply",
    "AdviceRequest",
    "AdviceRequestError",
    "ContainerAllocation",
    "FeatureGate",
    "Negotiation",
    "advice_request",
    "negotiate",
    "snb_entries",
]

#: The enum's zero, what a pool entry's unset container type reads as.
_POOL_CONTAINER_TYPE: Final = "INIT"


@dataclass(frozen=True, slots=True)
class FeatureGate:
    """``advisorsvc.FeatureGate``."""

    name: str
    type: str = "CPU"
    must_mutually_supported: bool = False


#: The feature gates qrmd's CPU plugin asks for: none (see the module docstring).
WANTED_CPU_FEATURE_GATES: Final[Mapping[str, FeatureGate]] = {}


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    """``cpuadvisor.ContainerAllocationInfo``: an entry's metadata and allocation."""

    metadata: ContainerMetadata
    allocation: CheckpointEntry


@dataclass(frozen=True, slots=True)
class AdviceRequest:
    """``cpuadvisor.GetAdviceRequest``."""

    entries: Mapping[str, Mapping[str, ContainerAllocation]]
    wanted_feature_gates: Mapping[str, FeatureGate] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AdviceReply:
    """``cpuadvisor.GetAdviceResponse``: the calculation result, as ListAndWatch's, and the
    feature gates sys-advisor supports."""

    response: AdvisorResponse
    supported_feature_gates: Mapping[str, FeatureGate] = field(default_factory=dict)


class AdviceRequestError(PolicyError):
    """A GetAdvice request that cannot be made; the message is the reference's."""

    kind = ErrorKind.INVALID


def _metadata(info: AllocationInfo, container_type: str) -> ContainerMetadata:
    quantity = info.request_quantity if math.isfinite(info.request_quantity) else 0.0
    return ContainerMetadata(
        pod_uid=info.pod_uid,
        pod_namespace=info.pod_namespace,
        pod_name=info.pod_name,
        container_name=info.container_name,
        container_type=container_type,
        container_index=info.container_index,
        labels=dict(info.labels or {}),
        annotations=dict(info.annotations or {}),
        qos_level=info.qos_level,
        # uint64(float64) in Go truncates toward zero.
        request_quantity=max(int(quantity), 0),
        request_milli_quantity=max(int(quantity * 1000), 0),  # uint64(RequestQuantity * 1000)
        use_milli_quantity=True,
    )


def advice_request(
    cpu: CPUState, wanted: Mapping[str, FeatureGate] = WANTED_CPU_FEATURE_GATES
) -> AdviceRequest:
    """The GetAdvice request of a state (see the module docstring).

    Args:
        cpu: the latest durable CPU state.
        wanted: the feature gates asked for.

    Raises:
        AdviceRequestError: a container's type is no ``ContainerType`` name.
    """
    entries: dict[str, dict[str, ContainerAllocation]] = {}
    for pool in cpu.pool_entries():
        metadata = _metadata(pool, _POOL_CONTAINER_TYPE)
        if numa_of_pool(pool.pod_uid) is not None:
            metadata = replace(
                metadata,
                qos_level=SHARED_CORES,
                annotations={**metadata.annotations, ANNOTATION_NUMA_BINDING: "true"},
            )
        entries[pool.pod_uid] = {
            "": ContainerAllocation(
                metadata,
                allocation_entry(pool, pool.owner_pool_name, at_v0_5_47=True),
            )
        }
    for info in cpu.allocation_infos():
        if info.container_type not in CONTAINER_TYPES:
            raise AdviceRequestError(
                f"create GetAdviceRequest failed with error: container type "
                f'"{info.container_type}" for container {info.pod_uid}/{info.container_name} '
                "not found"
            )
        metadata = _metadata(info, info.container_type)
        owner = info.owner_pool_name
        if info.is_sidecar():
            main = cpu.main_container_entry(info.pod_uid)
            if main is not None:
                if not owner:
                    owner = main.owner_pool_name
                missing = {
                    k: v
                    for k, v in (main.annotations or {}).items()
                    if k not in metadata.annotations
                }
                if missing:
                    metadata = replace(metadata, annotations={**metadata.annotations, **missing})
        entries.setdefault(info.pod_uid, {})[info.container_name] = ContainerAllocation(
            metadata, allocation_entry(info, owner, at_v0_5_47=True)
        )
    return AdviceRequest(entries, dict(wanted))


def snb_entries(request: AdviceRequest) -> frozenset[tuple[str, str]]:
    """The request's ``(entry, sub-entry)`` keys sent as shared cores with ``numa_binding``
    (what ``ValidateRequest`` compares with the state when the answer is applied)."""
    return frozenset(
        (name, sub)
        for name, subs in request.entries.items()
        for sub, item in subs.items()
        if item.metadata.qos_level == SHARED_CORES
        and item.metadata.annotations.get(ANNOTATION_NUMA_BINDING) == "true"
    )


@dataclass(frozen=True, slots=True)
class Negotiation:
    """What the feature gates of a reply mean.

    Attributes:
        refusal: the reference's error when a gate that must be supported by both is not
            (the reply is not applied); ``""`` otherwise.
        not_supported: wanted gates sys-advisor does not support, by name (applied anyway
            when none must be mutually supported; the reference then warns).
    """

    refusal: str
    not_supported: tuple[str, ...]


def negotiate(
    wanted: Mapping[str, FeatureGate], supported: Mapping[str, FeatureGate]
) -> Negotiation:
    """The feature gates of a GetAdvice reply against those asked for (:351-372)."""
    missing = sorted(name for name in wanted if name not in supported)
    for name in missing:
        if wanted[name].must_mutually_supported:
            return Negotiation(
                f"feature gate {wanted[name].name} which must be mutually supported is not "
                "supported by cpu-advisor",
                tuple(missing),
            )
    return Negotiation("", tuple(missing))
