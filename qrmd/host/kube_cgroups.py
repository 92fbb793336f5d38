"""Where kubelet puts a pod's and its containers' cgroups, for both cgroup drivers.

kubelet names a pod's cgroup after its QoS class and UID, and the container runtime names each
container's cgroup after its container ID, beneath the pod's. Relative to the memory
controller's mount (``/sys/fs/cgroup/memory`` on cgroup v1, ``/sys/fs/cgroup`` on v2) and to
kubelet's ``--cgroup-root`` (``/`` by default):

============ ============================================================================
driver       pod cgroup (guaranteed · burstable · besteffort)
============ ============================================================================
cgroupfs     ``kubepods/pod<uid>`` · ``kubepods/burstable/pod<uid>`` ·
             ``kubepods/besteffort/pod<uid>``
systemd      ``kubepods.slice/kubepods-pod<uid_>.slice`` ·
             ``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice`` ·
             ``kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid_>.slice``
============ ============================================================================

``<uid_>`` is the UID with its dashes turned into underscores (systemd reserves ``-`` for the
slice hierarchy). Container cgroups under the pod's, by runtime (the scheme of the container ID
kubelet reports, ``containerd://<id>``):

============ ==================================== ===========================
runtime      systemd                              cgroupfs
============ ==================================== ===========================
containerd   ``cri-containerd-<id>.scope``        ``<id>``
docker       ``docker-<id>.scope``                ``<id>``
cri-o        ``crio-<id>.scope``                  ``crio-<id>``
============ ==================================== ===========================

An ID without a scheme is tried under every name. The QoS class is not needed: each place is
tried in the table's order and the first that exists is the pod's.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import PurePosixPath

__all__ = [
    "CgroupDriver",
    "container_cgroup_names",
    "container_id_of_cgroup",
    "pod_cgroup_paths",
    "split_container_id",
]


class CgroupDriver(StrEnum):
    """kubelet's ``--cgroup-driver``."""

    CGROUPFS = "cgroupfs"
    SYSTEMD = "systemd"


# A UID or container ID becomes part of a path: nothing that could climb out of it.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

# Runtime scheme → (systemd scope prefix, cgroupfs directory prefix).
_RUNTIME_PREFIXES: dict[str, tuple[str, str]] = {
    "containerd": ("cri-containerd-", ""),
    "docker": ("docker-", ""),
    "cri-o": ("crio-", "crio-"),
}


def _checked(value: str, what: str) -> str:
    if not _SAFE_NAME.fullmatch(value) or ".." in value:
        raise ValueError(f"{what} {value!r} is not a valid name for a cgroup")
    return value


def pod_cgroup_paths(
    pod_uid: str, driver: CgroupDriver, kubelet_cgroup_root: str = "/"
) -> tuple[PurePosixPath, ...]:
    """Where the pod's cgroup may be, guaranteed first, then burstable, then besteffort.

    Args:
        pod_uid: the pod's UID.
        driver: kubelet's cgroup driver.
        kubelet_cgroup_root: kubelet's ``--cgroup-root``.

    Returns:
        Paths relative to the memory controller's mount.

    Raises:
        ValueError: the UID could not name a directory.
    """
    uid = _checked(pod_uid, "pod UID")
    base = PurePosixPath(kubelet_cgroup_root.strip("/") or ".")
    if driver is CgroupDriver.CGROUPFS:
        kubepods = base / "kubepods"
        return (
            kubepods / f"pod{uid}",
            kubepods / "burstable" / f"pod{uid}",
            kubepods / "besteffort" / f"pod{uid}",
        )
    unit = uid.replace("-", "_")
    kubepods = base / "kubepods.slice"
    return (
        kubepods / f"kubepods-pod{unit}.slice",
        kubepods / "kubepods-burstable.slice" / f"kubepods-burstable-pod{unit}.slice",
        kubepods / "kubepods-besteffort.slice" / f"kubepods-besteffort-pod{unit}.slice",
    )


def split_container_id(container_id: str) -> tuple[str | None, str]:
    """``containerd://abc`` → ``("containerd", "abc")``; a bare ``abc`` → ``(None, "abc")``.

    Raises:
        ValueError: the scheme is not a known runtime, or the ID could not name a directory.
    """
    runtime, sep, bare = container_id.partition("://")
    if not sep:
        return None, _checked(container_id, "container ID")
    if runtime not in _RUNTIME_PREFIXES:
        known = ", ".join(f"{r}://" for r in _RUNTIME_PREFIXES)
        raise ValueError(f"container ID {container_id!r}: unknown runtime {runtime!r} ({known})")
    return runtime, _checked(bare, "container ID")


def container_cgroup_names(container_id: str, driver: CgroupDriver) -> tuple[str, ...]:
    """The names the container's cgroup may have under its pod's, most likely first.

    Args:
        container_id: as kubelet reports it, with or without its runtime scheme.
        driver: kubelet's cgroup driver.

    Raises:
        ValueError: see ``split_container_id``.
    """
    runtime, bare = split_container_id(container_id)
    runtimes = [runtime] if runtime is not None else list(_RUNTIME_PREFIXES)
    names: list[str] = []
    for r in runtimes:
        scope_prefix, dir_prefix = _RUNTIME_PREFIXES[r]
        name = (
            f"{scope_prefix}{bare}.scope" if driver is CgroupDriver.SYSTEMD else dir_prefix + bare
        )
        if name not in names:
            names.append(name)
    return tuple(names)


def container_id_of_cgroup(name: str) -> str | None:
    """The bare container ID a container cgroup's directory name carries, or None when the
    name is not a container's (a systemd ``.slice``, a stray directory).

    ``cri-containerd-abc.scope``, ``docker-abc.scope``, ``crio-abc.scope``, ``crio-abc`` and
    ``abc`` all give ``abc``.
    """
    if name.startswith("crio-conmon-"):
        return None  # cri-o's monitor process, beside the container, not a container
    if name.endswith(".scope"):
        stem = name.removesuffix(".scope")
        for scope_prefix, _ in _RUNTIME_PREFIXES.values():
            if stem.startswith(scope_prefix):
                bare = stem.removeprefix(scope_prefix)
                return bare if _SAFE_NAME.fullmatch(bare) else None
        return None
    if name.endswith(".slice") or not _SAFE_NAME.fullmatch(name):
        return None
    return name.removeprefix("crio-")
