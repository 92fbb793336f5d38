"""CPU selection: which CPU ids a request of n CPUs gets (spec cpu-policy §2).

Three algorithms, each a pure function of the topology, the available CPUs and a count, and
each reproducing the reference's CPU ids exactly (§2.4 gives worked values):

* ``take_ht_by_numa_balance`` — one CPU per NUMA node per round (the reserved CPUs, §3);
* ``take_by_numa_balance`` — one whole free core per NUMA node per round while the request
  covers a core, else one CPU per NUMA node per round (pools, blocks without NUMA binding);
* ``take_by_topology`` — kubelet's best fit: whole sockets, whole cores, then single CPUs from
  the most used sockets and cores first (dedicated non-exclusive, NUMA-pinned blocks); with
  ``align_by_l3`` (Katalyst v0.5.47's dedicated allocation, cpu-policy-v0.5.47 (b)), the L3
  cache level between sockets and cores.

All three follow the spec's accumulator: ``details`` (here the bitmask ``free``) is the
topology restricted to the available CPUs, ``needed`` the CPUs still wanted; a *free core* is
one whose CPUs still in ``free`` number exactly the topology's ``cpus_per_core``, a *free
socket* likewise with ``cpus_per_socket``; NUMA nodes are the whole machine's, ascending.

Everything runs on int bitmasks, with the per-topology lookups built once and cached
(``_index_of``), so a call costs a few dozen integer operations per CPU taken plus, at most,
one pass over the cores: taking 64 CPUs from a half-free 1024-CPU node is tens of µs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from policy.errors import ErrorKind, PolicyError
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology

__all__ = [
    "FAILED_TO_ALLOCATE",
    "NOT_ENOUGH_CPUS",
    "SelectionError",
    "take_by_numa_balance",
    "take_by_topology",
    "take_ht_by_numa_balance",
]

#: The reference's failure texts (§2); callers and tests may match on them.
NOT_ENOUGH_CPUS = "not enough cpus available to satisfy request"
FAILED_TO_ALLOCATE = "failed to allocate cpus"


class SelectionError(PolicyError):
    """A selection that cannot be satisfied: the free CPUs are too few, or too scattered.

    Attributes:
        requested: CPUs asked for.
        available: CPUs of the topology that were available.
    """

    kind = ErrorKind.SHORTAGE

    def __init__(self, reason: str, *, requested: int, available: int) -> None:
        super().__init__(f"{reason}: requested={requested}, available={available}")
        self.reason = reason
        self.requested = requested
        self.available = available


@dataclass(frozen=True, slots=True)
class _Index:
    """Lookups of one topology for the hot loops (built once per topology, cached)."""

    all_cpus: int
    numa_masks: tuple[int, ...]  # per NUMA node, ascending NUMA id
    numa_core_bits: tuple[int, ...]  # per NUMA node: bitmask over the ids of its cores
    core_masks: Mapping[int, int]  # core id -> CPUs of the core
    core_of_cpu: Mapping[int, int]
    socket_ids: tuple[int, ...]  # ascending
    socket_masks: Mapping[int, int]
    socket_cores: Mapping[int, tuple[int, ...]]  # socket id -> its core ids, ascending
    smallest_core: int  # CPUs of the smallest core (no whole core fits below it)
    # Cores of cpus_per_core CPUs grouped by shape: (lowest CPUs of the group's cores, the
    # offsets of their other CPUs from the lowest, whether each core's id is its lowest CPU).
    # One group on a regular host (siblings k and k + N/2, core id k, as sysfs and the
    # synthetic generator number them), so its free cores are a few whole-mask operations.
    core_shapes: tuple[tuple[int, tuple[int, ...], bool], ...]
    odd_cores: tuple[int, ...]  # cores of another size (hybrid parts), counted one by one
    cpus_per_core: int
    cpus_per_socket: int
    l3_masks: Mapping[int, int]  # L3 id -> its CPUs, ascending id


@lru_cache(maxsize=32)
def _index_of(topology: CPUTopology) -> _Index:
    core_masks = topology.core_masks()
    numa_masks = topology.numa_masks()
    core_of_cpu = {cpu: info.core_id for cpu, info in topology.cpu_details.items()}
    # A core lies in one NUMA node, as on every real CPU (the topology model assumes it too).
    numa_core_bits = dict.fromkeys(numa_masks, 0)
    for core, numa in topology.core_numa().items():
        numa_core_bits[numa] |= 1 << core
    socket_cores: dict[int, list[int]] = {s: [] for s in topology.socket_masks()}
    for core, socket in sorted(topology.core_socket().items()):
        socket_cores[socket].append(core)
    shapes: dict[tuple[tuple[int, ...], bool], int] = {}
    odd_cores: list[int] = []
    for core, core_cpus in core_masks.items():
        if core_cpus.bit_count() != topology.cpus_per_core:
            odd_cores.append(core)
            continue
        ids = CPUSet.from_mask(core_cpus).ids()
        shape = (tuple(cpu - ids[0] for cpu in ids[1:]), core == ids[0])
        shapes[shape] = shapes.get(shape, 0) | (1 << ids[0])
    return _Index(
        all_cpus=topology.cpu_details.mask,
        numa_masks=tuple(numa_masks.values()),
        numa_core_bits=tuple(numa_core_bits.values()),
        core_masks=core_masks,
        core_of_cpu=core_of_cpu,
        socket_ids=tuple(topology.socket_masks()),
        socket_masks=topology.socket_masks(),
        socket_cores={s: tuple(cores) for s, cores in socket_cores.items()},
        smallest_core=min((m.bit_count() for m in core_masks.values()), default=0),
        core_shapes=tuple((lows, offsets, by_low) for (offsets, by_low), lows in shapes.items()),
        odd_cores=tuple(odd_cores),
        cpus_per_core=topology.cpus_per_core,
        cpus_per_socket=topology.cpus_per_socket,
        l3_masks=topology.l3_masks(),
    )


def _lowest(bits: int) -> int:
    """The lowest set bit of a non-zero mask, as a mask."""
    return bits & -bits


def _check_enough(n: int, free: int) -> None:
    # §2 "failed" ⇔ needed > |details|; every take removes from both alike, so checking the
    # start is checking every round.
    if n > free.bit_count():
        raise SelectionError(NOT_ENOUGH_CPUS, requested=n, available=free.bit_count())


def take_ht_by_numa_balance(
    topology: CPUTopology, available: CPUSet, n: int
) -> tuple[CPUSet, CPUSet]:
    """Take n CPUs one per NUMA node per round, lowest id first (spec cpu-policy §2.1).

    1. If n < 1, take nothing.
    2. Rounds: for each NUMA node of the machine, ascending, take its smallest available CPU,
       until n are taken.

    Args:
        topology: the node's topology.
        available: CPUs that may be taken; CPUs outside the topology are never taken.
        n: how many CPUs to take.

    Returns:
        ``(taken, available − taken)``.

    Raises:
        SelectionError: "not enough cpus available to satisfy request" when n exceeds the
            available CPUs of the topology.
    """
    # 1. Nothing asked, nothing taken.
    if n < 1:
        return CPUSet(), available.clone()
    idx = _index_of(topology)
    free = idx.all_cpus & available.mask
    _check_enough(n, free)
    taken = 0
    needed = n
    # 2. Rounds (the "failed" check is _check_enough's, once): one CPU per NUMA node per
    # round, the node's smallest free id.
    while True:
        for numa_cpus in idx.numa_masks:
            candidates = free & numa_cpus
            if not candidates:
                continue
            cpu = _lowest(candidates)
            free ^= cpu
            taken |= cpu
            needed -= 1
            if needed < 1:
                return CPUSet.from_mask(taken), CPUSet.from_mask(available.mask & ~taken)


def _free_cores(idx: _Index, free: int) -> int:
    """Bitmask over core ids of the cores whose free CPUs number ``cpus_per_core``."""
    per_core = idx.cpus_per_core
    cores = 0
    if per_core < 1:
        return cores
    for lows, offsets, core_id_is_lowest_cpu in idx.core_shapes:
        # a core of this shape is free iff its lowest CPU and each sibling are
        free_lows = lows & free
        for offset in offsets:
            free_lows &= free >> offset
        if core_id_is_lowest_cpu:
            cores |= free_lows
        else:
            for low in CPUSet.from_mask(free_lows).ids():
                cores |= 1 << idx.core_of_cpu[low]
    for core in idx.odd_cores:
        if (idx.core_masks[core] & free).bit_count() == per_core:
            cores |= 1 << core
    return cores


def take_by_numa_balance(topology: CPUTopology, available: CPUSet, n: int) -> tuple[CPUSet, CPUSet]:
    """Take n CPUs spread over NUMA nodes, whole cores first (spec cpu-policy §2.2).

    1. If n < 1, take nothing.
    2. Rounds until n are taken:
       a. fail if fewer CPUs are available than still needed;
       b. for each NUMA node of the machine, ascending: if what is still needed covers a core
          and a free core exists anywhere, take this node's free core with the smallest id
          (none here: pass the node by); otherwise take this node's smallest available CPU.
    3. Return what was taken and the rest.

    Args:
        topology: the node's topology.
        available: CPUs that may be taken; CPUs outside the topology are never taken.
        n: how many CPUs to take.

    Returns:
        ``(taken, available − taken)``.

    Raises:
        SelectionError: "not enough cpus available to satisfy request" when n exceeds the
            available CPUs of the topology. (The reference then returns
            ``(available, available)`` for its callers to ignore; we return nothing.)
    """
    # 1. Nothing asked, nothing taken.
    if n < 1:
        return CPUSet(), available.clone()
    idx = _index_of(topology)
    free = idx.all_cpus & available.mask
    # 2a. Checked once: every take removes as many CPUs from ``free`` as from ``needed``.
    _check_enough(n, free)
    per_core = idx.cpus_per_core
    # Free cores only matter while n covers a core; needed only shrinks, so skip the scan
    # (and the bookkeeping) when it never does.
    track_cores = n >= per_core
    free_cores = _free_cores(idx, free) if track_cores else 0
    taken = 0
    needed = n
    start = 0
    # 2b, while what is needed covers a core and a free core exists: the rounds' whole-core
    # takes, all at once when they span a few rounds (:func:`_whole_core_rounds`); the rounds
    # then go on from the NUMA node after the last one that took a core.
    if free_cores and per_core > 0 and needed // per_core >= _BULK_ROUNDS * len(idx.numa_masks):
        cores, start = _whole_core_rounds(idx, free_cores, needed // per_core)
        cpus = _cpus_of_cores(idx, cores) & free
        free &= ~cpus
        taken |= cpus
        needed -= cpus.bit_count()
        free_cores &= ~cores
        if needed < 1:
            return CPUSet.from_mask(taken), CPUSet.from_mask(available.mask & ~taken)
    # 2b. Rounds over the NUMA nodes until satisfied.
    numa_pairs = tuple(zip(idx.numa_masks, idx.numa_core_bits, strict=True))
    while True:
        for numa_cpus, numa_cores in numa_pairs[start:]:
            # Whole cores: at most one per NUMA node per round.
            if needed >= per_core and free_cores:
                candidates = free_cores & numa_cores
                if candidates:
                    core_bit = _lowest(candidates)
                    cpus = idx.core_masks[core_bit.bit_length() - 1] & free
                    free &= ~cpus
                    taken |= cpus
                    needed -= cpus.bit_count()
                    free_cores &= ~core_bit
            # Otherwise one CPU, the node's smallest.
            else:
                candidates = free & numa_cpus
                if candidates:
                    cpu = _lowest(candidates)
                    free ^= cpu
                    taken |= cpu
                    needed -= 1
                    if track_cores:
                        free_cores = _refresh_core(idx, free, free_cores, cpu)
            # 3. Done as soon as n are taken.
            if needed < 1:
                return CPUSet.from_mask(taken), CPUSet.from_mask(available.mask & ~taken)
        start = 0


#: From how many rounds of whole cores on they are taken at once: the loop costs about half a
#: microsecond per core taken, the bulk take a few microseconds per NUMA node whatever it takes.
_BULK_ROUNDS = 4


def _whole_core_rounds(idx: _Index, free_cores: int, wanted: int) -> tuple[int, int]:
    """The whole cores the rounds of §2.2 step 2b take while ``wanted`` more cores are needed,
    and the index of the NUMA node the rounds go on from.

    While what is needed covers a core and a free core exists, each NUMA node in turn takes
    its free core with the smallest id (a node with none is passed by), and taking a free
    core changes no other core. So exactly ``k = min(wanted, free cores)`` cores are taken:
    every node's lowest ``min(its free cores, R)`` cores for the ``R`` full rounds, then one
    more from each of the first nodes that still have one until ``k`` is reached. The loop
    that took them one per visit did tens of operations per core; this does a few per core.

    Returns:
        ``(bitmask over the core ids taken, index of the NUMA node after the last that took
        one)``; ``(0, 0)`` when none is taken.
    """
    per_node = [free_cores & bits for bits in idx.numa_core_bits]
    counts = [cores.bit_count() for cores in per_node]
    k = min(wanted, sum(counts))
    if k < 1:
        return 0, 0
    # R: the most full rounds whose takes number at most k.
    rounds = _full_rounds(counts, k)
    taken = 0
    for i, cores in enumerate(per_node):
        taken |= _lowest_bits(cores, min(counts[i], rounds))
    left = k - sum(min(count, rounds) for count in counts)
    last = -1
    if left:
        # A partial round: one more core from each node that still has one, in order.
        for i, cores in enumerate(per_node):
            if counts[i] > rounds:
                taken |= _lowest(cores & ~taken)
                left -= 1
                last = i
                if left == 0:
                    break
    else:
        # The last full round ended at the last node that had a core for it.
        last = max(i for i, count in enumerate(counts) if count >= rounds)
    return taken, last + 1


def _full_rounds(counts: list[int], k: int) -> int:
    """The largest R with ``sum(min(count, R) for count in counts) <= k`` (at most the largest
    count): levels filled from the smallest count up."""
    remaining, left, level = k, len(counts), 0
    for count in sorted(counts):
        step = (count - level) * left
        if step > remaining:
            return level + remaining // left
        remaining -= step
        level = count
        left -= 1
    return level


def _lowest_bits(bits: int, count: int) -> int:
    """The ``count`` lowest set bits of ``bits``."""
    rest = bits
    for _ in range(count):
        rest &= rest - 1
    return bits ^ rest


def _cpus_of_cores(idx: _Index, cores: int) -> int:
    """Every CPU of the cores in ``cores`` (a bitmask over core ids)."""
    cpus = 0
    for lows, offsets, core_id_is_lowest_cpu in idx.core_shapes:
        if not core_id_is_lowest_cpu:
            continue
        # Cores of this shape are numbered by their lowest CPU: their CPUs are the core
        # bits themselves and the same bits shifted by each sibling's offset.
        group = cores & lows
        cores &= ~group
        cpus |= group
        for offset in offsets:
            cpus |= group << offset
    while cores:
        core_bit = _lowest(cores)
        cores ^= core_bit
        cpus |= idx.core_masks[core_bit.bit_length() - 1]
    return cpus


def _refresh_core(idx: _Index, free: int, free_cores: int, cpu_bit: int) -> int:
    """``free_cores`` after the CPU ``cpu_bit`` left ``free``.

    Its core is no longer free, or, on an irregular topology whose core had more than
    ``cpus_per_core`` free CPUs, has just become free.
    """
    core = idx.core_of_cpu[cpu_bit.bit_length() - 1]
    if (idx.core_masks[core] & free).bit_count() == idx.cpus_per_core:
        return free_cores | (1 << core)
    return free_cores & ~(1 << core)


def _sockets_by_use(idx: _Index, free: int) -> list[int]:
    """Sockets with free CPUs, fewest free CPUs first, then by id (§2.3 step 2)."""
    counts = ((s, (idx.socket_masks[s] & free).bit_count()) for s in idx.socket_ids)
    return [s for s, count in sorted(counts, key=lambda sc: (sc[1], sc[0])) if count]


def take_by_topology(
    topology: CPUTopology, available: CPUSet, n: int, *, align_by_l3: bool = False
) -> CPUSet:
    """Take n CPUs by kubelet's best fit (spec cpu-policy §2.3).

    1. n < 1 takes nothing; n above the available CPUs fails.
    2. Orders, each computed once at the start of the step that uses it: sockets by fewest
       free CPUs, then id; cores by socket in that order, then fewest free CPUs, then id;
       CPUs by core in that order, then id.
    3. Whole free sockets, in socket order, each while what is still needed covers it.
    3b. With ``align_by_l3`` only: the L3 caches (:func:`_align_l3_caches`).
    4. Whole free cores, in core order, each while what is still needed covers it.
    5. Single CPUs in CPU order until n are taken: partly used sockets and cores first.
    6. Still short: fail.

    Args:
        topology: the node's topology.
        available: CPUs that may be taken; CPUs outside the topology are never taken.
        n: how many CPUs to take.
        align_by_l3: the reference's ``alignByL3Caches`` (v0.5.47's ``TakeByTopology(...,
            true)`` of dedicated NUMA-binding allocation); off, the v0.5.3 rule exactly.

    Returns:
        The CPUs taken.

    Raises:
        SelectionError: "not enough cpus available to satisfy request" when n exceeds the
            available CPUs of the topology; "failed to allocate cpus" if the steps end short.
    """
    # 1. Nothing asked, nothing taken; too much asked, fail.
    if n < 1:
        return CPUSet()
    idx = _index_of(topology)
    free = idx.all_cpus & available.mask
    _check_enough(n, free)
    start_free = free
    taken = 0
    needed = n

    # 3. Whole free sockets, in socket order (2). The reference takes every CPU the socket
    # has in the topology: a free socket holds all of them on any regular topology, and on an
    # irregular one we keep to the available ones (never a CPU outside ``available``).
    for socket in _sockets_by_use(idx, free):
        socket_cpus = idx.socket_masks[socket]
        if (socket_cpus & free).bit_count() != idx.cpus_per_socket:
            continue
        if needed >= socket_cpus.bit_count():
            cpus = socket_cpus & free
            free &= ~cpus
            taken |= cpus
            needed -= cpus.bit_count()
    if needed < 1:
        return CPUSet.from_mask(taken)

    # 3b. The L3 caches: whole caches taken, or the rest confined to one cache.
    if align_by_l3:
        free, cached = _align_l3_caches(idx, free, needed)
        taken |= cached
        needed -= cached.bit_count()
        if needed < 1:
            return CPUSet.from_mask(taken)

    # 4. Whole free cores, in core order (2). Free cores of one socket all hold cpus_per_core
    # free CPUs, so among themselves they sort by id; taking one changes no other core's
    # count, so walking lazily equals listing them first.
    if idx.cpus_per_core > 0:
        for socket in _sockets_by_use(idx, free):
            if needed < idx.smallest_core:
                break
            for core in idx.socket_cores[socket]:
                if needed < idx.smallest_core:
                    break
                core_cpus = idx.core_masks[core]
                if (core_cpus & free).bit_count() != idx.cpus_per_core:
                    continue
                if needed >= core_cpus.bit_count():
                    cpus = core_cpus & free
                    free &= ~cpus
                    taken |= cpus
                    needed -= cpus.bit_count()
    if needed < 1:
        return CPUSet.from_mask(taken)

    # 5. Single CPUs, in CPU order (2), until satisfied.
    for cpu in _cpus_by_use(idx, free, needed):
        free &= ~cpu
        taken |= cpu
        needed -= 1
        if needed < 1:
            return CPUSet.from_mask(taken)

    # 6. Unreachable while step 1 holds, kept so a broken invariant fails loudly.
    raise SelectionError(FAILED_TO_ALLOCATE, requested=n, available=start_free.bit_count())


def _best_l3_cache(idx: _Index, free: int, needed: int) -> int | None:
    """The reference's ``getBestMatchCPUsNeededL3Cache``: which cache the rest goes to.

    Over the caches with free CPUs, ascending id: the first whose free CPUs equal what is
    needed; else the one exceeding it by the least (the first such on a tie); else the one
    with the most free CPUs (the first such on a tie). None when no cache has a free CPU.
    """
    sizes = [(l3, (bits & free).bit_count()) for l3, bits in idx.l3_masks.items() if bits & free]
    if not sizes:
        return None
    for l3, size in sizes:
        if size == needed:
            return l3
    larger = [(size - needed, l3) for l3, size in sizes if size > needed]
    if larger:
        return min(larger, key=lambda excess_l3: excess_l3[0])[1]
    most = max(size for _, size in sizes)
    return next(l3 for l3, size in sizes if size == most)


def _align_l3_caches(idx: _Index, free: int, needed: int) -> tuple[int, int]:
    """Step 3b, the reference's ``tryAlignL3Caches``: returns (the CPUs still eligible, taken).

    a. Pick the best cache for what is still needed (:func:`_best_l3_cache`).
    b. If what is needed covers its free CPUs, take them all and go back to a.
    c. Otherwise confine every later step to that cache's free CPUs, taking nothing.
    """
    taken = 0
    while needed >= 1:
        # a. The best cache.
        l3 = _best_l3_cache(idx, free, needed)
        if l3 is None:
            break
        cache_free = idx.l3_masks[l3] & free
        # b. Whole cache while it fits.
        if needed >= cache_free.bit_count():
            free &= ~cache_free
            taken |= cache_free
            needed -= cache_free.bit_count()
            continue
        # c. The rest within this cache only.
        free &= cache_free
        break
    return free, taken


def _cpus_by_use(idx: _Index, free: int, limit: int) -> list[int]:
    """The first ``limit`` free CPUs (as one-bit masks) in §2.3's CPU order (step 2)."""
    out: list[int] = []
    for socket in _sockets_by_use(idx, free):
        # cores of the socket grouped by free CPU count; ascending id within a group
        by_count: dict[int, list[int]] = {}
        for core in idx.socket_cores[socket]:
            core_free = idx.core_masks[core] & free
            if core_free:
                by_count.setdefault(core_free.bit_count(), []).append(core_free)
        for count in sorted(by_count):
            for core_free in by_count[count]:
                left = core_free
                while left:
                    cpu = _lowest(left)
                    out.append(cpu)
                    if len(out) == limit:
                        return out
                    left ^= cpu
    return out
