"""The simulator's load model: how big the pools are (a stand-in for sys-advisor's QoS-aware
calculation, not a copy of it).

From qrmd's checkpoint (pools and dedicated containers, cpu-policy §11.4) and the containers it
was told about:

* ``reserve`` keeps its size (one NUMA ``-1`` block, as the validator wants, §11.6);
* every dedicated container keeps its CPUs: one block per NUMA node of its assignments, shared
  by all containers of its pod (a sidecar mirrors its main container, and one block id means
  one set of CPUs, §11.1);
* ``share`` gets ``ceil(load × Σ shared requests)`` CPUs, at least one, leaving one for reclaim;
* optionally ``isolation0`` gets ``isolation`` CPUs and the first shared container moves there;
* ``reclaim`` gets the rest, as a block of its own, or (``explicit_reclaim`` off) implicitly:
  qrmd then gives it every CPU the blocks leave (§11.8, the spec's example). Shared containers
  name their pool, reclaimed ones ``reclaim``.

As a Katalyst v0.5.47 sys-advisor (``at_v0_5_47``), the NUMA nodes holding dedicated blocks are
kept apart, as its plugin withholds them from the blocks tied to no NUMA node
(``generateBlockCPUSet``, docs/reference-levels.md "sys-advisor at v0.5.47"): ``share``,
``isolation0`` and ``reclaim``'s NUMA ``-1`` block are sized on the other NUMA nodes only, and
what a dedicated NUMA node has left (beside its dedicated CPUs and the reserve's) is a
``reclaim`` block of that NUMA node. The result also carries a NUMA headroom (``extra_entries``'
``cpu_numa_headroom``): each NUMA node's share of reclaim. Shared pods bound to a NUMA node are
not modelled (they join ``share`` like the others).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from policy.cpu.advisor.checkpoint import CheckpointEntry
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse, Block, CalculationInfo

__all__ = ["ISOLATION_POOL", "LoadModel", "SimNode", "plan_response"]

ISOLATION_POOL = "isolation0"


@dataclass(frozen=True, slots=True)
class SimNode:
    """What the simulator knows of the machine: CPUs per NUMA node."""

    numa_cpus: Mapping[int, int]

    @property
    def num_cpus(self) -> int:
        return sum(self.numa_cpus.values())


@dataclass(frozen=True, slots=True)
class LoadModel:
    """``load``: share's CPUs per requested core; ``isolation``: CPUs of ``isolation0``
    (0: no isolation pool); ``explicit_reclaim``: send reclaim's block (off: leave it out)."""

    load: float = 1.5
    isolation: int = 0
    explicit_reclaim: bool = True


def plan_response(
    node: SimNode,
    checkpoint: Mapping[str, Mapping[str, CheckpointEntry]],
    containers: Mapping[tuple[str, str], ContainerMetadata],
    model: LoadModel,
    *,
    at_v0_5_47: bool = False,
) -> AdvisorResponse:
    """One calculation result for the node as the checkpoint shows it (module docstring)."""
    entries: dict[str, dict[str, CalculationInfo | None]] = {}
    used = 0
    reserve = checkpoint.get("reserve", {}).get("")
    reserve_numas: dict[int, int] = {}
    if reserve is not None:
        reserve_numas = {n: len(c) for n, c in (reserve.topology_aware_assignments or {}).items()}
        size = sum(reserve_numas.values())
        entries["reserve"] = {"": CalculationInfo("reserve", {-1: (Block(size, "reserve"),)})}
        used += size
    dedicated_numas: dict[str, dict[int, int]] = {}
    for pod, subs in sorted(checkpoint.items()):
        for name, entry in sorted(subs.items()):
            if name == "" or entry.owner_pool_name != "dedicated":
                continue
            numas = {n: len(c) for n, c in (entry.topology_aware_assignments or {}).items()}
            entries.setdefault(pod, {})[name] = CalculationInfo(
                "dedicated",
                {n: (Block(size, f"{pod}/numa{n}"),) for n, size in sorted(numas.items())},
            )
            for numa, size in numas.items():
                known = dedicated_numas.setdefault(pod, {})
                known[numa] = max(known.get(numa, 0), size)
    used += sum(sum(numas.values()) for numas in dedicated_numas.values())
    available = max(node.num_cpus - used, 0)
    numa_reclaim: dict[int, int] = {}
    if at_v0_5_47:
        # Dedicated NUMA nodes are kept apart: what they have left is reclaim of their own.
        for numa in sorted({n for numas in dedicated_numas.values() for n in numas}):
            held = sum(numas.get(numa, 0) for numas in dedicated_numas.values())
            held += reserve_numas.get(numa, 0)
            numa_reclaim[numa] = max(node.numa_cpus.get(numa, 0) - held, 0)
        available = max(available - sum(numa_reclaim.values()), 0)
    live = {k: m for k, m in containers.items() if k[1] in checkpoint.get(k[0], {})}
    shared = sorted(k for k, m in live.items() if m.qos_level == "shared_cores")
    requested = sum(live[k].request_quantity for k in shared)
    isolation = model.isolation if shared and model.isolation else 0
    share = min(max(math.ceil(model.load * requested), 1), max(available - 1 - isolation, 0))
    pools = {"share": share}
    if model.explicit_reclaim:
        pools["reclaim"] = max(available - share - isolation, 0)
    elif numa_reclaim:
        pools["reclaim"] = 0  # only the dedicated NUMA nodes' blocks
    if isolation:
        pools[ISOLATION_POOL] = isolation
    for pool, size in pools.items():
        numa_blocks: dict[int, tuple[Block, ...]] = {}
        if size > 0:
            numa_blocks[-1] = (Block(size, pool),)
        if pool == "reclaim":
            for numa, left in numa_reclaim.items():
                if left > 0:
                    numa_blocks[numa] = (Block(left, f"reclaim/numa{numa}"),)
        if numa_blocks:
            entries[pool] = {"": CalculationInfo(pool, numa_blocks)}
    for key in shared:
        pool = ISOLATION_POOL if isolation and key == shared[0] else "share"
        entries.setdefault(key[0], {})[key[1]] = CalculationInfo(pool, {})
    for key, metadata in sorted(live.items()):
        if metadata.qos_level == "reclaimed_cores":
            entries.setdefault(key[0], {})[key[1]] = CalculationInfo("reclaim", {})
    if not at_v0_5_47:
        return AdvisorResponse(entries)
    return AdvisorResponse(
        entries,
        numa_headroom=_headroom(node, numa_reclaim, pools.get("reclaim", 0)),
        numa_headroom_sent=True,
    )


def _headroom(node: SimNode, numa_reclaim: Mapping[int, int], spread: int) -> dict[int, float]:
    """Reclaim by NUMA node: a dedicated node's own block, the NUMA ``-1`` block shared evenly
    by the other nodes."""
    others = [numa for numa in sorted(node.numa_cpus) if numa not in numa_reclaim]
    out = {numa: float(left) for numa, left in numa_reclaim.items()}
    for numa in others:
        out[numa] = spread / len(others)
    return out
