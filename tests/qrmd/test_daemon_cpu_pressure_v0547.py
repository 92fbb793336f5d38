"""The suppression plugin inside the daemon at ``--reference-version v0.5.47``: ``GetEvictPods``
over its unix socket with a gRPC client as katalyst-agent's eviction manager calls it, the
reclaim pool judged by parts against the CPU each can supply (``policy.cpu.pressure.
suppression_numa``), read through the reclaim metrics port; each offer with the deletion grace
period; every decision journaled and re-run from its record.

Provenance: katalyst-core v0.5.47 ``cpueviction/strategy/pressure_suppression_test.go``
``TestCPUPressureSuppression_GetEvictPods`` (:79-352): every CPU of the reclaim pool at usage
ratio 0.5, the reclaim cgroup's usage and its quota / period 20000 / 1000 (5000 / 1000 in the
quota-limited case), ``GetEvictPods`` twice past the minimum duration. The reference's pool
has 10 CPUs (supply 5 + 5 = 10); this node's pool has ``R``, so the cgroup's usage is set to
``10 - R / 2`` (``55 - R / 2``) to give the same supply and so the same rates. The per-NUMA
case follows ``pressure_suppression.go:145-260`` (the reference's tests have none).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import grpc
import pykka
import pytest

from actors.allocator_messages import Allocate, GetResourcesAllocation
from actors.ports.clock import Clock
from actors.ports.reclaim_metrics import CgroupCPU, MissingMetric, ReclaimReading
from policy.cpu.context import PolicyContext
from qrmd.cli import main
from qrmd.config import ConfigError
from qrmd.cpu_pressure.settings import CPUPressureSettings
from qrmd.cpu_pressure.subsystem import CPUPressureWiring
from qrmd.daemon import Daemon
from tests.qrmd.test_daemon import shared
from tests.qrmd.test_daemon_cpu_pressure import RECLAIMED, PressureHarness, pod, pools
from tests.wire.eviction_agent import EvictionAgent
from wire.gen import k8s_core_v1_pb2 as core

ROOT = "/kubepods/besteffort"
TOLERANCE_1_2 = {"katalyst.kubewharf.io/cpu_enhancement": '{"suppression_tolerance_rate": "1.2"}'}


@dataclass
class SettableReclaimMetrics:
    """A ``ReclaimMetricsSource`` the test sets: every CPU at ``core_usage``, the cgroups as
    given (absent ones do not exist)."""

    core_usage: float = 0.5
    cgroups: dict[str, CgroupCPU | MissingMetric] = field(default_factory=dict)
    reads: list[tuple[str, ...]] = field(default_factory=list)

    def cgroup_exists(self, relative_path: str) -> bool:
        return relative_path in self.cgroups

    def read(self, cgroups: Sequence[str]) -> ReclaimReading:
        self.reads.append(tuple(cgroups))
        missing = MissingMetric("no such cgroup")
        return ReclaimReading(
            {cpu: self.core_usage for cpu in range(64)},
            {path: self.cgroups.get(path, missing) for path in cgroups},
        )


class V0547Harness(PressureHarness):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reclaim = SettableReclaimMetrics()

    def wiring(
        self, config: CPUPressureSettings, clock: Clock, ctx: PolicyContext
    ) -> CPUPressureWiring:
        return CPUPressureWiring(
            config, clock, reserved=ctx.reserved, qos=ctx.qos, loads=self.loads, machine=ctx,
            reclaim=self.reclaim,
        )  # fmt: skip

    def v0547_daemon(self) -> Daemon:
        config = self.config(
            **{
                "reference-version": "v0.5.47",
                "enable-cpu-pressure-eviction": True,
                "eviction-suppression-enable": True,
                "eviction-suppression-min-tolerance-duration": "30s",
                "eviction-cpu-grace-period": "15",
                "eviction-load-sync-period": "1h",
                "plugin-registration-dir": str(self.root / "ev"),
                "transition-period": "1s",
            }
        )
        return Daemon(config, builders=self.pressure_builders(), clock=self.clock)


@pytest.fixture
def vh() -> Iterator[V0547Harness]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qp") as root:
        yield V0547Harness(Path(root))
    pykka.ActorRegistry.stop_all()


def reclaimed(name: str, cpus: str, numa: int | None = None) -> core.Pod:
    annotations = {**RECLAIMED, **TOLERANCE_1_2}
    if numa is not None:
        annotations["katalyst.kubewharf.io/numa_bind_result"] = str(numa)
    return pod(name, cpus, annotations)


def reason(rate: str) -> str:
    return (f"current pool suppression rate {rate} is over than the "
            "pod suppression tolerance rate 1.20")  # fmt: skip


def run(
    vh: V0547Harness,
    cgroups: Mapping[str, tuple[float, float]],
    active: list[core.Pod],
) -> tuple[list[tuple[str, str, int]], int]:
    """Start the v0.5.47 daemon with a reclaimed container placed, set each cgroup's (usage,
    quota; the root's usage beyond half the pool), call ``GetEvictPods`` twice 31 s apart;
    the second call's offers as (uid, reason, grace period) and the reclaim pool's size."""
    daemon = vh.v0547_daemon()
    daemon.start()
    try:
        allocator = vh.servers[0].allocator
        allocator.ask(Allocate(shared("web")))
        allocator.ask(Allocate(replace(shared("etl"), annotations=RECLAIMED, labels=RECLAIMED)))
        vh.clock.advance(2)
        allocator.ask(GetResourcesAllocation())
        size = pools(daemon)["reclaim"]
        for path, (usage, quota) in cgroups.items():
            beyond = size / 2 if path == ROOT else 0.0
            vh.reclaim.cgroups[path] = CgroupCPU(usage - beyond, quota, 1000)
        socket = daemon.find(CPUPressureWiring).servers["cpu-pressure-suppression-plugin"]
        agent = EvictionAgent(socket.socket_path)
        try:
            agent.register()
            agent.run_pass(active)
            vh.clock.advance(31)
            second = agent.run_pass(active)
        finally:
            agent.close()
    finally:
        daemon.stop()
    offers = [
        (e.pod.metadata.uid, e.reason, e.deletion_options.grace_period_seconds)
        for e in second.evict.evict_pods
    ]
    return offers, size


@pytest.mark.parametrize(
    ("usage", "quota", "pods", "want"),
    [
        pytest.param(10, 20000, [reclaimed("pod-1", "2")], [],
                     id="no over tolerance rate pod: 2 CPUs on a supply of 10"),
        pytest.param(10, 20000, [reclaimed("pod-1", "15"), reclaimed("pod-2", "4")],
                     [("pod-1", reason("1.90"), 15)],
                     id="over tolerance rate: 19 CPUs on 10, the larger pod goes with the grace "
                        "period"),
        pytest.param(60, 5000, [reclaimed("pod-1", "15"), reclaimed("pod-2", "4")],
                     [("pod-1", reason("3.80"), 15)],
                     id="over tolerance rate because quota limited: a supply of 60 capped at 5"),
    ],
)  # fmt: skip
def test_get_evict_pods_judges_the_reclaim_pool_by_the_cpu_it_can_supply(
    vh: V0547Harness,
    usage: float,
    quota: float,
    pods: list[core.Pod],
    want: list[tuple[str, str, int]],
) -> None:
    offers, size = run(vh, {ROOT: (usage, quota)}, pods)
    assert offers == want
    # The root only: no <root>-<numa> cgroup exists, so no NUMA part is judged.
    assert vh.reclaim.reads and set(vh.reclaim.reads[-1]) == {ROOT}
    assert size <= 20  # the cgroup's usage stays >= 0 (usage - size / 2)


def test_a_pod_bound_to_a_numa_is_judged_by_that_numas_reclaim_cgroup(
    vh: V0547Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    # The root part supplies 10: the unbound pod (2 on 10) stays. NUMA 0's cgroup uses 1 CPU
    # and is capped at 1000 / 1000 = 1 CPU, so its part supplies 1 whatever share of the pool
    # is on NUMA 0: its bound pod's 2 CPUs are a rate of 2 over 1.2. NUMA 1 has no cgroup and
    # is not judged, however much its pod asks.
    cgroups = {ROOT: (10, 20000), f"{ROOT}-0": (1, 1000)}
    active = [reclaimed("free", "2"), reclaimed("bound", "2", numa=0), reclaimed("on1", "80", 1)]
    offers, _ = run(vh, cgroups, active)
    assert offers == [("bound", reason("2.00"), 15)]
    assert set(vh.reclaim.reads[-1]) == {ROOT, f"{ROOT}-0"}

    # The journal names the level and the parts; every decision re-runs to its events.
    capsys.readouterr()
    state = str(vh.root / "state")
    assert main(["journal", "show", state, "--pod", "bound", "--json"]) == 0
    record = next(line for line in capsys.readouterr().out.splitlines() if "over than" in line)
    assert '"version": "v0.5.47"' in record and '"parts"' in record
    assert main(["eviction", "rerun", state]) == 0
    out = capsys.readouterr().out
    assert "GetEvictPods: same events" in out
    assert out.splitlines()[-1].endswith("CPU pressure records re-run, 0 differ")


def test_the_reclaim_metrics_source_is_refused_at_v0_5_3(vh: V0547Harness) -> None:
    refused = "--reclaim-metrics-source only means something at --reference-version v0.5.47"
    with pytest.raises(ConfigError, match=re.escape(refused)):
        vh.config(**{"reclaim-metrics-source": "simulated"})
    config = vh.config(**{"reference-version": "v0.5.47", "reclaim-metrics-source": "simulated"})
    assert config.reclaim_metrics_source == "simulated"


def test_a_cgroup_that_cannot_be_read_fails_the_call_as_the_reference_does(
    vh: V0547Harness,
) -> None:
    daemon = vh.v0547_daemon()
    daemon.start()
    try:
        allocator = vh.servers[0].allocator
        allocator.ask(Allocate(replace(shared("etl"), annotations=RECLAIMED, labels=RECLAIMED)))
        vh.reclaim.cgroups[ROOT] = MissingMetric(f"{ROOT}: cannot read cpuacct.usage")
        socket = daemon.find(CPUPressureWiring).servers["cpu-pressure-suppression-plugin"]
        agent = EvictionAgent(socket.socket_path)
        try:
            agent.register()
            with pytest.raises(grpc.RpcError) as failed:
                agent.run_pass([reclaimed("etl", "2")])
        finally:
            agent.close()
    finally:
        daemon.stop()
    assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert failed.value.details() == (
        f"GetEvictPods: get reclaim metrics failed: {ROOT}: cannot read cpuacct.usage"
    )
