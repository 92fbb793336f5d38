"""The reclaim pool's metrics on a host (qrmd.host.reclaim_metrics): per-CPU usage from
/proc/stat and a cgroup's usage and CFS quota from cgroup v2 and v1 trees, as rates over a
window of an injected clock; this machine's own /proc/stat and cpu cgroup tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.ports.reclaim_metrics import CgroupCPU, MissingMetric, ReclaimMetricsSource
from qrmd.host.cpu_idle import default_cpu_cgroup_root
from qrmd.host.reclaim_metrics import (
    FixedReclaimMetrics,
    HostReclaimMetrics,
    build_reclaim_metrics_source,
    read_proc_stat,
)

ROOT = "/kubepods/besteffort"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def stat(path: Path, cpus: dict[int, tuple[int, int, int]]) -> None:
    """A /proc/stat whose cpuN lines have ``(user, idle, iowait)`` ticks (the rest 0)."""
    lines = ["cpu  1 2 3 4 5 6 7 8 0 0"]
    lines += [f"cpu{n} {u} 0 0 {i} {w} 0 0 0 0 0" for n, (u, i, w) in sorted(cpus.items())]
    path.write_text("\n".join([*lines, "intr 1 2 3", "ctxt 42", ""]))


def v2(root: Path, usage_usec: int, cpu_max: str, relative: str = ROOT) -> None:
    cgroup = root / relative.strip("/")
    cgroup.mkdir(parents=True, exist_ok=True)
    (cgroup / "cgroup.controllers").write_text("cpu cpuset\n")
    (cgroup / "cpu.stat").write_text(f"usage_usec {usage_usec}\nuser_usec 1\nsystem_usec 2\n")
    (cgroup / "cpu.max").write_text(cpu_max + "\n")


def v1(cpu: Path, cpuacct: Path, usage_ns: int, quota: int, period: int = 100000) -> None:
    cgroup = cpu / ROOT.strip("/")
    cgroup.mkdir(parents=True, exist_ok=True)
    (cgroup / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (cgroup / "cpu.cfs_period_us").write_text(f"{period}\n")
    acct = cpuacct / ROOT.strip("/")
    acct.mkdir(parents=True, exist_ok=True)
    (acct / "cpuacct.usage").write_text(f"{usage_ns}\n")


def test_per_cpu_usage_is_the_busy_share_of_each_cpus_ticks_over_the_window(
    tmp_path: Path,
) -> None:
    proc = tmp_path / "stat"
    stat(proc, {0: (100, 100, 0), 1: (100, 100, 0), 2: (0, 0, 0)})
    clock = Clock()
    source = HostReclaimMetrics(tmp_path / "cg", proc_stat=proc, clock=clock)
    # cpu0 busy 30 of 100 ticks; cpu1 idle 60 and iowait 40 of 100: not busy; cpu2 left.
    stat(proc, {0: (130, 170, 0), 1: (100, 160, 40), 3: (5, 5, 0)})
    clock.now += 5
    assert source.read(()).core_usage == {0: pytest.approx(0.3), 1: 0.0}


@pytest.mark.parametrize(
    ("cpu_max", "quota", "period"),
    [
        pytest.param("200000 100000", 200000.0, 100000.0, id="v2: cpu.max's quota and period"),
        pytest.param("max 100000", -1.0, 100000.0, id="v2: max is no quota (-1)"),
    ],
)
def test_a_v2_cgroups_usage_is_usage_usec_over_the_window(
    tmp_path: Path, cpu_max: str, quota: float, period: float
) -> None:
    proc, root, clock = tmp_path / "stat", tmp_path / "cg", Clock()
    stat(proc, {0: (1, 1, 0)})
    v2(root, 1_000_000, cpu_max)
    source = HostReclaimMetrics(root, proc_stat=proc, clock=clock, prime=[ROOT])
    v2(root, 7_000_000, cpu_max)  # 6 CPU-seconds in 4 s: 1.5 CPUs
    clock.now += 4
    assert source.read([ROOT]).cgroups == {ROOT: CgroupCPU(1.5, quota, period)}


def test_a_v1_cgroups_usage_is_cpuacct_usage_from_the_sibling_cpuacct_mount(
    tmp_path: Path,
) -> None:
    proc, clock = tmp_path / "stat", Clock()
    stat(proc, {0: (1, 1, 0)})
    cpu, cpuacct = tmp_path / "cgroup" / "cpu", tmp_path / "cgroup" / "cpuacct"
    v1(cpu, cpuacct, 2_000_000_000, 50000)
    source = HostReclaimMetrics(cpu, proc_stat=proc, clock=clock, prime=[ROOT])
    v1(cpu, cpuacct, 4_000_000_000, 50000)  # 2 CPU-seconds in 2 s
    clock.now += 2
    assert source.read([ROOT]).cgroups == {ROOT: CgroupCPU(1.0, 50000.0, 100000.0)}


def test_what_cannot_be_measured_is_missing_never_zero(tmp_path: Path) -> None:
    proc, root, clock = tmp_path / "stat", tmp_path / "cg", Clock()
    stat(proc, {0: (1, 1, 0)})
    source = HostReclaimMetrics(root, proc_stat=proc, clock=clock)
    v2(root, 5, "max 100000")
    clock.now += 2
    first = source.read([ROOT, "/kubepods/besteffort-0"]).cgroups
    assert isinstance(first[ROOT], MissingMetric) and "first reading" in first[ROOT].reason
    missing = first["/kubepods/besteffort-0"]
    assert isinstance(missing, MissingMetric) and "besteffort-0" in missing.reason
    proc.unlink()
    clock.now += 2
    reading = source.read([ROOT])
    assert isinstance(reading.core_usage, MissingMetric)
    assert reading.cgroups[ROOT] == CgroupCPU(0.0, -1.0, 100000.0)


def test_a_window_too_short_answers_the_previous_figure(tmp_path: Path) -> None:
    proc, root, clock = tmp_path / "stat", tmp_path / "cg", Clock()
    stat(proc, {0: (1, 1, 0)})
    v2(root, 0, "max 100000")
    source = HostReclaimMetrics(root, proc_stat=proc, clock=clock, prime=[ROOT])
    v2(root, 2_000_000, "max 100000")
    clock.now += 2
    assert source.read([ROOT]).cgroups[ROOT] == CgroupCPU(1.0, -1.0, 100000.0)
    v2(root, 9_000_000, "max 100000")
    clock.now += 0.01
    assert source.read([ROOT]).cgroups[ROOT] == CgroupCPU(1.0, -1.0, 100000.0)


def test_existence_is_the_cgroup_directory_and_paths_stay_in_the_root(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    v2(root, 0, "max 100000")
    source = HostReclaimMetrics(root, proc_stat=tmp_path / "none")
    assert source.cgroup_exists(ROOT)
    assert not source.cgroup_exists(ROOT + "-0")
    assert not source.cgroup_exists("/../etc")


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no procfs")
def test_this_machines_own_proc_stat_and_cpu_cgroup_root_are_read() -> None:
    clock = Clock()
    source = HostReclaimMetrics(clock=clock, prime=["/"], min_window_s=0.0)
    clock.now += 1
    reading = source.read(["/"])
    assert isinstance(reading.core_usage, dict)
    assert set(reading.core_usage) == set(read_proc_stat(Path("/proc/stat")))
    assert all(0.0 <= v <= 1.0 for v in reading.core_usage.values())
    root = reading.cgroups["/"]
    assert source.root == default_cpu_cgroup_root()
    # The root cgroup has no quota; a hierarchy without usage counters at its root says why.
    if isinstance(root, CgroupCPU):
        assert root.usage >= 0 and root.cfs_quota == -1
    else:
        assert root.reason


@pytest.mark.parametrize(
    ("spec", "kind"),
    [("host", HostReclaimMetrics), ("simulated", FixedReclaimMetrics)],
    ids=["host reads the machine", "simulated answers fixed idle figures"],
)
def test_the_flag_names_the_source(spec: str, kind: type) -> None:
    source = build_reclaim_metrics_source(spec)
    assert isinstance(source, kind) and isinstance(source, ReclaimMetricsSource)


def test_an_unknown_source_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'malachite' is not a reclaim metrics source"):
        build_reclaim_metrics_source("malachite")
