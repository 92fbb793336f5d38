"""The balancer's fixed values (spec memory-balancer §2): names, thresholds, windows."""

from __future__ import annotations

__all__ = [
    "ADVICE_KEY",
    "BALANCE_INTERVAL_NS",
    "BANDWIDTH_HIGH_THRESHOLD",
    "BANDWIDTH_MEDIUM_THRESHOLD",
    "EVICTION_PLUGIN_NAME",
    "EVICT_REASON",
    "FIXED_FAILED_REASONS",
    "FREE_TEXT_FAILED_REASON",
    "LOW_BANDWIDTH_DESTINATION_DISTANCE",
    "MIGRATE_PAGES_THRESHOLD",
    "NOTHING_TO_DO",
    "NO_DEST_NUMA",
    "PING_PONG_WINDOW_NS",
    "PLUGIN_NAME",
    "ROUND_METRIC",
]

#: Name of the advisor plugin and of the eviction plugin.
PLUGIN_NAME = "numa_memory_balancer"
EVICTION_PLUGIN_NAME = PLUGIN_NAME
#: Reason of every eviction offer; names the source NUMA whatever the trigger was (O18).
EVICT_REASON = "the memory node {} is under bandwidth pressure"
#: Metric emitted for every computed round (§12).
ROUND_METRIC = "numa_memory_balance"
#: Bandwidth ratio strictly above which the max-latency NUMA counts as ``high``.
BANDWIDTH_HIGH_THRESHOLD = 0.8
#: Bandwidth ratio strictly above which it counts as ``medium``.
BANDWIDTH_MEDIUM_THRESHOLD = 0.5
#: A reverse migration within 15 minutes (inclusive) of the last emitted one is filtered (§7.9.2).
PING_PONG_WINDOW_NS = 15 * 60 * 1_000_000_000
#: The ``threshold`` field of every advice (§5.6).
MIGRATE_PAGES_THRESHOLD = 0.7
#: Rounds are skipped while the last emitted round is younger than 30 s (§6.2).
BALANCE_INTERVAL_NS = 30 * 1_000_000_000
#: Distance given to the destination in the ``low`` bandwidth branch, not looked up (O6).
LOW_BANDWIDTH_DESTINATION_DISTANCE = 10
#: Control-knob key of the advice in the advisor result (§5.7).
ADVICE_KEY = "balance_numa_memory"
#: ``failedReason`` of a round with pressure but nothing to balance or evict (§7.11).
NOTHING_TO_DO = "there is latency pressure but no pod can be balanced or evicted"
#: The error of a round that found no destination NUMA (§7.9).
NO_DEST_NUMA = "failed to find any dest numa"
#: The failed reasons the reference writes as fixed text, the only ones the round metric's
#: ``failed_reason`` label carries (§12). Every other reason holds free text (a metric
#: source's error, a path, an errno, a distance map) and is labelled
#: ``FREE_TEXT_FAILED_REASON``; the text itself is in the log and the journal.
FIXED_FAILED_REASONS = frozenset({"", NOTHING_TO_DO, NO_DEST_NUMA})
FREE_TEXT_FAILED_REASON = "round failed (the reason is in the log)"
