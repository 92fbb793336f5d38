"""The demo's node files are what the daemon's own readers accept: the metrics file through
``MetricsFile`` (quiet below the grace threshold, the pressured node above the force threshold
with the highest bandwidth, on either vendor) and the cgroup tree through
``CgroupAnonMemoryReader``, for each QoS class's place."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy.balance import MissingSample
from qrmd.host.kube_cgroups import CgroupDriver
from qrmd.host.metrics_file import MetricsFile
from qrmd.host.numa_stat import CgroupAnonMemoryReader
from qrmd.sim.demo.node_files import NumaMetricsCollector, write_pod_cgroups
from qrmd.sim.demo.workload import ANON_MEMORY, PRESSURED_NUMA, WORKLOAD
from qrmd.sim.kubelet import shared_pod
from qrmd.sim.kubelet.pods_endpoint import container_id

VENDORS = pytest.mark.parametrize("vendor", ["GenuineIntel", "AuthenticAMD", ""])


def read_back(collector: NumaMetricsCollector) -> dict[int, tuple[float, float]]:
    source = MetricsFile(collector.path, latency_metric=collector.config.read_latency_metric)
    out: dict[int, tuple[float, float]] = {}
    for numa, metrics in source.sample(range(collector.numa_count)).items():
        assert not isinstance(metrics.read_latency, MissingSample), metrics.read_latency
        assert not isinstance(metrics.read_write_bandwidth, MissingSample)
        out[numa] = (metrics.read_latency, metrics.read_write_bandwidth)
    return out


@VENDORS
def test_quiet_nodes_are_below_the_grace_threshold_of_the_vendor(
    tmp_path: Path, vendor: str
) -> None:
    collector = NumaMetricsCollector(tmp_path / "m.json", 4, vendor)
    collector.write(collector.quiet())
    read = read_back(collector)
    grace = collector.config.grace_balance_read_latency_threshold
    gap = collector.config.grace_balance_read_latency_gap_threshold
    latencies = [lat for lat, _ in read.values()]
    assert max(latencies) < grace
    assert max(latencies) - min(latencies) <= gap  # no gap trigger either (§7.4)


@VENDORS
def test_the_pressured_node_is_above_force_with_the_highest_bandwidth(
    tmp_path: Path, vendor: str
) -> None:
    collector = NumaMetricsCollector(tmp_path / "m.json", 4, vendor)
    collector.write(collector.under_pressure(PRESSURED_NUMA))
    read = read_back(collector)
    latency, bandwidth = read[PRESSURED_NUMA]
    assert latency > collector.config.force_balance_read_latency_threshold
    others = [v for n, v in read.items() if n != PRESSURED_NUMA]
    assert all(bandwidth > bw for _, bw in others)
    # Every other node passes the force gap ratio as a destination (§7.9.1).
    ratio = collector.config.force_balance_gap_ratio
    assert all(lat * (1 + ratio) <= latency for lat, _ in others)


def test_a_node_off_the_machine_is_refused(tmp_path: Path) -> None:
    collector = NumaMetricsCollector(tmp_path / "m.json", 4, "")
    with pytest.raises(ValueError, match="NUMA 4 is not on this machine"):
        collector.under_pressure(4)


def test_the_cgroup_tree_reads_back_per_numa_for_every_qos_class(tmp_path: Path) -> None:
    pods = [*WORKLOAD, shared_pod("uid-none", "none", 1, namespace="demo")]
    written = write_pod_cgroups(tmp_path, pods, ANON_MEMORY, 4)
    places = {p.relative_to(tmp_path).parent.as_posix() for p in written}
    assert places == {"kubepods", "kubepods/burstable", "kubepods/besteffort"}
    reader = CgroupAnonMemoryReader(tmp_path, driver=CgroupDriver.CGROUPFS)
    for pod in pods:
        read = reader.anon_by_numa(pod.uid, None)
        expected = ANON_MEMORY.get(pod.uid, {})
        assert dict(read.pod) == {n: expected.get(n, 0) for n in range(4)}, pod.uid
        # Each regular container has its cgroup, named by the ID the simulator's /pods lists;
        # the pod's memory is its first container's (the balancer reads them by those IDs).
        ids = [container_id(pod.uid, c.name) for c in pod.containers]
        by_id = reader.anon_by_numa(pod.uid, ids).containers
        assert list(by_id) == sorted(ids)
        for i, cid in enumerate(ids):
            want = {n: expected.get(n, 0) if i == 0 else 0 for n in range(4)}
            assert dict(by_id[cid]) == want, (pod.uid, cid)
    # Rewriting is allowed (the phase may run on a tree a previous run left).
    write_pod_cgroups(tmp_path, pods[:1], {pods[0].uid: {0: 1}}, 4)
    assert dict(reader.anon_by_numa(pods[0].uid, None).pod) == {0: 1, 1: 0, 2: 0, 3: 0}
