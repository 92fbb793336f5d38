"""Anonymous memory per NUMA node of pods and containers, from cgroup ``memory.numa_stat``
(spec memory-balancer §4.2).

The file has one line per counter, in one of two shapes:

* cgroup v1: ``anon=<pages> N0=<pages> N1=<pages> ...``, counts in pages. A container's figure is
  its ``anon`` line (its own pages, as the spec says); a pod's is ``hierarchical_anon`` (older
  kernels: ``total_anon``), since a pod cgroup holds no process of its own and its plain
  ``anon`` line is nearly empty. Pages are 4096 bytes (page shift 12), as the reference counts
  them; ``page_size`` exists for hosts that know better.
* cgroup v2: ``anon N0=<bytes> N1=<bytes> ...``, counts in bytes and always hierarchical.

The shape of the lines says which version wrote the file, so the reader needs no setting for it.
A node the file does not list has no sample there (the pod is then skipped, §4.2): it is never
read as zero.

``CgroupAnonMemoryReader`` implements the ``ContainerMemoryReader`` port: it finds the pod's
cgroup from its UID and its containers' cgroups beneath it by container ID, for the cgroupfs and
systemd drivers (``qrmd.host.kube_cgroups``), or reads every container cgroup under the pod when
the caller knows no container IDs. Every failure names the file or the places it looked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from actors.ports.balancer import AnonMemoryUnavailable, PodAnonMemory
from qrmd.host.kube_cgroups import (
    CgroupDriver,
    container_cgroup_names,
    container_id_of_cgroup,
    pod_cgroup_paths,
)

__all__ = [
    "NUMA_STAT",
    "V1_PAGE_SIZE",
    "CgroupAnonMemoryReader",
    "NumaStat",
    "NumaStatError",
    "default_memory_cgroup_root",
    "parse_numa_stat",
    "read_numa_stat",
]

NUMA_STAT = "memory.numa_stat"

#: Bytes per page of a v1 count: the reference shifts by 12 (§4.2).
V1_PAGE_SIZE = 4096

_V1_HEAD = re.compile(r"([a-z][a-z0-9_]*)=(\d+)")
_V2_HEAD = re.compile(r"[a-z][a-z0-9_]*")
_NODE = re.compile(r"N(\d+)=(\d+)")

# The pod-level (hierarchical) anon counter of v1, by kernel generation.
_V1_HIERARCHICAL_ANON = ("hierarchical_anon", "total_anon")


class NumaStatError(AnonMemoryUnavailable):
    """A ``memory.numa_stat`` is missing, unreadable or malformed, or a cgroup is not found;
    the message names the file or the places looked at."""


@dataclass(frozen=True, slots=True)
class NumaStat:
    """One ``memory.numa_stat``: every counter's bytes per NUMA node.

    Attributes:
        version: 1 or 2, from the shape of the lines.
        counters: counter name (``anon``, ``hierarchical_anon``, ...) → NUMA id → bytes.
        path: the file, for messages.
    """

    version: int
    counters: Mapping[str, Mapping[int, int]]
    path: str

    def anon(self, *, hierarchical: bool) -> Mapping[int, int]:
        """Anonymous memory per NUMA node, in bytes.

        Args:
            hierarchical: the cgroup's subtree (a pod) rather than its own pages (a
                container). On v2 every counter is hierarchical already.

        Raises:
            NumaStatError: the file has no suitable anon line.
        """
        if self.version == 2:
            names: tuple[str, ...] = ("anon",)
        elif hierarchical:
            names = _V1_HIERARCHICAL_ANON
        else:
            names = ("anon", "total_anon")
        for name in names:
            if name in self.counters:
                return self.counters[name]
        raise NumaStatError(f"{self.path}: no {' or '.join(repr(n) for n in names)} line")


def parse_numa_stat(text: str, path: str, page_size: int = V1_PAGE_SIZE) -> NumaStat:
    """Parse a ``memory.numa_stat`` file's text.

    Args:
        text: the file's contents.
        path: the file's path, for messages.
        page_size: bytes per page of a v1 count.

    Returns:
        The counters in bytes.

    Raises:
        NumaStatError: a line has neither shape, the shapes are mixed, or a node repeats; the
            message names the file and the line number.
    """
    counters: dict[str, Mapping[int, int]] = {}
    version = 0
    for number, line in enumerate(text.splitlines(), start=1):
        tokens = line.split()
        if not tokens:
            continue
        where = f"{path}: line {number}"
        if _V1_HEAD.fullmatch(tokens[0]):
            line_version, name, unit = 1, tokens[0].partition("=")[0], page_size
        elif _V2_HEAD.fullmatch(tokens[0]):
            line_version, name, unit = 2, tokens[0], 1
        else:
            raise NumaStatError(
                f"{where}: expected 'name=total N0=...' or 'name N0=...', got {line.strip()!r}"
            )
        if version and line_version != version:
            raise NumaStatError(f"{where}: a cgroup v{line_version} line in a v{version} file")
        version = line_version
        counters[name] = MappingProxyType(_nodes(tokens[1:], unit, where))
    if not version:
        raise NumaStatError(f"{path}: empty")
    return NumaStat(version, MappingProxyType(counters), path)


def _nodes(tokens: Sequence[str], unit: int, where: str) -> dict[int, int]:
    nodes: dict[int, int] = {}
    for token in tokens:
        match = _NODE.fullmatch(token)
        if match is None:
            raise NumaStatError(f"{where}: expected N<node>=<count>, got {token!r}")
        node = int(match.group(1))
        if node in nodes:
            raise NumaStatError(f"{where}: node {node} is listed twice")
        nodes[node] = int(match.group(2)) * unit
    return nodes


def read_numa_stat(cgroup: Path, page_size: int = V1_PAGE_SIZE) -> NumaStat:
    """Read and parse ``<cgroup>/memory.numa_stat``.

    Raises:
        NumaStatError: missing (a kernel without NUMA support has none), unreadable or
            malformed; the message names the file.
    """
    path = cgroup / NUMA_STAT
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise NumaStatError(f"{path}: missing") from None
    except OSError as exc:
        raise NumaStatError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise NumaStatError(f"{path}: not text") from None
    return parse_numa_stat(text, str(path), page_size)


def default_memory_cgroup_root(fs_root: Path | str = "/sys/fs/cgroup") -> Path:
    """The memory controller's mount: ``<fs_root>/memory`` where cgroup v1 (or a hybrid
    layout) mounts it there, else the unified v2 hierarchy at ``fs_root``."""
    root = Path(fs_root)
    v1 = root / "memory"
    return v1 if (v1 / NUMA_STAT).exists() else root


class CgroupAnonMemoryReader:
    """The ``ContainerMemoryReader`` port on a host's cgroup tree.

    Args:
        cgroup_root: the memory controller's mount (default: ``default_memory_cgroup_root()``).
        driver: kubelet's cgroup driver; None tries cgroupfs, then systemd.
        kubelet_cgroup_root: kubelet's ``--cgroup-root``.
        page_size: bytes per page of a v1 count.
    """

    def __init__(
        self,
        cgroup_root: Path | str | None = None,
        driver: CgroupDriver | None = None,
        kubelet_cgroup_root: str = "/",
        page_size: int = V1_PAGE_SIZE,
    ) -> None:
        self._root = Path(cgroup_root) if cgroup_root is not None else default_memory_cgroup_root()
        self._drivers = (driver,) if driver is not None else tuple(CgroupDriver)
        self._kubelet_root = kubelet_cgroup_root
        self._page_size = page_size

    def pod_cgroup(self, pod_uid: str) -> tuple[Path, CgroupDriver]:
        """The pod's cgroup directory and the driver that named it.

        Raises:
            NumaStatError: no candidate exists; the message lists the places looked at.
        """
        tried: list[Path] = []
        for driver in self._drivers:
            try:
                candidates = pod_cgroup_paths(pod_uid, driver, self._kubelet_root)
            except ValueError as exc:
                raise NumaStatError(str(exc)) from None
            for relative in candidates:
                path = self._root / relative
                if path.is_dir():
                    return path, driver
                tried.append(path)
        raise NumaStatError(
            f"pod {pod_uid}: no cgroup found; looked at {', '.join(map(str, tried))}"
        )

    def anon_by_numa(self, pod_uid: str, container_ids: Sequence[str] | None) -> PodAnonMemory:
        """Read the pod's and its containers' anonymous memory per NUMA node (the port).

        Args:
            pod_uid: the pod's UID.
            container_ids: its regular containers' IDs; None reads every container cgroup.

        Returns:
            The pod's hierarchical figure and each container's own figure, in bytes.

        Raises:
            NumaStatError: the pod's or a listed container's cgroup is not found, or a
                ``memory.numa_stat`` is unreadable or malformed; the message names it.
        """
        pod_dir, driver = self.pod_cgroup(pod_uid)
        pod = read_numa_stat(pod_dir, self._page_size).anon(hierarchical=True)
        containers: dict[str, Mapping[int, int]] = {}
        if container_ids is None:
            for cid, cgroup in self._every_container(pod_dir):
                containers[cid] = read_numa_stat(cgroup, self._page_size).anon(hierarchical=False)
        else:
            for cid in container_ids:
                cgroup = self._container_cgroup(pod_uid, pod_dir, driver, cid)
                containers[cid] = read_numa_stat(cgroup, self._page_size).anon(hierarchical=False)
        return PodAnonMemory(pod=pod, containers=containers)

    def _container_cgroup(
        self, pod_uid: str, pod_dir: Path, driver: CgroupDriver, container_id: str
    ) -> Path:
        try:
            names = container_cgroup_names(container_id, driver)
        except ValueError as exc:
            raise NumaStatError(f"pod {pod_uid}: {exc}") from None
        for name in names:
            if (pod_dir / name).is_dir():
                return pod_dir / name
        raise NumaStatError(
            f"pod {pod_uid}: no cgroup for container {container_id} under {pod_dir} "
            f"(looked for {', '.join(names)})"
        )

    def _every_container(self, pod_dir: Path) -> list[tuple[str, Path]]:
        try:
            entries = sorted(p for p in pod_dir.iterdir() if p.is_dir())
        except OSError as exc:
            raise NumaStatError(f"cannot list {pod_dir}: {exc.strerror or exc}") from None
        found: list[tuple[str, Path]] = []
        for entry in entries:
            cid = container_id_of_cgroup(entry.name)
            if cid is not None:
                found.append((cid, entry))
        return found
