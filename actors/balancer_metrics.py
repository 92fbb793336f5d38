"""The MemoryBalancer's counters (memory-balancer §12), as plain values.

The round metric ``numa_memory_balance`` has raw value 1 and is emitted for every computed
round, failed ones included, never for a skipped one; it is kept here as a count per tag set
(``need_balance``, ``balance_level``, ``bandwidth_pressure``, ``status``, ``bandwidth_level``,
``failed_reason``, in the reference's order). ``failed_reason`` keeps the reference's fixed
reasons; a reason holding free text (a path, an errno, a source's message) is one fixed value
(``failed_reason_label``), so a broken set-up cannot mint a label value per message. The
other counters say what the actor did. The daemon exports them on its metrics endpoint;
nothing here knows Prometheus.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from policy.balance import BalanceInfo
from policy.balance.constants import FIXED_FAILED_REASONS, FREE_TEXT_FAILED_REASON, ROUND_METRIC

__all__ = ["ROUND_METRIC", "BalancerMetrics", "RoundTags", "failed_reason_label"]

#: The round metric's tags, as ``((name, value), ...)`` in the reference's order.
RoundTags = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class BalancerMetrics:
    """Counters since the actor started. Owned by the actor's thread; read through a copy."""

    ticks_total: int = 0
    rounds_skipped_total: int = 0
    rounds_failed_total: int = 0
    rounds_stored_total: int = 0
    rounds_coalesced_total: int = 0
    advices_emitted_total: int = 0
    eviction_polls_total: int = 0
    evictions_taken_total: int = 0
    eviction_offers_total: int = 0
    pods_unreadable_total: int = 0
    commit_failures_total: int = 0
    migrations_planned_total: int = 0
    migrations_dropped_total: int = 0
    round_metric: dict[RoundTags, int] = field(default_factory=dict)
    #: The tag set of each round's tag values seen so far, at most ``_TAG_SETS_KEPT``: a node
    #: counts the same few outcomes round after round, each made into its labels once.
    _tag_sets: dict[tuple[str, ...], RoundTags] = field(default_factory=dict, repr=False)

    def count_round(self, record: BalanceInfo) -> None:
        """Emit ``numa_memory_balance`` for a computed round (§12)."""
        values = record.metric_tags()
        key = tuple(values.values())
        tags = self._tag_sets.get(key)
        if tags is None:
            tags = tuple(
                (name, failed_reason_label(value) if name == "failed_reason" else value)
                for name, value in values.items()
            )
            if len(self._tag_sets) < _TAG_SETS_KEPT:
                self._tag_sets[key] = tags
        self.round_metric[tags] = self.round_metric.get(tags, 0) + 1

    def counters(self) -> dict[str, int]:
        """Every plain counter by name (the round metric is in ``round_metric``)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_COUNTERS}


#: Fields of ``BalancerMetrics`` that are not plain counters.
_NOT_COUNTERS = frozenset({"round_metric", "_tag_sets"})

#: How many tag sets ``BalancerMetrics`` keeps made: free-text failed reasons (one label, but
#: a key each) must not grow it without bound.
_TAG_SETS_KEPT = 64


def failed_reason_label(reason: str) -> str:
    """The ``failed_reason`` label value of a round's reason (module docstring)."""
    return reason if reason in FIXED_FAILED_REASONS else FREE_TEXT_FAILED_REASON
