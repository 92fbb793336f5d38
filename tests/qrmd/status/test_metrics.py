"""Metrics: the reference's names (§14) with policy="dynamic", RPC histograms, store figures."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from actors.store_messages import Snapshot
from actors.store_report import RecoveryReport
from actors.store_status import FsyncSummary, JournalFigures, StoreHealth, StoreStatus
from actors.supervisor import ChildStatus, SupervisorStatus
from policy.state.cpu_state import CPUState
from policy.state.sections import empty_state
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import generate_dummy_cpu_topology
from qrmd.status.health import HealthRegistry
from qrmd.status.metrics import DaemonMetrics, MetricSources, pool_type

TOPOLOGY = generate_dummy_cpu_topology(16, 2, 4)


def samples(metrics: DaemonMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.exposition().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.mark.parametrize(
    ("pool", "kind"),
    [
        pytest.param("share", "share", id="the default shared pool"),
        pytest.param("batch", "share", id="a cpuset_pool is a shared pool"),
        pytest.param("reclaim", "reclaim", id="reclaim"),
        pytest.param("reserve", "reserve", id="reserve"),
        pytest.param("dedicated", "dedicated", id="dedicated"),
        pytest.param("fallback", "fallback", id="fallback"),
        pytest.param("isolation-pod1", "isolation", id="isolation prefix"),
    ],
)
def test_pool_type(pool: str, kind: str) -> None:
    assert pool_type(pool) == kind


def test_reference_metrics_before_anything_happened() -> None:
    got = samples(DaemonMetrics(MetricSources()))
    policy = (("policy", "dynamic"),)
    assert got[("heartbeat", policy)] == 1
    assert got[("alloc_failed", policy)] == 0
    assert got[("get_topology_hints_failed", policy)] == 0
    assert got[("remove_pod_failed", policy)] == 0


def test_observer_counts_failures_under_the_reference_names_and_times_every_rpc() -> None:
    metrics = DaemonMetrics(MetricSources())
    metrics.observe("Allocate", 0.002, "OK")
    metrics.observe("Allocate", 0.003, "RESOURCE_EXHAUSTED")
    metrics.observe("/resourceplugin.v1alpha1.ResourcePlugin/Allocate", 0.001, "UNAVAILABLE")
    metrics.observe("GetTopologyHints", 0.001, "INVALID_ARGUMENT")
    metrics.observe("RemovePod", 0.001, "OK")
    metrics.observe("GetResourcesAllocation", 0.004, "UNAVAILABLE")  # no reference gauge
    got = samples(metrics)
    policy = (("policy", "dynamic"),)
    assert got[("alloc_failed", policy)] == 2
    assert got[("get_topology_hints_failed", policy)] == 1
    assert got[("remove_pod_failed", policy)] == 0
    ok = (("code", "OK"), ("rpc", "Allocate"))
    assert got[("qrmd_rpc_duration_seconds_count", ok)] == 1
    assert got[("qrmd_rpc_duration_seconds_sum", ok)] == pytest.approx(0.002)
    assert got[("qrmd_rpc_duration_seconds_bucket", (*ok[:1], ("le", "0.0025"), ok[1]))] == 1
    unavailable = (("code", "UNAVAILABLE"), ("rpc", "Allocate"))
    assert got[("qrmd_rpc_duration_seconds_count", unavailable)] == 1


def test_pool_sizes_store_and_actor_figures() -> None:
    cpu = CPUState.empty(TOPOLOGY)
    cpu = type(cpu)(
        topology=TOPOLOGY,
        pools=cpu.pools.set("reserve", CPUSet.parse("0,2"))
        .set("share", CPUSet.parse("1,3-8,10,12-15"))
        .set("reclaim", CPUSet.parse("9,11")),
    )
    snapshot = Snapshot(empty_state(TOPOLOGY).with_section("cpu", cpu), seq=7)
    journal = JournalFigures(
        records_appended=5, bytes_appended=1234, fsync=FsyncSummary(6, 0.012, 0.004)
    )
    recovery = RecoveryReport("/s", None, 3, 9, 7, 41, None, (), (), 0.01, 0.02)
    store = StoreStatus(
        recovery,
        commits_total=5,
        commits_refused_total=1,
        commits_outcome_unknown_total=3,
        checkpoint_seq=4,
        checkpoint_failures_total=2,
        journal=journal,
    )
    status = SupervisorStatus(
        available=False,
        children=(ChildStatus("store", True, 2, None), ChildStatus("allocator", False, 1, "x")),
    )
    health = HealthRegistry(lambda: 0.0)
    health.add_source(status.problems)
    got = samples(
        DaemonMetrics(
            MetricSources(
                store=lambda: store,
                snapshot=lambda: snapshot,
                supervisor=lambda: status,
                health=health,
            )
        )
    )

    def pool(name: str, kind: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        return ("pool_size", (("policy", "dynamic"), ("poolName", name), ("pool_type", kind)))

    assert got[pool("reserve", "reserve")] == 2
    assert got[pool("share", "share")] == 12
    assert got[pool("reclaim", "reclaim")] == 2
    assert got[("qrmd_state_seq", ())] == 7
    assert got[("qrmd_journal_records_appended_total", ())] == 5
    assert got[("qrmd_journal_bytes_appended_total", ())] == 1234
    assert got[("qrmd_journal_fsyncs_total", ())] == 6
    assert got[("qrmd_journal_fsync_seconds_total", ())] == pytest.approx(0.012)
    assert got[("qrmd_journal_fsync_max_seconds", ())] == pytest.approx(0.004)
    assert got[("qrmd_state_commits_total", ())] == 5
    assert got[("qrmd_state_commits_refused_total", ())] == 1
    assert got[("qrmd_state_commits_outcome_unknown_total", ())] == 3
    assert got[("qrmd_state_checkpoint_seq", ())] == 4
    assert got[("qrmd_state_checkpoint_failures_total", ())] == 2
    assert got[("qrmd_recovery_records_replayed", ())] == 3
    assert got[("qrmd_recovery_bytes_truncated", ())] == 41
    assert got[("qrmd_recovery_seconds", ())] == pytest.approx(0.02)
    assert got[("qrmd_actor_up", (("actor", "allocator"),))] == 0
    assert got[("qrmd_actor_restarts_total", (("actor", "store"),))] == 2
    assert got[("qrmd_healthy", ())] == 0


@pytest.mark.parametrize(
    ("health", "gauge"),
    [
        pytest.param(StoreHealth(), 1, id="a healthy published status reads 1"),
        pytest.param(
            StoreHealth("state store refuses commits: disk gone"),
            0,
            id="a published status with a reason reads 0",
        ),
    ],
)
def test_the_store_health_gauge_reads_the_published_status(health: StoreHealth, gauge: int) -> None:
    recovery = RecoveryReport("/s", None, 0, 0, 0, 0, None, (), (), 0.0, 0.0)
    status = StoreStatus(recovery, health=health)
    got = samples(DaemonMetrics(MetricSources(store=lambda: status)))
    assert got[("qrmd_state_store_healthy", ())] == gauge
