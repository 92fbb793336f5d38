"""The memory balancer inside the daemon, in-process: simulated metrics and memory, a fake
clock that ticks rounds by hand, the round journaled and readable by ``qrmd journal show``,
the §12 metrics on the endpoint, ``/healthz`` while the balancer is down, the eviction plugin
over its socket. The real ``qrmd run`` process is in ``tests/integration``."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.allocator_messages import Allocate, GetResourcesAllocation
from actors.balancer_messages import BalancerView, GetBalancerState
from actors.ports.clock import Clock
from actors.supervisor import SupervisedRef
from journal import read_records
from policy.balance import BalanceStatus
from policy.state.codec import decode_event
from policy.topology.model import CPUTopology
from qrmd.balancer.settings import BalancerSettings
from qrmd.balancer.subsystem import BALANCER_CHILD, BalancerWiring
from qrmd.cli import main
from qrmd.config import DaemonConfig
from qrmd.daemon import Builder, Daemon
from qrmd.pods.subsystem import CheckersWiring
from qrmd.sim.host.memory import SimulatedContainerMemory
from qrmd.sim.host.metrics import SimulatedNumaMetrics
from qrmd.sim.kubelet import Container as SimContainer
from qrmd.sim.kubelet import Kubelet
from qrmd.sim.kubelet import Pod as SimPod
from qrmd.sim.kubelet.pods_endpoint import PodsEndpoint
from qrmd.sim.kubelet.pods_endpoint import container_id as listed_id
from tests.qrmd.test_daemon import Harness, http, shared, wait_until
from tests.wire.eviction_agent import EvictionAgent, go_pod

GIB = 1 << 30
START = 1_764_460_800.0  # 2025-11-30T00:00:00Z


class FakeClock:
    """Wall and monotonic time that move only when told to."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class BalancerHarness(Harness):
    """The daemon harness with the balancer on simulated sources and a fake clock."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.clock = FakeClock(START)
        self.metrics = SimulatedNumaMetrics.quiet(range(4))
        self.memory = SimulatedContainerMemory()
        self.refuse_restart = False

    def balancer_config(self, **flags: Any) -> DaemonConfig:
        return self.config(
            **{
                "enable-memory-balancer": True,
                # Rounds come from ``tick()`` here: the ticker's own period never passes.
                "qos-aware-sync-period": "1h",
                "plugin-registration-dir": str(self.root / "ev"),
                "transition-period": "1s",
                **flags,
            }
        )

    def wiring(
        self, config: BalancerSettings, topology: CPUTopology, clock: Clock
    ) -> BalancerWiring:
        harness = self

        class Refusing(BalancerWiring):
            def _start_actor(self, store: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
                if harness.refuse_restart:
                    raise OSError("simulated start failure")
                return super()._start_actor(store)

        return Refusing(
            config,
            topology,
            clock,
            cpu_vendor="GenuineIntel",
            metric_source=self.metrics,
            memory=self.memory,
        )

    def balancer_daemon(self, **flags: Any) -> Daemon:
        builders: dict[str, Builder] = {
            **self.builders(),
            "balancer": lambda settings, shared: self.wiring(
                settings, shared.machine.topology, shared.clock
            ).attach(shared),
        }
        return Daemon(self.balancer_config(**flags), builders=builders, clock=self.clock)


@pytest.fixture
def bh() -> Iterator[BalancerHarness]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qb") as root:
        yield BalancerHarness(Path(root))
    pykka.ActorRegistry.stop_all()


def state(daemon: Daemon) -> BalancerView:
    assert daemon.supervisor is not None
    view = daemon.supervisor.ref(BALANCER_CHILD).ask(GetBalancerState(), timeout=10)
    assert isinstance(view, BalancerView)
    return view


def admit_pods(bh: BalancerHarness) -> SupervisedRef:
    """Two shared pods with 2 GiB of anonymous memory each on NUMA 0."""
    allocator = bh.servers[0].allocator
    for pod in ("pod-a", "pod-b"):
        allocator.ask(Allocate(shared(pod)))
        bh.memory.set_container(pod, f"containerd://{pod}", {0: 2 * GIB, 1: 0, 2: 0, 3: 0})
    # Past the transition period, kubelet's listing ends their ramp-up: they join the share
    # pool, where a round finds them (§4.5).
    bh.clock.advance(2)
    allocator.ask(GetResourcesAllocation())
    return allocator


def test_a_node_under_pressure_gives_a_journaled_round_and_a_dry_run_advice(
    bh: BalancerHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon = bh.balancer_daemon()
    daemon.start()
    try:
        assert (
            daemon.find(BalancerWiring) is not None
            and daemon.find(BalancerWiring).server is not None
        )
        admit_pods(bh)
        # A quiet machine: the round is computed and stored, nothing to balance.
        bh.clock.advance(5)
        assert daemon.find(BalancerWiring).tick()
        quiet = state(daemon)
        assert quiet.metrics["rounds_stored_total"] == 1
        assert quiet.state.current is not None and not quiet.state.current.need_balance
        # NUMA 0 under pressure: a force balance, its advice taken (dry run) on the same tick.
        bh.metrics.put_under_pressure(0)
        bh.clock.advance(5)
        assert daemon.find(BalancerWiring).tick()
        view = state(daemon)
        current = view.state.current
        assert current is not None
        assert current.detect_time == START + 12
        assert current.need_balance and current.status is BalanceStatus.PREPARE_SUCCESS
        assert current.source_numa is not None and current.source_numa.numa_id == 0
        assert current.balance_executed
        assert view.state.last == current
        assert {p.uid for p in current.balance_pods} == {"pod-a", "pod-b"}
        assert view.metrics["advices_emitted_total"] == 1
        # The cool-down (30 s after the emitted round): the next tick computes nothing.
        bh.clock.advance(5)
        daemon.find(BalancerWiring).tick()
        assert state(daemon).metrics["rounds_skipped_total"] == 1
        # §12 on the endpoint.
        text = http(daemon, "/metrics")[1].splitlines()
        assert "qrmd_balancer_rounds_stored_total 2.0" in text
        assert "qrmd_balancer_rounds_skipped_total 1.0" in text
        assert "memory_handle_numa_balance 1.0" in text
        assert (
            'plugin_start_failed{pluginName="numa_memory_balancer",pluginType="EvictionPlugin"} 0.0'
            in text
        )
        rounds = [line for line in text if line.startswith("numa_memory_balance{")]
        assert len(rounds) == 2
        assert any(
            'need_balance="true"' in line
            and 'balance_level="forceBalance"' in line
            and 'status="prepareSuccess"' in line
            and 'bandwidth_level="high"' in line
            and line.endswith(" 1.0")
            for line in rounds
        )
    finally:
        daemon.stop()
    # The rounds are in the journal, with their inputs.
    capsys.readouterr()
    directory = str(bh.root / "state")
    assert main(["journal", "show", directory, "--kind", "BalanceRoundRecorded", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == 2
    assert main(["journal", "show", directory, "--kind", "BalanceAdviceTaken"]) == 0
    assert "BalanceAdviceTaken" in capsys.readouterr().out


def test_the_eviction_plugin_offers_the_reclaimed_pod_once(bh: BalancerHarness) -> None:
    daemon = bh.balancer_daemon()
    daemon.start()
    try:
        assert (
            daemon.find(BalancerWiring) is not None
            and daemon.find(BalancerWiring).server is not None
        )
        allocator = admit_pods(bh)
        reclaimed = replace(
            shared("pod-r"),
            annotations={"katalyst.kubewharf.io/qos_level": "reclaimed_cores"},
            labels={"katalyst.kubewharf.io/qos_level": "reclaimed_cores"},
        )
        allocator.ask(Allocate(reclaimed))
        bh.memory.set_container("pod-r", "containerd://r", {0: 3 * GIB, 1: 0, 2: 0, 3: 0})
        bh.metrics.put_under_pressure(0)
        bh.clock.advance(5)
        daemon.find(BalancerWiring).tick()
        current = state(daemon).state.current
        assert current is not None and [p.uid for p in current.evict_pods] == ["pod-r"]
        agent = EvictionAgent(daemon.find(BalancerWiring).server.socket_path)
        try:
            agent.register()
            active = [go_pod("a", "pod-a"), go_pod("r", "pod-r")]
            first = agent.run_pass(active)
            assert [p.pod.metadata.uid for p in first.evict.evict_pods] == ["pod-r"]
            assert first.evict.evict_pods[0].reason == (
                "the memory node 0 is under bandwidth pressure"
            )
            # §9.1: once per record.
            assert list(agent.run_pass(active).evict.evict_pods) == []
        finally:
            agent.close()
        assert state(daemon).metrics["eviction_offers_total"] == 1
    finally:
        daemon.stop()


def test_the_eviction_plugin_offers_nothing_without_a_reclaimed_pod(bh: BalancerHarness) -> None:
    daemon = bh.balancer_daemon()
    daemon.start()
    try:
        assert (
            daemon.find(BalancerWiring) is not None
            and daemon.find(BalancerWiring).server is not None
        )
        socket_path = daemon.find(BalancerWiring).server.socket_path
        assert socket_path == bh.root / "ev" / "numa_memory_balancer.sock"
        assert socket_path.stat().st_mode & 0o077 == 0
        agent = EvictionAgent(socket_path)
        try:
            info = agent.register()
            assert (info.type, info.name) == ("EvictionPlugin", "numa_memory_balancer")
            assert agent.token == ""
            answer = agent.run_pass([go_pod("a", "pod-a")])
            assert list(answer.evict.evict_pods) == []
        finally:
            agent.close()
        assert state(daemon).metrics["eviction_polls_total"] == 1
    finally:
        daemon.stop()
    assert not socket_path.exists()


def test_the_balancer_restarts_with_the_store_and_keeps_its_rounds(bh: BalancerHarness) -> None:
    daemon = bh.balancer_daemon()
    daemon.start()
    try:
        assert daemon.find(BalancerWiring) is not None and daemon.supervisor is not None
        admit_pods(bh)
        bh.metrics.put_under_pressure(0)
        bh.clock.advance(5)
        daemon.find(BalancerWiring).tick()
        before = state(daemon).state
        assert before.last is not None
        daemon.supervisor.current("store").stop()
        wait_until(daemon.supervisor.available)
        # Rebuilt from the recovered snapshot: the cool-down holds across the restart.
        assert state(daemon).state == before
        bh.clock.advance(5)
        daemon.find(BalancerWiring).tick()
        assert state(daemon).metrics["rounds_skipped_total"] == 1
    finally:
        daemon.stop()


def test_health_is_unhealthy_while_the_balancer_is_down(bh: BalancerHarness) -> None:
    daemon = bh.balancer_daemon()
    daemon.start()
    try:
        assert daemon.supervisor is not None and daemon.find(BalancerWiring) is not None
        assert http(daemon, "/healthz") == (200, "ok\n")
        bh.refuse_restart = True
        daemon.supervisor.current(BALANCER_CHILD).stop()
        wait_until(lambda: "simulated start failure" in http(daemon, "/healthz")[1])
        status, body = http(daemon, "/healthz")
        assert status == 503 and "actor memory_balancer is down" in body
        assert 'qrmd_actor_up{actor="memory_balancer"} 0.0' in http(daemon, "/metrics")[1]
        # A tick while it is down is missed, not an error.
        assert not daemon.find(BalancerWiring).tick()
        bh.refuse_restart = False
        wait_until(lambda: http(daemon, "/healthz") == (200, "ok\n"), timeout_s=30)
    finally:
        daemon.stop()


def test_without_the_flag_there_is_no_balancer(bh: BalancerHarness) -> None:
    daemon = bh.daemon()
    daemon.start()
    try:
        assert daemon.find(BalancerWiring) is None and daemon.supervisor is not None
        assert [c.name for c in daemon.supervisor.status().children] == ["store", "allocator"]
        assert "numa_memory_balance" not in http(daemon, "/metrics")[1]
        assert not (bh.root / "ev").exists()
    finally:
        daemon.stop()


def test_a_plugin_that_cannot_be_served_is_counted_and_the_rounds_go_on(
    bh: BalancerHarness,
) -> None:
    blocker = bh.root / "not-a-dir"
    blocker.write_text("a file where the registration directory should be\n")
    daemon = bh.balancer_daemon(**{"plugin-registration-dir": str(blocker)})
    daemon.start()
    try:
        assert daemon.find(BalancerWiring) is not None
        assert (
            daemon.find(BalancerWiring).server is None
            and daemon.find(BalancerWiring).plugin_start_failures == 1
        )
        assert (
            'plugin_start_failed{pluginName="numa_memory_balancer",pluginType="EvictionPlugin"} 1.0'
            in http(daemon, "/metrics")[1].splitlines()
        )
        bh.clock.advance(5)
        assert daemon.find(BalancerWiring).tick()
        assert state(daemon).metrics["ticks_total"] == 1
    finally:
        daemon.stop()
    assert (
        daemon.find(BalancerWiring)._retry is not None
        and not daemon.find(BalancerWiring)._retry.is_alive()
    )


def test_with_the_kubelet_pod_source_each_container_is_read_by_its_listed_id(
    bh: BalancerHarness, tmp_path: Path
) -> None:
    """``--pod-source kubelet``: the balancer takes the containers' IDs from the publisher's
    latest listing each round (memory-balancer §4.2); the round's journaled inputs name them."""
    kubelet = Kubelet([0, 1, 2, 3])
    for pod in ("pod-a", "pod-b"):
        kubelet.admit(SimPod(pod, pod, "default", (SimContainer("app"),)))
    with PodsEndpoint(kubelet) as endpoint:
        daemon = bh.balancer_daemon(**{
            "pod-source": "kubelet",
            "kubelet-read-only-port": str(endpoint.port),
            "cpuset-cgroup-root": str(tmp_path),
        })  # fmt: skip
        daemon.start()
        try:
            assert (
                daemon.find(BalancerWiring) is not None and daemon.find(CheckersWiring) is not None
            )
            assert daemon.find(BalancerWiring).pod_source is daemon.find(CheckersWiring).publisher
            publisher = daemon.find(CheckersWiring).publisher
            wait_until(lambda: publisher.latest() is not None)
            admit_pods(bh)
            for pod in ("pod-a", "pod-b"):  # by the IDs the kubelet lists, and nothing else
                bh.memory.remove_pod(pod)
                bh.memory.set_container(pod, listed_id(pod, "app"), {0: 2 * GIB, 1: 0, 2: 0, 3: 0})
            bh.metrics.put_under_pressure(0)
            bh.clock.advance(5)
            assert daemon.find(BalancerWiring).tick()
            current = state(daemon).state.current
            assert current is not None and current.balance_executed
            assert {p.uid for p in current.balance_pods} == {"pod-a", "pod-b"}
        finally:
            daemon.stop()
    records = list(read_records(str(bh.root / "state")))
    rounds = [e for r in records for e in r.events if e.get("kind") == "BalanceRoundRecorded"]
    assert rounds, "the round is journaled"
    # Journaled as columns (policy.balance.columns); decoded, they read as the pod maps.
    pods = {p["uid"]: p for p in decode_event(rounds[-1]).inputs["pods"]}
    assert pods["pod-a"]["containers"] == [
        {"name": "app", "anon": {"0": 2 * GIB, "1": 0, "2": 0, "3": 0},
         "containerId": listed_id("pod-a", "app")}
    ]  # fmt: skip
