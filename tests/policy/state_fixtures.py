"""Shared builders and the naive §5.4 oracle for the state-model tests.

The oracle computes machine state and the derived CPU sets straight from the reference's
definitions (spec cpu-policy §5.4, §5.6), walking every container's full AllocationInfo —
the O(pods) way the reference does it — so that the indexed queries of ``CPUState`` can be
checked against it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction

from policy.state.entries import (
    DEDICATED_CORES,
    RECLAIMED_CORES,
    SHARED_CORES,
    AllocationInfo,
    ContainerEntry,
    Placement,
)
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology, numa_aware_assignments
from policy.topology.synthetic import generate_dummy_cpu_topology

# The spec's example machine (§1.3): 16 CPUs, 2 sockets, 4 NUMA nodes, reserve 0,2 (§3).
SYNTH_16_2_4 = generate_dummy_cpu_topology(16, 2, 4)
RESERVED = CPUSet.parse("0,2")


def cpus(text: str) -> CPUSet:
    return CPUSet.parse(text)


def container(
    pod: str,
    name: str,
    placement: Placement,
    *,
    qos: str = SHARED_CORES,
    ramp_up: bool = False,
    owner: str = "",
    quantity: float = 1.0,
    numa_binding: bool = False,
    numa_exclusive: bool = False,
    cpuset_pool: str = "",
    container_type: str = "MAIN",
    init_timestamp: str = "2024-05-08 15:04:05 +0000 UTC",
) -> ContainerEntry:
    annotations = {"katalyst.kubewharf.io/qos_level": qos}
    if numa_binding:
        annotations["numa_binding"] = "true"
    if numa_exclusive:
        annotations["numa_exclusive"] = "true"
    if cpuset_pool:
        annotations["cpuset_pool"] = cpuset_pool
    return ContainerEntry(
        pod_uid=pod,
        pod_namespace="default",
        pod_name=f"name-{pod}",
        container_name=name,
        container_type=container_type,
        ramp_up=ramp_up,
        owner_pool_name=owner,
        placement=placement,
        init_timestamp=init_timestamp,
        labels={"katalyst.kubewharf.io/qos_level": qos},
        annotations=annotations,
        qos_level=qos,
        request_quantity=quantity,
    )


def reference_record(
    entry: ContainerEntry, result: CPUSet, original: CPUSet, topology: CPUTopology
) -> AllocationInfo:
    """The reference's per-container copy: every field, both results, both NUMA splits."""
    return AllocationInfo(
        pod_uid=entry.pod_uid,
        pod_namespace=entry.pod_namespace,
        pod_name=entry.pod_name,
        container_name=entry.container_name,
        container_type=entry.container_type,
        container_index=entry.container_index,
        ramp_up=entry.ramp_up,
        owner_pool_name=entry.owner_pool_name,
        pod_role=entry.pod_role,
        pod_type=entry.pod_type,
        allocation_result=result,
        original_allocation_result=original,
        topology_aware_assignments=numa_aware_assignments(topology, result),
        original_topology_aware_assignments=numa_aware_assignments(topology, original),
        init_timestamp=entry.init_timestamp,
        labels=entry.labels,
        annotations=entry.annotations,
        qos_level=entry.qos_level,
        request_quantity=entry.request_quantity,
    )


# -- the naive §5.4 oracle ------------------------------------------------------------------


@dataclass
class NaiveNUMA:
    default_cpuset: CPUSet
    allocated_cpuset: CPUSet
    entries: list[AllocationInfo]


def naive_machine_state(
    topology: CPUTopology, infos: Iterable[AllocationInfo]
) -> dict[int, NaiveNUMA]:
    """§5.4 ``generate_machine_state``, literally."""
    infos = list(infos)
    out = {}
    for n in topology.numa_nodes():
        all_n = topology.cpus_in_numa(n)
        allocated = CPUSet()
        local = []
        for ai in infos:
            orig_n = (ai.original_topology_aware_assignments or {}).get(n, CPUSet())
            cur_n = (ai.topology_aware_assignments or {}).get(n, CPUSet())
            if orig_n.is_empty() and cur_n.is_empty():
                continue
            if ai.is_dedicated_numa_binding():
                allocated = allocated.union(orig_n)
            res, orig = ai.allocation_result & all_n, ai.original_allocation_result & all_n
            local.append(
                AllocationInfo(
                    **{
                        **{f: getattr(ai, f) for f in ai.__dataclass_fields__},
                        "allocation_result": res,
                        "original_allocation_result": orig,
                        "topology_aware_assignments": numa_aware_assignments(topology, res),
                        "original_topology_aware_assignments": numa_aware_assignments(
                            topology, orig
                        ),
                    }
                )
            )
        out[n] = NaiveNUMA(all_n - allocated, allocated, local)
    return out


Pred = Callable[[AllocationInfo], bool]
Lookup = Callable[[str, str], "float | None"]


def naive_filtered_default(
    ns: NaiveNUMA, exclude_entry: Pred | None, exclude_whole: Pred
) -> CPUSet:
    result = ns.default_cpuset | ns.allocated_cpuset
    for ai in ns.entries:
        if exclude_whole(ai):
            return CPUSet()
        if exclude_entry is not None and exclude_entry(ai):
            result = result - ai.allocation_result
    return result


def naive_filtered_available(
    machine: dict[int, NaiveNUMA], reserved: CPUSet, exclude_entry: Pred | None, exclude_whole: Pred
) -> CPUSet:
    return (
        CPUSet.union_all(
            naive_filtered_default(ns, exclude_entry, exclude_whole) for ns in machine.values()
        )
        - reserved
    )


def naive_pooled(machine: dict[int, NaiveNUMA], reserved: CPUSet) -> CPUSet:
    return naive_filtered_available(
        machine, reserved, AllocationInfo.is_dedicated, AllocationInfo.is_dedicated_numa_binding
    )


def naive_adjustable(machine: dict[int, NaiveNUMA], reserved: CPUSet) -> CPUSet:
    return naive_filtered_available(
        machine, reserved, None, AllocationInfo.is_dedicated_numa_binding
    )


def naive_filtered_numa_set(machine: dict[int, NaiveNUMA], pred: Pred) -> frozenset[int]:
    return frozenset(n for n, ns in machine.items() if not any(pred(ai) for ai in ns.entries))


def naive_requested_cores(ai: AllocationInfo, lookup: Lookup | None) -> float:
    """§5.5, literally."""
    if ai.request_quantity != 0:
        return ai.request_quantity
    millicores = lookup(ai.pod_uid, ai.container_name) if lookup else None
    return 0.0 if millicores is None else max(millicores / 1000, 0.0)


def naive_shared_quantity_map(
    infos: Iterable[AllocationInfo], lookup: Lookup | None = None
) -> dict[str, int]:
    """§5.6 with the float sum made exact, as the state does."""
    sums: dict[str, Fraction] = {}
    for ai in infos:
        if ai.qos_level == SHARED_CORES and ai.owner_pool_name:
            cores = Fraction(naive_requested_cores(ai, lookup))
            sums[ai.owner_pool_name] = sums.get(ai.owner_pool_name, Fraction(0)) + cores
    return {pool: math.ceil(total) for pool, total in sums.items()}


def naive_isolated_quantity_map(
    infos: Iterable[AllocationInfo], lookup: Lookup | None = None
) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for ai in infos:
        if ai.qos_level != DEDICATED_CORES or ai.is_numa_binding():
            continue
        if ai.owner_pool_name == "dedicated":
            q = ai.allocation_result.size()
        else:
            q = math.ceil(naive_requested_cores(ai, lookup))
        if q:
            out.setdefault(ai.pod_uid, {})[ai.container_name] = q
    return out


__all__ = [
    "RECLAIMED_CORES",
    "RESERVED",
    "SYNTH_16_2_4",
    "container",
    "cpus",
    "naive_adjustable",
    "naive_filtered_numa_set",
    "naive_isolated_quantity_map",
    "naive_machine_state",
    "naive_pooled",
    "naive_shared_quantity_map",
    "reference_record",
]
