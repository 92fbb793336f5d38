"""The balancer's configuration: defaults, vendor-aware values, JSON form (spec §3, §3.1)."""

from __future__ import annotations

import pytest

from policy.balance import BalanceError, BalancerConfig, VendorAware, vendor_key


def test_defaults_are_the_reference_defaults() -> None:
    cfg = BalancerConfig().resolve("GenuineIntel")
    assert cfg.read_latency_metric == "mem.latency.read.numa"
    assert cfg.grace_balance_read_latency_threshold == 70.0
    assert cfg.force_balance_read_latency_threshold == 80.0
    assert cfg.grace_balance_read_latency_gap_threshold == 40.0
    assert cfg.grace_balance_numa_distance_max == 19
    assert cfg.grace_balance_gap_ratio == 0.15
    assert cfg.force_balance_gap_ratio == 0.2
    assert cfg.balanced_pod_source_numa_rss_max == 10737418240
    assert cfg.balanced_pod_source_numa_rss_min == 134217728
    assert cfg.balanced_reclaimed_pod_source_numa_rss_max == 16106127360
    assert cfg.balanced_reclaimed_pod_source_numa_rss_min == 134217728
    assert cfg.balanced_pods_source_numa_total_rss_max == 12884901888
    assert cfg.balanced_reclaimed_pods_source_numa_total_rss_max == 16106127360
    assert cfg.balanced_reclaimed_pods_single_round_total_rss_threshold == 3221225472
    assert cfg.supported_pools == ("share",)


@pytest.mark.parametrize(
    ("vendor", "key", "metric", "grace", "force", "gap"),
    [
        pytest.param("AuthenticAMD", "AMD", "mem.latency.amd.l3.miss", 500, 600, 400, id="AMD"),
        pytest.param("GenuineIntel", "Intel", "mem.latency.read.numa", 70, 80, 40, id="Intel"),
        pytest.param("HygonGenuine", None, "mem.latency.read.numa", 70, 80, 40, id="other vendor"),
        pytest.param("", None, "mem.latency.read.numa", 70, 80, 40, id="unknown vendor"),
    ],
)
def test_vendor_picks_its_values(
    vendor: str, key: str | None, metric: str, grace: int, force: int, gap: int
) -> None:
    assert vendor_key(vendor) == key
    cfg = BalancerConfig().resolve(vendor)
    assert cfg.read_latency_metric == metric
    assert (
        cfg.grace_balance_read_latency_threshold,
        cfg.force_balance_read_latency_threshold,
        cfg.grace_balance_read_latency_gap_threshold,
    ) == (float(grace), float(force), float(gap))


def test_intel_key_wins_over_default_when_given() -> None:
    option = VendorAware.parse("default=70,Intel=75,AMD=500", int)
    assert option.resolve(vendor_key("GenuineIntel")) == 75
    assert option.resolve(vendor_key("AuthenticAMD")) == 500
    assert option.resolve(None) == 70


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("AMD=500", "must have a default value", id="no default"),
        pytest.param("default=70,AMD", "'AMD' is not key=value", id="pair without value"),
        pytest.param("default=seventy", "'default=seventy'", id="value not a number"),
        pytest.param("default=70,default=71", "names a key twice", id="key twice"),
    ],
)
def test_vendor_aware_text_errors(text: str, message: str) -> None:
    with pytest.raises(BalanceError, match=message):
        VendorAware.parse(text, int)


def test_json_round_trip_and_command_line_form() -> None:
    cfg = BalancerConfig.from_json(
        {
            "grace-balance-read-latency-threshold": "default=60,AMD=450",
            "read-latency-metric-name": {"default": "lat", "AMD": "amd.lat"},
            "numa-balance-supported-pools": ["share", "batch"],
            "balanced-pod-source-numa-total-rss-max": 1024,
        }
    )
    assert cfg.resolve("AuthenticAMD").grace_balance_read_latency_threshold == 450.0
    assert cfg.resolve("AuthenticAMD").read_latency_metric == "amd.lat"
    assert cfg.resolve("x").balanced_pods_source_numa_total_rss_max == 1024
    assert cfg.supported_pools == ("share", "batch")
    assert BalancerConfig.from_json(cfg.to_json()) == cfg
    assert BalancerConfig.from_json({}) == BalancerConfig()


def test_negative_threshold_is_refused() -> None:
    with pytest.raises(BalanceError, match="grace-balance-read-latency-threshold"):
        BalancerConfig.from_json({"grace-balance-read-latency-threshold": "default=-1"})
