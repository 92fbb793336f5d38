"""The CPU invariants (policy.cpu.invariants): each rule caught, each allowed overlap allowed.

States on the spec's (16,2,4) node with reserve ``0,2`` (cpu-policy §6.2: reserve ``0,2``,
reclaim ``1,3,9,11`` on a fresh node; NUMA 0 is ``0-1,8-9``).
"""

from __future__ import annotations

import dataclasses

import pytest

from policy.cpu.invariants import InvariantError, check_invariants, require_invariants
from policy.state.entries import InPool
from policy.state.events import Event, PoolRemoved, PoolSet, RampCPUsSet
from policy.state.sections import State, apply_all
from tests.policy.pool_fixtures import CTX, dedicated, fresh_state, shared
from tests.topologies import cpus


def state_with(*events: Event) -> State:
    return apply_all(fresh_state(), list(events))


@pytest.mark.parametrize(
    ("events", "rule", "what"),
    [
        pytest.param(
            [PoolSet("reserve", cpus("0-3"))], 1, "pool reserve is 0-3, the reserve is 0,2",
            id="a reserve pool that is not the reserve breaks rule 1",
        ),
        pytest.param(
            [PoolRemoved("reclaim")], 2, "pool reclaim is missing",
            id="a node without a reclaim pool breaks rule 2",
        ),
        pytest.param(
            [PoolSet("reclaim", cpus("0-1"))], 2, "pool reclaim (0-1) holds reserved CPUs 0",
            id="reclaim on a reserved CPU breaks rule 2",
        ),
        pytest.param(
            [PoolSet("share", cpus("2-5")), shared("pod-1", InPool("share"))], 3,
            "pool share (2-5) holds reserved CPUs 2",
            id="a shared pool on a reserved CPU breaks rule 3",
        ),
        pytest.param(
            [
                PoolSet("share", cpus("1,3-5")),
                shared("pod-1", InPool("share")),
                dedicated("pod-d", "8-9"),
            ],
            3, "pool share (1,3-5) holds 1 of NUMA nodes with dedicated CPUs",
            id="a shared pool on the NUMA node of a dedicated NUMA-binding container breaks rule 3",
        ),
        pytest.param(
            [
                PoolSet("share", cpus("4-7")),
                PoolSet("batch", cpus("6-7,12")),
                shared("pod-1", InPool("share")),
                shared("pod-2", InPool("batch")),
            ],
            4, "pools batch (6-7,12) and share (4-7) share 6-7",
            id="two shared pools that partly overlap break rule 4",
        ),
        pytest.param(
            [RampCPUsSet(cpus("0-15"))], 5, "the ramp-up cpuset (0-15) holds reserved CPUs 0,2",
            id="a ramp-up cpuset over the reserve breaks rule 5",
        ),
        pytest.param(
            [dedicated("pod-d", "2-3")], 6,
            "dedicated pod default/name-pod-d (uid pod-d), container c (2-3) holds reserved CPUs 2",
            id="a dedicated container on a reserved CPU breaks rule 6",
        ),
        pytest.param(
            [dedicated("pod-d", "4-5"), dedicated("pod-e", "5,12")], 6,
            "dedicated pod default/name-pod-e (uid pod-e), container c (5,12) shares 5 with "
            "pod default/name-pod-d (uid pod-d), container c",
            id="two pods' dedicated containers on one CPU break rule 6",
        ),
        pytest.param(
            [
                PoolSet("share", cpus("12-13")),
                shared("pod-1", InPool("share")),
                dedicated("pod-d", "12", numa_binding=False),
            ],
            6,
            "dedicated pod default/name-pod-d (uid pod-d), container c (12) shares 12 with "
            "pool share",
            id="an isolated dedicated container inside a shared pool breaks rule 6",
        ),
    ],
)  # fmt: skip
def test_each_rule_is_caught(events: list[Event], rule: int, what: str) -> None:
    violations = check_invariants(state_with(*events).cpu, CTX)
    assert [(v.rule, v.what) for v in violations] == [(rule, what)]


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([], id="a freshly started node keeps every rule"),
        pytest.param(
            [PoolSet("share", cpus("1,3-15")), shared("pod-1", InPool("share"))],
            id="reclaim may overlap a shared pool (its four-CPU fallback, §6.2 step 6d)",
        ),
        pytest.param(
            [
                PoolSet("share", cpus("4-7")),
                PoolSet("batch", cpus("4-7")),
                shared("pod-1", InPool("share")),
                shared("pod-2", InPool("batch")),
            ],
            id="shared pools may be identical when they cannot have a CPU each (§15.8)",
        ),
        pytest.param(
            [dedicated("pod-d", "1,9"), PoolSet("reclaim", cpus("1,9,12"))],
            id="reclaim may overlap dedicated CPUs (§9.7)",
        ),
        pytest.param(
            [
                dedicated("pod-d", "4-5"),
                dedicated("pod-d", "4-5", name="side", container_type="SIDECAR"),
            ],
            id="a sidecar may hold its main container's CPUs (§7.5.2)",
        ),
        pytest.param(
            [dedicated("pod-f", "0-15", numa_binding=False, owner="fallback")],
            id="a fallback dedicated container is not held to the dedicated rules",
        ),
        pytest.param(
            [shared("pod-r", InPool("reserve"), pool="reserve"), PoolSet("reserve", cpus("0,2"))],
            id="a shared container may run on the reserve it asked for",
        ),
    ],
)  # fmt: skip
def test_the_overlaps_the_spec_allows_are_allowed(events: list[Event]) -> None:
    assert check_invariants(state_with(*events).cpu, CTX) == []


def test_with_the_advisor_only_the_reserve_s_rules_hold() -> None:
    """§11.8: pools and dedicated containers are where the advisor's blocks put them."""
    advised = dataclasses.replace(CTX, advisor_enabled=True)
    state = state_with(
        PoolSet("share", cpus("4-7")),
        PoolSet("batch", cpus("6-7,12")),
        shared("pod-1", InPool("share")),
        shared("pod-2", InPool("batch")),
        dedicated("pod-d", "12-13"),
    )
    assert check_invariants(state.cpu, advised) == []
    with_reserved = apply_all(state, [dedicated("pod-e", "2-3")])
    assert [v.rule for v in check_invariants(with_reserved.cpu, advised)] == [6]


def test_require_invariants_names_where_and_every_violation() -> None:
    state = state_with(PoolSet("reclaim", cpus("0-1")), RampCPUsSet(cpus("2-3")))
    with pytest.raises(InvariantError) as raised:
        require_invariants(state.cpu, CTX, "start-up")
    assert str(raised.value) == (
        "start-up would leave an inconsistent CPU state: rule 2: pool reclaim (0-1) holds "
        "reserved CPUs 0; rule 5: the ramp-up cpuset (2-3) holds reserved CPUs 2"
    )
