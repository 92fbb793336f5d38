"""Pod selection: the pod to evict and the pods to migrate (spec memory-balancer §7.8, §7.10).

* **Listing** pods in a pool: every pod whose main container is in it, in UID order (O12);
  a failed pod lookup in that pool fails the step (O17, kept).
* **Eviction**: the reclaimed pod with the most anonymous memory on the source NUMA, however
  little (O11); the lowest UID among equal maxima (O12).
* **Migration**: reclaimed candidates first (their own RSS bounds and total cap), then, unless
  the reclaimed total already reached the single-round threshold, the supported pools' pods
  under the combined total cap (O14). Bounds are strict on the truncated byte count (O13). A
  pool is considered only if it has CPUs on a destination NUMA. The evicted pod may also be
  migrated (O2, kept).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import NamedTuple

from policy.balance.config import POOL_RECLAIM, ResolvedConfig
from policy.balance.errors import RoundFailed
from policy.balance.inputs import Pod, UnresolvedPod
from policy.balance.pod_table import PodTable
from policy.balance.record import BalancePod, EvictPod

__all__ = ["Candidate", "PoolListing", "balance_pods", "collect_candidates", "pod_to_evict"]


class PoolListing:
    """The pods of each pool, as the meta cache lists them (§4.5).

    Read from the round's ``PodTable`` (``policy.balance.pod_table``): a pool's pods are rows
    of its columns, and a pod's anonymous memory on a node is read from them for every pod at
    once; a ``Pod`` is made only for a pod the round picks.
    """

    __slots__ = ("_failures", "table")

    def __init__(self, pods: Sequence[Pod], unresolved: Sequence[UnresolvedPod]) -> None:
        #: The pods, in UID order.
        self.table = PodTable.of(pods)
        failures: dict[str, list[str]] = {}
        for u in unresolved:
            failures.setdefault(u.pool, []).append(u.reason)
        self._failures = failures

    def rows(self, pool: str) -> list[int]:
        """The rows of ``table`` holding the pods in ``pool``, by UID.

        Raises:
            RoundFailed: a pod of the pool could not be looked up; the message aggregates the
                distinct reasons as Kubernetes' error aggregate prints them.
        """
        reasons = self._failures.get(pool)
        if reasons:
            distinct = list(dict.fromkeys(reasons))
            raise RoundFailed(distinct[0] if len(distinct) == 1 else f"[{', '.join(distinct)}]")
        return self.table.rows_in(pool)

    def pods(self, pool: str) -> tuple[Pod, ...]:
        """The pods in ``pool``, by UID.

        Raises:
            RoundFailed: as ``rows``.
        """
        return tuple(self.table[row] for row in self.rows(pool))


def pod_to_evict(listing: PoolListing, source_numa: int) -> EvictPod | None:
    """The reclaimed pod with the most anon on the source NUMA (§7.8), or None.

    Raises:
        RoundFailed: listing the reclaim pool failed.
    """
    table = listing.table
    rows = listing.rows(POOL_RECLAIM)
    anon_on = table.anon_on(source_numa)
    best: int | None = None
    best_anon = 0.0
    for row in rows:
        anon = anon_on[row]
        # Strictly greater: pods come in UID order, so equal maxima keep the lowest UID.
        if anon is not None and (best is None or anon > best_anon):
            best, best_anon = row, anon
    if best is None:
        return None
    return EvictPod(table.namespace(best), table.name(best), table.uid(best))


class Candidate(NamedTuple):
    """A pod that may be migrated: its row in the round's pods, its anon on the source NUMA
    and its pool's NUMA list. A tuple: a round makes one per pod of a pool's qualifying
    thousands, and picks a few dozen."""

    table: PodTable
    row: int
    anon: float
    pool_numas: tuple[int, ...]

    @property
    def pod(self) -> Pod:
        """The pod itself."""
        return self.table[self.row]


def collect_candidates(
    listing: PoolListing,
    pool_numas: Mapping[str, tuple[int, ...]],
    pool: str,
    *,
    source_numa: int,
    dest_ids: frozenset[int],
    bounds: tuple[int, int],
) -> list[Candidate]:
    """A pool's migration candidates, in UID order (§7.10 ``collect``).

    Args:
        listing: the pods per pool.
        pool_numas: each known pool's NUMA list; a pool without one has no candidates.
        pool: the pool to collect.
        source_numa: the source NUMA id.
        dest_ids: the destination NUMA ids.
        bounds: ``(lo, hi)``; a pod qualifies iff ``lo < trunc(anon) < hi``.

    Raises:
        RoundFailed: listing the pool failed; this happens before the overlap check (O17).
    """
    numas = pool_numas.get(pool)
    if numas is None:
        return []
    rows = listing.rows(pool)
    if dest_ids.isdisjoint(numas):
        return []
    lo, hi = bounds
    table = listing.table
    anon_on = table.anon_on(source_numa)
    found: list[Candidate] = []
    for row in rows:
        anon = anon_on[row]
        # int() truncates toward zero like Go's int64(anon); anon is finite and non-negative.
        if anon is not None and lo < int(anon) < hi:
            found.append(Candidate(table, row, anon, numas))
    return found


def balance_pods(
    listing: PoolListing,
    pool_numas: Mapping[str, tuple[int, ...]],
    cfg: ResolvedConfig,
    source_numa: int,
    dest_ids: frozenset[int],
) -> tuple[tuple[BalancePod, ...], float]:
    """The pods to migrate and their total anon on the source NUMA (§7.10 selection).

    1. Reclaimed candidates and supported pools' candidates (pools in configured order), each
       list sorted ascending by anon; the sort is stable, so ties stay in UID order (O12).
    2. Reclaimed pods while the total stays within the reclaimed total cap.
    3. If that total is below the single-round threshold, shared pods while the combined total
       stays within the non-reclaimed cap.

    Raises:
        RoundFailed: listing a pool failed.
    """
    reclaimed = collect_candidates(
        listing,
        pool_numas,
        POOL_RECLAIM,
        source_numa=source_numa,
        dest_ids=dest_ids,
        bounds=(
            cfg.balanced_reclaimed_pod_source_numa_rss_min,
            cfg.balanced_reclaimed_pod_source_numa_rss_max,
        ),
    )
    shared: list[Candidate] = []
    for pool in cfg.supported_pools:
        shared += collect_candidates(
            listing,
            pool_numas,
            pool,
            source_numa=source_numa,
            dest_ids=dest_ids,
            bounds=(cfg.balanced_pod_source_numa_rss_min, cfg.balanced_pod_source_numa_rss_max),
        )
    reclaimed.sort(key=_BY_ANON)
    shared.sort(key=_BY_ANON)

    # Go compares float64 totals with the caps converted to float64; so do we.
    reclaimed_cap = float(cfg.balanced_reclaimed_pods_source_numa_total_rss_max)
    single_round = float(cfg.balanced_reclaimed_pods_single_round_total_rss_threshold)
    combined_cap = float(cfg.balanced_pods_source_numa_total_rss_max)
    chosen: list[Candidate] = []
    total = 0.0
    # Lists are ascending, so the first candidate over the cap ends the walk.
    for c in reclaimed:
        if total + c.anon > reclaimed_cap:
            break
        chosen.append(c)
        total += c.anon
    if total < single_round:
        for c in shared:
            if total + c.anon > combined_cap:
                break
            chosen.append(c)
            total += c.anon
    return tuple(_balance_pod(c) for c in chosen), total


_BY_ANON = attrgetter("anon")


def _balance_pod(c: Candidate) -> BalancePod:
    table, row = c.table, c.row
    return BalancePod(
        namespace=table.namespace(row),
        name=table.name(row),
        uid=table.uid(row),
        containers=table.container_names(row),
        rss_on_source_numa=c.anon,
        dest_numas=c.pool_numas,
    )
