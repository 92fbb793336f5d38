"""The cgroup ports of the periodic checkers: read a container's real cpuset (cpu-policy §12.5)
and set ``cpu.idle`` on the reclaimed pods' cgroup (§12.6).

``qrmd.host.cpuset_cgroups.CgroupCpusetReader`` and ``qrmd.host.cpu_idle.CgroupCpuIdle``
implement them on a host's cgroup tree; tests drive the checkers with fakes of the same shape.
"""

from __future__ import annotations

from typing import Protocol

from actors.errors import ActorError
from policy.errors import ErrorKind
from policy.topology.cpuset import CPUSet

__all__ = ["CpuIdleError", "CpuIdleSetter", "CpusetReader", "CpusetUnavailable"]


class CpusetUnavailable(ActorError):  # noqa: N818 (reads as the condition, like the ports' errors)
    """A container's cpuset could not be read; the message names the file or the places.

    checkCPUSet reports it for that container (``real_state_invalid``) and goes on.
    """

    kind = ErrorKind.UNAVAILABLE


class CpuIdleError(ActorError):
    """``cpu.idle`` could not be written; the message names the file and the reason.

    syncCPUIdle reports NotReady; the operator must look (a missing cgroup, a refused write).
    """

    kind = ErrorKind.INTERNAL


class CpusetReader(Protocol):
    """Where a container's real cpuset is read."""

    def cpuset(self, pod_uid: str, container_id: str) -> CPUSet:
        """The CPUs the container may run on now.

        Args:
            pod_uid: the pod's UID.
            container_id: the runtime container ID as the pod source lists it.

        Raises:
            CpusetUnavailable: no cgroup, or an unreadable or malformed file.
        """
        ...


class CpuIdleSetter(Protocol):
    """Where ``cpu.idle`` is written."""

    def set_idle(self, relative_path: str, idle: bool) -> bool:
        """Write ``cpu.idle`` (1 or 0) into the cgroup at ``relative_path``.

        Returns:
            False when this kernel or hierarchy has no ``cpu.idle`` (nothing written; the
            reference then only warns), True once written.

        Raises:
            CpuIdleError: the cgroup is missing or the write failed.
        """
        ...
