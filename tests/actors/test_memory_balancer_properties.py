"""Invariants of the MemoryBalancer over any sequence of ticks, RPCs, failures and restarts
(memory-balancer §6.2, §6.3, §8, §9.1, §13)."""

from __future__ import annotations

import contextlib
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.balancer_messages import BalancerUnavailable, GetAdvices, GetEvictPods, Tick
from policy.balance import BalanceInfo, RoundResult
from policy.balance.constants import BALANCE_INTERVAL_NS
from policy.balance.events import (
    BalanceAdviceTaken,
    BalanceEvictionTaken,
    BalanceRoundFailed,
    BalanceRoundRecorded,
)
from policy.balance.gojson import to_nanos
from tests.actors.balancer_fakes import Balancer
from tests.policy.balance.examples import EX2_PODS, NOW

ACTIVE = tuple(p.uid for p in EX2_PODS)

operations = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.integers(0, 40)),
        st.tuples(st.just("advices"), st.just(0)),
        st.tuples(st.just("evict"), st.just(0)),
        st.tuples(st.just("metric_missing"), st.booleans()),
        st.tuples(st.just("refuse_next"), st.just(0)),
        st.tuples(st.just("restart"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(operations)
def test_taken_at_most_once_cool_down_kept_and_replay_equals_live(
    ops: list[tuple[str, object]],
) -> None:
    b = Balancer()
    t = 0.0
    for op, arg in ops:
        if op == "tick":
            t += float(arg)  # type: ignore[arg-type]
            before = b.core.state
            report = b.core.handle(Tick(b.at(t)))
            last = before.last
            if last is not None and to_nanos(NOW + t) - to_nanos(last.detect_time) < (
                BALANCE_INTERVAL_NS
            ):
                assert report.result is RoundResult.SKIPPED, "§6.2: the cool-down skips"
            if report.result is not RoundResult.STORED:
                assert b.core.state.current in (before.current, _taken(before.current))
        elif op == "advices":
            with contextlib.suppress(BalancerUnavailable):
                b.core.handle(GetAdvices())
        elif op == "evict":
            with contextlib.suppress(BalancerUnavailable):
                b.core.handle(GetEvictPods(ACTIVE))
        elif op == "metric_missing":
            b.metrics.missing = {3} if arg else set()
        elif op == "refuse_next":
            b.store.refuse_next()
        else:
            b.restart()

    # Each stored record's advice and eviction are taken at most once (§8, §9.1): between
    # two recorded rounds, at most one of each.
    taken: list[str] = []
    for event in b.store.events:
        if isinstance(event, BalanceRoundRecorded):
            taken = []
        elif isinstance(event, BalanceAdviceTaken | BalanceEvictionTaken):
            assert type(event).__name__ not in taken, "taken twice from one record"
            taken.append(type(event).__name__)
        else:
            assert isinstance(event, BalanceRoundFailed)
    # Replay rebuilds exactly the live state.
    assert b.replayed() == b.store.latest().state
    assert b.core.state == b.store.latest().state.balance


def _taken(record: BalanceInfo | None) -> BalanceInfo | None:
    """The record with its advice taken: a skipped or failed tick may still emit it."""
    return None if record is None else replace(record, balance_executed=True)
