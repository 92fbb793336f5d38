"""Balance round and balancer windows (memory-balancer §6, §8, §9.1, worked example 9)."""

from __future__ import annotations

import pytest

from machines import balance_round as br
from machines.lifecycle import InvalidTransition
from tests.machines.checks import Model, assert_every_illegal_trigger_raises, walk

ROUND = br.round_lifecycle()
WINDOWS = br.windows_lifecycle()

QUIET = {"in_cool_down": False}
WORK = QUIET | {"needs_balance": True, "has_pods_to_move": True, "has_advice": True}
EVICT_ONLY = WORK | {"has_advice": False}


@pytest.mark.parametrize(
    ("guards", "triggers", "final", "events"),
    [
        pytest.param(
            {"in_cool_down": True}, ["start"], "skipped", [],
            id="within the balance interval the round is skipped and nothing is committed",
        ),
        pytest.param(
            QUIET, ["start", "fail"], "discarded", ["BalanceRoundFailed"],
            id="an error discards the round (current keeps the previous record)",
        ),
        pytest.param(
            QUIET | {"needs_balance": False}, ["start", "conclude"], "no_balance",
            ["BalanceRoundRecorded"],
            id="no pressure: stored with status preparing (O7)",
        ),
        pytest.param(
            QUIET | {"needs_balance": True, "has_pods_to_move": False}, ["start", "conclude"],
            "prepare_failed", ["BalanceRoundRecorded"],
            id="pressure but nothing to balance or evict: stored as prepareFailed (O1 fix)",
        ),
        pytest.param(
            WORK, ["start", "conclude", "take_advice", "take_eviction", "supersede"],
            "superseded",
            ["BalanceRoundRecorded", "BalanceAdviceTaken", "BalanceEvictionTaken"],
            id="example 9 at 0 s and 2 s: advice then eviction taken, then superseded at 30 s",
        ),
        pytest.param(
            WORK, ["start", "conclude", "take_eviction", "take_advice"],
            "advice_and_eviction_taken",
            ["BalanceRoundRecorded", "BalanceEvictionTaken", "BalanceAdviceTaken"],
            id="eviction may be taken before the advice",
        ),
        pytest.param(
            EVICT_ONLY, ["start", "conclude", "take_eviction"], "eviction_taken",
            ["BalanceRoundRecorded", "BalanceEvictionTaken"],
            id="an eviction-only round offers its pod once",
        ),
        pytest.param(
            QUIET | {"needs_balance": False}, ["start", "conclude", "take_eviction"],
            "eviction_taken", ["BalanceRoundRecorded", "BalanceEvictionTaken"],
            id="GetEvictPods consumes the offer even when nothing matched (O10)",
        ),
    ],
)  # fmt: skip
def test_round_legal_paths(
    guards: dict[str, bool], triggers: list[str], final: str, events: list[str]
) -> None:
    assert walk(ROUND, triggers, guards) == (final, events)


@pytest.mark.parametrize(
    ("state", "trigger"),
    [
        pytest.param("advice_taken", "take_advice", id="advice is taken at most once"),
        pytest.param("advice_and_eviction_taken", "take_advice", id="even after the eviction"),
        pytest.param("eviction_taken", "take_eviction", id="eviction is taken at most once"),
        pytest.param("advice_and_eviction_taken", "take_eviction", id="even after the advice"),
        pytest.param("prepare_failed", "take_advice", id="a failed record has no advice"),
        pytest.param("no_balance", "take_advice", id="a record without balance has no advice"),
        pytest.param("preparing", "take_eviction", id="nothing is offered before it is stored"),
        pytest.param("superseded", "take_eviction", id="a superseded record offers nothing"),
        pytest.param("discarded", "supersede", id="a discarded record was never current"),
        pytest.param("skipped", "conclude", id="a skipped round computes nothing"),
    ],
)
def test_round_illegal_trigger_raises_and_changes_nothing(state: str, trigger: str) -> None:
    model = Model(state, {g: True for g in br.ROUND.guards})
    with pytest.raises(InvalidTransition):
        ROUND.fire(model, trigger)
    assert model.state == state


def test_every_unlisted_round_trigger_is_illegal() -> None:
    assert assert_every_illegal_trigger_raises(ROUND) > 40


def test_an_eviction_only_record_keeps_its_state_when_asked_for_advice() -> None:
    """GetAdvices on a record without balance pods returns nothing and marks nothing (§8 step 2)."""
    model = Model("prepare_success", EVICT_ONLY)
    assert ROUND.fire(model, "take_advice") is None
    assert model.state == "prepare_success"


@pytest.mark.parametrize(
    ("guards", "triggers", "final"),
    [
        pytest.param(
            {}, ["tick", "emit_advice"], "cooling_down",
            id="an emitted advice starts the cool-down",
        ),
        pytest.param(
            {"balance_interval_passed": True, "ping_pong_window_passed": False},
            ["emit_advice", "tick"], "ping_pong_window",
            id="after 30 s rounds run again, the reverse move is still filtered",
        ),
        pytest.param(
            {"balance_interval_passed": True, "ping_pong_window_passed": True},
            ["emit_advice", "tick", "tick"], "open",
            id="a long pause skips the ping-pong window",
        ),
        pytest.param(
            {"balance_interval_passed": True, "ping_pong_window_passed": False},
            ["emit_advice", "tick", "emit_advice"], "cooling_down",
            id="example 9 A at 30 s: a new advice restarts the cool-down",
        ),
    ],
)  # fmt: skip
def test_window_legal_paths(guards: dict[str, bool], triggers: list[str], final: str) -> None:
    assert walk(WINDOWS, triggers, guards)[0] == final


def test_the_windows_hold_until_their_time_has_passed() -> None:
    model = Model(
        "cooling_down", {"balance_interval_passed": False, "ping_pong_window_passed": False}
    )
    assert WINDOWS.fire(model, "tick") is None
    assert model.state == "cooling_down"


def test_no_advice_can_be_emitted_during_the_cool_down() -> None:
    model = Model("cooling_down")
    with pytest.raises(InvalidTransition, match="legal there: tick"):
        WINDOWS.fire(model, "emit_advice")
    assert model.state == "cooling_down"


def test_every_unlisted_window_trigger_is_illegal() -> None:
    assert assert_every_illegal_trigger_raises(WINDOWS) == 1
