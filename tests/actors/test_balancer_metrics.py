"""The balancer's counters (actors.balancer_metrics): the round metric by tag set (§12)."""

from __future__ import annotations

import pytest

from actors.balancer_metrics import BalancerMetrics, RoundTags, failed_reason_label
from policy.balance import BalanceInfo
from policy.balance.constants import NOTHING_TO_DO
from policy.balance.record import BalanceLevel, BalanceStatus, BandwidthLevel

NOW = 1_795_994_721.5


def quiet() -> BalanceInfo:
    return BalanceInfo(NOW)


def nothing_to_do() -> BalanceInfo:
    return BalanceInfo(
        NOW,
        need_balance=True,
        balance_level=BalanceLevel.GRACE,
        max_latency_numa_bandwidth_level=BandwidthLevel.HIGH,
        status=BalanceStatus.PREPARE_FAILED,
        failed_reason=NOTHING_TO_DO,
    )


def failed(reason: str) -> BalanceInfo:
    return BalanceInfo(NOW, status=BalanceStatus.PREPARE_FAILED, failed_reason=reason)


def tags_of(record: BalanceInfo) -> RoundTags:
    """The tag set of one round, made from its record as §12 labels it."""
    return tuple(
        (name, failed_reason_label(value) if name == "failed_reason" else value)
        for name, value in record.metric_tags().items()
    )


def expected(rounds: list[BalanceInfo]) -> dict[RoundTags, int]:
    counted: dict[RoundTags, int] = {}
    for record in rounds:
        counted[tags_of(record)] = counted.get(tags_of(record), 0) + 1
    return counted


@pytest.mark.parametrize(
    "rounds",
    [
        pytest.param([quiet()] * 5, id="the same quiet outcome counts under one tag set"),
        pytest.param([quiet(), nothing_to_do(), quiet(), nothing_to_do(), nothing_to_do()],
                     id="outcomes taking turns count each under its own tag set"),
        pytest.param([failed(f"metric source: read {i} failed") for i in range(100)] + [quiet()],
                     id="more free-text reasons than the kept tag sets still count as one label"),
    ],
)  # fmt: skip
def test_each_round_is_counted_under_the_tags_its_record_gives(rounds: list[BalanceInfo]) -> None:
    metrics = BalancerMetrics()
    for record in rounds:
        metrics.count_round(record)
    assert metrics.round_metric == expected(rounds)


def test_the_counters_are_the_plain_counts_only() -> None:
    metrics = BalancerMetrics()
    metrics.count_round(quiet())
    counters = metrics.counters()
    assert "round_metric" not in counters and "_tag_sets" not in counters
    assert all(type(value) is int for value in counters.values())
    assert counters["ticks_total"] == 0
