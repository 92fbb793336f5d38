"""The simulated kubelet's pods: init containers, a main container and sidecars, admitted one
container at a time in the kubelet fork's order, and re-allocated by the reconcile when a
listing leaves an app container out (qrmd.sim.dst.kubelet)."""

from __future__ import annotations

import re
from random import Random
from typing import Any

import pytest

from policy.cpu.commands import Allocate, GetTopologyHints
from policy.cpu.request import ContainerType
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.kubelet import KubeletPeer, SimContainer, SimPod
from qrmd.sim.dst.simulation import Simulation

ANSWERED = re.compile(r"kubelet (GetTopologyHints|Allocate) (p\d+)/(\S+) ok")


class RecordingAllocator:
    """An Allocator ref that only records what kubelet asked."""

    def __init__(self) -> None:
        self.asked: list[Any] = []

    def ask(self, command: Any, block: bool = True) -> Any:
        del block
        self.asked.append(command)
        return object()


def pod(kind: str = "dedicated", *, sidecar_first: bool = False) -> SimPod:
    init = SimContainer("init-0", ContainerType.INIT, 0, 1.0)
    main = SimContainer("app", ContainerType.MAIN, 0, 2.0)
    sidecar = SimContainer("sidecar-0", ContainerType.SIDECAR, 1, 1.0)
    apps = (sidecar, main) if sidecar_first else (main, sidecar)
    admitted = {"init-0": 0, "app": 1, "sidecar-0": 2}  # each answered before any listing
    return SimPod("p0001", kind, (init, *apps), phase="running", cursor=3, admitted=admitted)


def kubelet_with(sim_pod: SimPod) -> KubeletPeer:
    kubelet = KubeletPeer(Random(0), VirtualClock())
    kubelet.pods[sim_pod.uid] = sim_pod
    return kubelet


@pytest.fixture(scope="module")
def run_traces() -> list[tuple[Simulation, list[str]]]:
    runs = []
    for seed in range(3):
        sim = Simulation(seed, faults=())
        outcome = sim.run(300)
        assert not outcome.failures
        runs.append((sim, outcome.trace))
    return runs


def test_admission_goes_init_containers_first_each_container_hinted_before_allocated(
    run_traces: list[tuple[Simulation, list[str]]],
) -> None:
    seen_types: set[str] = set()
    for _, trace in run_traces:
        order: dict[str, list[tuple[str, str]]] = {}
        for line in trace:
            found = ANSWERED.search(line)
            if found:
                rpc, uid, container = found.groups()
                order.setdefault(uid, []).append((rpc, container))
        for calls in order.values():
            allocated = [c for rpc, c in calls if rpc == "Allocate"]
            hinted = [c for rpc, c in calls if rpc == "GetTopologyHints"]
            inits = [i for i, c in enumerate(allocated) if c.startswith("init-")]
            apps = [i for i, c in enumerate(allocated) if not c.startswith("init-")]
            assert not inits or not apps or max(inits) < min(apps), calls
            for container in allocated:
                assert container in hinted, (container, calls)
            seen_types.update(c.split("-")[0] for c in allocated)
    assert seen_types == {"init", "app", "sidecar"}


def test_init_containers_get_no_cpus_and_no_cgroup(
    run_traces: list[tuple[Simulation, list[str]]],
) -> None:
    listed = set()
    for sim, _ in run_traces:
        assert not [k for k in sim.kubelet.answers if k[1].startswith("init-")]
        sim.pod_source.mode = "healthy"
        snapshot = sim.pod_source.fetch()
        for listing in snapshot.pods.values():
            listed.update(name.split("-")[0] for name in listing.container_ids)
    assert "app" in listed and "init" not in listed


def test_a_listing_without_an_app_container_makes_kubelet_allocate_it_again() -> None:
    sim_pod = pod(sidecar_first=True)
    kubelet = kubelet_with(sim_pod)
    # The sidecar came before its main container: answered empty, never listed.
    kubelet._listed({"p0001": {"app": {}}}, 3, None, settled=True)
    assert sim_pod.realloc == ["sidecar-0"]
    assert kubelet.reallocations == 1
    allocator = RecordingAllocator()
    kubelet.act(allocator)  # the pod is the only one: its re-allocation is sent
    sent = [c for c in allocator.asked if isinstance(c, Allocate)]
    assert [c.request.container_name for c in sent] == ["sidecar-0"]
    assert sent[0].request.container_type is ContainerType.SIDECAR


def test_a_container_admitted_while_the_listing_was_out_is_not_reallocated() -> None:
    sim_pod = pod()
    sim_pod.admitted["sidecar-0"] = 5
    kubelet = kubelet_with(sim_pod)
    # Asked for after 5 answers: the sidecar's Allocate was answered while it was out.
    kubelet._listed({"p0001": {"app": {}}}, 3, None, settled=True, sent=5)
    assert sim_pod.realloc == []


def test_init_containers_are_never_reconciled() -> None:
    sim_pod = pod()
    kubelet = kubelet_with(sim_pod)
    kubelet._listed({"p0001": {"app": {}, "sidecar-0": {}}}, 3, None, settled=True)
    assert sim_pod.realloc == []


def test_a_pod_being_admitted_is_asked_for_its_current_container() -> None:
    sim_pod = pod()
    sim_pod.phase, sim_pod.cursor = "hints", 0
    kubelet = kubelet_with(sim_pod)
    kubelet.max_pods = 1  # no new pod: the admission goes on
    allocator = RecordingAllocator()
    while not allocator.asked:
        kubelet.act(allocator)
    hints = [c for c in allocator.asked if isinstance(c, GetTopologyHints)]
    assert [c.request.container_type for c in hints] == [ContainerType.INIT]


def test_a_late_answer_to_a_resent_allocate_does_not_skip_a_container() -> None:
    sim_pod = pod()
    sim_pod.phase, sim_pod.cursor = "allocate", 1
    kubelet = kubelet_with(sim_pod)
    kubelet._admitted(sim_pod, "init-0")  # the answer of a re-send for the previous one
    assert (sim_pod.phase, sim_pod.cursor) == ("allocate", 1)
    kubelet._admitted(sim_pod, "app")
    assert (sim_pod.phase, sim_pod.cursor) == ("hints", 2)
