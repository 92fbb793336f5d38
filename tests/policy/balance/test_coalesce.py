"""Quiet rounds coalesced in the journal (policy.balance.coalesce): which rounds are journaled,
with which summary, and what the summary counts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.balance import BalancerState, MissingSample, NumaMetrics, RoundInputs
from policy.balance.coalesce import QuietStretch, coalesce_round, round_outcome
from policy.balance.decide import RoundReply, balance_round, unreadable_round
from policy.balance.events import (
    BalanceRoundFailed,
    BalanceRoundRecorded,
    BalanceRoundsCoalesced,
)
from policy.decision import Decision
from tests.policy.balance.examples import EX2_B, EX2_L, EX2_PODS, NOW, make_inputs
from tests.policy.balance.test_properties import round_inputs

HOUR = 3600.0
QUIET = ((20, 21, 22, 23), (100, 100, 100, 100))
QUIETER = ((10, 11, 12, 13), (50, 60, 70, 80))


def quiet(
    t: float, metrics: tuple[Sequence[float], Sequence[float]] = QUIET
) -> Decision[RoundReply]:
    """A round at NOW + t on quiet metrics: stored, nothing to balance."""
    return balance_round(BalancerState(), make_inputs(*metrics, EX2_PODS, now=NOW + t))


def missing(t: float, reason: str = "no sample") -> Decision[RoundReply]:
    """A round at NOW + t whose NUMA 3 bandwidth is missing: failed."""
    inputs = make_inputs(*QUIET, EX2_PODS, now=NOW + t)
    metrics = dict(inputs.numa_metrics)
    metrics[3] = NumaMetrics(20.0, MissingSample(reason))
    return balance_round(BalancerState(), replace(inputs, numa_metrics=metrics))


def pressure(t: float) -> Decision[RoundReply]:
    """Example 2's round at NOW + t: a grace balance with pods to move."""
    return balance_round(BalancerState(), make_inputs(EX2_L, EX2_B, EX2_PODS, now=NOW + t))


def after(decision: Decision[RoundReply], at: float = 0.0) -> QuietStretch:
    """The stretch held once ``decision``'s round at NOW + at is journaled."""
    journaled = coalesce_round(None, decision, NOW + at, HOUR)
    assert journaled.stretch is not None
    return journaled.stretch


@pytest.mark.parametrize(
    ("stretch", "decision", "t", "journaled"),
    [
        pytest.param(None, quiet(0), 0, True, id="the first round since start is journaled"),
        pytest.param(after(quiet(0)), quiet(5), 5, False,
                     id="a quiet round repeating the journaled outcome is coalesced"),
        pytest.param(after(quiet(0)), quiet(5, QUIETER), 5, False,
                     id="other metrics with the same outcome are still the same outcome"),
        pytest.param(after(quiet(0)), missing(5), 5, True,
                     id="a failure after a quiet round is journaled"),
        pytest.param(after(missing(0)), missing(5), 5, False,
                     id="the same failure again is coalesced"),
        pytest.param(after(missing(0)), missing(5, "expired"), 5, True,
                     id="a failure for another reason is journaled"),
        pytest.param(after(missing(0)), quiet(5), 5, True,
                     id="a quiet round after a failure is journaled"),
        pytest.param(after(pressure(0)), pressure(5), 5, True,
                     id="a round with pods to move is journaled even when it repeats"),
        pytest.param(after(quiet(0)), quiet(HOUR - 5), HOUR - 5, False,
                     id="just under the summary period, still coalesced"),
        pytest.param(after(quiet(0)), quiet(HOUR), HOUR, True,
                     id="once the summary period has passed the round is journaled"),
        pytest.param(after(quiet(0), at=60), quiet(5), 5, True,
                     id="a clock that stepped back journals the round"),
    ],
)  # fmt: skip
def test_which_rounds_are_journaled(
    stretch: QuietStretch | None, decision: Decision[RoundReply], t: float, journaled: bool
) -> None:
    out = coalesce_round(stretch, decision, NOW + t, HOUR)
    if journaled:
        assert out.events[-len(decision.events) :] == decision.events
        assert out.stretch == QuietStretch(round_outcome(decision.events[0]), since=NOW + t)  # type: ignore[arg-type]
        assert not out.coalesced
    else:
        assert out.events == () and out.coalesced
        assert out.stretch is not None and stretch is not None
        assert out.stretch.rounds == stretch.rounds + 1 and out.stretch.since == stretch.since


def test_a_period_of_zero_journals_every_round() -> None:
    stretch = after(quiet(0))
    out = coalesce_round(stretch, quiet(5), NOW + 5, 0.0)
    assert out.events == quiet(5).events


def test_a_skipped_round_is_neither_journaled_nor_counted() -> None:
    stretch = after(quiet(0))
    # In the cool-down the decision has no events (``skip_round``, §6.2 step 2).
    empty: Decision[RoundReply] = Decision((), quiet(5).reply)
    out = coalesce_round(stretch, empty, NOW + 5, HOUR)
    assert out.events == () and out.stretch == stretch and not out.coalesced


def test_the_round_after_a_stretch_carries_its_summary() -> None:
    stretch = after(quiet(0))
    for t, metrics in ((5, QUIET), (10, QUIETER), (15, QUIET)):
        out = coalesce_round(stretch, quiet(t, metrics), NOW + t, HOUR)
        assert out.coalesced and out.stretch is not None
        stretch = out.stretch
    changed = missing(20)
    out = coalesce_round(stretch, changed, NOW + 20, HOUR)
    summary, failed = out.events
    assert isinstance(failed, BalanceRoundFailed) and failed == changed.events[0]
    assert summary == BalanceRoundsCoalesced(
        rounds=3,
        first_time=NOW + 5,
        last_time=NOW + 15,
        metrics={
            "0": {"readLatency": [10.0, 20.0], "readWriteBandwidth": [50.0, 100.0]},
            "1": {"readLatency": [11.0, 21.0], "readWriteBandwidth": [60.0, 100.0]},
            "2": {"readLatency": [12.0, 22.0], "readWriteBandwidth": [70.0, 100.0]},
            "3": {"readLatency": [13.0, 23.0], "readWriteBandwidth": [80.0, 100.0]},
        },
    )
    assert out.stretch == QuietStretch(("failed", failed.error), since=NOW + 20)


def test_a_summary_leaves_out_missing_samples() -> None:
    stretch = after(missing(0))
    out = coalesce_round(stretch, missing(5), NOW + 5, HOUR)
    assert out.stretch is not None
    summary = out.stretch.summary()
    assert summary is not None
    assert summary.metrics["3"] == {"readLatency": [20.0, 20.0]}, "no bandwidth sample on NUMA 3"


def test_an_unreadable_round_repeats_by_its_reason() -> None:
    first = unreadable_round(BalancerState(), NOW, "the state store is gone")
    again = unreadable_round(BalancerState(), NOW + 5, "the state store is gone")
    out = coalesce_round(after(first), again, NOW + 5, HOUR)
    assert out.coalesced
    summary = out.stretch.summary() if out.stretch else None
    assert summary is not None and summary.metrics == {}, "it read no metric"


def test_outcomes_are_the_metric_tags_of_a_round_that_hands_nothing_out() -> None:
    recorded = quiet(0).events[0]
    assert isinstance(recorded, BalanceRoundRecorded)
    assert round_outcome(recorded) == ("stored", *recorded.record.metric_tags().values())
    assert round_outcome(pressure(0).events[0]) is None


def test_a_negative_period_is_refused() -> None:
    with pytest.raises(ValueError, match="summary period"):
        coalesce_round(None, quiet(0), NOW, -1.0)


_SAMPLE = st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False), st.integers(0, 10**6))


@given(st.lists(st.lists(st.tuples(_SAMPLE, _SAMPLE), min_size=1, max_size=4), max_size=8))
def test_a_stretch_holds_each_metrics_range_over_every_coalesced_round(
    rounds: list[list[tuple[float | None, float | None]]],
) -> None:
    # Rounds read one to four NUMA nodes, a sample missing now and then; the ranges kept as
    # they were when a round lies inside them must still be every sample's min and max.
    stretch = QuietStretch(("stored",), since=NOW)
    seen: dict[str, dict[str, list[float]]] = {}
    for t, numas in enumerate(rounds):
        entries = [
            {"numa": numa, "readLatency": latency, "readWriteBandwidth": bandwidth}
            for numa, (latency, bandwidth) in enumerate(numas)
        ]
        stretch = stretch.with_round(NOW + t, {"numaMetrics": entries})
        for entry in entries:
            for name in ("readLatency", "readWriteBandwidth"):
                value = entry[name]
                if value is not None:
                    seen.setdefault(str(entry["numa"]), {}).setdefault(name, []).append(value)
    summary = stretch.summary()
    expected = {
        numa: {name: [float(min(v)), float(max(v))] for name, v in by_name.items()}
        for numa, by_name in sorted(seen.items())
    }
    assert (summary.metrics if summary is not None else {}) == (expected if rounds else {})


# Four NUMA nodes, each sample missing or one of a few values: rounds inside the ranges, and
# rounds that widen one metric of one node only.
_FEW = st.sampled_from([MissingSample(), MissingSample("expired"), 1.0, 2.0, 3.0])
_ROUND_METRICS = st.lists(st.builds(NumaMetrics, _FEW, _FEW), min_size=4, max_size=4).map(
    lambda nodes: dict(enumerate(nodes))
)


def _live_stretches_equal_to_journaled(
    rounds: list[dict[int, NumaMetrics]],
) -> Iterator[QuietStretch]:
    """Each round's stretch from its live inputs, checked equal to the one its journaled form
    (what a journal holds) gives."""
    live = plain = QuietStretch(("stored",), since=NOW)
    for t, metrics in enumerate(rounds):
        inputs = replace(make_inputs(*QUIET, now=NOW + t), numa_metrics=metrics)
        live = live.with_round(NOW + t, inputs.plain())
        plain = plain.with_round(NOW + t, inputs.to_json())
        assert live == plain
        yield live


@given(st.lists(_ROUND_METRICS, min_size=1, max_size=10))
def test_a_live_rounds_stretch_is_the_stretch_of_its_journaled_form(
    rounds: list[dict[int, NumaMetrics]],
) -> None:
    # A live round's inputs are checked against the stretch's flat bounds without making
    # their form; round after round, the stretch must be the one the forms (what a journal
    # holds) give, and its bounds those of its ranges.
    for live in _live_stretches_equal_to_journaled(rounds):
        assert live.bounds == QuietStretch(("stored",), since=NOW, metrics=live.metrics).bounds


@given(round_inputs())
def test_any_live_rounds_stretch_is_the_stretch_of_its_journaled_form(inputs: RoundInputs) -> None:
    stretch = QuietStretch(("stored",), since=NOW)
    assert stretch.with_round(NOW + 5, inputs.plain()) == stretch.with_round(
        NOW + 5, inputs.to_json()
    )


# Samples made once and answered again (as ``qrmd.host.metrics_fixed`` does), one object shared
# by several nodes, and rounds that read fewer or other nodes: the identity shortcut must
# give the stretch the journaled forms give.
_MADE_ONCE = [NumaMetrics(1.0, 2.0), NumaMetrics(3.0, 1.0), NumaMetrics(MissingSample(), 5.0)]
_REUSED_METRICS = st.dictionaries(
    st.integers(0, 3), st.sampled_from(_MADE_ONCE), min_size=1, max_size=4
)


@given(st.lists(_REUSED_METRICS, min_size=1, max_size=10))
def test_a_live_round_reading_samples_made_once_stretches_as_its_journaled_form(
    rounds: list[dict[int, NumaMetrics]],
) -> None:
    assert len(list(_live_stretches_equal_to_journaled(rounds))) == len(rounds)


@pytest.mark.parametrize(
    ("second", "widens"),
    [
        pytest.param({0: _MADE_ONCE[0], 1: _MADE_ONCE[1]}, False,
                     id="the same sample objects for the same nodes lie within"),
        pytest.param({0: _MADE_ONCE[1], 1: _MADE_ONCE[0]}, True,
                     id="the same objects read for other nodes are compared and widen"),
        pytest.param({0: _MADE_ONCE[0], 1: NumaMetrics(3.0, 1.0)}, False,
                     id="an equal sample made anew is compared and lies within"),
        pytest.param({0: _MADE_ONCE[0], 1: NumaMetrics(4.0, 1.0)}, True,
                     id="a new sample outside the range widens it"),
    ],
)  # fmt: skip
def test_a_second_live_round_widens_only_for_samples_outside(
    second: dict[int, NumaMetrics], widens: bool
) -> None:
    first = {0: _MADE_ONCE[0], 1: _MADE_ONCE[1]}
    stretch = QuietStretch(("stored",), since=NOW)
    for t, metrics in enumerate((first, second)):
        inputs = replace(make_inputs(*QUIET, now=NOW + t), numa_metrics=metrics)
        before = stretch.metrics
        stretch = stretch.with_round(NOW + t, inputs.plain())
    assert (stretch.metrics != before) == widens
