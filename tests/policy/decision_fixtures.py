"""Shared builders for the decision tests (Allocate, hints, queries, the façade).

The spec's example node (cpu-policy §1.3, §6.2): ``synthetic:cpus=16,sockets=2,numas=4`` with
reserve ``0,2`` after start-up: pools ``reserve = 0,2`` and ``reclaim = 1,3,9,11``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TypeVar

from policy.cpu import facade as cpu_policy
from policy.cpu.allocation_listing import ResourcesAllocation
from policy.cpu.commands import (
    UNKNOWN_PHASE,
    Allocate,
    AllocateInputs,
    GetResourcesAllocation,
    GetTopologyHints,
    PodPhase,
    RemovePod,
)
from policy.cpu.context import PolicyContext
from policy.cpu.qos import MEMORY_ENHANCEMENT_KEY, QOS_LEVEL_KEY, QoSConfig
from policy.cpu.replies import AllocationReply
from policy.cpu.request import ContainerType, ResourceRequest, TopologyHint
from policy.decision import Decision
from policy.state.events import Event, PoolSet
from policy.state.sections import State, apply_all, empty_state
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from policy.topology.synthetic import generate_dummy_cpu_topology

R = TypeVar("R")
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


def allocate_inputs(req: ResourceRequest, phase: str | None = None) -> AllocateInputs:
    """Allocate's inputs: the call, and the pod source's answer (``None``: pod unknown)."""
    return AllocateInputs(Allocate(req), PodPhase(UNKNOWN_PHASE if phase is None else phase))


class Node:
    """A node driven through the façade the way the Allocator does: decide, commit, adopt.

    It keeps every committed event so tests can check that replaying them from the empty state
    gives the live state. ``phases`` is what its pod source lists (pod uid → phase; a pod it
    does not hold, or ``None``, is unknown).
    """

    def __init__(self, ctx: PolicyContext = CTX) -> None:
        self.ctx = ctx
        self.phases: dict[str, str | None] = {}
        self.base = empty_state(ctx.topology)
        decision = cpu_policy.start(self.base, ctx)
        self.events: list[Event] = list(decision.events)
        self.state = apply_all(self.base, decision.events)

    def commit(self, decision: Decision[R]) -> Decision[R]:
        self.state = apply_all(self.state, decision.events)
        self.events.extend(decision.events)
        return decision

    def allocate(self, req: ResourceRequest, now: float = T0) -> AllocationReply:
        inputs = allocate_inputs(req, self.phases.get(req.pod_uid))
        decision = self.commit(cpu_policy.allocate(self.state, inputs, self.ctx, now))
        if decision.error is not None:
            raise decision.error
        assert decision.reply is not None
        return decision.reply

    def hints(self, req: ResourceRequest) -> tuple[TopologyHint, ...] | None:
        decision = cpu_policy.get_topology_hints(self.state, GetTopologyHints(req), self.ctx, T0)
        assert decision.events == ()
        return decision.reply.hints

    def reconcile(self, now: float) -> ResourcesAllocation:
        listing = GetResourcesAllocation()
        return self.commit(
            cpu_policy.get_resources_allocation(self.state, listing, self.ctx, now)
        ).reply

    def remove(self, pod: str) -> None:
        self.commit(cpu_policy.remove_pod(self.state, RemovePod(pod), self.ctx, T0))

    def cpus_of(self, pod: str, container: str = "app") -> CPUSet:
        info = self.state.cpu.allocation_info(pod, container)
        assert info is not None
        return info.allocation_result

    def pools(self) -> dict[str, str]:
        return {name: str(cpuset) for name, cpuset in self.state.cpu.pools.items()}

    def replayed(self) -> State:
        return apply_all(self.base, self.events)
