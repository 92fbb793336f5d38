"""The CPU vendor for vendor-aware values (memory-balancer §3.1): ``vendor_id`` of cpuinfo, or
no vendor at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy.balance import BalancerConfig
from qrmd.host.cpu_vendor import read_cpu_vendor

INTEL = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\nprocessor\t: 1\n"
AMD = "processor\t: 0\nvendor_id\t: AuthenticAMD\n"
ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n"


@pytest.mark.parametrize(
    ("text", "vendor", "threshold"),
    [
        pytest.param(INTEL, "GenuineIntel", 80.0, id="an Intel host takes the default values"),
        pytest.param(AMD, "AuthenticAMD", 600.0, id="an AMD host takes the AMD values"),
        pytest.param(ARM, "", 80.0, id="a host without vendor_id takes the default values"),
    ],
)
def test_the_vendor_picks_the_vendor_aware_value(
    tmp_path: Path, text: str, vendor: str, threshold: float
) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    assert read_cpu_vendor(cpuinfo) == vendor
    resolved = BalancerConfig().resolve(read_cpu_vendor(cpuinfo))
    assert resolved.force_balance_read_latency_threshold == threshold


def test_no_cpuinfo_is_no_vendor(tmp_path: Path) -> None:
    assert read_cpu_vendor(tmp_path / "missing") == ""


def test_this_hosts_vendor_is_read() -> None:
    vendor = read_cpu_vendor()
    if Path("/proc/cpuinfo").exists() and "vendor_id" in Path("/proc/cpuinfo").read_text():
        assert vendor
