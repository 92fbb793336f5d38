"""The simulated container-memory source (qrmd.sim.host.memory) behaves as the cgroup
reader does: figures per container, the pod's per-node sum, errors for unknown pods."""

from __future__ import annotations

import pytest

from actors.ports.balancer import (
    AnonMemoryUnavailable,
    BatchedContainerMemoryReader,
    ContainerMemoryReader,
    PodAnonMemory,
)
from policy.balance.amounts import NumaAmounts, numa_index
from qrmd.sim.host.memory import SimulatedContainerMemory

GiB = 1 << 30


def test_figures_per_container_and_the_pods_sum() -> None:
    memory = SimulatedContainerMemory()
    assert isinstance(memory, ContainerMemoryReader)
    memory.set_container("p", "containerd://a", {0: 2 * GiB, 1: GiB})
    memory.set_container("p", "containerd://b", {0: GiB})
    assert memory.anon_by_numa("p", ["containerd://b"]) == PodAnonMemory(
        pod={0: 3 * GiB, 1: GiB}, containers={"containerd://b": {0: GiB}}
    )
    every = memory.anon_by_numa("p", None).containers
    assert every == {"containerd://a": {0: 2 * GiB, 1: GiB}, "containerd://b": {0: GiB}}
    assert 1 not in every["containerd://b"], "no figure is no key, never a zero"


def test_unknown_pods_and_containers_raise_the_ports_error() -> None:
    memory = SimulatedContainerMemory()
    memory.set_container("p", "a", {0: 1})
    with pytest.raises(AnonMemoryUnavailable, match=r"^pod q: not simulated$"):
        memory.anon_by_numa("q", None)
    with pytest.raises(
        AnonMemoryUnavailable, match=r"^pod p: container z is not simulated \(have a\)$"
    ):
        memory.anon_by_numa("p", ["a", "z"])
    memory.remove_pod("p")
    with pytest.raises(AnonMemoryUnavailable):
        memory.anon_by_numa("p", None)


def test_negative_figures_are_refused() -> None:
    with pytest.raises(ValueError, match="pod p container a: NUMA 0 holds -1 bytes"):
        SimulatedContainerMemory().set_container("p", "a", {0: -1})


def test_a_read_keeps_what_it_read_and_lists_nodes_in_numa_order() -> None:
    memory = SimulatedContainerMemory()
    memory.set_container("p", "a", {1: GiB, 0: 2 * GiB})
    read = memory.anon_by_numa("p", ["a"])
    memory.set_container("p", "a", {0: 5 * GiB})
    memory.set_container("p", "b", {0: GiB})
    assert list(read.containers["a"].items()) == [(0, 2 * GiB), (1, GiB)]
    assert list(read.pod.items()) == [(0, 2 * GiB), (1, GiB)]
    assert memory.anon_by_numa("p", None).pod == {0: 6 * GiB}, "the sum follows every change"


def test_figures_given_out_of_numa_order_are_put_in_order() -> None:
    anon = PodAnonMemory(pod={3: 1, 0: 2}, containers={"b": {2: 1, 1: 1}, "a": {0: 2, 3: 0}})
    assert list(anon.pod) == [0, 3]
    assert list(anon.containers) == ["a", "b"] and list(anon.containers["b"]) == [1, 2]


@pytest.mark.parametrize(
    ("figures", "given_checked"),
    [
        pytest.param({1: GiB, 0: 2 * GiB}, True, id="byte counts are given as checked amounts"),
        pytest.param({}, True, id="a container without figures is given as checked too"),
        pytest.param({0: 2**64}, False, id="a count beyond int64 is given as set, to be refused"),
    ],
)
def test_a_containers_figures_are_checked_once_when_set(
    figures: dict[int, int], given_checked: bool
) -> None:
    memory = SimulatedContainerMemory()
    memory.set_container("p", "a", figures)
    first = memory.anon_by_numa("p", ["a"]).containers["a"]
    assert (type(first) is NumaAmounts) is given_checked
    assert first == figures and list(first) == sorted(figures)
    again = memory.anon_by_numa("p", None).containers["a"]
    assert (again is first) is given_checked, "checked figures are handed over, not copied"


def test_the_port_keeps_checked_amounts_and_copies_any_other_map() -> None:
    checked = NumaAmounts(numa_index((0, 1)), (2.0, 1.0))
    plain = {1: 1, 0: 2}
    anon = PodAnonMemory(pod={0: 2, 1: 1}, containers={"a": checked, "b": plain})
    assert anon.containers["a"] is checked
    assert anon.containers["b"] == plain and list(anon.containers["b"]) == [0, 1]
    plain[0] = 7
    assert anon.containers["b"][0] == 2, "a plain map is copied"


@pytest.mark.parametrize(
    ("uid", "ids"),
    [
        pytest.param("p", ["b", "a"], id="every container, in the order of the IDs asked"),
        pytest.param("p", ["a"], id="some of its containers"),
        pytest.param("p", [], id="no container"),
        pytest.param("q", ["a"], id="a pod not simulated"),
        pytest.param("p", ["a", "z"], id="a container not simulated"),
    ],
)
def test_a_batched_read_answers_what_reads_pod_by_pod_answer(uid: str, ids: list[str]) -> None:
    memory = SimulatedContainerMemory()
    assert isinstance(memory, BatchedContainerMemoryReader)
    memory.set_container("p", "a", {1: GiB, 0: 2 * GiB})
    memory.set_container("p", "b", {0: 2**64})
    memory.set_container("r", "a", {0: GiB})
    answers = memory.containers_anon_by_numa([("r", ["a"]), (uid, ids)])
    assert answers[0] == (memory.anon_by_numa("r", ["a"]).containers["a"],)
    try:
        one = memory.anon_by_numa(uid, ids)
    except AnonMemoryUnavailable as err:
        assert isinstance(answers[1], AnonMemoryUnavailable) and str(answers[1]) == str(err)
    else:
        assert answers[1] == tuple(one.containers[cid] for cid in ids)
