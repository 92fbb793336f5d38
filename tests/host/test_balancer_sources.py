"""Choosing the balancer's metric sources from configuration keys (qrmd.host.balancer_sources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.balance import NumaMetrics
from qrmd.host.balancer_sources import (
    BalancerSourceSettings,
    SourceKind,
    build_container_memory_reader,
    build_numa_metric_source,
)
from qrmd.host.kube_cgroups import CgroupDriver
from qrmd.host.metric_sources import MetricSourceUnavailable, SplitNumaMetrics
from qrmd.host.metrics_file import MetricsFile
from qrmd.host.metrics_fixed import FixedNumaMetrics
from qrmd.host.metrics_prometheus import PrometheusNumaMetrics
from tests.host.cgroup_tree import put_cgroup


def test_defaults() -> None:
    settings = BalancerSourceSettings.from_mapping({})
    assert settings == BalancerSourceSettings()
    assert settings.latency_source is settings.bandwidth_source is SourceKind.FILE
    assert settings.metric_insurance_period_s == 0.0
    assert settings.cgroup_driver is None


def test_every_key_is_read() -> None:
    settings = BalancerSourceSettings.from_mapping(
        {
            "numa-latency-source": "prometheus",
            "numa-bandwidth-source": "resctrl",
            "numa-metrics-file": "/tmp/m.json",
            "numa-metrics-prometheus-url": "http://127.0.0.1:9100/metrics",
            "numa-metrics-prometheus-latency-metric": "lat",
            "numa-metrics-prometheus-bandwidth-metric": "bw",
            "numa-metrics-prometheus-numa-label": "node",
            "numa-metrics-prometheus-match-labels": "host=a, socket=0",
            "numa-metrics-prometheus-timeout": 0.5,
            "resctrl-root": "/mnt/resctrl",
            "metric-insurance-period": 30,
            "memory-cgroup-root": "/sys/fs/cgroup",
            "cgroup-driver": "systemd",
            "kubelet-cgroup-root": "/k8s",
        }
    )
    assert settings.latency_source is SourceKind.PROMETHEUS
    assert settings.bandwidth_source is SourceKind.RESCTRL
    assert settings.metrics_file == Path("/tmp/m.json")
    assert dict(settings.prometheus_match_labels) == {"host": "a", "socket": "0"}
    assert settings.prometheus_timeout_s == 0.5
    assert settings.resctrl_root == Path("/mnt/resctrl")
    assert settings.metric_insurance_period_s == 30.0
    assert settings.memory_cgroup_root == Path("/sys/fs/cgroup")
    assert settings.cgroup_driver is CgroupDriver.SYSTEMD
    assert settings.kubelet_cgroup_root == "/k8s"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        pytest.param(
            {"numa-latency-sources": "file"},
            "memory-balancer.numa-latency-sources: unknown key",
            id="a typo",
        ),
        pytest.param(
            {"numa-latency-source": "resctrl"},
            "memory-balancer.numa-latency-source: 'resctrl' is not one of file, prometheus, sim",
            id="resctrl measures no latency",
        ),
        pytest.param(
            {"numa-bandwidth-source": "prometheus"},
            "memory-balancer.numa-metrics-prometheus-url: required when",
            id="prometheus needs its url",
        ),
        pytest.param(
            {"metric-insurance-period": -1},
            "memory-balancer.metric-insurance-period: -1 s must be 0 or more",
            id="negative period",
        ),
        pytest.param(
            {"numa-metrics-prometheus-timeout": 0},
            "memory-balancer.numa-metrics-prometheus-timeout: 0 s must be positive",
            id="zero timeout",
        ),
        pytest.param(
            {"numa-metrics-prometheus-match-labels": "host"},
            "memory-balancer.numa-metrics-prometheus-match-labels: expected label=value pairs",
            id="a label without value",
        ),
        pytest.param(
            {"cgroup-driver": "cgroupfs2"},
            "memory-balancer.cgroup-driver: 'cgroupfs2' is not one of cgroupfs, systemd, auto",
            id="unknown driver",
        ),
        pytest.param(
            {"numa-metrics-file": ""},
            "memory-balancer.numa-metrics-file: expected a non-empty string",
            id="empty path",
        ),
    ],
)
def test_bad_values_name_the_key(section: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BalancerSourceSettings.from_mapping(section)


def test_one_source_for_both_metrics_is_built_once(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps({"numas": {"0": {"mem.latency.amd.l3.miss": 500, "mem.bandwidth.numa": 7}}})
    )
    settings = BalancerSourceSettings.from_mapping({"numa-metrics-file": str(path)})
    source = build_numa_metric_source(settings, latency_metric="mem.latency.amd.l3.miss")
    assert isinstance(source, MetricsFile)
    assert source.sample([0]) == {0: NumaMetrics(500, 7)}


def test_different_sources_are_split() -> None:
    settings = BalancerSourceSettings.from_mapping(
        {
            "numa-latency-source": "simulator",
            "numa-bandwidth-source": "prometheus",
            "numa-metrics-prometheus-url": "http://127.0.0.1:1/metrics",
        }
    )
    source = build_numa_metric_source(
        settings, latency_metric="mem.latency.read.numa", numa_ids=[0, 1]
    )
    assert isinstance(source, SplitNumaMetrics)


def test_simulator_alone_starts_quiet() -> None:
    settings = BalancerSourceSettings.from_mapping({"numa-latency-source": "simulator"})
    source = build_numa_metric_source(settings, latency_metric="x", numa_ids=[0, 1])
    assert isinstance(source, FixedNumaMetrics)
    assert source.sample([1]) == {1: NumaMetrics(40, 100)}


def test_prometheus_latency_name_follows_the_balancers_metric() -> None:
    settings = BalancerSourceSettings.from_mapping(
        {"numa-latency-source": "prometheus", "numa-metrics-prometheus-url": "http://h:1/m"}
    )
    source = build_numa_metric_source(settings, latency_metric="mem.latency.amd.l3.miss")
    assert isinstance(source, PrometheusNumaMetrics)
    assert source._latency_metric == "mem_latency_amd_l3_miss"


def test_resctrl_that_is_not_there_says_so(tmp_path: Path) -> None:
    settings = BalancerSourceSettings.from_mapping(
        {"numa-bandwidth-source": "resctrl", "resctrl-root": str(tmp_path / "none")}
    )
    with pytest.raises(MetricSourceUnavailable, match="is not available"):
        build_numa_metric_source(settings, latency_metric="mem.latency.read.numa")


def test_container_memory_reader_uses_the_cgroup_keys(tmp_path: Path) -> None:
    uid = "0b1c2d3e-aaaa-4bbb-8ccc-123456789abc"
    pod = put_cgroup(
        tmp_path / f"k8s/kubepods.slice/kubepods-pod{uid.replace('-', '_')}.slice", 2, {0: 8}
    )
    put_cgroup(pod / "cri-containerd-abc.scope", 2, {0: 8})
    reader = build_container_memory_reader(
        BalancerSourceSettings.from_mapping(
            {
                "memory-cgroup-root": str(tmp_path),
                "cgroup-driver": "systemd",
                "kubelet-cgroup-root": "/k8s",
            }
        )
    )
    assert reader.anon_by_numa(uid, ["containerd://abc"]).containers == {"containerd://abc": {0: 8}}
