"""The simulated container-memory source (qrmd.sim.host.memory) behaves as the cgroup
reader does: figures per container, the pod's per-node sum, errors for unknown pods."""

from __future__ import annotations

import pytest

from actors.ports.balancer import AnonMemoryUnavailable, ContainerMemoryReader, PodAnonMemory
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
