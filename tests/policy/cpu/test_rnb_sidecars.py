"""Reclaimed sidecars at v0.5.47: a sidecar copies its main container at Allocate, its
``numa_hint`` included, and so holds the main container's part of the reclaim pool from every
later regeneration on (katalyst-core v0.5.47 ``reclaimedCoresAllocationHandler``
``policy_allocation_handlers.go:214-216`` → ``allocationSidecarHandler`` :511-559,
``applySidecarAllocationInfoFromMainContainer`` ``policy.go:1379-1410``, then
``updateReclaimAllocationResultByPoolEntry`` :2101-2160 reading the sidecar's own
``numa_hint``; GetResourcesAllocation syncs each sidecar to its main container,
``policy.go:546-553``). The reference's tests allocate no reclaimed sidecar; the cases follow
that source.

The node is the reference's (16,2,4) with reserve ``0,2``; v0.5.47's start-up reclaim pool is
``1,3-4,6``, one CPU per NUMA (NUMA 0 holds 1, NUMA 1 holds 3, NUMA 2 holds 4, NUMA 3 holds 6).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy.cpu.reference import V0_5_47, ReferenceOptions
from policy.cpu.request import ContainerType
from policy.state.entries import InPool
from tests.policy.decision_fixtures import CTX, T0, Node, dedicated, request

AT_47 = replace(
    CTX,
    reference_version=V0_5_47,
    reference=ReferenceOptions(enable_reclaim_numa_binding=True),
)


def reclaimed(pod: str, cpu: float = 1, *, binding: bool = True, **kw: object):  # type: ignore[no-untyped-def]
    return request(pod, cpu=cpu, qos="reclaimed_cores", numa_binding=binding, **kw)  # type: ignore[arg-type]


def sidecar(pod: str, *, binding: bool = True):  # type: ignore[no-untyped-def]
    return reclaimed(pod, 0.5, binding=binding, container="side",
                     container_type=ContainerType.SIDECAR)  # fmt: skip


def regenerate(node: Node) -> None:
    """A dedicated pod on NUMA 3 makes the pools regenerate (``applyPoolsAndIsolatedInfo``):
    the reclaim pool becomes ``1,3-5,7-13,15``."""
    node.allocate(dedicated("ded", 2, exclusive=False, hint=(3,)))


@pytest.mark.parametrize(
    ("main", "others", "want_side", "want_after"),
    [
        pytest.param(reclaimed("pod-r", hint=(0,)), [reclaimed("plain", binding=False)],
                     "1", "1,8-9",
                     id="the sidecar of an RNB container on NUMA 0 keeps NUMA 0's part"),
        pytest.param(reclaimed("pod-r", hint=(2,)), [], "4", "4-5,12-13",
                     id="the sidecar of an RNB container on NUMA 2 keeps NUMA 2's part"),
        pytest.param(reclaimed("pod-r", binding=False), [reclaimed("rnb", hint=(2,))],
                     "1,3-4,6", "1,3,7-11,15",
                     id="the sidecar of a non-bound container follows the non-bound part"),
    ],
)  # fmt: skip
def test_a_reclaimed_sidecar_holds_its_main_containers_part(  # type: ignore[no-untyped-def]
    main, others, want_side, want_after
) -> None:
    node = Node(AT_47)
    node.allocate(main)
    reply = node.allocate(sidecar("pod-r", binding=main.annotations.get("numa_binding") == "true"))
    assert reply.allocation is not None and reply.allocation.allocation_result == want_side
    stored = node.state.cpu.require_entry("pod-r", "side")
    main_entry = node.state.cpu.require_entry("pod-r", "app")
    assert stored.owner_pool_name == "reclaim"
    assert (stored.annotations or {}).get("numa_hint") == (main_entry.annotations or {}).get(
        "numa_hint"
    )
    for other in others:
        node.allocate(other)
    regenerate(node)
    assert str(node.cpus_of("pod-r", "side")) == str(node.cpus_of("pod-r")) == want_after
    assert node.replayed() == node.state


def test_a_reclaimed_sidecar_before_its_main_container_is_answered_nothing() -> None:
    node = Node(AT_47)
    reply = node.allocate(sidecar("pod-r"))
    assert reply.allocation is None
    assert node.state.cpu.entry("pod-r", "side") is None


def test_the_listing_gives_a_reclaimed_sidecar_its_main_containers_cpus_again() -> None:
    node = Node(AT_47)
    node.allocate(reclaimed("pod-r", cpu=2, hint=(0,)))
    node.allocate(sidecar("pod-r"))
    # re-allocated without a resize, the main container drops its numa_hint (as
    # updateAllocationInfoByReq does) and takes the part of the NUMAs no bound container is
    # in: the sidecar, still bound to NUMA 0, keeps NUMA 0 out of it
    node.allocate(reclaimed("pod-r", cpu=2, hint=(0,)))
    assert str(node.cpus_of("pod-r")) == "3-4,6"
    assert str(node.cpus_of("pod-r", "side")) == "1"
    node.reconcile(T0)
    assert node.state.cpu.require_entry("pod-r", "side").placement == InPool(
        "reclaim", frozenset({1, 2, 3})
    )
    # the sidecar's own numa_hint puts it back on NUMA 0 at the next regeneration
    regenerate(node)  # the reclaim pool grows to 1,3-5,7-13,15
    assert str(node.cpus_of("pod-r", "side")) == "1,8-9"
    assert node.replayed() == node.state


def test_a_reclaimed_sidecar_follows_the_whole_pool_at_v0_5_3() -> None:
    node = Node(CTX)
    node.allocate(reclaimed("pod-r", binding=False, hint=(0,)))
    node.allocate(sidecar("pod-r", binding=False))
    assert str(node.cpus_of("pod-r", "side")) == str(node.cpus_of("pod-r")) == "1,3,9,11"
