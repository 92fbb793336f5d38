"""The NUMA memory balance round and the balancer's windows (memory-balancer.md §6, §8, §9).

**One round** (:data:`ROUND`), from the tick that asks for it to the next stored record:

* ``start``: within the balance interval (30 s) after the last emitted advice's detect time the
  round is **skipped** — nothing is computed, stored or measured (§6.2 step 2). Otherwise the
  round *detects* (its ``detectTime`` is now) and is **preparing** (§7).
* ``fail``: an error anywhere discards the round; ``current`` keeps the previous record (§6.2
  step 5, §7.12, O8). qrmd still commits the failed round with its inputs, so it can be
  re-read and re-computed offline (DESIGN.md "Actors and messages": any decision can be
  re-run from the journal alone).
* ``conclude``: the computed record is stored as ``current`` (§6.2 step 6) with status
  ``preparing`` when no balance is needed (zero metrics, no pressure, grace cancelled: O7),
  ``prepareFailed`` when there is pressure but nothing to balance or evict (§7.11, O1 fixed),
  and ``prepareSuccess`` otherwise.
* ``take_advice``: ``GetAdvices`` emits the record's advice at most once (§8 step 6); the record
  becomes ``last`` and starts the cool-down. Eviction-only records have no advice (guard).
* ``take_eviction``: the first ``GetEvictPods`` consumes the record's eviction offer, whether or
  not a pod matched (§9.1 step 3, O10), at most once.
* ``supersede``: the next stored record replaces this one as ``current``; it can no longer be
  taken.

**The windows** (:data:`WINDOWS`), one per balancer, follow ``last`` — the record whose advice
was most recently emitted (§6.3): the **cool-down** while ``now - last.detectTime < 30 s``
(rounds are skipped), then the **ping-pong window** while that age is not more than 15 minutes
(a migration in the exact reverse direction of ``last`` is filtered out, §7.9.2), then **open**.
They are derived from ``last.detectTime``, so they commit nothing; the round's
``in_cool_down`` guard is answered from them.
"""

from __future__ import annotations

from functools import cache

from machines.lifecycle import Lifecycle
from machines.table import MachineTable, Transition

# Round states.
SCHEDULED = "scheduled"
SKIPPED = "skipped"
PREPARING = "preparing"
DISCARDED = "discarded"
NO_BALANCE = "no_balance"
PREPARE_FAILED = "prepare_failed"
PREPARE_SUCCESS = "prepare_success"
ADVICE_TAKEN = "advice_taken"
EVICTION_TAKEN = "eviction_taken"
ADVICE_AND_EVICTION_TAKEN = "advice_and_eviction_taken"
SUPERSEDED = "superseded"

#: States of a record stored as ``current``.
STORED = (
    NO_BALANCE,
    PREPARE_FAILED,
    PREPARE_SUCCESS,
    ADVICE_TAKEN,
    EVICTION_TAKEN,
    ADVICE_AND_EVICTION_TAKEN,
)

BALANCE_ROUND_RECORDED = "BalanceRoundRecorded"
BALANCE_ROUND_FAILED = "BalanceRoundFailed"
BALANCE_ADVICE_TAKEN = "BalanceAdviceTaken"
BALANCE_EVICTION_TAKEN = "BalanceEvictionTaken"

# fmt: off
ROUND_TRANSITIONS = (
    # §6.2 step 2: the cool-down skips the round without computing anything.
    Transition("start", (SCHEDULED,), SKIPPED, conditions=("in_cool_down",)),
    Transition("start", (SCHEDULED,), PREPARING, unless=("in_cool_down",)),
    # §6.2 step 5 / §7.12: an error discards the record; current is unchanged (O8).
    Transition("fail", (PREPARING,), DISCARDED, events=(BALANCE_ROUND_FAILED,)),
    # §6.2 step 6 / §7.11: the record is stored with its status.
    Transition("conclude", (PREPARING,), PREPARE_SUCCESS,
               conditions=("needs_balance", "has_pods_to_move"),
               events=(BALANCE_ROUND_RECORDED,)),
    Transition("conclude", (PREPARING,), PREPARE_FAILED,
               conditions=("needs_balance",), unless=("has_pods_to_move",),
               events=(BALANCE_ROUND_RECORDED,)),
    Transition("conclude", (PREPARING,), NO_BALANCE, unless=("needs_balance",),
               events=(BALANCE_ROUND_RECORDED,)),
    # §8: the advice is emitted at most once per record, and only if it has one.
    Transition("take_advice", (PREPARE_SUCCESS,), ADVICE_TAKEN, conditions=("has_advice",),
               events=(BALANCE_ADVICE_TAKEN,)),
    Transition("take_advice", (EVICTION_TAKEN,), ADVICE_AND_EVICTION_TAKEN,
               conditions=("has_advice",), events=(BALANCE_ADVICE_TAKEN,)),
    # §9.1: the first GetEvictPods consumes the offer, even when no pod matched (O10).
    Transition("take_eviction", (NO_BALANCE, PREPARE_FAILED, PREPARE_SUCCESS), EVICTION_TAKEN,
               events=(BALANCE_EVICTION_TAKEN,)),
    Transition("take_eviction", (ADVICE_TAKEN,), ADVICE_AND_EVICTION_TAKEN,
               events=(BALANCE_EVICTION_TAKEN,)),
    # §6.1: the next stored record becomes current; this one can no longer be taken.
    Transition("supersede", STORED, SUPERSEDED),
)
# fmt: on

ROUND = MachineTable(
    name="balance_round",
    title="NUMA memory balance round",
    states=(SCHEDULED, SKIPPED, PREPARING, DISCARDED, *STORED, SUPERSEDED),
    initial=SCHEDULED,
    final=(SKIPPED, DISCARDED, SUPERSEDED),
    transitions=ROUND_TRANSITIONS,
    glossary=(
        (
            "in_cool_down",
            "an advice was emitted and now - last.detectTime < 30 s (the balance interval, §6.2)",
        ),
        ("needs_balance", "the record's needBalance after regulation by bandwidth (§7.7)"),
        (
            "has_pods_to_move",
            "the record has destinations and balance pods, or a pod to evict (§7.11)",
        ),
        (
            "has_advice",
            "GetAdvices would build an advice: balance pods and destinations present (§8 step 2)",
        ),
        (
            BALANCE_ROUND_FAILED,
            "a round ended in an error; its inputs and reason are kept, current is unchanged",
        ),
        (BALANCE_ROUND_RECORDED, "the computed record was stored as current (§6.2 step 6)"),
        (
            BALANCE_ADVICE_TAKEN,
            "the advice was emitted: balanceExecuted set, the record becomes last (§8 step 6)",
        ),
        (BALANCE_EVICTION_TAKEN, "GetEvictPods consumed the offer: evictExecuted set (§9.1)"),
    ),
    summary=(
        "One balance round and its record (memory-balancer.md §6, §7.11, §8, §9.1): skipped "
        "within the balance interval, else detect and prepare; a failed round is discarded, a "
        "computed one stored as preparing (no balance), prepareFailed or prepareSuccess; its "
        "advice and its eviction offer are each taken at most once."
    ),
)

# Window states.
OPEN = "open"
COOLING_DOWN = "cooling_down"
PING_PONG_WINDOW = "ping_pong_window"

# fmt: off
WINDOW_TRANSITIONS = (
    # §8 step 6: emitting an advice makes its record `last`; the cool-down starts at its
    # detect time. No advice can be emitted while cooling down: no round is computed then.
    Transition("emit_advice", (OPEN, PING_PONG_WINDOW), COOLING_DOWN),
    # Ticks move on as time passes; a long pause can skip the ping-pong window entirely.
    Transition("tick", (COOLING_DOWN, PING_PONG_WINDOW), OPEN,
               conditions=("ping_pong_window_passed",)),
    Transition("tick", (COOLING_DOWN,), PING_PONG_WINDOW,
               conditions=("balance_interval_passed",)),
    Transition("tick", (OPEN,), OPEN),
)
# fmt: on

WINDOWS = MachineTable(
    name="balance_windows",
    title="NUMA memory balancer windows",
    states=(OPEN, COOLING_DOWN, PING_PONG_WINDOW),
    initial=OPEN,
    final=(),
    transitions=WINDOW_TRANSITIONS,
    glossary=(
        ("ping_pong_window_passed", "now - last.detectTime is more than 15 minutes (§6.3)"),
        ("balance_interval_passed", "now - last.detectTime is at least 30 s (§6.2 step 2)"),
    ),
    summary=(
        "The balancer's windows after an emitted advice (memory-balancer.md §6.3, §7.9.2): "
        "rounds are skipped during the 30 s cool-down, and the reverse migration is filtered "
        "out while the last emitted round is at most 15 minutes old."
    ),
)


@cache
def round_lifecycle() -> Lifecycle:
    """The one balance-round machine every round shares."""
    return Lifecycle(ROUND)


@cache
def windows_lifecycle() -> Lifecycle:
    """The one windows machine (a balancer per node, but the definition is shared anyway)."""
    return Lifecycle(WINDOWS)
