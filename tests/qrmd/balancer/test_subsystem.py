"""How the daemon builds the balancer's ports from the configuration (memory-balancer §3.1,
§4, §11): distances from the machine's matrix, the simulated (fixed) source's pressure above the
force threshold in force, and a dry-run executor unless told to execute."""

from __future__ import annotations

import pytest

from actors.ports.clock import SYSTEM_CLOCK
from actors.ports.migration import MigrationMode
from policy.balance import MemoryAdvice, NumaDistance
from policy.topology.synthetic import parse_synthetic_spec
from qrmd.balancer.settings import BalancerSettings
from qrmd.balancer.subsystem import BalancerWiring
from qrmd.config import load_config
from qrmd.config_values import settings_of
from qrmd.host.metrics_fixed import QUIET_LATENCY, FixedNumaMetrics
from qrmd.host.migrate import CgroupMigrator

SYNTH = "synthetic:cpus=16,sockets=2,numas=4"


def wiring(vendor: str, **flags: object) -> BalancerWiring:
    config = load_config({"enable-memory-balancer": True, "topology": SYNTH, **flags})
    return BalancerWiring(
        settings_of(BalancerSettings, config),
        parse_synthetic_spec(SYNTH),
        SYSTEM_CLOCK,
        cpu_vendor=vendor,
    )


def test_distances_come_from_the_synthetic_matrix_self_included() -> None:
    lists = wiring("GenuineIntel").distances.distances()
    assert sorted(lists) == [0, 1, 2, 3]
    assert lists[0] == (
        NumaDistance(0, 10),
        NumaDistance(1, 12),
        NumaDistance(2, 21),
        NumaDistance(3, 21),
    )


@pytest.mark.parametrize(
    ("vendor", "latency"),
    [
        pytest.param("GenuineIntel", 90.0, id="Intel: above the default force threshold 80"),
        pytest.param("AuthenticAMD", 610.0, id="AMD: above the AMD force threshold 600"),
    ],
)
def test_simulated_pressure_is_above_the_force_threshold_in_force(
    vendor: str, latency: float
) -> None:
    source = wiring(vendor, **{"numa-metrics-source": "simulated:pressure=1"}).metric_source
    assert isinstance(source, FixedNumaMetrics)
    profiles = source.profiles()
    assert profiles[1].read_latency == latency
    assert [profiles[n].read_latency for n in (0, 2, 3)] == [QUIET_LATENCY] * 3


@pytest.mark.parametrize(
    ("flags", "mode"),
    [
        pytest.param({}, MigrationMode.DRY_RUN, id="a dry run by default"),
        pytest.param(
            {"memory-balance-execute": "true"}, MigrationMode.EXECUTE, id="executes when told"
        ),
    ],
)
def test_the_executor_is_a_dry_run_unless_told(
    flags: dict[str, object], mode: MigrationMode
) -> None:
    executor = wiring("GenuineIntel", **flags).executor
    assert isinstance(executor, CgroupMigrator)
    advice = MemoryAdvice(dest_numa_list=(1,), source_numa=0, migrate_containers=(), total_rss=0)
    assert executor.plan(advice, {}).mode is mode
