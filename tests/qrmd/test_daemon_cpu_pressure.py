"""CPU pressure eviction inside the daemon: both plugins registered over their unix sockets and
called with a gRPC client as katalyst-agent's plugin manager and eviction manager do (wire.md
§8.3, §11), simulated loads and a fake clock; every decision journaled and readable by
``qrmd journal show``; the metrics on the endpoint."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.allocator_messages import Allocate, GetResourcesAllocation
from actors.cpu_pressure_messages import GetPressureState, PressureView
from actors.ports.clock import Clock
from actors.store_messages import GetSnapshot
from policy.cpu.context import PolicyContext
from qrmd.cli import main
from qrmd.cpu_pressure.settings import CPUPressureSettings
from qrmd.cpu_pressure.subsystem import CPU_PRESSURE_CHILD, CPUPressureWiring
from qrmd.daemon import Builder, Daemon
from qrmd.sim.host.cpu_load import SimulatedContainerLoads
from tests.qrmd.test_daemon import Harness, http, shared
from tests.qrmd.test_daemon_balancer import START, FakeClock
from tests.wire.eviction_agent import EvictionAgent
from wire.gen import evictionplugin_pb2 as ep
from wire.gen import k8s_core_v1_pb2 as core
from wire.gen import k8s_meta_v1_pb2 as meta
from wire.gen import k8s_resource_pb2 as resource

RECLAIMED = {"katalyst.kubewharf.io/qos_level": "reclaimed_cores"}


def pod(uid: str, cpu: str, annotations: dict[str, str] | None = None, **extra: Any) -> core.Pod:
    """A pod as the eviction manager sends it, with its CPU request."""
    requests = {"cpu": resource.Quantity(string=cpu)}
    return core.Pod(
        metadata=meta.ObjectMeta(
            name=uid, namespace="default", uid=uid, annotations=annotations or {}
        ),
        spec=core.PodSpec(
            containers=[
                core.Container(name="app", resources=core.ResourceRequirements(requests=requests))
            ],
            **extra,
        ),
    )


class PressureHarness(Harness):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.clock = FakeClock(START)
        self.loads = SimulatedContainerLoads()

    def wiring(
        self, config: CPUPressureSettings, clock: Clock, ctx: PolicyContext
    ) -> CPUPressureWiring:
        return CPUPressureWiring(
            config, clock, reserved=ctx.reserved, qos=ctx.qos, loads=self.loads
        )

    def pressure_daemon(self) -> Daemon:
        config = self.config(
            **{
                "enable-cpu-pressure-eviction": True,
                "eviction-load-enable": True,
                "eviction-load-metric-ring-size": "2",
                "eviction-suppression-enable": True,
                "eviction-suppression-min-tolerance-duration": "30s",
                "eviction-cpu-grace-period": "15",
                # Collections come from ``tick()`` here: the ticker's own period never passes.
                "eviction-load-sync-period": "1h",
                "plugin-registration-dir": str(self.root / "ev"),
                "transition-period": "1s",
            }
        )
        return Daemon(config, builders=self.pressure_builders(), clock=self.clock)

    def pressure_builders(self) -> dict[str, Builder]:
        """The fake plugin servers, and CPU pressure eviction on this harness's loads."""
        return {
            **self.builders(),
            "cpu_pressure": lambda settings, shared: self.wiring(
                settings, shared.clock, shared.machine
            ),
        }


@pytest.fixture
def ph() -> Iterator[PressureHarness]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qp") as root:
        yield PressureHarness(Path(root))
    pykka.ActorRegistry.stop_all()


def view(daemon: Daemon) -> PressureView:
    assert daemon.supervisor is not None
    reply = daemon.supervisor.ref(CPU_PRESSURE_CHILD).ask(GetPressureState(), timeout=10)
    assert isinstance(reply, PressureView)
    return reply


def pools(daemon: Daemon) -> dict[str, int]:
    assert daemon.supervisor is not None
    snapshot = daemon.supervisor.ref("store").ask(GetSnapshot(), timeout=10)
    return {name: cpus.size() for name, cpus in snapshot.state.cpu.pools.items()}


def test_both_plugins_register_and_answer_as_the_eviction_manager_asks(
    ph: PressureHarness, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = ph.pressure_daemon()
    daemon.start()
    try:
        assert daemon.find(CPUPressureWiring) is not None
        sockets = {
            name: s.socket_path for name, s in daemon.find(CPUPressureWiring).servers.items()
        }
        assert {p.name for p in sockets.values()} == {
            "cpu-pressure-load-plugin.sock",
            "cpu-pressure-suppression-plugin.sock",
        }
        allocator = ph.servers[0].allocator
        for uid in ("web", "api"):
            allocator.ask(Allocate(shared(uid)))
        allocator.ask(Allocate(replace(shared("etl"), annotations=RECLAIMED, labels=RECLAIMED)))
        ph.clock.advance(2)
        allocator.ask(GetResourcesAllocation())  # ramp-up over: web and api join the share pool
        share, reclaim = pools(daemon)["share"], pools(daemon)["reclaim"]
        ph.loads.set_load("web", "app", share * 1.5)
        ph.loads.set_load("api", "app", share * 0.5)  # together 2 × the pool: over 1.8 ×
        for _ in range(2):
            daemon.find(CPUPressureWiring).tick()
            ph.clock.advance(30)
        etl = pod(
            "etl",
            str(reclaim * 2),
            {
                **RECLAIMED,
                "katalyst.kubewharf.io/cpu_enhancement": '{"suppression_tolerance_rate": "1.5"}',
            },
        )
        active = [pod("web", "2"), pod("api", "2", priority=100), etl]

        load = EvictionAgent(sockets["cpu-pressure-load-plugin"])
        suppression = EvictionAgent(sockets["cpu-pressure-suppression-plugin"])
        try:
            for agent, name in (
                (load, "cpu-pressure-load-plugin"),
                (suppression, "cpu-pressure-suppression-plugin"),
            ):
                info = agent.register()
                assert (info.type, info.name) == ("EvictionPlugin", name)
                assert agent.token == ""
            first = load.run_pass(active)
            assert list(first.evict.evict_pods) == []  # the load plugin evicts through topN only
            assert first.threshold.met_type == ep.HARD_MET
            assert first.threshold.eviction_scope == "cpu.load.1min.container"
            assert first.threshold.threshold_operator == ep.GREATER_THAN
            assert (first.threshold.threshold_value, first.threshold.observed_value) == (1.0, 0.8)
            assert first.threshold.condition == ep.Condition(
                condition_type=ep.NODE_CONDITION,
                effects=["NoSchedule"],
                condition_name="CPUPressure",
                met_condition=True,
            )
            assert first.top is not None
            assert [p.metadata.uid for p in first.top.target_pods] == ["web"]  # the heaviest
            assert first.top.deletion_options.grace_period_seconds == 15
            # Still HARD, but in the cool-down: no pods.
            again = load.run_pass(active)
            assert again.top is not None and list(again.top.target_pods) == []

            # The suppression plugin: 2 × reclaim on reclaim, over the pod's 1.5, for > 30 s.
            assert list(suppression.run_pass(active).evict.evict_pods) == []
            ph.clock.advance(31)
            offered = suppression.run_pass(active)
            assert offered.threshold.met_type == ep.NOT_MET and offered.top is None
            (evict,) = offered.evict.evict_pods
            assert evict.pod.metadata.uid == "etl"
            assert evict.reason == (
                "current pool suppression rate 2.00 is over than the pod suppression "
                "tolerance rate 1.50"
            )
        finally:
            load.close()
            suppression.close()
        counters = view(daemon).counters
        assert counters["load_offers_total"] == 1 and counters["suppression_offers_total"] == 1
        code, text = http(daemon, "/metrics")
        assert code == 200
        assert (
            'load_pressure_threshold_met_count{metric_name="cpu.load.1min.container",'
            'pool_name="share",threshold_type="hard"} 2.0'
        ) in text
        assert "qrmd_cpu_pressure_suppression_offers_total 1.0" in text
        assert 'rpc="cpu-pressure-suppression-plugin:GetEvictPods"' in text
        sample = f'pool_name="share"}} {share * 2.0}'
        assert f'pool_metric_value_raw{{metric_name="cpu.load.1min.container",{sample}' in text
        assert (
            'pool_metric_bound_raw{bound_type="lower",metric_name="cpu.load.1min.container",'
            f'pool_name="share"}} {float(share)}'
        ) in text
    finally:
        daemon.stop()
    assert not sockets["cpu-pressure-load-plugin"].exists()

    # "Why was etl evicted?": the journal has the decision, its reason and its inputs.
    capsys.readouterr()
    assert main(["journal", "show", str(ph.root / "state"), "--kind", "SuppressionTimersSet"]) == 0
    out = capsys.readouterr().out
    assert (
        "current pool suppression rate 2.00 is over than the pod suppression tolerance rate 1.50"
        in out
    )
    assert main(["journal", "show", str(ph.root / "state"), "--kind", "LoadEvictionOffered"]) == 0
    assert "web" in capsys.readouterr().out
    assert main(["journal", "show", str(ph.root / "state"), "--pod", "etl", "--json"]) == 0
    (record,) = [
        line
        for line in capsys.readouterr().out.splitlines()
        if "SuppressionTimersSet" in line and "over than" in line
    ]
    assert '"pod_uid": "etl"' in record

    # Every decision re-runs from its record alone to the events it committed.
    assert main(["eviction", "rerun", str(ph.root / "state")]) == 0
    out = capsys.readouterr().out
    assert "GetEvictPods: same events" in out and "CollectLoad: same events" in out
    assert out.splitlines()[-1].endswith("CPU pressure records re-run, 0 differ")
    seqs = [int(line.split()[1]) for line in out.splitlines()[:-1]]
    assert main(["eviction", "rerun", str(ph.root / "state"), "--from-seq", str(seqs[-1])]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 CPU pressure records re-run, 0 differ"

    # A policy that decides otherwise now is named, and the command fails.
    import qrmd.offline.pressure_rerun as pressure_rerun  # noqa: PLC0415 (patched here only)

    original = pressure_rerun.rerun_cause

    def changed(history: Any, cause: Any, qos: Any = None) -> Any:
        decision = original(history, cause, qos)
        return replace(decision, events=()) if cause["command"] == "GetEvictPods" else decision

    monkeypatch.setattr(pressure_rerun, "rerun_cause", changed)
    assert main(["eviction", "rerun", str(ph.root / "state")]) == 1
    out = capsys.readouterr().out
    assert "GetEvictPods: DIFFERENT events" in out


def test_a_plugin_that_cannot_be_served_is_counted_and_the_daemon_runs(ph: PressureHarness) -> None:
    blocked = ph.root / "ev"
    blocked.write_text("a file where the directory should be")
    daemon = ph.pressure_daemon()
    daemon.start()
    try:
        assert daemon.find(CPUPressureWiring) is not None
        assert daemon.find(CPUPressureWiring).servers == {}
        assert daemon.find(CPUPressureWiring).plugin_start_failures == {
            "cpu-pressure-load-plugin": 1,
            "cpu-pressure-suppression-plugin": 1,
        }
        code, text = http(daemon, "/metrics")
        assert code == 200
        assert (
            'qrmd_cpu_pressure_plugin_start_failed{pluginName="cpu-pressure-load-plugin",'
            'pluginType="EvictionPlugin"} 1.0'
        ) in text
        assert view(daemon).counters == {}  # the actor runs; nothing asked yet
    finally:
        daemon.stop()
