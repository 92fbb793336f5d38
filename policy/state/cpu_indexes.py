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
  requested cores come from the pod source at read time, §5.5);
* per ``ContainerClass`` (what v0.5.47's pool demands, non-binding shared total and NUMA
  anti-affinity read of a container, ``policy.cpu.snb``): how many containers, the exact sum
  of their requested quantities and of their magnitudes (which bound how far the
  reference's float sum in key order can stray from the exact one), how many follow each
  placement (a pool, the ramp-up cpuset) or hold their own CPUs on each set of NUMA nodes;
  and its shared containers with quantity 0.

They are derived data: rebuilt when a state is decoded, never encoded or journaled, and not
part of state equality.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

import immutables

from policy.state.entries import (
    ANNOTATION_CPUSET_POOL,
    ANNOTATION_NUMA_HINT,
    ANNOTATION_NUMA_SHARE,
    CONTAINER_TYPE_MAIN,
    SHARED_CORES,
    ContainerEntry,
    InPool,
    OwnCPUs,
    Ramping,
)

__all__ = [
    "CPUIndexes",
    "ClassTotals",
    "ContainerClass",
    "ContainerKey",
    "PlacementKey",
    "ceil_units",
    "exact_units",
]

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


class ContainerClass(NamedTuple):
    """What v0.5.47 reads of a container to sum its request into a pool's demand or the
    non-binding shared total (level, owner pool, main or not, ``numa_binding``,
    ``cpuset_pool``, ``numa_hint``) and to tell NUMA anti-affinity
    (``CheckNUMABindingAntiAffinity``: level, ``numa_share: "false"``, ``numa_binding``,
    ``cpuset_pool``)."""

    qos_level: str
    owner: str
    main: bool
    numa_binding: bool
    numa_share_false: bool
    cpuset_pool: str
    numa_hint: str


#: Where a container's CPUs are: ``("pool", name, numas)`` for a pool it follows,
#: ``("ramp",)`` for the ramp-up cpuset, ``("own", numas)`` for the NUMA nodes its own CPUs
#: (current or original) touch. Plain tuples: hashed on every applied event, where the
#: placement dataclasses hash several times slower.
PlacementKey = tuple[Any, ...]

_RAMP_KEY: PlacementKey = ("ramp",)


class ClassTotals(NamedTuple):
    """One class's containers: how many, the exact sum of their requested quantities and of
    their magnitudes (units of 2**-1074), and how many follow each placement."""

    terms: int
    units: int
    magnitude: int
    placements: immutables.Map[PlacementKey, int]


# NamedTuple's own constructor costs several times a plain tuple's; these run per event.
_tuple_new = tuple.__new__


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
    cls: ContainerClass | None = None
    placement_key: PlacementKey = ()


_NOTHING = _Facts()


def _numas_touched(bits: int, numa_masks: Mapping[int, int]) -> tuple[int, ...]:
    return tuple(n for n, m in numa_masks.items() if m & bits)


def _facts(entry: ContainerEntry | None, numa_masks: Mapping[int, int]) -> _Facts:
    if entry is None:
        return _NOTHING
    placement = entry.placement
    owner = entry.owner_pool_name
    ramp_flag = entry.ramp_up
    binding = entry.is_numa_binding()
    dedicated = entry.is_dedicated()
    shared = entry.is_shared()
    # Each placement kind decides what it contributes; the branches keep every predicate
    # evaluated once, since this runs for both sides of every applied event.
    if isinstance(placement, OwnCPUs):
        result, original = placement.result.mask, placement.original.mask
        touched = _numas_touched(result | original, numa_masks)
        placement_key: PlacementKey = ("own", touched)
        dnb = dedicated and binding
        in_pool = ""
        pooled = on_ramp = False
        allocated_bits = original if dnb else 0
        dedicated_bits = result if dedicated else 0
        dnb_numas = touched if dnb else ()
        nb_numas = touched if binding else ()
    else:
        if isinstance(placement, InPool):
            placement_key = ("pool", placement.pool_name, placement.numas)
        else:
            placement_key = _RAMP_KEY
        pooled = isinstance(placement, InPool)
        in_pool = placement.pool_name if isinstance(placement, InPool) else ""
        on_ramp = isinstance(placement, Ramping)
        allocated_bits = dedicated_bits = 0
        dnb_numas = nb_numas = ()
    unpooled = not dedicated and not pooled
    settled = on_ramp and not owner and (shared or entry.is_reclaimed())
    shared_owner = owner if shared else ""
    quantity = entry.request_quantity if shared else 0.0
    annotations = entry.annotations
    main = entry.container_type == CONTAINER_TYPE_MAIN
    if annotations is None:
        cls = _tuple_new(ContainerClass, (entry.qos_level, owner, main, False, False, "", ""))
    else:
        cls = _tuple_new(
            ContainerClass,
            (
                entry.qos_level,
                owner,
                main,
                binding,
                annotations.get(ANNOTATION_NUMA_SHARE) == "false",
                annotations.get(ANNOTATION_CPUSET_POOL, ""),
                annotations.get(ANNOTATION_NUMA_HINT, ""),
            ),
        )
    return _Facts(
        owner,
        in_pool,
        ramp_flag,
        on_ramp,
        dedicated,
        dedicated and not binding,
        unpooled,
        ramp_flag and not dedicated and not settled,
        unpooled and not ramp_flag,
        allocated_bits,
        dedicated_bits,
        dnb_numas,
        nb_numas,
        in_pool if binding else "",
        binding and on_ramp,
        shared_owner,
        quantity,
        cls,
        placement_key,
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


class CPUIndexes(NamedTuple):
    """The derived indexes of one CPU state value (see the module docstring).

    A named tuple rather than a frozen dataclass: every applied event makes a new one, live
    (twice per commit: the candidate and the store's) and in recovery, and building a tuple
    from its fields is several times cheaper than setting each slot of a frozen instance.
    """

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
    classes: immutables.Map[ContainerClass, ClassTotals] = _EMPTY
    class_unknown: immutables.Map[ContainerClass, immutables.Map[ContainerKey, None]] = _EMPTY

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
        (
            by_owner,
            in_pool,
            ramp_flagged,
            on_ramp,
            dedicated,
            isolated,
            unpooled,
            ramp_unsettled,
            unpooled_unflagged,
            allocated_refs,
            allocated_mask,
            dedicated_refs,
            dedicated_mask,
            dnb_numas,
            nb_numas,
            nb_pools,
            nb_on_ramp,
            shared_sum,
            shared_unknown,
            classes,
            class_unknown,
        ) = self
        if a.owner != b.owner:
            if a.owner:
                by_owner = _member(by_owner, a.owner, key, add=False)
            if b.owner:
                by_owner = _member(by_owner, b.owner, key, add=True)
        if a.in_pool != b.in_pool:
            in_pool = _moved(in_pool, a.in_pool, b.in_pool)
        if a.ramp_flag != b.ramp_flag:
            ramp_flagged = _flag(ramp_flagged, key, b.ramp_flag)
        if a.on_ramp != b.on_ramp:
            on_ramp += b.on_ramp - a.on_ramp
        if a.dedicated != b.dedicated:
            dedicated = _flag(dedicated, key, b.dedicated)
        if a.isolated != b.isolated:
            isolated = _flag(isolated, key, b.isolated)
        if a.unpooled != b.unpooled:
            unpooled = _flag(unpooled, key, b.unpooled)
        if a.ramp_unsettled != b.ramp_unsettled:
            ramp_unsettled = _flag(ramp_unsettled, key, b.ramp_unsettled)
        if a.unpooled_unflagged != b.unpooled_unflagged:
            unpooled_unflagged = _flag(unpooled_unflagged, key, b.unpooled_unflagged)
        if a.allocated_bits != b.allocated_bits:
            allocated_refs, allocated_mask = _moved_cpus(
                allocated_refs, allocated_mask, a.allocated_bits, b.allocated_bits
            )
        if a.dedicated_bits != b.dedicated_bits:
            dedicated_refs, dedicated_mask = _moved_cpus(
                dedicated_refs, dedicated_mask, a.dedicated_bits, b.dedicated_bits
            )
        if a.dnb_numas != b.dnb_numas:
            dnb_numas = _bump_all(_bump_all(dnb_numas, a.dnb_numas, -1), b.dnb_numas, 1)
        if a.nb_numas != b.nb_numas:
            nb_numas = _bump_all(_bump_all(nb_numas, a.nb_numas, -1), b.nb_numas, 1)
        if a.nb_pool != b.nb_pool:
            nb_pools = _moved(nb_pools, a.nb_pool, b.nb_pool)
        if a.nb_on_ramp != b.nb_on_ramp:
            nb_on_ramp += b.nb_on_ramp - a.nb_on_ramp
        if (a.shared_owner, a.shared_quantity) != (b.shared_owner, b.shared_quantity):
            shared_sum, shared_unknown = _shared_changes(shared_sum, shared_unknown, key, a, b)
        if (a.cls, a.placement_key, a.shared_quantity) != (
            b.cls,
            b.placement_key,
            b.shared_quantity,
        ):
            classes, class_unknown = _class_changes(classes, class_unknown, key, a, b)
        # Positional, in field order (the order of the unpacking above): several times cheaper
        # than by keyword, and this runs for every applied event.
        return CPUIndexes(
            by_owner,
            in_pool,
            ramp_flagged,
            on_ramp,
            dedicated,
            isolated,
            unpooled,
            ramp_unsettled,
            unpooled_unflagged,
            allocated_refs,
            allocated_mask,
            dedicated_refs,
            dedicated_mask,
            dnb_numas,
            nb_numas,
            nb_pools,
            nb_on_ramp,
            shared_sum,
            shared_unknown,
            classes,
            class_unknown,
        )

    def with_entries(
        self, entries: Iterable[ContainerEntry], numa_masks: Mapping[int, int]
    ) -> CPUIndexes:
        """The indexes after each of ``entries`` is added, none of them indexed before.

        Equal to ``replaced(entry.key, None, entry, numa_masks)`` for each entry in turn (a
        hypothesis property holds the two together), built in one pass with map mutations
        instead of a new value per entry: a checkpoint's thousands of entries are decoded
        this way.
        """
        groups = _GroupsBuilder(self.by_owner)
        unknown = _GroupsBuilder(self.shared_unknown)
        in_pool = dict(self.in_pool)
        nb_pools = dict(self.nb_pools)
        dnb_numas = dict(self.dnb_numas)
        nb_numas = dict(self.nb_numas)
        sums = dict(self.shared_sum)
        classes: dict[ContainerClass, list[Any]] = {
            cls: [t.terms, t.units, t.magnitude, dict(t.placements)]
            for cls, t in self.classes.items()
        }
        class_unknown = _GroupsBuilder(self.class_unknown)
        ramp_flagged = self.ramp_flagged.mutate()
        dedicated = self.dedicated.mutate()
        isolated = self.isolated.mutate()
        unpooled = self.unpooled.mutate()
        ramp_unsettled = self.ramp_unsettled.mutate()
        unpooled_unflagged = self.unpooled_unflagged.mutate()
        allocated = _CPURefsBuilder(self.allocated_refs, self.allocated_mask)
        dedicated_cpus = _CPURefsBuilder(self.dedicated_refs, self.dedicated_mask)
        on_ramp, nb_on_ramp = self.on_ramp, self.nb_on_ramp
        # What an entry contributes depends on a few of its fields only, and a node's entries
        # share a handful of placements and annotation maps (the decoders share equal ones),
        # so the entries are grouped by those fields and each group's facts worked out and
        # counted once, its keys added to the key sets together: _facts and the per-entry
        # updates were most of the cost of indexing a checkpoint or a replayed journal. Every
        # index is a set of keys or a sum of integers, so the order they are added in does not
        # matter. The placement and annotations are keyed by identity (cheap to hash) and kept
        # alive in the group, so no id is reused for another object during the pass; equal
        # objects that are not the same one only make another group.
        grouped: dict[tuple[Any, ...], tuple[ContainerEntry, list[ContainerKey]]] = {}
        for entry in entries:
            facts_key = (
                id(entry.placement),
                id(entry.annotations),
                entry.qos_level,
                entry.owner_pool_name,
                entry.ramp_up,
                entry.container_type,
                entry.request_quantity,
            )
            group = grouped.get(facts_key)
            if group is None:
                grouped[facts_key] = (entry, [(entry.pod_uid, entry.container_name)])
            else:
                group[1].append((entry.pod_uid, entry.container_name))
        for first, keys in grouped.values():
            b = _facts(first, numa_masks)
            if b is _NOTHING or b == _NOTHING:
                continue
            n = len(keys)
            if b.owner:
                groups.add_all(b.owner, keys)
            if b.in_pool:
                in_pool[b.in_pool] = in_pool.get(b.in_pool, 0) + n
            if b.ramp_flag:
                ramp_flagged.update(dict.fromkeys(keys))
            on_ramp += b.on_ramp * n
            if b.dedicated:
                dedicated.update(dict.fromkeys(keys))
            if b.isolated:
                isolated.update(dict.fromkeys(keys))
            if b.unpooled:
                unpooled.update(dict.fromkeys(keys))
            if b.ramp_unsettled:
                ramp_unsettled.update(dict.fromkeys(keys))
            if b.unpooled_unflagged:
                unpooled_unflagged.update(dict.fromkeys(keys))
            allocated.add(b.allocated_bits, n)
            dedicated_cpus.add(b.dedicated_bits, n)
            for numa in b.dnb_numas:
                dnb_numas[numa] = dnb_numas.get(numa, 0) + n
            for numa in b.nb_numas:
                nb_numas[numa] = nb_numas.get(numa, 0) + n
            if b.nb_pool:
                nb_pools[b.nb_pool] = nb_pools.get(b.nb_pool, 0) + n
            nb_on_ramp += b.nb_on_ramp * n
            if b.shared_owner:
                count, total = sums.get(b.shared_owner, (0, 0))
                sums[b.shared_owner] = (count + n, total + n * exact_units(b.shared_quantity))
                if b.shared_quantity == 0:
                    unknown.add_all(b.shared_owner, keys)
            cls = b.cls
            if cls is not None:
                totals = classes.get(cls)
                if totals is None:
                    totals = classes[cls] = [0, 0, 0, {}]
                units = exact_units(b.shared_quantity) if b.shared_quantity else 0
                totals[0] += n
                totals[1] += n * units
                totals[2] += n * abs(units)
                placements = totals[3]
                placements[b.placement_key] = placements.get(b.placement_key, 0) + n
                if b.shared_quantity == 0 and cls.qos_level == SHARED_CORES:
                    class_unknown.add_all(cls, keys)
        allocated_refs, allocated_mask = allocated.finish()
        dedicated_refs, dedicated_mask = dedicated_cpus.finish()
        return CPUIndexes(
            by_owner=groups.finish(),
            in_pool=immutables.Map(in_pool),
            ramp_flagged=ramp_flagged.finish(),
            on_ramp=on_ramp,
            dedicated=dedicated.finish(),
            isolated=isolated.finish(),
            unpooled=unpooled.finish(),
            ramp_unsettled=ramp_unsettled.finish(),
            unpooled_unflagged=unpooled_unflagged.finish(),
            allocated_refs=allocated_refs,
            allocated_mask=allocated_mask,
            dedicated_refs=dedicated_refs,
            dedicated_mask=dedicated_mask,
            dnb_numas=immutables.Map(dnb_numas),
            nb_numas=immutables.Map(nb_numas),
            nb_pools=immutables.Map(nb_pools),
            nb_on_ramp=nb_on_ramp,
            shared_sum=immutables.Map(sums),
            shared_unknown=unknown.finish(),
            classes=immutables.Map(
                {
                    cls: ClassTotals(terms, units, magnitude, immutables.Map(placements))
                    for cls, (terms, units, magnitude, placements) in classes.items()
                }
            ),
            class_unknown=class_unknown.finish(),
        )


class _GroupsBuilder:
    """Adds members to a map of groups (group -> map of keys) in place, for ``with_entries``."""

    def __init__(self, groups: immutables.Map[Any, immutables.Map[ContainerKey, None]]) -> None:
        self._groups = groups
        self._added: dict[Any, Any] = {}

    def add_all(self, group: Any, keys: list[ContainerKey]) -> None:
        members = self._added.get(group)
        if members is None:
            members = self._added[group] = self._groups.get(group, _NO_KEYS).mutate()
        members.update(dict.fromkeys(keys))

    def finish(self) -> immutables.Map[Any, immutables.Map[ContainerKey, None]]:
        if not self._added:
            return self._groups
        groups = self._groups.mutate()
        for group, members in self._added.items():
            groups[group] = members.finish()
        return groups.finish()


class _CPURefsBuilder:
    """Adds one holder of a set of CPUs at a time in place, keeping the union, for
    ``with_entries``."""

    def __init__(self, refs: immutables.Map[int, int], mask: int) -> None:
        self._refs = refs.mutate()
        self._mask = mask

    def add(self, bits: int, holders: int = 1) -> None:
        """Add ``holders`` holders of every CPU in ``bits``."""
        if not bits:
            return
        refs = self._refs
        for cpu in _bits_ids(bits):
            refs[cpu] = refs.get(cpu, 0) + holders
        self._mask |= bits

    def finish(self) -> tuple[immutables.Map[int, int], int]:
        return self._refs.finish(), self._mask


def _shared_changes(
    sums: immutables.Map[str, tuple[int, int]],
    unknown: immutables.Map[str, immutables.Map[ContainerKey, None]],
    key: ContainerKey,
    a: _Facts,
    b: _Facts,
) -> tuple[
    immutables.Map[str, tuple[int, int]], immutables.Map[str, immutables.Map[ContainerKey, None]]
]:
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
    return sums, unknown


_NO_TOTALS = ClassTotals(0, 0, 0, _EMPTY)


def _class_changes(
    classes: immutables.Map[ContainerClass, ClassTotals],
    unknown: immutables.Map[ContainerClass, immutables.Map[ContainerKey, None]],
    key: ContainerKey,
    a: _Facts,
    b: _Facts,
) -> tuple[
    immutables.Map[ContainerClass, ClassTotals],
    immutables.Map[ContainerClass, immutables.Map[ContainerKey, None]],
]:
    for facts, sign in ((a, -1), (b, 1)):
        cls = facts.cls
        if cls is None:
            continue
        found = classes.get(cls, _NO_TOTALS)
        quantity = facts.shared_quantity
        units = exact_units(quantity) if quantity else 0
        terms = found.terms + sign
        if terms:
            totals = (
                terms,
                found.units + sign * units,
                found.magnitude + sign * abs(units),
                _bump(found.placements, facts.placement_key, sign),
            )
            classes = classes.set(cls, _tuple_new(ClassTotals, totals))
        else:
            classes = classes.delete(cls)
        if quantity == 0 and cls.qos_level == SHARED_CORES:
            unknown = _member(unknown, cls, key, add=sign > 0)
    return classes, unknown
