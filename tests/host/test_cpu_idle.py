"""cpu.idle on the reclaimed pods' cgroup (qrmd.host.cpu_idle, cpu-policy §12.6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.ports.cgroups import CpuIdleError
from qrmd.host.cpu_idle import CgroupCpuIdle, default_cpu_cgroup_root


def _reclaim(root: Path, with_idle: bool = True) -> Path:
    cgroup = root / "kubepods" / "besteffort"
    cgroup.mkdir(parents=True)
    if with_idle:
        (cgroup / "cpu.idle").write_text("0\n")
    return cgroup


@pytest.mark.parametrize(("idle", "written"), [(True, "1"), (False, "0")], ids=["on", "off"])
def test_cpu_idle_is_written_into_the_relative_path(
    tmp_path: Path, idle: bool, written: str
) -> None:
    cgroup = _reclaim(tmp_path)
    assert CgroupCpuIdle(tmp_path).set_idle("/kubepods/besteffort", idle) is True
    assert (cgroup / "cpu.idle").read_text() == written


def test_a_cgroup_without_cpu_idle_is_unsupported_not_an_error(tmp_path: Path) -> None:
    _reclaim(tmp_path, with_idle=False)
    assert CgroupCpuIdle(tmp_path).set_idle("/kubepods/besteffort", True) is False
    assert not (tmp_path / "kubepods" / "besteffort" / "cpu.idle").exists()


@pytest.mark.parametrize(
    ("path", "message"),
    [
        pytest.param("/kubepods/besteffort", "does not exist", id="a missing cgroup is an error"),
        pytest.param("/../etc", "climbs out", id="a path out of the root is refused"),
    ],
)
def test_bad_reclaim_cgroups(tmp_path: Path, path: str, message: str) -> None:
    with pytest.raises(CpuIdleError, match=message):
        CgroupCpuIdle(tmp_path).set_idle(path, True)


def test_the_cpu_root_is_the_v1_cpu_mount_when_there_is_one(tmp_path: Path) -> None:
    assert default_cpu_cgroup_root(tmp_path) == tmp_path
    (tmp_path / "cpu,cpuacct").mkdir()
    (tmp_path / "cpu,cpuacct" / "cpu.shares").write_text("1024\n")
    assert default_cpu_cgroup_root(tmp_path) == tmp_path / "cpu,cpuacct"
