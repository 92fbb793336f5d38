"""``cpu.idle`` on the reclaimed pods' cgroup (spec cpu-policy §12.6; the reference's
``ApplyCPUWithRelativePath`` with ``CpuIdlePtr``).

The cgroup is ``--reclaim-relative-root-cgroup-path`` (``/kubepods/besteffort``) under the cpu
controller's mount: ``/sys/fs/cgroup/cpu`` on cgroup v1 (``cpu,cpuacct`` where the two are
mounted together), else the unified v2 hierarchy at ``/sys/fs/cgroup``. The path is used as
given, as the reference does: with kubelet's systemd driver it is
``/kubepods.slice/kubepods-besteffort.slice``.

A cgroup without a ``cpu.idle`` file is a kernel without SCHED_IDLE for cgroups (before 5.15)
or a v1 hierarchy: the reference warns and reports ready, and so does the checker (the port
answers False). A missing cgroup or a failed write is a ``CpuIdleError``.
"""

from __future__ import annotations

from pathlib import Path

from actors.ports.cgroups import CpuIdleError

__all__ = ["CPU_IDLE", "CgroupCpuIdle", "default_cpu_cgroup_root"]

CPU_IDLE = "cpu.idle"


def default_cpu_cgroup_root(fs_root: Path | str = "/sys/fs/cgroup") -> Path:
    """The cpu controller's mount: ``<fs_root>/cpu`` (or ``cpu,cpuacct``) on cgroup v1, else
    the unified v2 hierarchy at ``fs_root``."""
    root = Path(fs_root)
    for name in ("cpu", "cpu,cpuacct"):
        if (root / name / "cpu.shares").exists():
            return root / name
    return root


class CgroupCpuIdle:
    """Implements the ``CpuIdleSetter`` port on a host's cgroup tree.

    Args:
        cgroup_root: the cpu controller's mount (default: ``default_cpu_cgroup_root()``).
    """

    def __init__(self, cgroup_root: Path | str | None = None) -> None:
        self.root = Path(cgroup_root) if cgroup_root is not None else default_cpu_cgroup_root()

    def set_idle(self, relative_path: str, idle: bool) -> bool:
        """Write ``cpu.idle`` into ``<root>/<relative_path>``.

        Returns:
            False when the cgroup has no ``cpu.idle`` (unsupported), True once written.

        Raises:
            CpuIdleError: the path climbs out of the root, the cgroup is missing, or the
                write failed.
        """
        relative = Path(relative_path.strip("/"))
        if ".." in relative.parts:
            raise CpuIdleError(f"{relative_path!r} climbs out of the cgroup root {self.root}")
        cgroup = self.root / relative
        if not cgroup.is_dir():
            raise CpuIdleError(f"the reclaimed pods' cgroup {cgroup} does not exist")
        target = cgroup / CPU_IDLE
        if not target.exists():
            return False
        try:
            target.write_text("1" if idle else "0", encoding="ascii")
        except OSError as err:
            raise CpuIdleError(f"cannot write {target}: {err.strerror or err}") from None
        return True
