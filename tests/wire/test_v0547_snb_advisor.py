"""An in-place resize of a shared-cores-with-NUMA-binding (SNB) container while sys-advisor
sizes the pools, at ``--reference-version v0.5.47``, through real gRPC.

Provenance: katalyst-core v0.5.47 ``policy_allocation_handlers.go:819-853`` (the pools' sizes
are their current cpusets, and a resize adds ``calcPoolResizeRequest``) and ``:885-970``
(``calcPoolResizeRequest``: the growth of the pod's aggregated request, 0 when it shrinks, the
whole aggregated request when the NUMA changes). The reference's tests do not run a resize
with the advisor on (``resize_test.go`` runs without it), so the figures are worked out from
that source on its (16,2,4) harness, reserve ``0,2``: NUMA 1 is ``2-3,10-11``, NUMA 2
``4-5,12-13``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from policy.cpu.reference import INPLACE_UPDATE_RESIZING_KEY, ReferenceOptions
from policy.state.entries import InPool
from policy.state.events import ContainerAllocated, PoolSet
from policy.state.sections import State, empty_state
from tests.policy.pool_fixtures import with_events
from tests.policy.state_fixtures import container, cpus
from tests.wire.plugin_node import WireNode, resource_request
from tests.wire.test_v0547_snb import AT_47, SNB_NOT_EXCLUSIVE, allocate, listed, served

OPTIONS = ReferenceOptions(pod_annotation_kept_keys=(INPLACE_UPDATE_RESIZING_KEY,))
# With reclaim enabled the NUMA pools get exactly their sizes; without it they would split
# their whole NUMA node whatever the sizes (policy.cpu.numa_pools step 2).
WITH_ADVISOR = replace(AT_47, reference=OPTIONS, advisor_enabled=True, enable_reclaim=True)
RESIZING = {**SNB_NOT_EXCLUSIVE, INPLACE_UPDATE_RESIZING_KEY: "true"}


def _one_snb_pod(pool: str, pool_cpus: str, request: float) -> State:
    """Pod ``pod-v`` (container ``app``, ``request`` cores) alone in the SNB pool ``pool``."""
    return with_events(
        empty_state(AT_47.topology),
        PoolSet("reserve", cpus("0,2")),
        PoolSet("reclaim", cpus("1,9")),
        PoolSet(pool, cpus(pool_cpus)),
        ContainerAllocated(
            container("pod-v", "app", InPool(pool), owner=pool,
                      quantity=request, numa_binding=True)
        ),
    )  # fmt: skip


@pytest.fixture
def nodes() -> Iterator[list[WireNode]]:
    made: list[WireNode] = []
    yield made
    for node in made:
        node.close()


@pytest.mark.parametrize(
    ("pool", "pool_cpus", "request_before", "request_after", "hint", "pools_after", "listed_after"),
    [
        # Twice the new request (4) on top of the pool's 2 CPUs would take all NUMA 2.
        pytest.param("share-NUMA2", "4,12", 1, 2, 2, {"share-NUMA2": "4-5,12"}, "4-5,12",
                     id="a growing pod grows its pool by what it grew by, not twice its request"),
        pytest.param("share-NUMA2", "4,12", 2, 1, 2, {"share-NUMA2": "4,12"}, "4,12",
                     id="a shrinking pod leaves its pool as it is for the advisor to shrink"),
        # The old pool, owned by no container any more, is removed (cleanPools, policy.go:1182).
        pytest.param("share-NUMA1", "3,11", 1, 2, 2, {"share-NUMA2": "4,12"}, "4,12",
                     id="a pod moved to another NUMA takes its whole request in the new pool"),
    ],
)  # fmt: skip
def test_an_snb_resize_with_the_advisor_on(
    nodes: list[WireNode],
    pool: str,
    pool_cpus: str,
    request_before: float,
    request_after: float,
    hint: int,
    pools_after: dict[str, str],
    listed_after: str,
) -> None:
    node = served(WITH_ADVISOR, _one_snb_pod(pool, pool_cpus, request_before))
    nodes.append(node)
    allocate(node, resource_request("pod-v", cpu=request_after, qos="shared_cores",
                                    annotations=RESIZING, hint=(hint,)))  # fmt: skip
    pools = node.core.snapshot.state.cpu.pools
    shared = {name: str(cs) for name, cs in pools.items() if name not in {"reserve", "reclaim"}}
    assert shared == pools_after
    assert listed(node, "pod-v") == listed_after
