"""Where kubelet puts pod and container cgroups, for both drivers (qrmd.host.kube_cgroups)."""

from __future__ import annotations

import pytest

from qrmd.host.kube_cgroups import (
    CgroupDriver,
    container_cgroup_names,
    container_id_of_cgroup,
    pod_cgroup_paths,
    split_container_id,
)

UID = "0b1c2d3e-aaaa-4bbb-8ccc-123456789abc"
UID_ = UID.replace("-", "_")
CID = "4f9d0c1e" * 8


@pytest.mark.parametrize(
    ("driver", "root", "want"),
    [
        pytest.param(
            CgroupDriver.CGROUPFS,
            "/",
            [f"kubepods/pod{UID}", f"kubepods/burstable/pod{UID}", f"kubepods/besteffort/pod{UID}"],
            id="cgroupfs: guaranteed at kubepods, then burstable, then besteffort",
        ),
        pytest.param(
            CgroupDriver.SYSTEMD,
            "/",
            [
                f"kubepods.slice/kubepods-pod{UID_}.slice",
                f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice",
                f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice",
            ],
            id="systemd: slices named with the UID's dashes as underscores",
        ),
        pytest.param(
            CgroupDriver.CGROUPFS,
            "/custom/",
            [
                f"custom/kubepods/pod{UID}",
                f"custom/kubepods/burstable/pod{UID}",
                f"custom/kubepods/besteffort/pod{UID}",
            ],
            id="kubelet --cgroup-root prefixes every path",
        ),
    ],
)
def test_pod_cgroup_paths(driver: CgroupDriver, root: str, want: list[str]) -> None:
    assert [str(p) for p in pod_cgroup_paths(UID, driver, root)] == want


@pytest.mark.parametrize(
    ("container_id", "driver", "want"),
    [
        pytest.param(
            f"containerd://{CID}",
            CgroupDriver.SYSTEMD,
            (f"cri-containerd-{CID}.scope",),
            id="containerd under systemd is a cri-containerd scope",
        ),
        pytest.param(
            f"docker://{CID}", CgroupDriver.SYSTEMD, (f"docker-{CID}.scope",), id="docker scope"
        ),
        pytest.param(
            f"cri-o://{CID}", CgroupDriver.SYSTEMD, (f"crio-{CID}.scope",), id="cri-o scope"
        ),
        pytest.param(
            f"containerd://{CID}", CgroupDriver.CGROUPFS, (CID,), id="containerd under cgroupfs"
        ),
        pytest.param(f"cri-o://{CID}", CgroupDriver.CGROUPFS, (f"crio-{CID}",), id="cri-o dir"),
        pytest.param(
            CID,
            CgroupDriver.SYSTEMD,
            (f"cri-containerd-{CID}.scope", f"docker-{CID}.scope", f"crio-{CID}.scope"),
            id="a bare ID is tried under every runtime's name",
        ),
        pytest.param(CID, CgroupDriver.CGROUPFS, (CID, f"crio-{CID}"), id="bare ID, cgroupfs"),
    ],
)
def test_container_cgroup_names(container_id: str, driver: CgroupDriver, want: tuple) -> None:
    assert container_cgroup_names(container_id, driver) == want


@pytest.mark.parametrize(
    ("name", "want"),
    [
        pytest.param(f"cri-containerd-{CID}.scope", CID, id="containerd scope"),
        pytest.param(f"docker-{CID}.scope", CID, id="docker scope"),
        pytest.param(f"crio-{CID}.scope", CID, id="cri-o scope"),
        pytest.param(f"crio-{CID}", CID, id="cri-o cgroupfs dir"),
        pytest.param(CID, CID, id="cgroupfs dir"),
        pytest.param(f"crio-conmon-{CID}.scope", None, id="cri-o's monitor is no container"),
        pytest.param("kubepods-burstable.slice", None, id="a slice is no container"),
        pytest.param("session-1.scope", None, id="a foreign scope is no container"),
    ],
)
def test_container_id_of_cgroup(name: str, want: str | None) -> None:
    assert container_id_of_cgroup(name) == want


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        pytest.param("../../etc", "not a valid name", id="a path cannot climb out"),
        pytest.param("a/b", "not a valid name", id="no slashes"),
        pytest.param("rkt://abc", "unknown runtime 'rkt'", id="unknown runtime"),
        pytest.param("containerd://", "not a valid name", id="empty ID"),
    ],
)
def test_bad_container_ids_are_refused(bad: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split_container_id(bad)


def test_bad_pod_uid_is_refused() -> None:
    with pytest.raises(ValueError, match=r"pod UID '\.\./x' is not a valid name"):
        pod_cgroup_paths("../x", CgroupDriver.CGROUPFS)
