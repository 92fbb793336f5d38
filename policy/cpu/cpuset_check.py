"""checkCPUSet: each container's real cpuset against its allocation, and overlaps between them
(spec cpu-policy §12.5). Detection only: nothing here changes state.

1. Which containers: every MAIN container of a pod (pool entries are not containers); a shared
   container whose requested cores are 0 is skipped, as the reference does (its cpuset
   follows the pool's adjustments). ``containers_to_check`` lists them with the cpuset each
   must have (``original_allocation_result``) in ascending (pod uid, container) order.
2. The caller reads each one's real ``cpuset.cpus`` (the pod source gives the container ID,
   the cgroup the set) and hands back one ``CpusetReading`` each, a value or the reason it
   could not be read.
3. ``judge_cpusets`` decides:
   * unreadable → ``real_state_invalid`` for that container;
   * a dedicated container (any NUMA binding) whose real set differs from its allocation →
     ``cpuset_invalid``;
   * overlap: walking the real sets in order, a dedicated set that meets the union of the
     dedicated sets before it, or the union of the shared sets meeting the union of the
     dedicated ones → ``cpuset_overlap``.
   Health, in the reference's order of precedence: unreadable → NotReady naming the
   containers and reasons; else invalid → "invalid cpuset exists: ..."; else overlap →
   "cpuset overlap: ..."; else Ready.

Quirk fixed: the reference keeps one error variable that a later container's successful
look-up overwrites, so only the last container's failure counts. Here every failing container
is reported, in the metrics and the health message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policy.cpu.context import PolicyContext
from policy.state.cpu_state import CPUState
from policy.state.entries import requested_cores
from policy.topology.cpuset import CPUSet

__all__ = [
    "CheckedContainer",
    "CpusetReading",
    "CpusetVerdict",
    "containers_to_check",
    "judge_cpusets",
]

# A health message names at most this many containers, then says how many more.
_NAMED_IN_MESSAGE = 5


@dataclass(frozen=True, slots=True)
class CheckedContainer:
    """A container whose cpuset is checked, and what its cpuset must be.

    Attributes:
        pod_uid, pod_namespace, pod_name, container_name: who.
        qos_level: ``shared_cores``, ``dedicated_cores`` or ``reclaimed_cores``.
        expected: its ``original_allocation_result``.
    """

    pod_uid: str
    pod_namespace: str
    pod_name: str
    container_name: str
    qos_level: str
    expected: CPUSet

    @property
    def is_dedicated(self) -> bool:
        """Whether its real set must equal ``expected`` exactly."""
        return self.qos_level == "dedicated_cores"

    @property
    def label(self) -> str:
        """``namespace/pod/container`` for messages."""
        return f"{self.pod_namespace}/{self.pod_name}/{self.container_name}"


@dataclass(frozen=True, slots=True)
class CpusetReading:
    """One container's real cpuset, or why it could not be read."""

    container: CheckedContainer
    actual: CPUSet | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class CpusetVerdict:
    """What one checkCPUSet round found.

    Attributes:
        unreadable: containers whose real cpuset could not be read (``real_state_invalid``).
        invalid: dedicated containers whose real cpuset is not their allocation
            (``cpuset_invalid``).
        overlapping: dedicated containers whose real cpuset meets another dedicated one's
            or the shared containers' (``cpuset_overlap``).
        health_error: the handler's NotReady message, or ``None`` for Ready.
    """

    unreadable: tuple[CpusetReading, ...]
    invalid: tuple[CpusetReading, ...]
    overlapping: tuple[CpusetReading, ...]
    health_error: str | None

    @property
    def overlap(self) -> bool:
        """Whether any overlap was found."""
        return bool(self.overlapping)


def containers_to_check(state: CPUState, ctx: PolicyContext) -> tuple[CheckedContainer, ...]:
    """Step 1: the containers whose cpuset is checked, in ascending (pod, container) order."""
    checked: list[CheckedContainer] = []
    for pod_uid in sorted(state.pods):
        containers = state.pod_containers(pod_uid)
        for name in sorted(containers):
            entry = containers[name]
            if not entry.is_main():
                continue
            if entry.is_shared() and requested_cores(entry, ctx.requested_millicpu) == 0:
                continue
            info = state.derive(entry)
            checked.append(
                CheckedContainer(
                    pod_uid,
                    entry.pod_namespace,
                    entry.pod_name,
                    name,
                    entry.qos_level,
                    info.original_allocation_result,
                )
            )
    return tuple(checked)


def _listing(readings: Sequence[CpusetReading], describe: str) -> str:
    named = [f"{r.container.label} {describe.format(r=r)}" for r in readings[:_NAMED_IN_MESSAGE]]
    more = len(readings) - _NAMED_IN_MESSAGE
    return "; ".join(named) + (f"; and {more} more" if more > 0 else "")


def judge_cpusets(readings: Sequence[CpusetReading]) -> CpusetVerdict:
    """Steps 2–3: every unreadable, invalid and overlapping container, and the health.

    Args:
        readings: one per container of ``containers_to_check``, in its order.

    Returns:
        The verdict (see ``CpusetVerdict``).
    """
    unreadable = tuple(r for r in readings if r.actual is None)
    read = [r for r in readings if r.actual is not None]
    invalid = tuple(
        r for r in read if r.container.is_dedicated and r.actual != r.container.expected
    )
    dedicated_union = CPUSet()
    shared_union = CPUSet()
    overlapping: list[CpusetReading] = []
    for reading in read:
        assert reading.actual is not None
        if reading.container.is_dedicated:
            if reading.actual.intersection(dedicated_union):
                overlapping.append(reading)
            dedicated_union = dedicated_union.union(reading.actual)
        elif reading.container.qos_level == "shared_cores":
            shared_union = shared_union.union(reading.actual)
    shared_overlap = shared_union.intersection(dedicated_union)
    if shared_overlap:
        for reading in read:
            assert reading.actual is not None
            meets = reading.container.is_dedicated and reading.actual.intersection(shared_union)
            if meets and reading not in overlapping:
                overlapping.append(reading)
    health: str | None = None
    if unreadable:
        health = f"{len(unreadable)} containers' cpusets unreadable: " + _listing(
            unreadable, "({r.error})"
        )
    elif invalid:
        health = "invalid cpuset exists: " + _listing(
            invalid, "has {r.actual}, allocated {r.container.expected}"
        )
    elif overlapping:
        health = "cpuset overlap: " + _listing(overlapping, "has {r.actual}")
        if shared_overlap:
            health += f" (shared containers' CPUs {shared_overlap} are also dedicated)"
    return CpusetVerdict(unreadable, invalid, tuple(overlapping), health)
