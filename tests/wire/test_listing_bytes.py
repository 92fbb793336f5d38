"""GetResourcesAllocation's bytes, kept pod by pod (wire/listing_bytes.py, wire.md §4.3).

An encoder handed a reply after reply — pods coming and going, a pod's allocations changing,
one allocations map shared by many pods replaced at once (a pool that moved) — writes the bytes
a fresh encoding writes, which protobuf parses into the message the reply says, and keeps the
bytes of no pod the last reply did not list.
"""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.allocation_listing import ContainerCPUAllocation, ResourcesAllocation
from wire.convert import resources_allocation_response
from wire.gen import resourceplugin_pb2 as pb
from wire.listing_bytes import ListingEncoder

Allocations = Mapping[str, ContainerCPUAllocation]

POOLS = [ContainerCPUAllocation(n, f"{n}-{2 * n}") for n in (1, 4, 13, 200)]
SHAPES: list[Allocations] = [
    {"app": POOLS[0]},
    {"app": POOLS[1], "side": POOLS[1]},
    {"c" * 140: POOLS[3]},  # a name long enough for two-byte lengths
]
PODS = [f"pod-{i}" for i in range(8)] + ["u" * 150]

# One step of a history: (pod, shape index) puts a pod on a shape (None removes it);
# (None, shape index) replaces that shared map by an equal-valued new one on other cpusets.
STEPS = st.lists(
    st.tuples(
        st.one_of(st.none(), st.sampled_from(PODS)),
        st.one_of(st.none(), st.integers(0, len(SHAPES) - 1)),
    ),
    max_size=30,
)


def parsed(data: bytes) -> dict[str, dict[str, tuple[str, float]]]:
    response = pb.GetResourcesAllocationResponse.FromString(data)
    return {
        uid: {
            name: (
                a.resource_allocation["cpu"].allocation_result,
                a.resource_allocation["cpu"].allocated_quantity,
            )
            for name, a in pod.container_resources.items()
        }
        for uid, pod in response.pod_resources.items()
    }


@settings(max_examples=200, deadline=None)
@given(steps=STEPS, pool=st.sampled_from(POOLS))
def test_kept_bytes_equal_a_fresh_encoding_after_any_history(
    steps: list[tuple[str | None, int | None]], pool: ContainerCPUAllocation
) -> None:
    encoder = ListingEncoder()
    shapes = list(SHAPES)
    pods: dict[str, Allocations] = {}
    for pod, shape in steps:
        if pod is None and shape is not None:  # a pool moved: every pod of the shape moves
            old = shapes[shape]
            shapes[shape] = {name: pool for name in old}
            pods = {uid: shapes[shape] if a is old else a for uid, a in pods.items()}
        elif pod is not None:
            if shape is None:
                pods.pop(pod, None)
            else:
                pods[pod] = shapes[shape]
        reply = ResourcesAllocation(dict(sorted(pods.items())))
        data = encoder.encode(reply)
        assert data == resources_allocation_response(reply)
        want = {
            uid: {n: (a.allocation_result, float(a.allocated_quantity)) for n, a in c.items()}
            for uid, c in pods.items()
        }
        assert parsed(data) == want
        assert encoder.kept_pods() == set(pods)


def test_a_removed_pods_bytes_are_not_kept() -> None:
    encoder = ListingEncoder()
    encoder.encode(ResourcesAllocation({"pod-1": SHAPES[0], "pod-2": SHAPES[0]}))
    assert encoder.kept_pods() == {"pod-1", "pod-2"}
    encoder.encode(ResourcesAllocation({"pod-2": SHAPES[0]}))
    assert encoder.kept_pods() == {"pod-2"}
