"""A round's inputs from the pods in pools and the ports (memory-balancer §4.2, §4.5)."""

from __future__ import annotations

from actors.balancer_inputs import metric_inputs, with_pods
from policy.balance import BalancerConfig, RoundInputs
from policy.state.pool_pods import PodsInPools, PoolPod
from tests.actors.balancer_fakes import FakeDistances, FakeMemory, FakeMetrics, container_id
from tests.policy.balance.examples import EX2_B, EX2_L, NOW, T4, GiB, pod


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
