"""The advice a record yields (§8) and the eviction plugin's answers (§9)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy.balance import (
    BalanceStatus,
    advice_for,
    evict_offers,
    plan_round,
    threshold_met,
    token,
    top_eviction_pods,
)
from policy.balance.advice import extra_entries
from tests.policy.balance.examples import EX2_ADVICE, EX2_B, EX2_L, EX2_PODS, make_inputs

RECORD = plan_round(make_inputs(EX2_L, EX2_B, EX2_PODS)).record
assert RECORD is not None


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"need_balance": False}, id="no balance needed"),
        pytest.param({"status": BalanceStatus.PREPARE_FAILED}, id="not prepareSuccess"),
        pytest.param({"status": BalanceStatus.PREPARING}, id="still preparing"),
        pytest.param({"balance_pods": ()}, id="no balance pods"),
        pytest.param({"dest_numas": ()}, id="no destinations"),
        pytest.param({"dest_numas": None}, id="destinations not computed"),
        pytest.param({"balance_executed": True}, id="already taken"),
    ],
)
def test_no_advice_unless_every_condition_holds(change: dict[str, object]) -> None:
    assert advice_for(replace(RECORD, **change)) is None  # type: ignore[arg-type]


def test_advice_and_its_extra_entry() -> None:
    advice = advice_for(RECORD)
    assert advice is not None
    (entry,) = extra_entries(advice)
    assert entry.cgroup_path == ""
    assert dict(entry.values) == {"balance_numa_memory": EX2_ADVICE}
    assert extra_entries(None) == ()
    assert advice_for(None) is None


def test_eviction_offers_nothing_without_a_record_or_once_taken() -> None:
    assert evict_offers(None, ["r1"]) == ()
    assert evict_offers(replace(RECORD, evict_executed=True), ["r1"]) == ()
    (offer,) = evict_offers(RECORD, ["r1"])
    assert offer.reason == "the memory node 0 is under bandwidth pressure"
    assert offer.force_evict and offer.eviction_plugin_name == "numa_memory_balancer"


def test_other_rpcs_answer_constants() -> None:
    answer = threshold_met()
    assert (answer.threshold_value, answer.observed_value) == (0.0, 0.0)
    assert (answer.threshold_operator, answer.met_type) == ("LESS_THAN", "NOT_MET")
    assert (answer.eviction_scope, answer.grace_period_seconds) == ("", 0)
    assert top_eviction_pods() == ()
    assert token() == ""
