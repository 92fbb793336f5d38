"""Indexes of the CPU state that keep every policy query off the list of all pods (spec §5.4–§5.6).

The machine state of the reference (§5.4) is derived from the container entries; only
dedicated containers and NUMA-binding containers change what the policy asks of it, so these
indexes hold exactly their contributions, kept up to date by each applied event in time
proportional to the entry that changed (its CPUs, its NUMA nodes), never to the pod count:

* per CPU, how many dedicated NUMA-binding containers hold it in their *original* result (the
  union is every NUMA's ``allocated_cpuset``), and how many dedicated containers hold it in
  their *current* result (what ``filtered_default`` subtracts for ``is_dedicated``);
* per NUMA node, how many dedicated NUMA-binding containers touch it (original or current part
  non-empty: the node is then dropped from pooled and adjustable CPUs), and how many
  NUMA-binding containers of any level holding their own CPUs touch it; per pool, and for the
  ramp-up cpuset, how many NUMA-binding containers follow it (``filtered_numa_set``);
* containers by owner pool, by ramp-up flag, dedicated ones, dedicated non-binding ones
  (isolation candidates, §5.6), and shared/reclaimed ones that follow no pool (on the ramp-up
  cpuset or their own CPUs: the only ones the pool engine may have to move, §9.8 step 6);
  of those the pool engine walks on every re-sizing, the two subsets it can act on: the
  ramp-flagged non-dedicated containers not yet settled on the ramp-up cpuset with no owner
  as a shared or reclaimed container (every other ramping one is already where §9.8 would put
  it), and the unpooled containers without the ramp-up flag;
* per owner pool, the exact sum of the requested quantities of its shared containers (in
  units of 2**-1074, of which every finite double is a whole multiple, so the sum is an
  integer, exact, independent of order, and cheap), and those with quantity 0 (their
  requested cores come from the pod source at read time, §5.5).

They are derived data: rebuilt when a state is decoded, never encoded or journaled, and not
part of state equality.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, TypeVar

import immutables

from policy.state.entries import ContainerEntry, InPool, OwnCPUs, Ramping

__all__ = ["CPUIndexes", "ContainerKey", "ceil_units", "exact_units"]

ContainerKey = tuple[str, str]
K = TypeVar("K")
G = TypeVar("G")

_NO_KEYS: immutables.Map[ContainerKey, None] = immutables.Map()

# Every finite double is a whole multiple of 2**-1074 (the smallest subnormal).
_UNIT_SHIFT = 1074


def exact_units(quantity: float) -> int:
    """``quantity`` as an exact integer count of 2**-1074 (finite floats only)."""
    numerator, denominator = quantity.as_integer_ratio()
    return numerator << (_UNIT_SHIFT - (denominator.bit_length() - 1))


def ceil_units(units: int) -> int:
    """``ceil(units × 2**-1074)``, exactly."""
    return -((-units) >> _UNIT_SHIFT)


# One shared empty map for every index default: maps are immutable, so sharing is safe.
_EMPTY: immutables.Map[Any, Any] = immutables.Map()


class _Facts(NamedTuple):
    """What one entry contributes to the indexes (all zero for "no entry").

    A named tuple rather than a frozen dataclass: two are built and compared for every applied
    event, live and in recovery, and a tuple is several times cheaper to build and compare.
    """

    owner: str = ""
    in_pool: str = ""
    ramp_flag: bool = False
    on_ramp: bool = False
    dedicated: bool = False
    isolated: bool = False
    unpooled: bool = False
    ramp_unsettled: bool = False
    unpooled_unflagged: bool = False
    allocated_bits: int = 0
    dedicated_bits: int = 0
    dnb_numas: tuple[int, ...] = ()
    nb_numas: tuple[int, ...] = ()
    nb_pool: str = ""
    nb_on_ramp: bool = False
    shared_owner: str = ""
    shared_quantity: float = 0.0


_NOTHING = _Facts()


def _numas_touched(bits: int, numa_masks: Mapping[int, int]) -> tuple[int, ...]:
    return tuple(n for n, m in numa_masks.items() if m & bits)


def _facts(entry: ContainerEntry | None, numa_masks: Mapping[int, int]) -> _Facts:
    if entry is None:
        return _NOTHING
    placement = entry.placement
    own = placement if isinstance(placement, OwnCPUs) else None
    binding = entry.is_numa_binding()
    dedicated = entry.is_dedicated()
    dnb = dedicated and binding
    touched = _numas_touched(own.result.mask | own.original.mask, numa_masks) if own else ()
    shared_owner = entry.owner_pool_name if entry.is_shared() else ""
    on_ramp = isinstance(placement, Ramping)
    unpooled = not dedicated and not isinstance(placement, InPool)
    settled = on_ramp and not entry.owner_pool_name and (entry.is_shared() or entry.is_reclaimed())
    return _Facts(
        owner=entry.owner_pool_name,
        in_pool=placement.pool_name if isinstance(placement, InPool) else "",
        ramp_flag=entry.ramp_up,
        on_ramp=on_ramp,
        dedicated=dedicated,
        isolated=dedicated and not binding,
        unpooled=unpooled,
        ramp_unsettled=entry.ramp_up and not dedicated and not settled,
        unpooled_unflagged=unpooled and not entry.ramp_up,
        allocated_bits=own.original.mask if (own and dnb) else 0,
        dedicated_bits=own.result.mask if (own and dedicated) else 0,
        dnb_numas=touched if dnb else (),
        nb_numas=touched if binding else (),
        nb_pool=placement.pool_name if (binding and isinstance(placement, InPool)) else "",
        nb_on_ramp=binding and isinstance(placement, Ramping),
        shared_owner=shared_owner,
        shared_quantity=entry.request_quantity if shared_owner else 0.0,
    )


def _bump(counts: immutables.Map[K, int], key: K, delta: int) -> immutables.Map[K, int]:
    value = counts.get(key, 0) + delta
    return counts.set(key, value) if value else counts.delete(key)


def _bump_all(
    counts: immutables.Map[K, int], keys: tuple[K, ...], delta: int
) -> immutables.Map[K, int]:
    for key in keys:
        counts = _bump(counts, key, delta)
    return counts


def _moved(counts: immutables.Map[str, int], old: str, new: str) -> immutables.Map[str, int]:
    """One holder moves from group ``old`` to group ``new`` ("" = none)."""
    if old:
        counts = _bump(counts, old, -1)
    if new:
        counts = _bump(counts, new, 1)
    return counts


def _bits_ids(bits: int) -> list[int]:
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


def _bump_cpus(
    refs: immutables.Map[int, int], mask: int, bits: int, delta: int
) -> tuple[immutables.Map[int, int], int]:
    """Add (delta 1) or drop (delta -1) one holder of every CPU in ``bits``; keep the union."""
    if not bits:
        return refs, mask
    m = refs.mutate()
    for cpu in _bits_ids(bits):
        value = m.get(cpu, 0) + delta
        if value:
            m[cpu] = value
            mask |= 1 << cpu
        else:
            del m[cpu]
            mask &= ~(1 << cpu)
    return m.finish(), mask


def _moved_cpus(
    refs: immutables.Map[int, int], mask: int, old_bits: int, new_bits: int
) -> tuple[immutables.Map[int, int], int]:
    """One holder's CPUs change from ``old_bits`` to ``new_bits``; keep the union."""
    refs, mask = _bump_cpus(refs, mask, old_bits, -1)
    return _bump_cpus(refs, mask, new_bits, 1)


def _member(
    groups: immutables.Map[G, immutables.Map[ContainerKey, None]],
    group: G,
    key: ContainerKey,
    add: bool,
) -> immutables.Map[G, immutables.Map[ContainerKey, None]]:
    members = groups.get(group, _NO_KEYS)
    members = members.set(key, None) if add else members.delete(key)
    return groups.set(group, members) if members else groups.delete(group)


def _flag(
    keys: immutables.Map[ContainerKey, None], key: ContainerKey, add: bool
) -> immutables.Map[ContainerKey, None]:
    return keys.set(key, None) if add else keys.delete(key)


@dataclass(frozen=True, slots=True)
class CPUIndexes:
    """The derived indexes of one CPU state value (see the module docstring)."""

    by_owner: immutables.Map[str, immutables.Map[ContainerKey, None]] = _EMPTY
    in_pool: immutables.Map[str, int] = _EMPTY
    ramp_flagged: immutables.Map[ContainerKey, None] = _EMPTY
    on_ramp: int = 0
    dedicated: immutables.Map[ContainerKey, None] = _EMPTY
    isolated: immutables.Map[ContainerKey, None] = _EMPTY
    unpooled: immutables.Map[ContainerKey, None] = _EMPTY
    ramp_unsettled: immutables.Map[ContainerKey, None] = _EMPTY
    unpooled_unflagged: immutables.Map[ContainerKey, None] = _EMPTY
    allocated_refs: immutables.Map[int, int] = _EMPTY
    allocated_mask: int = 0
    dedicated_refs: immutables.Map[int, int] = _EMPTY
    dedicated_mask: int = 0
    dnb_numas: immutables.Map[int, int] = _EMPTY
    nb_numas: immutables.Map[int, int] = _EMPTY
    nb_pools: immutables.Map[str, int] = _EMPTY
    nb_on_ramp: int = 0
    shared_sum: immutables.Map[str, tuple[int, int]] = _EMPTY
    shared_unknown: immutables.Map[str, immutables.Map[ContainerKey, None]] = _EMPTY

    def replaced(
        self,
        key: ContainerKey,
        old: ContainerEntry | None,
        new: ContainerEntry | None,
        numa_masks: Mapping[int, int],
    ) -> CPUIndexes:
        """The indexes after the entry at ``key`` goes from ``old`` to ``new`` (None = absent).

        Costs the entry's CPUs and NUMA nodes; indexes the change does not touch are shared.
        """
        a, b = _facts(old, numa_masks), _facts(new, numa_masks)
        if a == b:
            return self
        changes: dict[str, object] = {}
        if a.owner != b.owner:
            by_owner = self.by_owner
            if a.owner:
                by_owner = _member(by_owner, a.owner, key, add=False)
            if b.owner:
                by_owner = _member(by_owner, b.owner, key, add=True)
            changes["by_owner"] = by_owner
        if a.in_pool != b.in_pool:
            changes["in_pool"] = _moved(self.in_pool, a.in_pool, b.in_pool)
        if a.ramp_flag != b.ramp_flag:
            changes["ramp_flagged"] = _flag(self.ramp_flagged, key, b.ramp_flag)
        if a.on_ramp != b.on_ramp:
            changes["on_ramp"] = self.on_ramp + b.on_ramp - a.on_ramp
        if a.dedicated != b.dedicated:
            changes["dedicated"] = _flag(self.dedicated, key, b.dedicated)
        if a.isolated != b.isolated:
            changes["isolated"] = _flag(self.isolated, key, b.isolated)
        if a.unpooled != b.unpooled:
            changes["unpooled"] = _flag(self.unpooled, key, b.unpooled)
        if a.ramp_unsettled != b.ramp_unsettled:
            changes["ramp_unsettled"] = _flag(self.ramp_unsettled, key, b.ramp_unsettled)
        if a.unpooled_unflagged != b.unpooled_unflagged:
            changes["unpooled_unflagged"] = _flag(
                self.unpooled_unflagged, key, b.unpooled_unflagged
            )
        if a.allocated_bits != b.allocated_bits:
            changes["allocated_refs"], changes["allocated_mask"] = _moved_cpus(
                self.allocated_refs, self.allocated_mask, a.allocated_bits, b.allocated_bits
            )
        if a.dedicated_bits != b.dedicated_bits:
            changes["dedicated_refs"], changes["dedicated_mask"] = _moved_cpus(
                self.dedicated_refs, self.dedicated_mask, a.dedicated_bits, b.dedicated_bits
            )
        if a.dnb_numas != b.dnb_numas:
            dnb = _bump_all(self.dnb_numas, a.dnb_numas, -1)
            changes["dnb_numas"] = _bump_all(dnb, b.dnb_numas, 1)
        if a.nb_numas != b.nb_numas:
            nb = _bump_all(self.nb_numas, a.nb_numas, -1)
            changes["nb_numas"] = _bump_all(nb, b.nb_numas, 1)
        if a.nb_pool != b.nb_pool:
            changes["nb_pools"] = _moved(self.nb_pools, a.nb_pool, b.nb_pool)
        if a.nb_on_ramp != b.nb_on_ramp:
            changes["nb_on_ramp"] = self.nb_on_ramp + b.nb_on_ramp - a.nb_on_ramp
        if (a.shared_owner, a.shared_quantity) != (b.shared_owner, b.shared_quantity):
            changes.update(self._shared_changes(key, a, b))
        # dataclasses.replace re-validates every field; a copy of the slots is several times
        # cheaper, and this runs on every applied event.
        evolved = object.__new__(CPUIndexes)
        for name in _INDEX_FIELDS:
            value = changes[name] if name in changes else getattr(self, name)
            object.__setattr__(evolved, name, value)
        return evolved

    def _shared_changes(self, key: ContainerKey, a: _Facts, b: _Facts) -> dict[str, object]:
        sums, unknown = self.shared_sum, self.shared_unknown
        for facts, sign in ((a, -1), (b, 1)):
            pool = facts.shared_owner
            if not pool:
                continue
            count, total = sums.get(pool, (0, 0))
            count += sign
            total += sign * exact_units(facts.shared_quantity)
            sums = sums.set(pool, (count, total)) if count else sums.delete(pool)
            if facts.shared_quantity == 0:
                unknown = _member(unknown, pool, key, add=sign > 0)
        return {"shared_sum": sums, "shared_unknown": unknown}


_INDEX_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(CPUIndexes))
