"""What a CPU state must hold for the node's CPUs to mean what the pools say (spec cpu-policy §3,
§6, §9).

The rules, and the overlaps the spec allows:

1. Pool ``reserve`` exists and is exactly the reserved set (§3, §6.2 step 5).
2. Pool ``reclaim`` exists, is not empty (§6.1: resident, must always exist) and holds no
   reserved CPU (§6.2 step 6, §9.4 step 3: it is taken from the CPUs outside the reserve).
   It *may* overlap any other pool or dedicated container (§6.2 step 6d, §9.4's fallback,
   §9.7's overlap with settled dedicated NUMA-binding containers).
3. No other pool holds a reserved CPU, nor a CPU of a NUMA node that hosts a dedicated
   NUMA-binding container (§3: the reserve is excluded from everything available; pools are
   taken from the adjustable CPUs, §5.4, §9.3 step 1). At v0.5.47: nor a CPU of a NUMA node
   hosting a NUMA-exclusive one, nor a dedicated NUMA-binding container's CPU.
4. Two non-resident pools are disjoint, or identical: when the pools cannot have one CPU each,
   every pool gets the whole available set (§15.8).
5. The ramp-up cpuset holds no reserved CPU (§9.8 step 5: adjustable CPUs minus isolated ones).
6. A dedicated container owned by ``dedicated`` (NUMA-binding, or isolated) holds no reserved
   CPU, no CPU of a non-resident pool, and no CPU of a dedicated container of another pod
   (§7.5, §9.4: its CPUs are its own). ``fallback`` containers sit on the ramp-up cpuset and
   sidecars copy their main container's CPUs (§7.5.2), so neither is checked against its own
   pod.

With sys-advisor (``advisor_enabled``) the pools are where the advisor's blocks put them
(§11.7, §11.8): a block may be referenced by several pools and containers, and NUMA-aware
blocks may lie anywhere. Only the reserve's rules then hold — 1, 2, 3 and 6 as far as they
concern reserved CPUs, and 5 (§11.8 step 2: the ramp-up cpuset is every CPU but the reserve
and the dedicated ones).

Shared and reclaimed containers are not checked: they follow their pool or the ramp-up cpuset,
and one that keeps CPUs of its own may keep reserved ones — "existing containers that already
hold reserved CPUs are not touched when the reservation changes across restarts" (§3).

The start-up decision checks its result with :func:`check_invariants` (so a node never serves
pools that overlap the reserve), and the tests check it after every commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from policy.cpu.context import PolicyContext
from policy.cpu.snb import exclusive_binding_numas
from policy.errors import ErrorKind, PolicyError, describe_container
from policy.state.cpu_state import CPUState
from policy.state.entries import DEDICATED_OWNER, RECLAIM_POOL, RESERVE_POOL, RESIDENT_POOLS
from policy.topology.cpuset import CPUSet

__all__ = ["InvariantError", "Violation", "check_invariants", "require_invariants"]


class InvariantError(PolicyError):
    """A CPU state breaks the rules of this module; the message lists every violation."""

    kind = ErrorKind.INTERNAL


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule.

    Attributes:
        rule: the rule's number in the module docstring.
        what: what breaks it, with the CPUs.
    """

    rule: int
    what: str

    def __str__(self) -> str:
        return f"rule {self.rule}: {self.what}"


def check_invariants(state: CPUState, settings: PolicyContext) -> list[Violation]:
    """Every violation of the module's rules in ``state`` under ``settings``' reserve.

    Cost: O(pools² + dedicated containers²); dedicated containers are few (each holds whole
    CPUs of its own), and nothing here walks the shared containers.

    Args:
        state: the CPU section to check.
        settings: the reserve it must respect.

    Returns:
        The violations, by rule; empty when the state is consistent.
    """
    placed_by_us = not settings.advisor_enabled
    return [
        *_resident_pools(state, settings, placed_by_us),
        *_dedicated(state, settings.reserved, placed_by_us),
    ]


def require_invariants(state: CPUState, settings: PolicyContext, where: str) -> None:
    """Raise unless ``state`` keeps every rule (see :func:`check_invariants`).

    Args:
        state: the CPU section to check.
        settings: the reserve it must respect.
        where: what produced the state, for the message ("start-up").

    Raises:
        InvariantError: naming ``where`` and every violation.
    """
    violations = check_invariants(state, settings)
    if violations:
        listed = "; ".join(str(v) for v in violations)
        raise InvariantError(f"{where} would leave an inconsistent CPU state: {listed}")


def _resident_pools(
    state: CPUState, settings: PolicyContext, placed_by_us: bool
) -> Iterator[Violation]:
    reserved = settings.reserved
    # 1. The reserve is the reserved set.
    reserve = state.pool_cpus(RESERVE_POOL)
    if reserve != reserved:
        yield Violation(1, f"pool {RESERVE_POOL} is {_show(reserve)}, the reserve is {reserved}")
    # 2. Reclaim exists, is not empty and is outside the reserve.
    reclaim = state.pool_cpus(RECLAIM_POOL)
    if reclaim is None or reclaim.is_empty():
        yield Violation(2, f"pool {RECLAIM_POOL} is {_show(reclaim)}")
    elif not (inside := reclaim.intersection(reserved)).is_empty():
        yield Violation(2, f"pool {RECLAIM_POOL} ({reclaim}) holds reserved CPUs {inside}")
    # 3. No other pool holds a reserved CPU; 4. other pools are disjoint or identical.
    others = sorted(state.filtered_pools_cpuset_map(RESIDENT_POOLS).items())
    bound = CPUSet()
    if placed_by_us and settings.at_v0_5_47:
        # v0.5.47 pools may use the free CPUs of NUMAs whose dedicated containers are not
        # NUMA-exclusive (policy.cpu.snb.adjustable_cpus).
        bound = CPUSet.union_all(
            state.topology.cpus_in_numa(n) for n in exclusive_binding_numas(state)
        ).union(CPUSet.from_mask(state.indexes.allocated_mask))
    elif placed_by_us:
        bound = CPUSet.union_all(
            state.topology.cpus_in_numa(n) for n in state.numas_with_dedicated_numa_binding()
        )
    for i, (name, cpus) in enumerate(others):
        if not (inside := cpus.intersection(reserved)).is_empty():
            yield Violation(3, f"pool {name} ({cpus}) holds reserved CPUs {inside}")
        if not (inside := cpus.intersection(bound)).is_empty():
            yield Violation(
                3, f"pool {name} ({cpus}) holds {inside} of NUMA nodes with dedicated CPUs"
            )
        # Without the advisor's blocks, pools are taken one after another from what is left.
        later = others[i + 1 :] if placed_by_us else []
        for other, other_cpus in later:
            shared = cpus.intersection(other_cpus)
            if not shared.is_empty() and cpus != other_cpus:
                yield Violation(
                    4, f"pools {name} ({cpus}) and {other} ({other_cpus}) share {shared}"
                )
    # 5. The ramp-up cpuset is outside the reserve.
    ramp = state.ramp_cpus
    if ramp is not None and not (inside := ramp.intersection(reserved)).is_empty():
        yield Violation(5, f"the ramp-up cpuset ({ramp}) holds reserved CPUs {inside}")


def _dedicated(state: CPUState, reserved: CPUSet, placed_by_us: bool) -> Iterator[Violation]:
    # 6. Dedicated CPUs are the container's own.
    pools = state.filtered_pools_cpuset_map(RESIDENT_POOLS)
    owned: list[tuple[str, str, CPUSet]] = []
    for key in sorted(state.dedicated_containers()):
        entry = state.require_entry(*key)
        if entry.owner_pool_name != DEDICATED_OWNER:
            continue
        cpus, _ = state.placement_cpus(entry.placement)
        who = describe_container(
            entry.pod_uid,
            entry.container_name,
            pod_namespace=entry.pod_namespace,
            pod_name=entry.pod_name,
        )
        if not (inside := cpus.intersection(reserved)).is_empty():
            yield Violation(6, f"dedicated {who} ({cpus}) holds reserved CPUs {inside}")
        if not placed_by_us:
            continue
        for name, pool_cpus in sorted(pools.items()):
            if not (shared := cpus.intersection(pool_cpus)).is_empty():
                yield Violation(6, f"dedicated {who} ({cpus}) shares {shared} with pool {name}")
        for other_pod, other_who, other_cpus in owned:
            if (
                other_pod != entry.pod_uid
                and not (shared := cpus.intersection(other_cpus)).is_empty()
            ):
                yield Violation(6, f"dedicated {who} ({cpus}) shares {shared} with {other_who}")
        owned.append((entry.pod_uid, who, cpus))


def _show(cpus: CPUSet | None) -> str:
    if cpus is None:
        return "missing"
    return "empty" if cpus.is_empty() else str(cpus)
