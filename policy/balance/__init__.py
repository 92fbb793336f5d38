"""The NUMA memory balancer's round planner, as pure functions (spec memory-balancer.md).

A *round* reads per-NUMA read latency and bandwidth, the NUMA distance lists, the pods of the
pools with their per-NUMA anonymous memory, the configuration and the last emitted round, and
decides whether a NUMA node is under pressure, which reclaimed pod to offer for eviction, and
which pods' memory to migrate where. Nothing here reads a clock, a file or a socket.

Modules, one job each:

* ``inputs``: what a round reads (``RoundInputs``), with its JSON form; ``distances``: the
  NUMA distance lists (§4.4), checked once for every round (``DistanceLists``);
  ``pod_values``: a pod and its containers (``Pod``, ``Container``); ``pod_table``: a round's
  pods held as columns, from the read to the journal (``PodTable``);
* ``config``: options, defaults and vendor-aware values (§3);
* ``record``: the balance record and its JSON form (§5);
* ``numas``: source and destination NUMA selection (§7.1–§7.9);
* ``pods``: the pod to evict and the pods to migrate (§7.8, §7.10);
* ``round``: the whole round (§6.2, §7), and ``run_round``, a round against the state;
* ``advice``: the memory advice (§5.6, §8); ``eviction``: the eviction answers (§9);
* ``section``: ``current``/``last`` and the taken-once transitions (§6); ``events``, ``codec``:
  the balance state section's events and their msgpack form;
* ``decide``: the façade, one pure decision per step (a round, ``GetAdvices``,
  ``GetEvictPods``), each returning a ``policy.decision.Decision`` and owning the round
  machine; ``lifecycle``: where a record and the windows stand in that machine (§6.3);
* ``coalesce``: which rounds are journaled, and the summary of the quiet rounds that are not;
* ``rerun``: a journaled round's inputs decoded back, to re-run it;
* ``gojson``, ``decode``: Go-identical JSON text and field-naming decoding.

Imports ``machines`` (the round machine), ``policy.topology`` (the codec checks a section
against the node) and ``policy``'s shared root (``errors``, ``decision``); never
``policy.state`` or ``policy.cpu``, which build on it.

Every name below loads its module on first use (``__getattr__``), so importing one part — the
settings' ``BalancerConfig``, the state section and its codec, a host metric's ``NumaMetrics`` —
does not load the round planner (``round``, ``numas``, ``pods``): ``qrmd run`` imports the
state codec whether or not the balancer is enabled, and a node's restart pays for every module
it imports.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policy.balance.advice import ExtraMemoryAdvice, MemoryAdvice, MigrateContainer, advice_for
    from policy.balance.config import BalancerConfig, ResolvedConfig, VendorAware, vendor_key
    from policy.balance.errors import BalanceError
    from policy.balance.eviction import (
        EvictOffer,
        ThresholdMetAnswer,
        evict_offers,
        threshold_met,
        token,
        top_eviction_pods,
    )
    from policy.balance.inputs import (
        Container,
        MissingSample,
        NumaDistance,
        NumaMetrics,
        Pod,
        RoundInputs,
        UnresolvedPod,
        distance_lists_from_rows,
    )
    from policy.balance.record import (
        BalanceInfo,
        BalanceLevel,
        BalancePod,
        BalanceStatus,
        BandwidthLevel,
        EvictPod,
        NumaInfo,
        NumaLatencyInfo,
    )
    from policy.balance.round import RoundOutcome, RoundResult, in_cool_down, plan_round, run_round
    from policy.balance.section import BalancerState, take_advice, take_eviction

_ON_FIRST_USE = {
    **dict.fromkeys(
        ("ExtraMemoryAdvice", "MemoryAdvice", "MigrateContainer", "advice_for"),
        "policy.balance.advice",
    ),
    **dict.fromkeys(
        ("BalancerConfig", "ResolvedConfig", "VendorAware", "vendor_key"), "policy.balance.config"
    ),
    **dict.fromkeys(("BalanceError",), "policy.balance.errors"),
    **dict.fromkeys(
        (
            "EvictOffer",
            "ThresholdMetAnswer",
            "evict_offers",
            "threshold_met",
            "token",
            "top_eviction_pods",
        ),
        "policy.balance.eviction",
    ),
    **dict.fromkeys(
        (
            "Container",
            "MissingSample",
            "NumaDistance",
            "NumaMetrics",
            "Pod",
            "RoundInputs",
            "UnresolvedPod",
            "distance_lists_from_rows",
        ),
        "policy.balance.inputs",
    ),
    **dict.fromkeys(
        (
            "BalanceInfo",
            "BalanceLevel",
            "BalancePod",
            "BalanceStatus",
            "BandwidthLevel",
            "EvictPod",
            "NumaInfo",
            "NumaLatencyInfo",
        ),
        "policy.balance.record",
    ),
    **dict.fromkeys(
        ("RoundOutcome", "RoundResult", "in_cool_down", "plan_round", "run_round"),
        "policy.balance.round",
    ),
    **dict.fromkeys(("BalancerState", "take_advice", "take_eviction"), "policy.balance.section"),
}


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'policy.balance' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups are plain module attributes
    return value


__all__ = [
    "BalanceError",
    "BalanceInfo",
    "BalanceLevel",
    "BalancePod",
    "BalanceStatus",
    "BalancerConfig",
    "BalancerState",
    "BandwidthLevel",
    "Container",
    "EvictOffer",
    "EvictPod",
    "ExtraMemoryAdvice",
    "MemoryAdvice",
    "MigrateContainer",
    "MissingSample",
    "NumaDistance",
    "NumaInfo",
    "NumaLatencyInfo",
    "NumaMetrics",
    "Pod",
    "ResolvedConfig",
    "RoundInputs",
    "RoundOutcome",
    "RoundResult",
    "ThresholdMetAnswer",
    "UnresolvedPod",
    "VendorAware",
    "advice_for",
    "distance_lists_from_rows",
    "evict_offers",
    "in_cool_down",
    "plan_round",
    "run_round",
    "take_advice",
    "take_eviction",
    "threshold_met",
    "token",
    "top_eviction_pods",
    "vendor_key",
]
