"""The real ``qrmd run`` with ``--pod-source kubelet`` reading the kubelet simulator's ``/pods``
over real HTTP (spec cpu-policy §12.3, §12.4): a pod the kubelet forgets to remove is removed
after the configured age, in one journaled decision; ``/healthz`` turns unhealthy when ``/pods``
fails for longer than the tolerance, and healthy again once it answers."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qrmd.sim.kubelet import Container, KubeletSimulator, Pod, shared_pod
from qrmd.sim.kubelet.pods_endpoint import PodsEndpoint, container_id
from tests.integration.daemon_process import REPO, PluginClient, QrmdProcess, wait_for

pytestmark = pytest.mark.slow

PERIOD = "200ms"  # --residual-check-period and --cpuset-check-period
MAX_AGE = "1s"  # five consecutive misses
TOLERANCE_S = 3 * 0.2  # §12.3: 3 periods


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qp") as root:
        yield Path(root)


def _write_cgroups(root: Path, pod: Pod, cpus: str = "1,3-15") -> None:
    """The container cgroups a runtime would make (cgroupfs driver, containerd), before the
    pod is admitted: checkCPUSet finds them from its first round."""
    for container in (*pod.init_containers, *pod.containers):
        bare = container_id(pod.uid, container.name).removeprefix("containerd://")
        cgroup = root / "kubepods" / "burstable" / f"pod{pod.uid}" / bare
        cgroup.mkdir(parents=True)
        (cgroup / "cpuset.cpus").write_text(f"{cpus}\n")


class Node:
    """A simulated kubelet with its /pods endpoint, and ``qrmd run`` reading it."""

    def __init__(self, workdir: Path) -> None:
        self.socket_dir = workdir / "k"
        self.cgroups = workdir / "cgroup"
        self.cgroups.mkdir()
        self.sim = KubeletSimulator([self.socket_dir], [0, 1, 2, 3], reconcile_period_s=0.3)
        self.pods = PodsEndpoint(self.sim.kubelet)
        self.qrmd = QrmdProcess(
            workdir / "state",
            [self.socket_dir],
            [
                "--pod-source", "kubelet",
                "--kubelet-read-only-port", str(self.pods.port),
                "--residual-check-period", PERIOD,
                "--residual-max-age", MAX_AGE,
                "--cpuset-check-period", PERIOD,
                "--cpuset-cgroup-root", str(self.cgroups),
                "--cgroup-driver", "cgroupfs",
            ],
        )  # fmt: skip

    def start(self) -> None:
        self.pods.start()
        self.qrmd.start()
        self.sim.start()
        self.sim.kubelet.endpoints.wait_registered("cpu", timeout_s=20)

    def admit(self, pod: Pod) -> None:
        _write_cgroups(self.cgroups, pod)
        self.sim.kubelet.admit(pod)

    def held(self) -> dict[str, dict[str, str]]:
        """Pod → container → cpuset qrmd holds, from its GetResourcesAllocation answer."""
        endpoint = self.sim.kubelet.endpoints.running("cpu")
        assert endpoint is not None
        return {
            pod: {name: res["cpu"].allocation_result for name, res in containers.items()}
            for pod, containers in endpoint.connection.get_resources_allocation().items()
        }

    def healthz(self) -> tuple[int, str]:
        return self.qrmd.http("/healthz")

    def close(self) -> None:
        self.sim.stop()
        self.qrmd.close()
        self.pods.stop()


@pytest.fixture
def node(workdir: Path) -> Iterator[Node]:
    n = Node(workdir)
    try:
        n.start()
        yield n
    finally:
        n.close()


def test_a_pod_the_kubelet_forgets_is_removed_after_the_configured_age(node: Node) -> None:
    node.admit(shared_pod("pod-keep", "keep", 2))
    node.admit(shared_pod("pod-lost", "lost", 2))
    wait_for(lambda: set(node.held()) == {"pod-keep", "pod-lost"}, 10, "both pods allocated")
    wait_for(lambda: node.healthz()[0] == 200, 10, "every checker ready")

    forgotten_at = time.monotonic()
    assert node.sim.kubelet.forget_pod("pod-lost")  # no RemovePod ever reaches qrmd
    wait_for(lambda: "pod-lost" not in node.held(), 15, "the residual pod to be removed")
    took = time.monotonic() - forgotten_at
    # Five consecutive misses 0.2 s apart: not before the fifth (the first may come up to a
    # period after the forgetting, so at least four periods have passed).
    assert took >= 0.75, f"removed after {took:.2f} s, before five misses"
    assert set(node.held()) == {"pod-keep"}

    # The checker hears the Allocator's answer at its next round.
    wait_for(
        lambda: "qrmd_residual_pods_removed_total 1.0" in node.qrmd.http("/metrics")[1],
        5,
        "the removal to be counted",
    )
    assert 'qrmd_pod_source_fetches_total{outcome="ok"}' in node.qrmd.http("/metrics")[1]
    wait_for(lambda: node.healthz()[0] == 200, 10, "healthy again once the pod is gone")
    assert "residual pods removed: pod-lost" in node.qrmd.log()

    # The removal is one journaled decision with its own cause.
    node.qrmd.signal(2)
    assert node.qrmd.wait(15) == 0
    shown = subprocess.run(
        [sys.executable, "-m", "qrmd.cli", "journal", "show", str(node.qrmd.state_dir),
         "--pod", "pod-lost", "--json"],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    causes = [json.loads(line)["cause"] for line in shown.stdout.splitlines() if line]
    residual = [c for c in causes if c.get("rpc") == "RemoveResidualPods"]
    assert len(residual) == 1 and residual[0]["pod_uids"] == ["pod-lost"]
    assert not [c for c in causes if c.get("rpc") == "RemovePod"]


def test_healthz_turns_unhealthy_while_pods_fails_past_the_tolerance_then_recovers(
    node: Node,
) -> None:
    node.admit(shared_pod("pod-a", "a", 2))
    wait_for(
        lambda: "qrmd_pod_source_pods 1.0" in node.qrmd.http("/metrics")[1],
        10,
        "the pod list to show the pod",
    )
    wait_for(lambda: node.healthz()[0] == 200, 10, "every checker ready")
    node.pods.fail_with(503)
    failed_at = time.monotonic()
    residual = "handler qrm_cpu_plugin_dynamic_clear_residual_state not ready"
    wait_for(lambda: residual in node.healthz()[1], 10, "the residual checker to fail")
    # §12.3: NotReady fails the check only once it has lasted longer than the tolerance.
    assert time.monotonic() - failed_at >= TOLERANCE_S - 0.05
    status, body = node.healthz()
    assert status == 503
    assert "HTTP 503" in body  # the fetch's error, in the handler's message
    assert "handler qrmd_pod_source_fetch not ready" in body
    node.pods.fail_with(None)
    wait_for(lambda: node.healthz()[0] == 200, 10, "/healthz to be healthy again")
    assert set(node.held()) == {"pod-a"}  # a failing pod list removed nothing


def test_a_running_pods_new_shared_container_goes_straight_to_its_pool(node: Node) -> None:
    """§7.3 step 3a: the Allocator reads the phase from the same pod source; a pod kubelet
    lists Running does not ramp up, a pod it does not list does."""
    node.admit(shared_pod("pod-a", "a", 2))  # ramps, then makes the share pool
    wait_for(lambda: node.held().get("pod-a", {}).get("app") not in (None, RAMP), 15, "share")
    running = Pod("pod-run", "run", "default", (Container("sidecar"),))  # nothing for qrmd
    node.sim.kubelet.admit(running)
    wait_for(
        lambda: "qrmd_pod_source_pods 2.0" in node.qrmd.http("/metrics")[1],
        10,
        "the pod list to show the running pod",
    )
    client = PluginClient(node.qrmd.socket_paths[0])
    try:
        client.allocate("pod-run", cores=1, container="late")
        client.allocate("pod-unlisted", cores=1)
        now = client.allocations()
    finally:
        client.close()
    share = now["pod-a"]["app"]
    assert now["pod-run"]["late"] == share  # in the pool at once: no ramp-up
    assert now["pod-unlisted"]["app"] == RAMP  # unknown to kubelet: every pooled CPU


RAMP = "1,3-15"  # every pooled CPU of (16,2,4) with reserve 0,2 (cpu-policy §7.3 example)
