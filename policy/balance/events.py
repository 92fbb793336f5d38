"""The memory balancer's state section and its events (memory-balancer §6.1, §6.3; DESIGN.md).

The ``balance`` section is a ``BalancerState``: ``current`` (the stored record) and ``last``
(the record whose advice was last emitted), each with its ``balanceExecuted`` and
``evictExecuted`` flags. The MemoryBalancer commits one event per transition of the balance
round machine (``machines.balance_round``), under the machine's names:

* ``BalanceRoundRecorded(record, inputs)``: a computed round is stored as ``current``
  (§6.2 step 6). ``inputs`` is the round's ``RoundInputs`` in its plain-dict form, so a
  journaled round can be re-read and re-computed offline (``qrmd balance plan``).
* ``BalanceRoundFailed(inputs, error)``: a round ended in an error. It is journaled with its
  inputs, but the state is unchanged: the failed record is discarded and ``current`` keeps
  the previous one (§6.2 step 5, O8).
* ``BalanceAdviceTaken(detect_time)``: ``GetAdvices`` emitted the current record's advice;
  the record is marked executed and becomes ``last`` (§8 step 6).
* ``BalanceEvictionTaken(detect_time)``: ``GetEvictPods`` consumed the current record's
  eviction offer (§9.1 step 3).
* ``BalanceRoundsCoalesced(rounds, first_time, last_time, metrics)``: rounds that repeated the
  last journaled round's outcome and were not journaled one by one (``policy.balance.coalesce``),
  counted with the range of the metrics they read. It shares its record with the round that
  ended the stretch, and changes no state: the state is what that round's event says.

A "taken" event names the record it takes by its detect time, so an event replayed onto a
state it was not decided on is refused instead of marking the wrong record. Applying uses the
planner's own "taken" updates (``policy.balance.section``: ``mark_advice_taken``,
``mark_eviction_taken``, written once), so replaying the journal from the empty section
rebuilds exactly the live ``current`` and ``last``: the cool-down and the ping-pong window
survive a restart (§6.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Final

from policy.balance.advice import advice_for
from policy.balance.errors import BalanceError
from policy.balance.gojson import format_time
from policy.balance.record import BalanceInfo
from policy.balance.section import BalancerState, mark_advice_taken, mark_eviction_taken
from policy.decision import Event
from policy.errors import StateError

__all__ = [
    "BALANCE_EVENT_TYPES",
    "BALANCE_SECTION",
    "BalanceAdviceTaken",
    "BalanceEvent",
    "BalanceEvictionTaken",
    "BalanceRoundFailed",
    "BalanceRoundRecorded",
    "BalanceRoundsCoalesced",
    "apply_balance_event",
]

BALANCE_SECTION: Final = "balance"


class BalanceEvent(Event):
    """An event of the balance section."""

    __slots__ = ()

    section: ClassVar[str] = BALANCE_SECTION


@dataclass(frozen=True, slots=True)
class BalanceRoundRecorded(BalanceEvent):
    """A computed round's record is stored as ``current`` (§6.2 step 6, §7.11).

    Attributes:
        record: the new record, neither of its flags set.
        inputs: the round's ``RoundInputs.to_json()`` (a live round's ``RoundInputs.plain()``,
            a journaled one's decoded map).
    """

    record: BalanceInfo
    inputs: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class BalanceRoundFailed(BalanceEvent):
    """A round failed (§7.12): journaled for forensics, ``current`` unchanged (O8).

    Attributes:
        inputs: the round's ``RoundInputs.to_json()``, or as much of it as was read.
        error: the failed reason.
    """

    inputs: Mapping[str, Any]
    error: str


@dataclass(frozen=True, slots=True)
class BalanceAdviceTaken(BalanceEvent):
    """``GetAdvices`` emitted the advice of the current record detected at ``detect_time``."""

    detect_time: float


@dataclass(frozen=True, slots=True)
class BalanceEvictionTaken(BalanceEvent):
    """``GetEvictPods`` took the eviction offer of the current record detected at
    ``detect_time``, whether or not a pod matched (O10)."""

    detect_time: float


@dataclass(frozen=True, slots=True)
class BalanceRoundsCoalesced(BalanceEvent):
    """Rounds not journaled one by one: each repeated the outcome of the round journaled before
    them (``policy.balance.coalesce``). Journaled in the record of the round that ended them;
    the state is unchanged.

    Attributes:
        rounds: how many rounds were coalesced (at least one).
        first_time: the first coalesced round's time, Unix seconds.
        last_time: the last coalesced round's time.
        metrics: per NUMA node (its id as a string), ``{"readLatency": [min, max],
            "readWriteBandwidth": [min, max]}`` over the samples those rounds read; a metric
            with no sample in any of them is left out.
    """

    rounds: int
    first_time: float
    last_time: float
    metrics: Mapping[str, Any]


#: Every balance-section event type, in the order the codec documents them.
BALANCE_EVENT_TYPES: Final[tuple[type[BalanceEvent], ...]] = (
    BalanceRoundRecorded,
    BalanceRoundFailed,
    BalanceAdviceTaken,
    BalanceEvictionTaken,
    BalanceRoundsCoalesced,
)


def apply_balance_event(state: BalancerState, event: Event) -> BalancerState:
    """The balance section after one event; ``state`` is unchanged.

    Raises:
        StateError: the event does not fit: a recorded round already taken, a "taken" event
            with no current record, for another record, or for a record already taken (or,
            for an advice, one that has none).
    """
    match event:
        case BalanceRoundRecorded(record=record):
            if record.balance_executed or record.evict_executed:
                raise StateError(
                    f"BalanceRoundRecorded: the round detected at {_when(record.detect_time)}"
                    " is recorded with its advice or eviction already taken"
                )
            return replace(state, current=record)
        case BalanceRoundFailed() | BalanceRoundsCoalesced():
            return state
        case BalanceAdviceTaken(detect_time=detect_time):
            current = _current(state, "BalanceAdviceTaken", detect_time)
            if advice_for(current) is None:
                taken = "was already taken" if current.balance_executed else "does not exist"
                raise StateError(
                    f"BalanceAdviceTaken: the advice of the round detected at "
                    f"{_when(detect_time)} {taken}"
                )
            return mark_advice_taken(state)
        case BalanceEvictionTaken(detect_time=detect_time):
            current = _current(state, "BalanceEvictionTaken", detect_time)
            if current.evict_executed:
                raise StateError(
                    f"BalanceEvictionTaken: the eviction of the round detected at "
                    f"{_when(detect_time)} was already taken"
                )
            return mark_eviction_taken(state)
    raise StateError(f"{type(event).__name__} is not an event of the balance section")


def _current(state: BalancerState, kind: str, detect_time: float) -> BalanceInfo:
    """The current record, which must be the one detected at ``detect_time``."""
    current = state.current
    if current is None:
        raise StateError(f"{kind}: there is no stored round to take from")
    # Compared in whole nanoseconds, the precision the record's JSON form keeps.
    if _when(current.detect_time) != _when(detect_time):
        raise StateError(
            f"{kind}: names the round detected at {_when(detect_time)}, "
            f"but the stored round was detected at {_when(current.detect_time)}"
        )
    return current


def _when(time_s: float) -> str:
    """A detect time for a message: RFC 3339, or the raw number if it is out of range."""
    try:
        return format_time(time_s)
    except BalanceError:
        return repr(time_s)
