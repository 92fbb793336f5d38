"""A round's inputs from the pods in pools, the pod source's container IDs and the ports
(memory-balancer §4.2, §4.5)."""

from __future__ import annotations

from typing import Any

import pytest

from actors.balancer_inputs import (
    ContainerIdsMemo,
    container_ids_of,
    metric_inputs,
    store_pods,
    with_container_ids,
    with_pods,
)
from actors.ports.balancer import AnonMemoryUnavailable
from actors.ports.pod_source import PodListing, PodListSnapshot
from policy.balance import BalanceInfo, BalancerConfig, Container, Pod, RoundInputs
from policy.balance.errors import BalanceError
from policy.balance.events import BalanceRoundRecorded
from policy.balance.pod_table import PodTable
from policy.state.entries import InPool
from policy.state.events import ContainerAllocated, PoolSet
from policy.state.pool_pods import PodsInPools, PoolPod, pods_in_pools
from policy.state.sections import empty_state
from policy.topology.cpuset import CPUSet
from qrmd.sim.host.memory import SimulatedContainerMemory
from tests.actors.balancer_fakes import FakeDistances, FakeMemory, FakeMetrics, container_id
from tests.actors.fakes import ApplyingCommitter
from tests.policy.balance.examples import EX2_B, EX2_L, NOW, T4, GiB, pod
from tests.policy.state_fixtures import SYNTH_16_2_4, container


def _gather(pods: PodsInPools, memory: FakeMemory) -> tuple[RoundInputs, int]:
    inputs = metric_inputs(
        now=NOW,
        distances=FakeDistances(T4).distances(),
        metrics=FakeMetrics(EX2_L, EX2_B),
        config=BalancerConfig(),
        cpu_vendor="GenuineIntel",
        last=None,
    )
    assert inputs.pods == () and inputs.pools == {}
    return with_pods(inputs, pods, memory)


def test_with_container_ids_each_container_has_its_own_figure() -> None:
    s4 = pod("s4", "share", containers=[("a", {0: 2 * GiB}), ("b", {0: GiB})])
    listed = PoolPod("s4", "default", "s4", "share", ("a", "b"),
                     (container_id("s4", "a"), container_id("s4", "b")))  # fmt: skip
    inputs, unreadable = _gather(PodsInPools({"share": (0, 1)}, (listed,)), FakeMemory([s4]))
    assert unreadable == 0
    (got,) = inputs.pods
    assert [(c.name, dict(c.anon)) for c in got.containers] == [
        ("a", {0: 2 * GiB}),
        ("b", {0: GiB}),
    ]


def test_without_container_ids_the_pod_figure_goes_to_the_first_container() -> None:
    s4 = pod("s4", "share", containers=[("a", {0: 2 * GiB}), ("b", {0: GiB})])
    listed = PoolPod("s4", "default", "s4", "share", ("a", "b"))
    inputs, _ = _gather(PodsInPools({"share": (0, 1)}, (listed,)), FakeMemory([s4]))
    (got,) = inputs.pods
    assert [(c.name, dict(c.anon)) for c in got.containers] == [("a", {0: 3 * GiB}), ("b", {0: 0})]
    assert got.anon_on(0) == 3 * GiB, "the pod sum, all a round uses, is exact"


@pytest.mark.parametrize(
    "container_ids",
    [
        pytest.param(True, id="figures read per container are the same checked or copied"),
        pytest.param(False, id="a pod figure is given to its first container the same way"),
    ],
)
def test_figures_handed_over_checked_make_the_same_pods_as_plain_maps(
    container_ids: bool,
) -> None:
    ids = (container_id("s4", "a"), container_id("s4", "b"))
    listed = PoolPod("s4", "default", "s4", "share", ("a", "b"), ids if container_ids else None)
    pods = PodsInPools({"share": (0, 1)}, (listed,))
    checked = SimulatedContainerMemory()
    checked.set_container("s4", ids[0], {1: GiB, 0: 2 * GiB})
    checked.set_container("s4", ids[1], {0: GiB})
    plain = FakeMemory(
        [pod("s4", "share", containers=[("a", {0: 2 * GiB, 1: GiB}), ("b", {0: GiB})])]
    )
    (got,) = _gather(pods, checked)[0].pods  # type: ignore[arg-type]
    (want,) = _gather(pods, plain)[0].pods
    assert got == want
    assert [list(c.anon.items()) for c in got.containers] == [
        list(c.anon.items()) for c in want.containers
    ]


def test_unreadable_pods_have_no_samples_and_unused_pools_are_not_read() -> None:
    listed = (
        PoolPod("gone", "default", "gone", "share", ("app",)),
        PoolPod("d", "default", "d", "dedicated", ("app",)),
    )
    memory = FakeMemory([])
    inputs, unreadable = _gather(PodsInPools({"share": (0, 1)}, listed), memory)
    assert unreadable == 1 and memory.reads == 1, "the dedicated pod's memory is not read"
    (got,) = inputs.pods
    assert got.uid == "gone" and got.anon_on(0) is None


# -- container IDs from the pod source's latest listing ----------------------------------------

_S4 = PoolPod("s4", "default", "s4", "share", ("a", "b"))


def _listing(**ids: dict[str, str]) -> PodListSnapshot:
    return PodListSnapshot.of(
        [PodListing(uid, "default", uid, "Running", cids) for uid, cids in ids.items()], NOW
    )


@pytest.mark.parametrize(
    ("listing", "want"),
    [
        pytest.param(_listing(s4={"a": "containerd://a1", "b": "containerd://b1"}),
                     ("containerd://a1", "containerd://b1"),
                     id="a pod listed with every container's ID gets them in pod-spec order"),
        pytest.param(_listing(s4={"a": "containerd://a1"}), None,
                     id="a pod with a container not started keeps no IDs"),
        pytest.param(_listing(s4={"a": "containerd://a1", "b": ""}), None,
                     id="an empty ID is no ID"),
        pytest.param(_listing(other={"a": "containerd://x"}), None,
                     id="a pod the listing misses keeps no IDs"),
        pytest.param(None, None, id="no listing yet changes nothing"),
    ],
)  # fmt: skip
def test_with_container_ids(listing: PodListSnapshot | None, want: tuple[str, ...] | None) -> None:
    pods = PodsInPools({"share": (0, 1)}, (_S4,))
    (got,) = with_container_ids(pods, listing).pods
    assert got.container_ids == want
    assert got.containers == ("a", "b") and got.pool == "share"


def test_the_ids_a_round_read_by_are_in_its_inputs_and_drive_the_executor() -> None:
    s4 = pod("s4", "share", containers=[("a", {0: 2 * GiB}), ("b", {0: GiB})])
    listing = _listing(s4={"a": container_id("s4", "a"), "b": container_id("s4", "b")})
    pods = with_container_ids(PodsInPools({"share": (0, 1)}, (_S4,)), listing)
    inputs, _ = _gather(pods, FakeMemory([s4]))
    doc: Any = inputs.to_json()
    (got,) = doc["pods"]
    assert got["containers"] == [
        {"name": "a", "anon": {"0": 2 * GiB}, "containerId": "containerd://s4-a"},
        {"name": "b", "anon": {"0": GiB}, "containerId": "containerd://s4-b"},
    ]
    assert RoundInputs.from_json(inputs.to_json()) == inputs
    assert container_ids_of(inputs.pods) == {
        ("s4", "a"): "containerd://s4-a",
        ("s4", "b"): "containerd://s4-b",
    }


def test_without_ids_the_inputs_name_none_and_the_executor_gets_none() -> None:
    s4 = pod("s4", "share", containers=[("a", {0: 2 * GiB}), ("b", {0: GiB})])
    inputs, _ = _gather(PodsInPools({"share": (0, 1)}, (_S4,)), FakeMemory([s4]))
    doc: Any = inputs.to_json()
    (got,) = doc["pods"]
    assert all("containerId" not in c for c in got["containers"])
    assert container_ids_of(inputs.pods) == {}


def test_an_unreadable_pod_still_names_the_ids_it_was_looked_up_by() -> None:
    listed = PoolPod("gone", "default", "gone", "share", ("app",), ("cri-o://g1",))
    inputs, unreadable = _gather(PodsInPools({"share": (0, 1)}, (listed,)), FakeMemory([]))
    assert unreadable == 1
    (got,) = inputs.pods
    assert [(c.name, c.container_id, dict(c.anon)) for c in got.containers] == [
        ("app", "cri-o://g1", {})
    ]


def test_the_pods_in_pools_are_listed_again_only_for_a_new_cpu_section() -> None:
    """A balance commit leaves the CPU section as it is: the same listing is given again; an
    Allocator's commit makes a new section, listed anew."""
    store = ApplyingCommitter(empty_state(SYNTH_16_2_4))
    store.commit((PoolSet("share", CPUSet.parse("0-3")),), {"rpc": "test"})
    pods = store_pods(store)
    first = pods()
    assert first == pods_in_pools(store.latest().state.cpu) and first.pods == ()
    record = BalanceInfo(NOW)
    store.commit((BalanceRoundRecorded(record, {"now": NOW}),), {"command": "Tick", "now": NOW})
    assert pods() is first
    entry = container("p1", "app", InPool("share"), owner="share")
    store.commit((ContainerAllocated(entry),), {"rpc": "test"})
    again = pods()
    assert again is not first and [p.uid for p in again.pods] == ["p1"]
    assert again == pods_in_pools(store.latest().state.cpu)


def test_container_ids_are_filled_again_only_when_the_pods_or_the_listing_change() -> None:
    memo = ContainerIdsMemo()
    pods = PodsInPools({"share": (0, 1)}, (_S4,))
    first = _listing(s4={"a": "containerd://a1", "b": "containerd://b1"})
    filled = memo(pods, first)
    assert memo(pods, first) is filled
    restarted = _listing(s4={"a": "containerd://a2", "b": "containerd://b1"})
    (again,) = memo(pods, restarted).pods
    assert again.container_ids == ("containerd://a2", "containerd://b1")
    moved = PodsInPools({"share": (0,)}, (_S4,))
    assert memo(moved, restarted).pools == moved.pools
    assert memo(moved, None) is moved


# -- the pods as columns (policy.balance.pod_table) --------------------------------------------


def _listed(uid: str, **fields: Any) -> PoolPod:
    pod_fields: dict[str, Any] = {
        "uid": uid,
        "namespace": "default",
        "name": uid,
        "pool": "share",
        "containers": ("a", "b"),
        "container_ids": (container_id(uid, "a"), container_id(uid, "b")),
    }
    pod_fields.update(fields)
    return PoolPod(**pod_fields)


def _read_one_by_one(pods: PodsInPools, memory: FakeMemory) -> RoundInputs:
    """What a round read before the columns: each pod made a ``Pod`` as it was read."""
    inputs, _ = _gather(PodsInPools(pods.pools, ()), memory)
    made = []
    for listed in pods.pods:
        try:
            read = memory.anon_by_numa(listed.uid, listed.container_ids)
        except AnonMemoryUnavailable:
            figures: list[Any] = [{}] * len(listed.containers)
        else:
            figures = (
                [read.containers[cid] for cid in listed.container_ids]
                if listed.container_ids is not None
                else [read.pod, *[dict.fromkeys(read.pod, 0.0)] * (len(listed.containers) - 1)]
            )
        ids = listed.container_ids or ("",) * len(listed.containers)
        containers = tuple(
            Container(name, figure, cid)
            for name, figure, cid in zip(listed.containers, figures, ids, strict=True)
        )
        made.append(Pod(listed.uid, listed.namespace, listed.name, listed.pool, containers))
    return RoundInputs(
        now=inputs.now,
        numa_metrics=inputs.numa_metrics,
        distances=inputs.distances,
        pools=pods.pools,
        pods=tuple(made),
        config=inputs.config,
        cpu_vendor=inputs.cpu_vendor,
    )


_TWO = [pod(u, "share", containers=[("a", {0: 2 * GiB, 1: GiB}), ("b", {0: GiB})]) for u in "pq"]


@pytest.mark.parametrize(
    "listed",
    [
        pytest.param((_listed("p"), _listed("q")), id="pods read by their container IDs"),
        pytest.param((_listed("p", container_ids=None), _listed("q", container_ids=None)),
                     id="pods read by their pod cgroups"),
        pytest.param((_listed("p"), _listed("gone")), id="a pod that cannot be read"),
        pytest.param((_listed("q"), _listed("p")), id="pods listed out of UID order"),
        pytest.param((_listed("p", name="é" * 100), _listed("q")),
                     id="a long non-ASCII name within its bound, taken by the pod's check"),
    ],
)  # fmt: skip
def test_the_columns_hold_what_pods_made_one_by_one_hold(listed: tuple[PoolPod, ...]) -> None:
    pods = PodsInPools({"share": (0, 1)}, listed)
    got, _ = _gather(pods, FakeMemory(_TWO))
    want = _read_one_by_one(pods, FakeMemory(_TWO))
    assert got == want and got.to_journal() == want.to_journal()
    assert isinstance(got.pods, PodTable) and container_ids_of(got.pods) == {
        (p.uid, c.name): c.container_id for p in want.pods for c in p.containers if c.container_id
    }


@pytest.mark.parametrize(
    ("listed", "refused"),
    [
        pytest.param((_listed("p", name="é" * 127), _listed("q", namespace="x" * 64)),
                     "pod 'p' name is 254 bytes", id="the first pod the checks refuse is named"),
        pytest.param((_listed("p"), _listed("p")), "pod 'p' is listed twice",
                     id="a pod listed twice"),
        pytest.param((_listed("p", containers=("a", "a")),), "names a container twice",
                     id="a container named twice"),
    ],
)  # fmt: skip
def test_what_the_columns_leave_to_the_pods_checks_is_refused_as_it_was(
    listed: tuple[PoolPod, ...], refused: str
) -> None:
    with pytest.raises(BalanceError, match=refused):
        _gather(PodsInPools({"share": (0, 1)}, listed), FakeMemory(_TWO))


def test_a_negative_figure_is_refused_naming_the_container() -> None:
    memory = FakeMemory(_TWO)
    memory.pods["p"][container_id("p", "b")] = {0: -5}
    with pytest.raises(BalanceError, match=r"container 'b' anon\[0\]: -5 is outside"):
        _gather(PodsInPools({"share": (0, 1)}, (_listed("p"),)), memory)


class _PodByPod:
    """A reader with ``anon_by_numa`` alone: a round reads it pod by pod."""

    def __init__(self, memory: SimulatedContainerMemory) -> None:
        self.anon_by_numa = memory.anon_by_numa


def _simulated(*uids: str) -> SimulatedContainerMemory:
    memory = SimulatedContainerMemory()
    for uid in uids:
        memory.set_container(uid, container_id(uid, "a"), {0: 2 * GiB, 1: GiB})
        memory.set_container(uid, container_id(uid, "b"), {1: GiB, 0: 3})
    return memory


@pytest.mark.parametrize(
    ("listed", "memory"),
    [
        pytest.param((_listed("p"), _listed("q")), _simulated("p", "q"),
                     id="pods read by their container IDs"),
        pytest.param((_listed("p"), _listed("q", container_ids=None), _listed("r")),
                     _simulated("p", "q", "r"), id="pods with and without IDs between them"),
        pytest.param((_listed("p"), _listed("gone")), _simulated("p"), id="a pod not found"),
        pytest.param((_listed("p", container_ids=(container_id("p", "a"), "containerd://z")),),
                     _simulated("p"), id="a container not found"),
    ],
)  # fmt: skip
def test_a_batched_read_makes_the_inputs_reads_pod_by_pod_make(
    listed: tuple[PoolPod, ...], memory: SimulatedContainerMemory
) -> None:
    pods = PodsInPools({"share": (0, 1)}, listed)
    batched, unreadable = _gather(pods, memory)  # type: ignore[arg-type]
    by_pod, unreadable_by_pod = _gather(pods, _PodByPod(memory))  # type: ignore[arg-type]
    assert batched == by_pod and unreadable == unreadable_by_pod
    assert batched.to_journal() == by_pod.to_journal()
