"""Commands the MemoryBalancer actor serves (spec memory-balancer §1.1, §6.2, §8, §9; DESIGN.md).

The ticker sends ``Tick`` every ``--qos-aware-sync-period`` (5 s by default): one iteration of
the reference's advisor loop, a round (``Reconcile``) then ``GetAdvices``, whose advice qrmd
hands to its own executor (§6.1, §11). The eviction-plugin gRPC server converts each RPC to one
of ``GetEvictPods``, ``ThresholdMet``, ``GetTopEvictionPods`` and ``GetToken`` and ``ask``s the
actor with the RPC's remaining deadline; the replies are the policy's domain values
(``policy.balance``), which the wire layer turns into protobuf:

==========================  ==============================================================
command                     reply
==========================  ==============================================================
``Tick(now)``               ``RoundReport`` (never raises: a tick is ``tell``-ed)
``GetAdvices()``            ``tuple[ExtraMemoryAdvice, ...]``: none, or one entry (§8)
``GetEvictPods(uids)``      ``tuple[EvictOffer, ...]``; ``offer.active_index`` is the
                            position in ``active_pod_uids`` of the pod to return (§9.1)
``ThresholdMet()``          ``ThresholdMetAnswer`` (all defaults, §9.2)
``GetTopEvictionPods(..)``  ``tuple[str, ...]``: target pod UIDs, always empty (§9.2)
``GetToken()``              ``str``: always ``""`` (§9.2)
``GetBalancerState()``      ``BalancerView``: state, snapshot sequence, metrics (read only)
==========================  ==============================================================

Every command is served on the actor's one mailbox, so ``current``, ``last`` and their flags
are read and written under one order with no lock (§13, O16). ``GetAdvices`` and
``GetEvictPods`` commit their "taken" event *before* answering; if that commit fails they raise
``BalancerUnavailable`` and nothing is taken (the wire answers UNAVAILABLE; the eviction
manager asks again at its next poll).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from actors.errors import ActorError
from policy.balance import BalanceInfo, BalancerState, MemoryAdvice, RoundResult
from policy.errors import ErrorKind

__all__ = [
    "BalancerCommand",
    "BalancerUnavailable",
    "BalancerView",
    "GetAdvices",
    "GetBalancerState",
    "GetEvictPods",
    "GetToken",
    "GetTopEvictionPods",
    "RoundReport",
    "ThresholdMet",
    "Tick",
]


class BalancerUnavailable(ActorError):  # noqa: N818 (like AllocatorUnavailable)
    """A "taken" event could not be made durable; nothing was taken and the call may be retried.

    The wire layer answers UNAVAILABLE (DESIGN.md, the commit protocol step 3).
    """

    kind = ErrorKind.UNAVAILABLE


@dataclass(frozen=True, slots=True)
class Tick:
    """Run one advisor-loop iteration at ``now`` (Unix seconds): a round, then ``GetAdvices``
    with the advice handed to the executor (§1.1: always called, even after a failed round)."""

    now: float


@dataclass(frozen=True, slots=True)
class GetAdvices:
    """``GetAdvices`` (§8): the current record's advice as advisor extra entries, at most once."""


@dataclass(frozen=True, slots=True)
class GetEvictPods:
    """``GetEvictPods`` (§9.1) with the UIDs of the request's active pods, in request order."""

    active_pod_uids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ThresholdMet:
    """``ThresholdMet`` (§9.2)."""


@dataclass(frozen=True, slots=True)
class GetTopEvictionPods:
    """``GetTopEvictionPods`` (§9.2) with the request's active pod UIDs and ``topN``."""

    active_pod_uids: tuple[str, ...] = ()
    top_n: int = 0


@dataclass(frozen=True, slots=True)
class GetToken:
    """``GetToken`` (§9.2)."""


@dataclass(frozen=True, slots=True)
class GetBalancerState:
    """Read the balancer's durable state and its counters (health, tests, the demo)."""


#: Any command the actor serves.
BalancerCommand = (
    Tick
    | GetAdvices
    | GetEvictPods
    | ThresholdMet
    | GetTopEvictionPods
    | GetToken
    | GetBalancerState
)


@dataclass(frozen=True, slots=True)
class RoundReport:
    """What one ``Tick`` did.

    Attributes:
        now: the tick's time.
        result: skipped (cool-down), failed (record discarded) or stored (§6.2).
        record: the computed record (the failed one too, for the log); None when skipped.
        advice: the advice emitted by the tick's ``GetAdvices`` step, if any.
        execution: the executor's report on that advice, as plain data (dry run: what it
            would do), or None without an advice or executor.
        error: why the tick could not do all of that (a failed round's reason, or a commit
            that did not go through); empty otherwise.
        window: the balancer's window when the tick began (``machines.balance_round``:
            ``open``, ``cooling_down`` or ``ping_pong_window``, §6.3).
        coalesced: the round repeated the journaled outcome and was not journaled on its
            own (``policy.balance.coalesce``).
    """

    now: float
    result: RoundResult
    record: BalanceInfo | None = None
    advice: MemoryAdvice | None = None
    execution: Mapping[str, object] | None = None
    error: str = ""
    window: str = ""
    coalesced: bool = False


@dataclass(frozen=True, slots=True)
class BalancerView:
    """The balancer's durable state, the snapshot sequence it came from, and its counters.

    Attributes:
        state: ``current`` and ``last``.
        seq: the sequence number of the snapshot the state is from.
        metrics: the plain counters by name (``BalancerMetrics.counters``).
        round_metric: ``numa_memory_balance`` counts by tag set, each tag set a tuple of
            ``(name, value)`` pairs in the reference's order (§12).
    """

    state: BalancerState
    seq: int
    metrics: Mapping[str, int] = field(default_factory=dict)
    round_metric: Mapping[tuple[tuple[str, str], ...], int] = field(default_factory=dict)
