"""The start-up decision (policy.cpu.facade.start, policy.cpu.pool_startup.start_pools) when the
reserve is not the one the recovered state was planned for, or leaves no CPU for pods.

On the spec's (16,2,4) node. The recovered state is §9.10's end state, planned for reserve
``0,2``: ``share = 1,3-6,9,11-14``, ``reclaim = 7-8,10,15``. A restart with another
``--reserved-cpu-cores`` must either re-plan every pool outside the new reserve, in the one
journaled start-up decision, or refuse; never serve pools that overlap it (cpu-policy §3,
§6.2, ``policy.cpu.invariants``).
"""

from __future__ import annotations

import dataclasses

import pytest

from policy.cpu import facade
from policy.cpu.context import PolicyContext
from policy.cpu.invariants import InvariantError, check_invariants
from policy.cpu.reserve import ReserveChangeRefused, ReserveError
from policy.state.events import PoolSet, RampCPUsSet
from policy.state.sections import State, apply_all, empty_state
from tests.policy.cpu.test_pool_engine import after_spec_9_10
from tests.policy.pool_fixtures import CTX, dedicated, pools_of, result_of, with_events
from tests.topologies import SYNTH_16_2_4, cpus


def reserve(text: str) -> PolicyContext:
    return dataclasses.replace(CTX, reserved=cpus(text))


@pytest.mark.parametrize(
    ("new_reserve", "pools", "container"),
    [
        pytest.param(
            "0,2,4,6",
            {"reclaim": "8,10,12,14", "reserve": "0,2,4,6", "share": "1,3,5,7,9,11,13,15"},
            "1,3,5,7,9,11,13,15",
            id="a larger reserve moves every pool off it and the container follows its pool",
        ),
        pytest.param(
            "0",
            {"reclaim": "7-8,13,15", "reserve": "0", "share": "1-6,9-12,14"},
            "1-6,9-12,14",
            id="a smaller reserve gives the CPUs it frees back to the pools",
        ),
    ],
)
def test_a_changed_reserve_re_plans_every_pool_in_the_start_up_decision(
    new_reserve: str, pools: dict[str, str], container: str
) -> None:
    state = after_spec_9_10()
    ctx = reserve(new_reserve)
    decision = facade.start(state, ctx)
    after = apply_all(state, decision.events)
    assert pools_of(after) == pools
    assert result_of(after, "pod-1") == container
    assert check_invariants(after.cpu, ctx) == []
    assert decision.warnings == (
        f"the reserve changed from 0,2 to {new_reserve} since the state was written: every "
        "pool was re-planned outside the new reserve",
    )
    # Started again with the same reserve, the node is as it should be: nothing to commit.
    assert facade.start(after, ctx).events == ()


def test_the_re_plan_also_moves_the_ramp_up_cpuset_off_the_reserve() -> None:
    state = with_events(after_spec_9_10(), RampCPUsSet(cpus("1,3-15")))
    decision = facade.start(state, reserve("0,2,4,6"))
    assert RampCPUsSet(cpus("1,3,5,7-15")) in decision.events


def test_a_reserve_over_a_dedicated_container_is_refused_naming_it_and_the_cpus() -> None:
    state = with_events(after_spec_9_10(), dedicated("pod-d", "6-7,14-15"))
    with pytest.raises(ReserveChangeRefused) as raised:
        facade.start(state, reserve("0,2,4,6"))
    assert str(raised.value) == (
        "the reserve changed from 0,2 to 0,2,4,6, but dedicated pod default/name-pod-d "
        "(uid pod-d), container c holds 6 of it (its CPUs: 6-7,14-15): dedicated CPUs cannot "
        "be moved. Start with the previous reserve (2 CPUs: 0,2), or remove those pods first"
    )
    assert raised.value.previous == cpus("0,2") and raised.value.reserved == cpus("0,2,4,6")


def test_a_dedicated_container_outside_the_new_reserve_does_not_stop_the_re_plan() -> None:
    state = with_events(after_spec_9_10(), dedicated("pod-d", "6-7,14-15"))
    ctx = reserve("0,2,4")
    after = apply_all(state, facade.start(state, ctx).events)
    assert pools_of(after)["reserve"] == "0,2,4"
    assert check_invariants(after.cpu, ctx) == []


@pytest.mark.parametrize(
    "state",
    [
        pytest.param(empty_state(SYNTH_16_2_4), id="on a fresh node"),
        pytest.param(after_spec_9_10(), id="on a used node"),
    ],
)
def test_a_reserve_of_every_cpu_is_refused_with_the_numbers(state: State) -> None:
    with pytest.raises(ReserveError) as raised:
        facade.start(state, reserve("0-15"))
    assert str(raised.value) == (
        "the reserve (0-15) holds all 16 CPUs of the node: none is left for the reclaim "
        "pool, which needs at least one (cpu-policy §6.2 step 6); reserve at most 15"
    )


def test_a_recovered_state_that_breaks_an_invariant_is_refused_not_served() -> None:
    # Same reserve as recorded, but a pool on a reserved CPU (a state no decision makes).
    state = with_events(after_spec_9_10(), PoolSet("share", cpus("1-6,9,11-14")))
    with pytest.raises(InvariantError, match=r"^start-up would leave an inconsistent CPU state"):
        facade.start(state, CTX)
