"""The memory balancer's settings of ``qrmd run``: the reference's option names and defaults
(memory-balancer §3), vendor-aware values (§3.1), the metric sources and their shorthand, the
insurance period (§4.3), execution and the registration directory; a bad value names its key."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from policy.balance import BalancerConfig
from qrmd.balancer.settings import BalancerSettings
from qrmd.config import (
    OPTIONS,
    ConfigError,
    DaemonConfig,
    add_arguments,
    config_from_args,
    load_config,
)
from qrmd.config_values import settings_of
from qrmd.host.balancer_sources import BalancerSourceSettings, SourceKind
from qrmd.host.kube_cgroups import CgroupDriver

GIB = 1 << 30
MIB = 1 << 20


def _from_argv(*argv: str) -> DaemonConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from_args(parser.parse_args(list(argv)))


def test_the_defaults_are_the_references() -> None:
    config = load_config({})
    assert config.enable_memory_balancer is False
    assert config.qos_aware_sync_period_s == 5.0
    assert config.memory_balance_execute is False
    assert config.plugin_registration_dir == "/var/lib/katalyst/plugin-socks"
    assert settings_of(BalancerSettings, config).eviction_socket_path() == (
        "/var/lib/katalyst/plugin-socks/numa_memory_balancer.sock"
    )
    assert config.memory_balancer == BalancerConfig()
    assert config.numa_metric_sources == BalancerSourceSettings()
    assert config.numa_metric_sources.metric_insurance_period_s == 0.0
    assert config.simulated_pressure == ()
    # §3's table, resolved for an Intel and an AMD host.
    intel = config.memory_balancer.resolve("GenuineIntel")
    assert intel.read_latency_metric == "mem.latency.read.numa"
    assert (
        intel.grace_balance_read_latency_threshold,
        intel.force_balance_read_latency_threshold,
        intel.grace_balance_read_latency_gap_threshold,
    ) == (70.0, 80.0, 40.0)
    amd = config.memory_balancer.resolve("AuthenticAMD")
    assert amd.read_latency_metric == "mem.latency.amd.l3.miss"
    assert (
        amd.grace_balance_read_latency_threshold,
        amd.force_balance_read_latency_threshold,
        amd.grace_balance_read_latency_gap_threshold,
    ) == (500.0, 600.0, 400.0)
    assert (intel.balanced_pod_source_numa_rss_max, intel.balanced_pod_source_numa_rss_min) == (
        10 * GIB,
        128 * MIB,
    )
    assert intel.supported_pools == ("share",)


def test_every_balancer_flag_from_the_command_line() -> None:
    config = _from_argv(
        "--enable-memory-balancer",
        "--qos-aware-sync-period", "2s",
        "--memory-balance-execute=true",
        "--plugin-registration-dir", "/tmp/ev",
        "--read-latency-metric-name", "default=lat,AMD=amdlat",
        "--grace-balance-read-latency-threshold", "default=71,AMD=501",
        "--force-balance-read-latency-threshold", "default=81,Intel=91",
        "--grace-balance-read-latency-gap-threshold", "default=41",
        "--grace-balance-numa-distance-max", "20",
        "--grace-balance-gap-ratio", "0.3",
        "--force-balance-gap-ratio", "0.4",
        "--balanced-pod-source-numa-rss-max", "100",
        "--balanced-pod-source-numa-rss-min", "1",
        "--balanced-reclaimed-pod-source-numa-rss-max", "200",
        "--balanced-reclaimed-pod-source-numa-rss-min", "2",
        "--balanced-pod-source-numa-total-rss-max", "300",
        "--balanced-reclaimed-pod-source-numa-total-rss-max", "400",
        "--balanced-reclaimed-pod-single-round-total-rss-threshold", "50",
        "--numa-balance-supported-pools", "share,batch",
        "--numa-metrics-source", "prometheus:http://127.0.0.1:9100/metrics",
        "--numa-bandwidth-source", "resctrl",
        "--numa-metrics-file", "/run/m.json",
        "--numa-metrics-prometheus-latency-metric", "lat_numa",
        "--numa-metrics-prometheus-bandwidth-metric", "bw_numa",
        "--numa-metrics-prometheus-numa-label", "node",
        "--numa-metrics-prometheus-match-labels", "job=node",
        "--numa-metrics-prometheus-timeout", "500ms",
        "--resctrl-root", "/mnt/resctrl",
        "--metric-insurance-period", "1m30s",
        "--memory-cgroup-root", "/cg/memory",
        "--cgroup-driver", "systemd",
        "--kubelet-cgroup-root", "/kube",
    )  # fmt: skip
    assert config.enable_memory_balancer and config.memory_balance_execute
    assert config.qos_aware_sync_period_s == 2.0
    assert config.plugin_registration_dir == "/tmp/ev"
    intel = config.memory_balancer.resolve("GenuineIntel")
    amd = config.memory_balancer.resolve("AuthenticAMD")
    assert (intel.read_latency_metric, amd.read_latency_metric) == ("lat", "amdlat")
    assert (
        intel.grace_balance_read_latency_threshold,
        amd.grace_balance_read_latency_threshold,
    ) == (
        71.0,
        501.0,
    )
    assert (
        intel.force_balance_read_latency_threshold,
        amd.force_balance_read_latency_threshold,
    ) == (
        91.0,
        81.0,
    )
    assert amd.grace_balance_read_latency_gap_threshold == 41.0
    assert intel.grace_balance_numa_distance_max == 20
    assert (intel.grace_balance_gap_ratio, intel.force_balance_gap_ratio) == (0.3, 0.4)
    assert (
        intel.balanced_pod_source_numa_rss_max,
        intel.balanced_pod_source_numa_rss_min,
        intel.balanced_reclaimed_pod_source_numa_rss_max,
        intel.balanced_reclaimed_pod_source_numa_rss_min,
        intel.balanced_pods_source_numa_total_rss_max,
        intel.balanced_reclaimed_pods_source_numa_total_rss_max,
        intel.balanced_reclaimed_pods_single_round_total_rss_threshold,
    ) == (100, 1, 200, 2, 300, 400, 50)
    assert intel.supported_pools == ("share", "batch")
    s = config.numa_metric_sources
    assert (s.latency_source, s.bandwidth_source) == (SourceKind.PROMETHEUS, SourceKind.RESCTRL)
    assert s.prometheus_url == "http://127.0.0.1:9100/metrics"
    assert s.metrics_file == Path("/run/m.json")
    assert (s.prometheus_latency_metric, s.prometheus_bandwidth_metric) == ("lat_numa", "bw_numa")
    assert s.prometheus_numa_label == "node"
    assert dict(s.prometheus_match_labels) == {"job": "node"}
    assert s.prometheus_timeout_s == 0.5
    assert s.resctrl_root == Path("/mnt/resctrl")
    assert s.metric_insurance_period_s == 90.0
    assert s.memory_cgroup_root == Path("/cg/memory")
    assert s.cgroup_driver is CgroupDriver.SYSTEMD
    assert s.kubelet_cgroup_root == "/kube"


@pytest.mark.parametrize(
    ("spec", "latency", "bandwidth", "extra", "pressure"),
    [
        pytest.param("file", SourceKind.FILE, SourceKind.FILE, {}, (), id="file, default path"),
        pytest.param("file:/run/x.json", SourceKind.FILE, SourceKind.FILE,
                     {"metrics_file": Path("/run/x.json")}, (), id="file at a path"),
        pytest.param("prometheus:http://h:1/m", SourceKind.PROMETHEUS, SourceKind.PROMETHEUS,
                     {"prometheus_url": "http://h:1/m"}, (), id="prometheus at a URL"),
        pytest.param("resctrl", SourceKind.FILE, SourceKind.RESCTRL, {}, (),
                     id="resctrl bandwidth with the file's latency"),
        pytest.param("simulated", SourceKind.SIMULATOR, SourceKind.SIMULATOR, {}, (),
                     id="simulated and quiet"),
        pytest.param("simulated:pressure=1", SourceKind.SIMULATOR, SourceKind.SIMULATOR, {},
                     (1,), id="simulated with one node under pressure"),
        pytest.param("simulated:pressure=2+0", SourceKind.SIMULATOR, SourceKind.SIMULATOR, {},
                     (0, 2), id="simulated with two nodes under pressure"),
    ],
)  # fmt: skip
def test_the_metrics_source_shorthand(
    spec: str,
    latency: SourceKind,
    bandwidth: SourceKind,
    extra: dict[str, object],
    pressure: tuple[int, ...],
) -> None:
    config = load_config({"numa-metrics-source": spec})
    s = config.numa_metric_sources
    assert (s.latency_source, s.bandwidth_source) == (latency, bandwidth)
    for field, value in extra.items():
        assert getattr(s, field) == value
    assert config.simulated_pressure == pressure
    assert config.numa_metrics_source == spec


def test_a_source_key_given_alone_wins_over_the_shorthand() -> None:
    config = load_config({"numa-metrics-source": "resctrl", "numa-latency-source": "simulated"})
    s = config.numa_metric_sources
    assert (s.latency_source, s.bandwidth_source) == (SourceKind.SIMULATOR, SourceKind.SIMULATOR)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            {"qos-aware-sync-period": "0s"},
            "--qos-aware-sync-period: '0s' must be longer than 0s",
            id="a zero sync period",
        ),
        pytest.param(
            {"qos-aware-sync-period": "5"},
            "--qos-aware-sync-period: '5' is not a duration",
            id="a sync period without units",
        ),
        pytest.param(
            {"memory-balance-execute": "maybe"},
            "--memory-balance-execute: 'maybe' is not true or false",
            id="execute neither true nor false",
        ),
        pytest.param(
            {"enable-memory-balancer": True, "plugin-registration-dir": "/tmp/" + "d" * 100},
            "--plugin-registration-dir: socket path",
            id="a registration dir too long for the socket",
        ),
        pytest.param(
            {"grace-balance-read-latency-threshold": "AMD=500"},
            "--grace-balance-read-latency-threshold: vendor aware configuration must have a",
            id="a vendor-aware value without default",
        ),
        pytest.param(
            {"force-balance-read-latency-threshold": "default=x"},
            "--force-balance-read-latency-threshold: vendor aware value 'default=x'",
            id="a vendor-aware value not a number",
        ),
        pytest.param(
            {"grace-balance-read-latency-gap-threshold": "default"},
            "--grace-balance-read-latency-gap-threshold: vendor aware value 'default': 'default'",
            id="a vendor-aware pair without =",
        ),
        pytest.param(
            {"read-latency-metric-name": "default="},
            "--read-latency-metric-name",
            id="an empty metric name",
        ),
        pytest.param(
            {"grace-balance-numa-distance-max": "far"},
            "--grace-balance-numa-distance-max: 'far' is not a whole number",
            id="a distance not a number",
        ),
        pytest.param(
            {"balanced-pod-source-numa-rss-max": "-1"},
            "--balanced-pod-source-numa-rss-max: -1 is negative",
            id="negative bytes",
        ),
        pytest.param(
            {"grace-balance-gap-ratio": "most"},
            "--grace-balance-gap-ratio: 'most' is not a number",
            id="a ratio not a number",
        ),
        pytest.param(
            {"numa-balance-supported-pools": "share,reclaim"},
            "--numa-balance-supported-pools: 'reclaim' may not be listed",
            id="reclaim among the supported pools",
        ),
        pytest.param(
            {"numa-balance-supported-pools": "share,share"},
            "--numa-balance-supported-pools: pool 'share' is listed twice",
            id="a pool listed twice",
        ),
        pytest.param(
            {"numa-metrics-source": "carrier-pigeon"},
            "--numa-metrics-source: 'carrier-pigeon' is not file[:PATH], prometheus:URL",
            id="an unknown metrics source",
        ),
        pytest.param(
            {"numa-metrics-source": "prometheus"},
            "--numa-metrics-source: 'prometheus': give the endpoint",
            id="prometheus without a URL",
        ),
        pytest.param(
            {"numa-metrics-source": "simulated:pressure=x"},
            "--numa-metrics-source: 'simulated:pressure=x': expected simulated:pressure=N",
            id="simulated pressure on no node",
        ),
        pytest.param(
            {"numa-latency-source": "resctrl"},
            "--numa-latency-source: 'resctrl' is not one of file, prometheus, simulator",
            id="resctrl has no latency",
        ),
        pytest.param(
            {"numa-bandwidth-source": "tea-leaves"},
            "--numa-bandwidth-source: 'tea-leaves' is not one of file, prometheus, resctrl, simul",
            id="an unknown bandwidth source",
        ),
        pytest.param(
            {"numa-bandwidth-source": "prometheus"},
            "--numa-metrics-prometheus-url: required when a NUMA metric source is 'prometheus'",
            id="prometheus bandwidth without a URL",
        ),
        pytest.param(
            {"numa-metrics-prometheus-match-labels": "job"},
            "--numa-metrics-prometheus-match-labels: expected label=value pairs",
            id="a label without a value",
        ),
        pytest.param(
            {"numa-metrics-prometheus-timeout": "0s"},
            "--numa-metrics-prometheus-timeout: 0.0 s must be positive",
            id="a zero scrape timeout",
        ),
        pytest.param(
            {"metric-insurance-period": "soon"},
            "--metric-insurance-period: 'soon' is not a duration",
            id="an insurance period not a duration",
        ),
        pytest.param(
            {"metric-insurance-period": -5},
            "--metric-insurance-period: -5 s must be 0 or more",
            id="a negative insurance period",
        ),
        pytest.param(
            {"cgroup-driver": "upstart"},
            "--cgroup-driver: 'upstart' is not one of auto, cgroupfs, systemd",
            id="an unknown cgroup driver",
        ),
        pytest.param(
            {"memory-cgroup-root": ""},
            "--memory-cgroup-root: must not be empty",
            id="an empty cgroup root",
        ),
    ],
)
def test_a_bad_balancer_value_names_its_key(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(flags)
    assert message in str(err.value)


def test_a_long_registration_dir_is_only_refused_when_the_balancer_runs() -> None:
    long_dir = "/tmp/" + "d" * 100
    assert load_config({"plugin-registration-dir": long_dir}).plugin_registration_dir == long_dir


@pytest.mark.parametrize(
    ("name", "text"),
    [
        pytest.param("qrmd.yaml", """\
enable-memory-balancer: true
qos_aware_sync_period: 10s
memory-balance-execute: false
grace-balance-read-latency-threshold: {default: 75, AMD: 550}
force-balance-read-latency-threshold: default=85,AMD=650
numa-balance-supported-pools: [share, batch]
balanced-pod-source-numa-rss-max: 1073741824
grace-balance-gap-ratio: 0.25
numa-metrics-source: simulated:pressure=0
numa-metrics-prometheus-match-labels: {job: node}
metric-insurance-period: 120
""", id="YAML with mappings, lists and numbers"),
        pytest.param("qrmd.toml", """\
enable-memory-balancer = true
qos_aware_sync_period = "10s"
memory-balance-execute = false
grace-balance-read-latency-threshold = {default = 75, AMD = 550}
force-balance-read-latency-threshold = "default=85,AMD=650"
numa-balance-supported-pools = ["share", "batch"]
balanced-pod-source-numa-rss-max = 1073741824
grace-balance-gap-ratio = 0.25
numa-metrics-source = "simulated:pressure=0"
numa-metrics-prometheus-match-labels = {job = "node"}
metric-insurance-period = 120
""", id="TOML with tables, arrays and numbers"),
    ],
)  # fmt: skip
def test_balancer_keys_in_a_config_file(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    config = load_config({}, str(path))
    assert config.enable_memory_balancer and not config.memory_balance_execute
    assert config.qos_aware_sync_period_s == 10.0
    amd = config.memory_balancer.resolve("AuthenticAMD")
    other = config.memory_balancer.resolve("HygonGenuine")
    assert (
        amd.grace_balance_read_latency_threshold,
        other.grace_balance_read_latency_threshold,
    ) == (
        550.0,
        75.0,
    )
    assert (
        amd.force_balance_read_latency_threshold,
        other.force_balance_read_latency_threshold,
    ) == (
        650.0,
        85.0,
    )
    assert amd.supported_pools == ("share", "batch")
    assert amd.balanced_pod_source_numa_rss_max == GIB
    assert amd.grace_balance_gap_ratio == 0.25
    assert config.simulated_pressure == (0,)
    assert dict(config.numa_metric_sources.prometheus_match_labels) == {"job": "node"}
    assert config.numa_metric_sources.metric_insurance_period_s == 120.0


def test_a_bad_file_value_names_the_key_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "qrmd.yaml"
    path.write_text("grace-balance-read-latency-threshold: {AMD: 500}\n")
    with pytest.raises(
        ConfigError,
        match=r"--grace-balance-read-latency-threshold \(in .*qrmd.yaml\): vendor aware",
    ):
        load_config({}, str(path))


@pytest.mark.parametrize(
    ("argv", "execute"),
    [
        pytest.param([], False, id="dry run by default"),
        pytest.param(["--memory-balance-execute"], True, id="the flag alone executes"),
        pytest.param(["--memory-balance-execute=false"], False, id="=false as the reference has"),
        pytest.param(["--memory-balance-execute=true"], True, id="=true"),
    ],
)  # fmt: skip
def test_execute_is_a_switch_that_takes_a_value(argv: list[str], execute: bool) -> None:
    assert _from_argv(*argv).memory_balance_execute is execute


def test_every_reference_option_of_section_3_is_a_flag() -> None:
    flags = {opt.flag for opt in OPTIONS}
    assert set(BalancerConfig().to_json()) <= flags
    help_text = {opt.flag: opt.help_text() for opt in OPTIONS}
    for key in BalancerConfig().to_json():
        assert f"reference: --{key}" in help_text[key]
    for key in ("qos-aware-sync-period", "plugin-registration-dir", "metric-insurance-period"):
        assert f"reference: --{key}" in help_text[key]
