"""Each refusal of the CPU policy is raised with the kind of what went wrong (policy.errors).

The kinds are set where the errors are raised, not read from their messages: these cases drive
the real decisions on the (16,2,4) node and check the kind and the subject of what they raise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from policy.cpu import facade as cpu_policy
from policy.cpu.allocate import AllocationError
from policy.cpu.commands import GetTopologyAwareResources, GetTopologyHints
from policy.cpu.errors import UnknownContainerError
from policy.cpu.hints import HintError
from policy.cpu.pool_engine import adjust_allocation_entries
from policy.cpu.pool_sizing import PoolError, generate_pools_and_isolation
from policy.cpu.qos import QoSError
from policy.cpu.request import RequestError, ResourceRequest
from policy.cpu.reserve import ReserveError, reserved_cpus
from policy.cpu.txn import Txn
from policy.errors import ErrorKind, PolicyError
from policy.state.entries import InPool
from policy.state.events import PoolSet
from policy.state.sections import State, apply_all, empty_state
from policy.topology.cpuset import CPUSet
from tests.policy.decision_fixtures import (
    CTX,
    FRESH,
    SYNTH_16_2_4,
    T0,
    Node,
    allocate_inputs,
    cpus,
    dedicated,
)
from tests.policy.decision_fixtures import request as shared
from tests.policy.pool_fixtures import shared as pooled
from tests.policy.pool_fixtures import with_events

K = ErrorKind


def _every_numa_node_dedicated() -> State:
    node = Node()
    for numa in range(4):
        node.allocate(dedicated(f"pod-{numa}", cpu=1, hint=(numa,)))
    return node.state


def _pools(**pools: str) -> State:
    return apply_all(empty_state(CTX.topology), [PoolSet(n, cpus(c)) for n, c in pools.items()])


@pytest.mark.parametrize(
    ("state", "req", "error", "kind"),
    [
        pytest.param(
            lambda: FRESH, dedicated(cpu=4, exclusive=False, hint=(0,)), AllocationError,
            K.SHORTAGE, id="a non-exclusive container larger than its NUMA node is a shortage",
        ),
        pytest.param(
            lambda: FRESH, dedicated(cpu=4, hint=(0,)), AllocationError, K.SHORTAGE,
            id="an exclusive container larger than its NUMA node is a shortage",
        ),
        pytest.param(
            _every_numa_node_dedicated, shared("pod-a"), AllocationError, K.SHORTAGE,
            id="no pooled CPUs left for a shared container is a shortage",
        ),
        pytest.param(
            lambda: _pools(reserve="0,2", reclaim=""), shared(qos="reclaimed_cores"),
            AllocationError, K.SHORTAGE, id="an empty reclaim pool is a shortage",
        ),
        pytest.param(
            lambda: _pools(reserve="0,2"), shared(qos="reclaimed_cores"), AllocationError,
            K.REFUSED, id="a missing reclaim pool is a refusal",
        ),
        pytest.param(
            lambda: FRESH, dedicated(hint=None), AllocationError, K.REFUSED,
            id="a nil hint is a refusal",
        ),
        pytest.param(
            lambda: FRESH, dedicated(hint=()), AllocationError, K.REFUSED,
            id="an empty hint is a refusal",
        ),
        pytest.param(
            lambda: FRESH, dedicated(exclusive=False, hint=(0, 1)), AllocationError, K.REFUSED,
            id="a multi-NUMA hint for a non-exclusive container is a refusal",
        ),
        pytest.param(
            lambda: FRESH, shared(qos="dedicated_cores", hint=(0,)), AllocationError, K.REFUSED,
            id="dedicated without NUMA binding is a refusal",
        ),
        pytest.param(
            lambda: FRESH, shared(qos="system_cores"), QoSError, K.INVALID,
            id="system cores is an invalid request",
        ),
        pytest.param(
            lambda: FRESH, shared(pod=""), RequestError, K.INVALID,
            id="an empty pod uid is an invalid request",
        ),
        pytest.param(
            lambda: FRESH, shared(cpu=float("nan")), RequestError, K.INVALID,
            id="a NaN quantity is an invalid request",
        ),
    ],
)  # fmt: skip
def test_allocate_raises_the_kind_of_what_went_wrong(
    state: Callable[[], State], req: ResourceRequest, error: type[PolicyError], kind: ErrorKind
) -> None:
    with pytest.raises(PolicyError) as caught:
        cpu_policy.allocate(state(), allocate_inputs(req), CTX, T0)
    assert type(caught.value) is error
    assert caught.value.kind is kind
    # The message names the container once, and says it does (the wire adds nothing).
    assert caught.value.subject == req.describe()
    assert str(caught.value).startswith(f"{req.describe()}: ")
    assert str(caught.value).count(req.describe()) == 1


@pytest.mark.parametrize(
    ("req", "error", "kind"),
    [
        pytest.param(
            shared(qos="dedicated_cores"), HintError, K.REFUSED,
            id="hints for dedicated without NUMA binding are a refusal",
        ),
        pytest.param(
            dedicated(cpu=64, exclusive=False), HintError, K.REFUSED,
            id="hints for a request larger than the node are a refusal, as the reference's",
        ),
        pytest.param(
            shared(qos="system_cores"), QoSError, K.INVALID,
            id="hints for system cores are an invalid request",
        ),
    ],
)  # fmt: skip
def test_hints_raise_the_kind_of_what_went_wrong(
    req: ResourceRequest, error: type[PolicyError], kind: ErrorKind
) -> None:
    with pytest.raises(PolicyError) as caught:
        cpu_policy.get_topology_hints(FRESH, GetTopologyHints(req), CTX, T0)
    assert type(caught.value) is error and caught.value.kind is kind
    assert caught.value.subject == req.describe()


def test_an_unknown_qos_level_is_invalid_in_the_references_words() -> None:
    req = shared(qos="gold_cores")
    with pytest.raises(QoSError) as caught:
        cpu_policy.allocate(FRESH, allocate_inputs(req), CTX, T0)
    assert caught.value.kind is K.INVALID
    # "GetKatalystQoSLevelFromResourceReq for pod: ..., container: ...": not the description,
    # so the error names no subject and the wire adds the request's.
    assert caught.value.subject == "" and req.describe() not in str(caught.value)


def test_a_query_about_an_unknown_container_is_not_found() -> None:
    query = GetTopologyAwareResources("pod-a", "app")
    with pytest.raises(UnknownContainerError) as caught:
        cpu_policy.get_topology_aware_resources(FRESH, query, CTX, T0)
    assert caught.value.kind is K.NOT_FOUND
    # The reference's text names them its own way; the wire adds the request's subject.
    assert caught.value.subject == ""


def test_a_pool_step_that_runs_out_of_cpus_keeps_the_selections_shortage() -> None:
    ctx = dataclasses.replace(CTX, reserved=cpus("0-12"))
    with pytest.raises(PoolError) as caught:
        generate_pools_and_isolation(ctx, {}, {}, CPUSet())
    assert caught.value.kind is K.SHORTAGE
    assert "not enough cpus available" in str(caught.value)


def test_a_pool_adjustment_that_runs_out_of_cpus_is_a_shortage_through_every_step() -> None:
    # adjustPoolsAndIsolatedEntries -> generatePoolsAndIsolation -> the reclaim fallback's
    # selection: each step adds its name and keeps the selection's kind.
    # Three CPUs outside the reserve, all taken by the share pool: reclaim falls back to
    # four CPUs and cannot have them (§9.4, §15.9).
    ctx = dataclasses.replace(CTX, reserved=cpus("0-12"))
    state = with_events(
        empty_state(SYNTH_16_2_4),
        PoolSet("share", cpus("13-15")),
        pooled("pod-1", InPool("share"), quantity=3.0),
    )
    with pytest.raises(PoolError) as caught:
        adjust_allocation_entries(Txn(state), ctx)
    assert str(caught.value).startswith(
        "adjustPoolsAndIsolatedEntries failed with error: generatePoolsAndIsolation failed"
    )
    assert caught.value.kind is K.SHORTAGE


def test_a_pool_refusal_is_a_refusal() -> None:
    with pytest.raises(PoolError) as caught:
        generate_pools_and_isolation(CTX, {"reserve": 2}, {}, cpus("1,3-15"))
    assert caught.value.kind is K.REFUSED


@pytest.mark.parametrize(
    ("options", "kind"),
    [
        pytest.param(
            {"use_kubelet_reserved_config": False, "reserved_cpu_cores": 17}, K.SHORTAGE,
            id="a reserve larger than the node is a shortage",
        ),
        pytest.param(
            {"use_kubelet_reserved_config": False, "reserved_cpu_cores": -1}, K.INVALID,
            id="a negative reserve is invalid",
        ),
        pytest.param(
            {"use_kubelet_reserved_config": True, "reserved_cpu_cores": 0,
             "kube_reserved_cpu": "one"},
            K.INVALID, id="a kubelet quantity that does not parse is invalid",
        ),
    ],
)  # fmt: skip
def test_reserve_errors_say_what_they_are(options: dict[str, object], kind: ErrorKind) -> None:
    with pytest.raises(ReserveError) as caught:
        reserved_cpus(SYNTH_16_2_4, **options)  # type: ignore[arg-type]
    assert caught.value.kind is kind
