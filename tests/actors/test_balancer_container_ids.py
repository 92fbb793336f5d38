"""Container IDs as balance round inputs, end to end on synthetic kubelet cgroup trees
(memory-balancer §4.2, §11: container IDs are inputs of each round, never state).

Example 2's node and pods (``tests.policy.balance.examples``) with the real
``CgroupAnonMemoryReader`` and the real ``CgroupMigrator`` (dry run: it plans, it moves
nothing) on a tree laid out as kubelet and the runtime name it: cgroup v1 (pages) and v2
(bytes), the cgroupfs and systemd drivers, containerd, docker and cri-o. Each pod cgroup also
holds its sandbox (pause) container, with memory and a process of its own, which the pod spec
does not list.

With a pod source, each container is read from its own cgroup and the advice is exactly the
spec's (the sandbox is no regular container, §4.2); the IDs are in the journaled round; the
executor targets each container's cgroup and its processes alone. Without one, the pod
cgroup stands for its containers (the fallback).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.balancer_messages import GetBalancerState, RoundReport, Tick
from actors.memory_balancer import MemoryBalancerActor
from actors.ports.pod_source import PodListing, PodListSnapshot
from policy.balance import Pod, RoundResult
from policy.balance.events import BalanceRoundRecorded
from qrmd.host.kube_cgroups import CgroupDriver
from qrmd.host.migrate import CgroupMigrator
from qrmd.host.numa_stat import CgroupAnonMemoryReader
from tests.actors.balancer_fakes import Balancer
from tests.actors.fakes import FakePodSource
from tests.host.cgroup_tree import put_cgroup
from tests.policy.balance.examples import EX2_ADVICE, EX2_PODS, NOW

PAGE = 4096
SANDBOX_ANON = {0: 8 * PAGE}


@dataclass(frozen=True)
class Layout:
    """A node's cgroup layout: the version, kubelet's driver and the container runtime."""

    version: int
    driver: CgroupDriver
    runtime: str  # the container ID's scheme

    def pod_dir(self, uid: str) -> str:
        """A burstable pod's cgroup, as kubelet names it."""
        if self.driver is CgroupDriver.CGROUPFS:
            return f"kubepods/burstable/pod{uid}"
        unit = uid.replace("-", "_")
        return f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{unit}.slice"

    def container_dir(self, bare_id: str) -> str:
        """A container's cgroup under its pod's, as the runtime names it."""
        if self.driver is CgroupDriver.SYSTEMD:
            prefix = {"containerd": "cri-containerd-", "docker": "docker-", "cri-o": "crio-"}
            return f"{prefix[self.runtime]}{bare_id}.scope"
        return f"crio-{bare_id}" if self.runtime == "cri-o" else bare_id


LAYOUTS = [
    pytest.param(Layout(1, CgroupDriver.CGROUPFS, "docker"), id="v1 cgroupfs docker"),
    pytest.param(Layout(1, CgroupDriver.SYSTEMD, "containerd"), id="v1 systemd containerd"),
    pytest.param(Layout(1, CgroupDriver.CGROUPFS, "cri-o"), id="v1 cgroupfs cri-o"),
    pytest.param(Layout(2, CgroupDriver.SYSTEMD, "cri-o"), id="v2 systemd cri-o"),
    pytest.param(Layout(2, CgroupDriver.CGROUPFS, "containerd"), id="v2 cgroupfs containerd"),
    pytest.param(Layout(2, CgroupDriver.SYSTEMD, "docker"), id="v2 systemd docker"),
]


def bare_id(pod_uid: str, container: str) -> str:
    return f"{pod_uid}{container}".encode().hex().ljust(16, "0")


@dataclass
class Node:
    """Example 2's pods on a synthetic cgroup tree, and what the pod source lists."""

    root: Path
    layout: Layout
    listing: PodListSnapshot
    pids: dict[tuple[str, str], int]  # (pod, container or "sandbox") -> its one process


def build_node(root: Path, layout: Layout, pods: tuple[Pod, ...] = EX2_PODS) -> Node:
    listed: list[PodListing] = []
    pids: dict[tuple[str, str], int] = {}
    hier_v1 = layout.version == 1
    for pod in pods:
        total = dict(SANDBOX_ANON)
        for c in pod.containers:
            for numa, v in c.anon.items():
                total[numa] = total.get(numa, 0) + int(v)
        own = {n: 0 for n in total} if hier_v1 else total
        pod_dir = put_cgroup(root / layout.pod_dir(pod.uid), layout.version, own, total)
        ids: dict[str, str] = {}
        for c in pod.containers:
            cid = bare_id(pod.uid, c.name)
            cgroup = put_cgroup(
                pod_dir / layout.container_dir(cid),
                layout.version,
                {n: int(v) for n, v in c.anon.items()},
            )
            pids[(pod.uid, c.name)] = pid = 1000 + len(pids)
            (cgroup / "cgroup.procs").write_text(f"{pid}\n")
            ids[c.name] = f"{layout.runtime}://{cid}"
        sandbox = put_cgroup(
            pod_dir / layout.container_dir(bare_id(pod.uid, "pause")), layout.version, SANDBOX_ANON
        )
        pids[(pod.uid, "sandbox")] = pid = 1000 + len(pids)
        (sandbox / "cgroup.procs").write_text(f"{pid}\n")
        listed.append(PodListing(pod.uid, "default", pod.uid, "Running", ids))
    return Node(root, layout, PodListSnapshot.of(listed, NOW - 1), pids)


def balancer(node: Node, *, with_pod_source: bool) -> Balancer:
    """Example 2's balancer reading and migrating on the node's tree; the CPU state (the
    pods in pools) knows no container IDs, as the real one."""
    b = Balancer()
    b.pods.set_pods(EX2_PODS, with_ids=False)
    reader = CgroupAnonMemoryReader(node.root, driver=node.layout.driver)
    b.ports = replace(
        b.ports,
        memory=reader,
        executor=CgroupMigrator(reader, 4, execute=False),
        pod_source=FakePodSource(node.listing) if with_pod_source else None,
    )
    b.restart()
    return b


def journaled_inputs(b: Balancer) -> dict[str, Any]:
    (recorded,) = [e for e in b.store.events if isinstance(e, BalanceRoundRecorded)]
    return dict(recorded.inputs)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_with_a_pod_source_each_container_is_read_and_migrated_by_its_own_cgroup(
    tmp_path: Path, layout: Layout
) -> None:
    node = build_node(tmp_path, layout)
    b = balancer(node, with_pod_source=True)
    report = b.core.handle(Tick(b.at(0)))
    assert report.result is RoundResult.STORED
    # Each container's own figure, the sandbox left out: exactly the spec's advice (§15 ex. 2).
    assert report.advice is not None and report.advice.to_json_text() == EX2_ADVICE
    # The IDs the round read by are in its journaled inputs.
    s4 = next(p for p in journaled_inputs(b)["pods"] if p["uid"] == "s4")
    assert [(c["name"], c["containerId"]) for c in s4["containers"]] == [
        ("a", f"{layout.runtime}://{bare_id('s4', 'a')}"),
        ("b", f"{layout.runtime}://{bare_id('s4', 'b')}"),
    ]
    # The executor's plan, journaled with the advice: one target per container cgroup, with
    # that container's process only (never the sandbox's).
    execution = b.store.causes[-1]["execution"]
    targets = {(t["pod_uid"], tuple(t["container_names"])): t for t in execution["targets"]}
    assert set(targets) == {("r2", ("r2",)), ("r1", ("r1",)), ("s4", ("a",)), ("s4", ("b",)),
                            ("s1", ("s1",))}  # fmt: skip
    for (uid, (name,)), target in targets.items():
        assert not target["whole_pod"] and target["error"] == ""
        assert target["cgroup"] == str(
            tmp_path / layout.pod_dir(uid) / layout.container_dir(bare_id(uid, name))
        )
        assert target["pids"] == [node.pids[(uid, name)]]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_without_a_pod_source_the_pod_cgroup_stands_for_its_containers(
    tmp_path: Path, layout: Layout
) -> None:
    node = build_node(tmp_path, layout)
    b = balancer(node, with_pod_source=False)
    report = b.core.handle(Tick(b.at(0)))
    assert report.result is RoundResult.STORED and report.advice is not None
    s4 = next(p for p in journaled_inputs(b)["pods"] if p["uid"] == "s4")
    assert all("containerId" not in c for c in s4["containers"])
    targets = b.store.causes[-1]["execution"]["targets"]
    (pod_target,) = [t for t in targets if t["pod_uid"] == "s4"]
    assert pod_target["whole_pod"] and pod_target["container_names"] == ["a", "b"]
    assert pod_target["cgroup"] == str(tmp_path / layout.pod_dir("s4"))
    assert pod_target["pids"] == sorted(node.pids[("s4", name)] for name in ("a", "b", "sandbox"))


def test_a_restarted_container_is_read_by_the_id_of_the_newest_listing(tmp_path: Path) -> None:
    """IDs are inputs, not state: a round after a restart reads the new container's cgroup."""
    layout = Layout(2, CgroupDriver.SYSTEMD, "containerd")
    node = build_node(tmp_path, layout)
    b = balancer(node, with_pod_source=True)
    source = b.ports.pod_source
    assert isinstance(source, FakePodSource)
    # s1's container restarted: a new ID and cgroup, the old cgroup gone.
    old = tmp_path / layout.pod_dir("s1") / layout.container_dir(bare_id("s1", "s1"))
    new_id = bare_id("s1", "s1-restarted")
    new = tmp_path / layout.pod_dir("s1") / layout.container_dir(new_id)
    old.rename(new)
    pods = dict(node.listing.pods)
    pods["s1"] = PodListing("s1", "default", "s1", "Running", {"s1": f"containerd://{new_id}"})
    source.snapshot = PodListSnapshot(pods, NOW)
    report = b.core.handle(Tick(b.at(0)))
    assert report.advice is not None and report.advice.to_json_text() == EX2_ADVICE
    s1 = next(p for p in journaled_inputs(b)["pods"] if p["uid"] == "s1")
    assert s1["containers"][0]["containerId"] == f"containerd://{new_id}"
    (target,) = [t for t in b.store.causes[-1]["execution"]["targets"] if t["pod_uid"] == "s1"]
    assert target["cgroup"] == str(new)


@pytest.fixture(name="actor")
def _actor(tmp_path: Path) -> Iterator[tuple[pykka.ActorRef[Any], Balancer]]:
    node = build_node(tmp_path, Layout(1, CgroupDriver.SYSTEMD, "cri-o"))
    b = balancer(node, with_pod_source=True)
    ref = MemoryBalancerActor.start(b.core)
    try:
        yield ref, b
    finally:
        ref.stop()


def test_through_the_actor_a_tick_reads_and_plans_per_container(
    actor: tuple[pykka.ActorRef[Any], Balancer],
) -> None:
    ref, b = actor
    report = ref.ask(Tick(b.at(0)), timeout=10)
    assert isinstance(report, RoundReport) and report.execution is not None
    targets: list[dict[str, Any]] = report.execution["targets"]  # type: ignore[assignment]
    assert targets and not any(t["whole_pod"] for t in targets)
    ref.ask(GetBalancerState(), timeout=10)
    s4 = next(p for p in journaled_inputs(b)["pods"] if p["uid"] == "s4")
    assert all(c["containerId"].startswith("cri-o://") for c in s4["containers"])
