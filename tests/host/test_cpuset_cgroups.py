"""A container's real cpuset from its cgroup (qrmd.host.cpuset_cgroups, cpu-policy §12.5): cgroup
v1 and v2, cgroupfs and systemd drivers, containerd / cri-o / docker IDs on synthetic trees,
and this machine's own cpuset cgroup read for real."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from policy.topology.cpuset import CPUSet
from qrmd.host.cpuset_cgroups import (
    CgroupCpusetReader,
    CpusetUnavailable,
    default_cpuset_cgroup_root,
    read_cpuset_cpus,
)
from qrmd.host.kube_cgroups import CgroupDriver

UID = "0b1c2d3e-aaaa-4bbb-8ccc-123456789abc"
UID_ = UID.replace("-", "_")
BARE = "4f9d0c1e" * 8

# (driver, runtime scheme) → the container cgroup's path under the controller's mount
# (a burstable pod: the middle of the three places tried).
PLACES = {
    (CgroupDriver.CGROUPFS, "containerd"): f"kubepods/burstable/pod{UID}/{BARE}",
    (CgroupDriver.CGROUPFS, "docker"): f"kubepods/burstable/pod{UID}/{BARE}",
    (CgroupDriver.CGROUPFS, "cri-o"): f"kubepods/burstable/pod{UID}/crio-{BARE}",
    (CgroupDriver.SYSTEMD, "containerd"): (
        f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"cri-containerd-{BARE}.scope"
    ),
    (CgroupDriver.SYSTEMD, "docker"): (
        f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"docker-{BARE}.scope"
    ),
    (CgroupDriver.SYSTEMD, "cri-o"): (
        f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
        f"crio-{BARE}.scope"
    ),
}


def _put(root: Path, relative: str, version: int, cpus: str, effective: str = "") -> Path:
    """A container cgroup as the kernel shows it: v1 cpuset.cpus; v2 also .effective."""
    cgroup = root / relative
    cgroup.mkdir(parents=True)
    (cgroup / "cpuset.cpus").write_text(f"{cpus}\n")
    if version == 2:
        (cgroup / "cpuset.cpus.effective").write_text(f"{effective or cpus}\n")
    return cgroup


@pytest.mark.parametrize("version", [1, 2], ids=["cgroup v1", "cgroup v2"])
@pytest.mark.parametrize(
    ("driver", "runtime"), list(PLACES), ids=[f"{d} driver, {r}" for d, r in PLACES]
)
@pytest.mark.parametrize("driver_known", [True, False], ids=["driver given", "driver auto"])
def test_every_driver_runtime_and_cgroup_version_is_found(
    tmp_path: Path, version: int, driver: CgroupDriver, runtime: str, driver_known: bool
) -> None:
    _put(tmp_path, PLACES[(driver, runtime)], version, "4-7,12")
    reader = CgroupCpusetReader(tmp_path, driver if driver_known else None)
    assert reader.cpuset(UID, f"{runtime}://{BARE}") == CPUSet.parse("4-7,12")
    # An ID without its scheme is tried under every runtime's name.
    assert reader.cpuset(UID, BARE) == CPUSet.parse("4-7,12")


def test_on_v2_an_empty_cpuset_cpus_reads_the_effective_set(tmp_path: Path) -> None:
    cgroup = _put(tmp_path, PLACES[(CgroupDriver.CGROUPFS, "containerd")], 2, "", "0-15")
    assert read_cpuset_cpus(cgroup) == CPUSet.parse("0-15")


def test_kubelets_cgroup_root_is_honoured(tmp_path: Path) -> None:
    _put(tmp_path, f"custom/kubepods/pod{UID}/{BARE}", 1, "3")
    reader = CgroupCpusetReader(tmp_path, CgroupDriver.CGROUPFS, kubelet_cgroup_root="/custom")
    assert reader.cpuset(UID, f"containerd://{BARE}") == CPUSet.parse("3")


@pytest.mark.parametrize(
    ("setup", "container_id", "message"),
    [
        pytest.param(None, f"containerd://{BARE}", "no cgroup found; looked at ",
                     id="a missing pod cgroup lists every place looked at"),
        pytest.param("pod-only", f"containerd://{BARE}", f"{{{BARE}}}",
                     id="a missing container cgroup names the names looked for"),
        pytest.param("garbage", f"containerd://{BARE}", "invalid cpuset",
                     id="a file that is not a CPU list is refused"),
        pytest.param("no-file", f"containerd://{BARE}", "cannot read",
                     id="a cgroup without cpuset.cpus names the file"),
        pytest.param(None, "rkt://abc", "unknown runtime 'rkt'",
                     id="an unknown runtime is named"),
        pytest.param(None, "containerd://../../etc", "not a valid name",
                     id="an ID that would climb out of the pod's cgroup is refused"),
    ],
)  # fmt: skip
def test_unreadable_cpusets_say_why(
    tmp_path: Path, setup: str | None, container_id: str, message: str
) -> None:
    pod = tmp_path / f"kubepods/pod{UID}"
    if setup == "pod-only":
        pod.mkdir(parents=True)
    elif setup == "garbage":
        (pod / BARE).mkdir(parents=True)
        (pod / BARE / "cpuset.cpus").write_text("four\n")
    elif setup == "no-file":
        (pod / BARE).mkdir(parents=True)
    reader = CgroupCpusetReader(tmp_path, CgroupDriver.CGROUPFS)
    with pytest.raises(CpusetUnavailable, match=message.replace("{", r"\{").replace("}", r"\}")):
        reader.cpuset(UID, container_id)


def test_the_cpuset_root_is_the_v1_mount_when_there_is_one(tmp_path: Path) -> None:
    assert default_cpuset_cgroup_root(tmp_path) == tmp_path
    (tmp_path / "cpuset").mkdir()
    (tmp_path / "cpuset" / "cpuset.cpus").write_text("0-3\n")
    assert default_cpuset_cgroup_root(tmp_path) == tmp_path / "cpuset"


def _own_cpuset_cgroup() -> Path | None:
    """This process's cpuset cgroup on this machine, v1 or v2, or None when there is none."""
    root = default_cpuset_cgroup_root()
    v1 = root != Path("/sys/fs/cgroup")
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (v1 and "cpuset" in controllers.split(",")) or (not v1 and controllers == ""):
            cgroup = root / path.lstrip("/")
            return cgroup if (cgroup / "cpuset.cpus").exists() else None
    return None


def test_this_machines_own_cpuset_cgroup_is_read_for_real() -> None:
    cgroup = _own_cpuset_cgroup()
    if cgroup is None:
        pytest.skip("this machine shows no cpuset cgroup for this process")
    cpus = read_cpuset_cpus(cgroup)
    # The kernel never lets this process run outside its cpuset.
    assert set(os.sched_getaffinity(0)) <= set(cpus)
