"""Which NUMA-node sets can host a dedicated NUMA-binding container (spec cpu-policy §8.3 step 4).

The reference's rule (``calculate_hints``), reproduced exactly by :func:`full_hints`: for every
size k = 1..N and every k-combination M of the NUMA nodes in lexicographic order, emit
``{nodes: M, preferred: |M| == min_needed}`` unless

* ``|M| < min_needed`` (``min_needed = ceil(request / cpus_per_numa)``);
* the container is not NUMA-exclusive and ``|M| > 1``;
* the container is exclusive and a node of M has allocated CPUs;
* the available CPUs of M number fewer than the request;
* ``|M| ≤ numas_per_socket`` and M spans more than one socket.

That is 2**N - 1 sets: fine for the 8 NUMA nodes kubelet's topology manager accepts by
default, hopeless beyond. qrmd therefore answers bigger machines (more NUMA nodes than
``--max-full-hint-numa-nodes``) with
:func:`smallest_size_hints`: only the hints of the smallest size that has any, in the same
order, at most ``limit`` of them — exactly the first ``limit`` hints of that size in the full
answer. It walks the combinations of each size lazily, in lexicographic order, and never
enters a branch that cannot be completed: a node set is extended only while the best
completion (the largest available counts still to come) can reach the request, so every
branch it opens yields a hint, and it stops at ``limit``. Its cost is about
``limit × k × N`` steps plus an ``N × k`` table per size, whatever the number of subsets.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from policy.cpu.request import TopologyHint

__all__ = ["NUMAFacts", "full_hints", "smallest_size_hints"]


@dataclass(frozen=True, slots=True)
class NUMAFacts:
    """What the hint rule reads of each NUMA node, and of the request.

    Attributes:
        numas: NUMA node ids, ascending (the keys of the machine state).
        available: per node, its available CPU count (default cpuset minus reserve).
        allocated: nodes with a non-empty ``allocated_cpuset``.
        sockets: per node, the sockets its CPUs are on.
        numas_per_socket: the topology's NUMA nodes per socket.
        request: CPUs requested (``req_int``).
        min_needed: ``ceil(request / cpus_per_numa)``.
        exclusive: the container asks for whole NUMA nodes.
    """

    numas: Sequence[int]
    available: Mapping[int, int]
    allocated: frozenset[int]
    sockets: Mapping[int, frozenset[int]]
    numas_per_socket: int
    request: int
    min_needed: int
    exclusive: bool

    def spans_sockets(self, nodes: Sequence[int]) -> bool:
        """``check_numa_cross_sockets``: two or more nodes on more than one socket."""
        if len(nodes) < 2:
            return False
        seen: set[int] = set()
        for n in nodes:
            seen |= self.sockets[n]
        return len(seen) > 1

    def usable(self, numa: int) -> bool:
        """Whether ``numa`` may be in a hint at all (exclusive: no allocated CPUs there)."""
        return not (self.exclusive and numa in self.allocated)

    def max_size(self) -> int:
        """The largest hint size: 1 for a non-exclusive container (§8.3 step 4e)."""
        return len(self.numas) if self.exclusive else min(1, len(self.numas))


def _fits(facts: NUMAFacts, nodes: tuple[int, ...]) -> bool:
    """The reference's per-mask skip rules (§8.3 step 4e), in its order."""
    if len(nodes) < facts.min_needed:
        return False
    if not facts.exclusive and len(nodes) > 1:
        return False
    if not all(facts.usable(n) for n in nodes):
        return False
    if sum(facts.available[n] for n in nodes) < facts.request:
        return False
    return not (len(nodes) <= facts.numas_per_socket and facts.spans_sockets(nodes))


def full_hints(facts: NUMAFacts) -> tuple[TopologyHint, ...]:
    """Every hint of the reference's enumeration, in its order (§8.3 step 4e).

    Args:
        facts: the nodes and the request.

    Returns:
        Hints by size, then lexicographically; preferred iff of size ``min_needed``.
    """
    out = []
    # The sets the first three skip rules refuse whatever the state (too small, too large
    # for a container that is not exclusive, holding an unusable node) are never built:
    # combinations of the usable nodes (a subsequence of ``numas``) keep the lexicographic
    # order, so the answer is the enumeration's, at 8 sets instead of 255 for a container
    # that is not exclusive on 8 NUMA nodes.
    usable = [n for n in facts.numas if facts.usable(n)]
    for size in range(max(facts.min_needed, 1), facts.max_size() + 1):
        for nodes in itertools.combinations(usable, size):
            if _fits(facts, nodes):
                out.append(TopologyHint(nodes, len(nodes) == facts.min_needed))
    return tuple(out)


def _best_completions(counts: Sequence[int], width: int) -> list[list[int]]:
    """``best[i][r]``: the sum of the r largest of ``counts[i:]`` (r ≤ width), for pruning."""
    best: list[list[int]] = [[0] * (width + 1) for _ in range(len(counts) + 1)]
    tail: list[int] = []
    for i in range(len(counts) - 1, -1, -1):
        tail.append(counts[i])
        tail.sort(reverse=True)
        row = best[i]
        total = 0
        for r in range(1, width + 1):
            if r <= len(tail):
                total += tail[r - 1]
            row[r] = total
    return best


def _walk(
    candidates: Sequence[int], facts: NUMAFacts, size: int, start: int, prefix: tuple[int, ...]
) -> Iterator[tuple[int, ...]]:
    """The ``size``-sets ``prefix + (some of candidates[start:])`` whose available CPUs reach the
    request, in lexicographic order, never entering a branch that cannot."""
    counts = [facts.available[n] for n in candidates]
    best = _best_completions(counts, size)
    need = facts.request - sum(facts.available[n] for n in prefix)

    def extend(
        i: int, chosen: tuple[int, ...], missing: int, still: int
    ) -> Iterator[tuple[int, ...]]:
        if still == 0:
            if missing <= 0:
                yield chosen
            return
        for j in range(i, len(candidates) - still + 1):
            # Prune: even the largest counts from j on cannot reach the request.
            if best[j][still] < missing:
                return
            yield from extend(j + 1, (*chosen, candidates[j]), missing - counts[j], still - 1)

    yield from extend(start, prefix, need, size - len(prefix))


def _sets_of_size(facts: NUMAFacts, size: int) -> Iterator[tuple[int, ...]]:
    """The node sets of one size that pass every skip rule, in lexicographic order."""
    usable = [n for n in facts.numas if facts.usable(n)]
    if size <= 1 or size > facts.numas_per_socket:
        yield from _walk(usable, facts, size, 0, ())
        return
    # Sizes up to numas_per_socket must stay on one socket: the first node fixes it.
    for first in usable:
        home = facts.sockets[first]
        if len(home) != 1:
            continue  # a node on two sockets spans them with any partner
        mates = [n for n in usable if n > first and facts.sockets[n] == home]
        if len(mates) >= size - 1:
            yield from _walk(mates, facts, size, 0, (first,))


def smallest_size_hints(facts: NUMAFacts, limit: int) -> tuple[TopologyHint, ...]:
    """The hints of the smallest size that has any, in the reference's order, at most ``limit``.

    Equal to the first ``limit`` hints of that size in :func:`full_hints`, computed without
    enumerating every subset (the module's reduced answer). Empty when no size has a hint.

    Args:
        facts: the nodes and the request.
        limit: the most hints to return (at least 1 to return anything).

    Returns:
        The hints; preferred iff of size ``min_needed``, as the reference sets it.
    """
    if limit < 1:
        return ()
    for size in range(max(facts.min_needed, 1), facts.max_size() + 1):
        found = list(itertools.islice(_sets_of_size(facts, size), limit))
        if found:
            return tuple(TopologyHint(nodes, size == facts.min_needed) for nodes in found)
    return ()
