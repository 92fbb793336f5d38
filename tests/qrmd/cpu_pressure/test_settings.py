"""The CPU pressure eviction flags: the reference's names and defaults, parsed values, and
errors naming the flag (``qrmd.cpu_pressure.settings``)."""

from __future__ import annotations

import pytest

from policy.cpu.pressure import PressureSettings
from qrmd.config import ConfigError, DaemonConfig, load_config
from qrmd.config_values import settings_of
from qrmd.cpu_pressure.settings import CPU_EVICTION_OPTIONS, CPUPressureSettings

# katalyst-agent v0.5.3's flag names (spec cpu-policy §12.7), kept exactly: they are a contract.
REFERENCE_FLAGS = (
    "enable-cpu-pressure-eviction",
    "load-pressure-eviction-skip-pools",
    "eviction-load-enable",
    "eviction-load-upper-bound-ratio",
    "eviction-load-threshold-met-percentage",
    "eviction-load-metric-ring-size",
    "eviction-load-cool-down-time",
    "eviction-suppression-enable",
    "eviction-suppression-max-tolerance-rate",
    "eviction-suppression-min-tolerance-duration",
)


def test_every_reference_flag_is_an_option_with_its_reference_name() -> None:
    flags = {o.flag: o for o in CPU_EVICTION_OPTIONS}
    for flag in REFERENCE_FLAGS:
        assert flags[flag].reference == f"--{flag}"


def test_the_defaults_are_the_references() -> None:
    config = load_config({})
    assert config.enable_cpu_pressure_eviction is False
    assert config.cpu_pressure == PressureSettings()
    assert config.cpu_pressure == DaemonConfig().cpu_pressure
    s = config.cpu_pressure
    assert s.skip_pools == {"reclaim", "dedicated", "fallback", "reserve"}
    assert (s.enable_load_eviction, s.load_upper_bound_ratio, s.load_threshold_met_percentage) == (
        False,
        1.8,
        0.8,
    )
    assert (
        s.load_metric_ring_size,
        s.load_eviction_cool_down_s,
        s.load_eviction_sync_period_s,
    ) == (
        10,
        300.0,
        30.0,
    )
    assert (
        s.enable_suppression_eviction,
        s.max_suppression_tolerance_rate,
        s.min_suppression_tolerance_duration_s,
        s.grace_period_s,
    ) == (False, 5.0, 300.0, -1)
    assert (s.reserved_cpu_for_allocate, s.reserved_cpu_for_reclaimed_cores) == (4.0, 4.0)


def test_flags_set_the_settings() -> None:
    config = load_config(
        {
            "enable-cpu-pressure-eviction": True,
            "load-pressure-eviction-skip-pools": "reclaim, reserve",
            "eviction-load-enable": "true",
            "eviction-load-upper-bound-ratio": "2.5",
            "eviction-load-threshold-met-percentage": "0.5",
            "eviction-load-metric-ring-size": "4",
            "eviction-load-cool-down-time": "1m30s",
            "eviction-suppression-enable": True,
            "eviction-suppression-max-tolerance-rate": "3",
            "eviction-suppression-min-tolerance-duration": "10s",
            "eviction-cpu-grace-period": "30",
            "reserved-resource-for-allocate": "cpu=0,memory=5Gi",
            "enable-reclaim": "true",
        }
    )
    s = settings_of(CPUPressureSettings, config).plugins
    assert config.enable_cpu_pressure_eviction
    assert not config.cpu_pressure.enable_reclaim and s.enable_reclaim
    assert s.skip_pools == {"reclaim", "reserve"}
    assert (s.load_upper_bound_ratio, s.load_threshold_met_percentage, s.load_metric_ring_size) == (
        2.5,
        0.5,
        4,
    )
    assert (s.load_eviction_cool_down_s, s.min_suppression_tolerance_duration_s) == (90.0, 10.0)
    assert (s.max_suppression_tolerance_rate, s.grace_period_s) == (3.0, 30)
    assert s.uses_advised_threshold  # enable-reclaim and no CPU reserved for allocation


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            {"eviction-load-metric-ring-size": "0"},
            "--eviction-load-metric-ring-size: 0 is below",
            id="a ring of no samples",
        ),
        pytest.param(
            {"eviction-load-upper-bound-ratio": "fast"},
            "--eviction-load-upper-bound-ratio: 'fast' is not a number",
            id="a ratio that is not a number",
        ),
        pytest.param(
            {"eviction-load-cool-down-time": "5"},
            "--eviction-load-cool-down-time: '5' is not a duration",
            id="a duration without units",
        ),
        pytest.param(
            {"reserved-resource-for-allocate": "cpu=lots"},
            "--reserved-resource-for-allocate: cpu: 'lots' is not a Kubernetes quantity",
            id="a resource list with a bad quantity",
        ),
        pytest.param(
            {"cpu-load-metrics-source": "cgroup"},
            "--cpu-load-metrics-source: 'cgroup' is not a CPU load source",
            id="an unknown load source",
        ),
        pytest.param(
            {"eviction-suppression-min-tolerance-duration": "-1s"},
            "--eviction-suppression-min-tolerance-duration",
            id="a negative duration",
        ),
    ],
)
def test_a_bad_value_is_an_error_naming_the_flag(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(flags)
