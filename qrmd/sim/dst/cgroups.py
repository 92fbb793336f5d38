"""The simulated cgroups: each container's real cpuset behind the ``CpusetReader`` port.

kubelet writes the cpuset it was last told into the container's cgroup (``cpuset.cpus``), so a
healthy read answers the simulated kubelet's last answer for the container. The seed makes a
cpuset drift (``cpuset_drift``: something else on the node rewrote it) for a while: the read
then answers a different set of CPUs, which checkCPUSet (spec cpu-policy §12.5) must notice and
report, never act on. A container kubelet was never told of has no cgroup.
"""

from __future__ import annotations

from actors.ports.cgroups import CpusetUnavailable
from policy.topology.cpuset import CPUSet
from qrmd.sim.dst.kubelet import KubeletPeer

__all__ = ["SimCgroups"]


class SimCgroups:
    """``CpusetReader`` fed from the simulated kubelet's answers (module docstring)."""

    def __init__(self, kubelet: KubeletPeer, all_cpus: CPUSet) -> None:
        self._kubelet = kubelet
        self._all = all_cpus
        #: Pods whose cpuset drifted to every CPU of the node.
        self.drifted: set[str] = set()
        self.reads = 0

    def cpuset(self, pod_uid: str, container_id: str) -> CPUSet:
        self.reads += 1
        container = container_id.rsplit("/", 1)[-1].split("-", 1)[-1]
        answer = self._kubelet.answers.get((pod_uid, container))
        if answer is None:
            raise CpusetUnavailable(f"no cgroup for {pod_uid}/{container} (simulated)")
        if pod_uid in self.drifted:
            return self._all
        return CPUSet.parse(answer.cpus)
