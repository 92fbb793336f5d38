"""The pool growth of an in-place resize with sys-advisor at v0.5.47 (``calcPoolResizeRequest``,
katalyst-core v0.5.47 ``policy_allocation_handlers.go:885-970``; the reference's tests do not
call it, so the cases follow that source)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from policy.cpu.advisor.resize import PoolGrowth, ResizeError, resize_growth
from policy.state.entries import ContainerEntry, InPool
from policy.state.events import ContainerAllocated, PoolSet
from policy.state.sections import empty_state
from tests.policy.pool_fixtures import CTX, with_events
from tests.policy.state_fixtures import container, cpus

AGGREGATED = "pod.kubernetes.io/pod-aggregated-requests"


def snb(pool: str, quantity: float, name: str = "app", **notes: str) -> ContainerEntry:
    entry = container("pod-v", name, InPool(pool), owner=pool, quantity=quantity,
                      numa_binding=True)  # fmt: skip
    return replace(entry, annotations={**(entry.annotations or {}), **notes})


def aggregated(cpu: str) -> str:
    return json.dumps({"cpu": cpu})


@pytest.mark.parametrize(
    ("origin", "resized", "sidecar", "growth"),
    [
        pytest.param(snb("share-NUMA1", 1), snb("share-NUMA1", 3), None,
                     PoolGrowth("share-NUMA1", 2.0),
                     id="without the aggregated annotation the pod's stored requests are summed"),
        pytest.param(snb("share-NUMA1", 1), snb("share-NUMA1", 3), 0.5,
                     PoolGrowth("share-NUMA1", 2.0),
                     id="a sidecar's request counts on both sides and cancels out"),
        pytest.param(snb("share-NUMA1", 1, **{AGGREGATED: aggregated("2")}),
                     snb("share-NUMA1", 2, **{AGGREGATED: aggregated("3500m")}), None,
                     PoolGrowth("share-NUMA1", 1.5),
                     id="the aggregated annotations give the growth when both have them"),
        pytest.param(snb("share-NUMA1", 3), snb("share-NUMA1", 1), None,
                     PoolGrowth("share-NUMA1", 0.0),
                     id="a shrinking pod grows nothing"),
        pytest.param(snb("share-NUMA1", 1), snb("share-NUMA2", 2), None,
                     PoolGrowth("share-NUMA2", 2.0),
                     id="a pod moved to another NUMA grows the new pool by its whole request"),
        pytest.param(snb("share-NUMA1", 3), snb("share-NUMA2", 1), None,
                     PoolGrowth("share-NUMA2", 1.0),
                     id="a pod moved to another NUMA counts whole even when it shrinks"),
    ],
)  # fmt: skip
def test_resize_growth(
    origin: ContainerEntry, resized: ContainerEntry, sidecar: float | None, growth: PoolGrowth
) -> None:
    events = [
        PoolSet("share-NUMA1", cpus("3,11")),
        PoolSet("share-NUMA2", cpus("4,12")),
        ContainerAllocated(resized),
    ]
    if sidecar is not None:
        side = replace(snb("share-NUMA1", sidecar, name="side"), container_type="SIDECAR")
        events.append(ContainerAllocated(side))
    state = with_events(empty_state(CTX.topology), *events)
    assert resize_growth(state.cpu, origin, resized) == growth


def test_a_resized_snb_container_without_a_numa_is_refused() -> None:
    origin = snb("share", 1)
    resized = snb("share-NUMA1", 2)
    state = with_events(
        empty_state(CTX.topology), PoolSet("share-NUMA1", cpus("3,11")), ContainerAllocated(resized)
    )
    with pytest.raises(ResizeError, match="failed to get origin target NUMA"):
        resize_growth(state.cpu, origin, resized)
