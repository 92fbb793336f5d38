"""The first step of every Allocate and GetTopologyHints: check and read the request.

One function, :func:`prepare_request`, does what the reference does before it looks at any
state (spec cpu-policy §7.1 steps 2–4, §8.1 step 2), in its order, plus qrmd's own checks
first:

0. Refuse a malformed identity or hint (qrmd; ``policy.cpu.request.validate_request``).
1. Note whether the pod is a debug pod, from the *original* annotations (§4.6).
2. Resolve the QoS level (§4.4); an error reads as the reference's:
   "GetKatalystQoSLevelFromResourceReq for pod: <ns>/<name>, container: <c> failed with
   error: resource type mismatches: <reason>".
3. Normalise labels and annotations (§4.5).
4. Parse the quantity (§4.2); an error carries the reference's
   "getReqQuantityFromResourceReq failed with error: <reason>" after the pod and container.

What the handlers do next with INIT containers and debug pods (echo, nothing stored,
§7.1 steps 5–6, §8.1 step 3) is theirs; this module only reports ``is_init`` and ``is_debug``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policy.cpu.enhancements import cpuset_pool, is_numa_binding, is_numa_exclusive
from policy.cpu.qos import QoSConfig, QoSError, is_debug_pod, normalise, resolve_qos_level
from policy.cpu.request import (
    ContainerType,
    Quantity,
    RequestError,
    ResourceRequest,
    parse_quantity,
    validate_request,
)
from policy.cpu.timestamps import format_qrm_time
from policy.state.entries import ContainerEntry, Placement

__all__ = ["PreparedRequest", "prepare_request"]

#: Each container type's name, as entries store it (§5.1): a lookup, where the enum's
#: ``name`` is a Python property.
_TYPE_NAMES: dict[ContainerType, str] = {member: member.name for member in ContainerType}


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """A request that passed every check, with what the handlers read from it.

    Attributes:
        request: the request as kubelet sent it (for the echo fields of a reply).
        qos_level: the resolved level.
        quantity: whole CPUs (``req_int``) and the exact value (``req_float``).
        is_debug: a debug pod (§4.6): answered without touching its cgroups, nothing stored.
        labels: normalised labels, stored and echoed.
        annotations: normalised annotations, stored, echoed and sent to the advisor.
        warnings: parts of the annotations that were ignored (lenient enhancements only);
            the caller logs them.
    """

    request: ResourceRequest
    qos_level: str
    quantity: Quantity
    is_debug: bool
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    warnings: tuple[str, ...] = ()

    @property
    def req_int(self) -> int:
        """Whole CPUs requested: what all counting uses."""
        return self.quantity.req_int

    @property
    def req_float(self) -> float:
        """The exact request, stored as ``request_quantity``."""
        return self.quantity.req_float

    def new_entry(
        self,
        now: float,
        placement: Placement,
        *,
        ramp_up: bool,
        owner: str,
        annotations: Mapping[str, str] | None = None,
    ) -> ContainerEntry:
        """The entry a handler stores for this request (§7.3): its identity, labels and
        annotations (``annotations`` when a handler adds its own, as SNB's ``numa_hint``),
        level and exact request, created ``now``."""
        request = self.request
        # ``request.identity.stored()``, field by field: one Allocate builds one entry, and
        # the identity value and the enum's ``name`` property were six Python calls.
        container_type = request.container_type
        return ContainerEntry(
            pod_uid=request.pod_uid,
            pod_namespace=request.pod_namespace,
            pod_name=request.pod_name,
            container_name=request.container_name,
            container_type=(
                _TYPE_NAMES[container_type]
                if type(container_type) is ContainerType
                else container_type.name
            ),
            container_index=request.container_index,
            ramp_up=ramp_up,
            owner_pool_name=owner,
            pod_role=request.pod_role,
            pod_type=request.pod_type,
            placement=placement,
            init_timestamp=format_qrm_time(now),
            labels=dict(self.labels),
            annotations=dict(self.annotations if annotations is None else annotations),
            qos_level=self.qos_level,
            request_quantity=self.req_float,
        )

    @property
    def is_init(self) -> bool:
        """An init container: never allocated, never stored, no hints (§4.7)."""
        return self.request.container_type is ContainerType.INIT

    @property
    def numa_binding(self) -> bool:
        """The pod asks for NUMA binding (``numa_binding: "true"``)."""
        return is_numa_binding(self.annotations)

    @property
    def numa_exclusive(self) -> bool:
        """The pod asks for NUMA binding with whole NUMA nodes to itself."""
        return is_numa_exclusive(self.annotations)

    @property
    def cpuset_pool(self) -> str:
        """The shared pool the pod names (``cpuset_pool``), or ""."""
        return cpuset_pool(self.annotations)


def prepare_request(
    config: QoSConfig, request: ResourceRequest, kept_annotation_keys: Iterable[str] = ()
) -> PreparedRequest:
    """Check a request and read its level, quantity and normalised maps.

    Args:
        config: QoS selectors, enhancement aliases and defaults, debug keys.
        request: the request as converted from the wire; not changed.
        kept_annotation_keys: annotations kept besides the QoS ones (v0.5.47 only).

    Returns:
        The prepared request.

    Raises:
        QoSError: the annotations resolve to no level (the reference's wrapped message).
        RequestError: a malformed identity, hint, enhancement annotation (strict
            configuration) or quantity; the message starts with the pod and container.
    """
    validate_request(request)
    is_debug = is_debug_pod(config.debug_annotation_keys, request.annotations)
    try:
        level = resolve_qos_level(config, request.annotations)
    except QoSError as err:
        raise QoSError(
            f"GetKatalystQoSLevelFromResourceReq for pod: {request.pod_namespace}/"
            f"{request.pod_name}, container: {request.container_name} failed with error: "
            f"resource type mismatches: {err}"
        ) from err
    try:
        normalised = normalise(
            config, level, request.labels, request.annotations, kept_annotation_keys
        )
    except RequestError as err:
        raise RequestError(str(err), subject=request.describe()) from err
    try:
        quantity = parse_quantity(request.resource_requests)
    except RequestError as err:
        raise RequestError(
            f"getReqQuantityFromResourceReq failed with error: {err}", subject=request.describe()
        ) from err
    return PreparedRequest(
        request=request,
        qos_level=level,
        quantity=quantity,
        is_debug=is_debug,
        labels=normalised.labels,
        annotations=normalised.annotations,
        warnings=normalised.warnings,
    )
