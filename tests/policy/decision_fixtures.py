"""Shared builders for the decision tests (Allocate, hints, queries, the façade).

The spec's example node (cpu-policy §1.3, §6.2): ``synthetic:cpus=16,sockets=2,numas=4`` with
reserve ``0,2`` after start-up: pools ``reserve = 0,2`` and ``reclaim = 1,3,9,11``.
"""

from __future__ import annotations

import dataclasses
import json

from policy.context import PolicyContext
from policy.cpuset import CPUSet
from policy.events import PoolSet
from policy.qos import MEMORY_ENHANCEMENT_KEY, QOS_LEVEL_KEY, QoSConfig
from policy.request import ContainerType, ResourceRequest, TopologyHint
from policy.state import State, apply_all, empty_state
from policy.synthetic import generate_dummy_cpu_topology
from policy.topology import CPUTopology

SYNTH_16_2_4 = generate_dummy_cpu_topology(16, 2, 4)
RESERVED = CPUSet.parse("0,2")
DEBUG_KEY = "debug.example.com/attach"
CTX = PolicyContext(
    topology=SYNTH_16_2_4,
    reserved=RESERVED,
    qos=QoSConfig.build(debug_annotation_keys=[DEBUG_KEY]),
)
#: 2024-05-08 15:04:05 UTC, any fixed instant.
T0 = 1715180645.0


def cpus(text: str) -> CPUSet:
    return CPUSet.parse(text)


def started(
    topology: CPUTopology = SYNTH_16_2_4, reserve: str = "0,2", reclaim: str = "1,3,9,11"
) -> State:
    """The state after start-up (§6.2 steps 5–6) on a fresh node."""
    return apply_all(
        empty_state(topology),
        [PoolSet("reserve", cpus(reserve)), PoolSet("reclaim", cpus(reclaim))],
    )


FRESH = started()


def annotations_for(
    qos: str | None = None,
    *,
    numa_binding: bool = False,
    numa_exclusive: bool = False,
    cpuset_pool: str = "",
) -> dict[str, str]:
    out: dict[str, str] = {}
    if qos is not None:
        out[QOS_LEVEL_KEY] = qos
    enhancement: dict[str, str] = {}
    if numa_binding:
        enhancement["numa_binding"] = "true"
    if numa_exclusive:
        enhancement["numa_exclusive"] = "true"
    if cpuset_pool:
        enhancement["cpuset_pool"] = cpuset_pool
    if enhancement:
        out[MEMORY_ENHANCEMENT_KEY] = json.dumps(enhancement)
    return out


def request(
    pod: str = "pod-a",
    container: str = "app",
    cpu: float = 2,
    *,
    qos: str | None = None,
    numa_binding: bool = False,
    numa_exclusive: bool = False,
    cpuset_pool: str = "",
    hint: tuple[int, ...] | None = None,
    container_type: ContainerType = ContainerType.MAIN,
    **changes: object,
) -> ResourceRequest:
    """A request for ``cpu`` CPUs; ``hint`` is the topology manager's choice (Allocate only)."""
    base = ResourceRequest(
        pod_uid=pod,
        pod_namespace="default",
        pod_name=f"name-{pod}",
        container_name=container,
        container_type=container_type,
        container_index=0,
        resource_name="cpu",
        resource_requests={"cpu": cpu},
        labels={"app": pod},
        annotations=annotations_for(
            qos, numa_binding=numa_binding, numa_exclusive=numa_exclusive, cpuset_pool=cpuset_pool
        ),
        native_qos_class="Guaranteed",
        hint=None if hint is None else TopologyHint(hint, True),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def dedicated(
    pod: str = "pod-d", cpu: float = 2, *, exclusive: bool = True, **kw: object
) -> ResourceRequest:
    return request(
        pod, cpu=cpu, qos="dedicated_cores", numa_binding=True, numa_exclusive=exclusive, **kw
    )  # type: ignore[arg-type]
