"""The balancer's persistent state and its transitions (spec memory-balancer §6.1, §6.3, §8, §9.1).

``BalancerState`` holds ``current`` (the last stored record) and ``last`` (the record whose
advice was last emitted). Each transition is a pure function from a state to a new state plus
what the caller hands out; a later integration (the round machine, the MemoryBalancer actor)
drives them, commits each new state to the journal and serialises the calls, which fixes the
reference's unsynchronised reads of ``last`` (O16).

* ``take_advice``: emit the current record's advice at most once; marks it executed and makes
  it ``last``, which starts the cool-down and the ping-pong window (``mark_advice_taken``).
* ``take_eviction``: offer the current record's eviction at most once, even when nothing
  matched the active pods (O10; ``mark_eviction_taken``).

``mark_advice_taken`` and ``mark_eviction_taken`` are the two "taken" updates, written once:
the planner's transitions use them, and so does applying the journaled "taken" events
(``policy.balance.events``), so a replayed journal cannot drift from the live state.

In the reference ``last`` is the very object ``current`` was when its advice was emitted, so
a flag set later on ``current`` shows through ``last`` until another record is stored; here
``last`` follows ``current``'s flags while the two are the same record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from policy.balance.advice import MemoryAdvice, advice_for
from policy.balance.decode import as_object, reject_unknown
from policy.balance.errors import BalanceError
from policy.balance.eviction import EvictOffer, evict_offers
from policy.balance.record import BalanceInfo

__all__ = [
    "BalancerState",
    "mark_advice_taken",
    "mark_eviction_taken",
    "take_advice",
    "take_eviction",
]


@dataclass(frozen=True, slots=True)
class BalancerState:
    """The stored record and the last emitted one; both None at first start."""

    current: BalanceInfo | None = None
    last: BalanceInfo | None = None

    def to_json(self) -> dict[str, object]:
        """``{"current": record|null, "last": record|null}``."""
        return {
            "current": None if self.current is None else self.current.to_json(),
            "last": None if self.last is None else self.last.to_json(),
        }

    @classmethod
    def from_json(cls, value: object, where: str = "state") -> BalancerState:
        """Decode the plain-dict form.

        Raises:
            BalanceError: a bad record, named with its path.
        """
        obj = as_object(value, where)
        reject_unknown(obj, ("current", "last"), where)
        current, last = obj.get("current"), obj.get("last")
        return cls(
            current=None if current is None else BalanceInfo.from_json(current, f"{where}.current"),
            last=None if last is None else BalanceInfo.from_json(last, f"{where}.last"),
        )


def take_advice(state: BalancerState) -> tuple[BalancerState, MemoryAdvice | None]:
    """``GetAdvices`` (§8): the current record's advice, at most once.

    Returns:
        The new state and the advice; when there is one, ``current`` is marked
        ``balanceExecuted`` and becomes ``last``. Otherwise the state is unchanged.
    """
    advice = advice_for(state.current)
    if advice is None or state.current is None:
        return state, None
    return mark_advice_taken(state), advice


def take_eviction(
    state: BalancerState, active_pod_uids: Sequence[str]
) -> tuple[BalancerState, tuple[EvictOffer, ...]]:
    """``GetEvictPods`` (§9.1): the current record's eviction offers, at most once.

    Args:
        state: the balancer's state.
        active_pod_uids: UIDs of the request's active pods, in request order.

    Returns:
        The new state and the offers. With a current record not yet evicted, the record is
        marked ``evictExecuted`` whether or not an offer matched (O10).
    """
    current = state.current
    if current is None or current.evict_executed:
        return state, ()
    return mark_eviction_taken(state), evict_offers(current, active_pod_uids)


def mark_advice_taken(state: BalancerState) -> BalancerState:
    """The section once ``current``'s advice is emitted (§8 step 6): marked
    ``balanceExecuted``, and it becomes ``last``, which starts the cool-down.

    Raises:
        BalanceError: there is no current record.
    """
    executed = replace(_current(state), balance_executed=True)
    return BalancerState(current=executed, last=executed)


def mark_eviction_taken(state: BalancerState) -> BalancerState:
    """The section once ``current``'s eviction offer is taken (§9.1 step 3): marked
    ``evictExecuted``. ``last`` is the same record as ``current`` while no newer one was
    stored, so the flag shows through it, as in the reference (§6.1).

    Raises:
        BalanceError: there is no current record.
    """
    current = _current(state)
    evicted = replace(current, evict_executed=True)
    last = evicted if state.last == current else state.last
    return BalancerState(current=evicted, last=last)


def _current(state: BalancerState) -> BalanceInfo:
    if state.current is None:
        raise BalanceError("the balancer state holds no current record to take from")
    return state.current
