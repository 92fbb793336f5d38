"""A container's real ``cpuset.cpus``, read from its cgroup (spec cpu-policy §12.5 step 1).

Where: the cpuset controller's mount (``--cpuset-cgroup-root``: ``/sys/fs/cgroup/cpuset`` on
cgroup v1, else the unified v2 hierarchy at ``/sys/fs/cgroup``), then the pod's cgroup by
UID and the container's by its runtime container ID, for the cgroupfs and systemd drivers
and the containerd, cri-o and docker runtimes — the same places the memory balancer reads
``memory.numa_stat`` (``qrmd.host.kube_cgroups`` has the table).

What: v1 ``cpuset.cpus`` always holds the container's set. On v2 ``cpuset.cpus`` holds what
was *asked* for and is empty when the runtime set nothing, the set then being inherited;
``cpuset.cpus.effective`` holds what the kernel applies. The checker compares what qrmd
allocated with what applies, so on v2 an empty ``cpuset.cpus`` is read through
``cpuset.cpus.effective``.

Implements the ``CpusetReader`` port. Every failure is a ``CpusetUnavailable`` naming the
file, or the places the cgroup was looked for; the checker reports it as
``real_state_invalid`` for that container.
"""

from __future__ import annotations

from pathlib import Path

from actors.ports.cgroups import CpusetUnavailable
from policy.topology.cpuset import CPUSet
from qrmd.host.kube_cgroups import CgroupDriver, container_cgroup_names, pod_cgroup_paths

__all__ = [
    "CPUSET_CPUS",
    "CgroupCpusetReader",
    "CpusetUnavailable",
    "default_cpuset_cgroup_root",
    "read_cpuset_cpus",
]

CPUSET_CPUS = "cpuset.cpus"
_EFFECTIVE = "cpuset.cpus.effective"


def default_cpuset_cgroup_root(fs_root: Path | str = "/sys/fs/cgroup") -> Path:
    """The cpuset controller's mount: ``<fs_root>/cpuset`` where cgroup v1 (or a hybrid
    layout) mounts it, else the unified v2 hierarchy at ``fs_root``."""
    root = Path(fs_root)
    v1 = root / "cpuset"
    return v1 if (v1 / CPUSET_CPUS).exists() else root


def read_cpuset_cpus(cgroup: Path) -> CPUSet:
    """The CPUs a cgroup's tasks may run on.

    Args:
        cgroup: the cgroup's directory.

    Returns:
        ``cpuset.cpus``, or on v2 ``cpuset.cpus.effective`` when the former is empty.

    Raises:
        CpusetUnavailable: the file is missing, unreadable or not a CPU list.
    """
    path = cgroup / CPUSET_CPUS
    text = _read(path)
    if not text and (cgroup / _EFFECTIVE).exists():
        path = cgroup / _EFFECTIVE
        text = _read(path)
    try:
        return CPUSet.parse(text)
    except ValueError as err:
        raise CpusetUnavailable(f"{path}: {err}") from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise CpusetUnavailable(f"cannot read {path}: {reason}") from None


class CgroupCpusetReader:
    """Reads containers' cpusets on a host's cgroup tree (see the module docstring).

    Args:
        cgroup_root: the cpuset controller's mount (default: ``default_cpuset_cgroup_root()``).
        driver: kubelet's cgroup driver; ``None`` tries cgroupfs, then systemd.
        kubelet_cgroup_root: kubelet's ``--cgroup-root``.
    """

    def __init__(
        self,
        cgroup_root: Path | str | None = None,
        driver: CgroupDriver | None = None,
        kubelet_cgroup_root: str = "/",
    ) -> None:
        self.root = Path(cgroup_root) if cgroup_root is not None else default_cpuset_cgroup_root()
        self._drivers = (driver,) if driver is not None else tuple(CgroupDriver)
        self._kubelet_root = kubelet_cgroup_root

    def container_cgroup(self, pod_uid: str, container_id: str) -> Path:
        """The container's cgroup directory.

        Raises:
            CpusetUnavailable: a UID or ID that cannot name a cgroup, or no such directory;
                the message lists every place looked at.
        """
        tried: list[str] = []
        for driver in self._drivers:
            try:
                pods = pod_cgroup_paths(pod_uid, driver, self._kubelet_root)
                names = container_cgroup_names(container_id, driver)
            except ValueError as err:
                raise CpusetUnavailable(f"pod {pod_uid}: {err}") from None
            for relative in pods:
                pod_dir = self.root / relative
                if not pod_dir.is_dir():
                    tried.append(str(pod_dir))
                    continue
                for name in names:
                    if (pod_dir / name).is_dir():
                        return pod_dir / name
                tried.append(f"{pod_dir}/{{{','.join(names)}}}")
        raise CpusetUnavailable(
            f"pod {pod_uid} container {container_id}: no cgroup found; looked at {', '.join(tried)}"
        )

    def cpuset(self, pod_uid: str, container_id: str) -> CPUSet:
        """The container's real cpuset (§12.5 step 1).

        Args:
            pod_uid: the pod's UID.
            container_id: as kubelet reports it (``containerd://<id>``), or bare.

        Raises:
            CpusetUnavailable: see ``container_cgroup`` and ``read_cpuset_cpus``.
        """
        return read_cpuset_cpus(self.container_cgroup(pod_uid, container_id))
