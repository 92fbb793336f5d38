"""The simulated CPU load source: containers' 1-minute load behind the ``ContainerLoadSource``
port, and the eviction manager's ``GetEvictPods`` requests of the suppression plugin.

Healthy, each container asked for has a load the seed draws (0 to a few runnable tasks). The
seed makes the source misbehave (``mode``):

* ``missing``: a container's sample is absent now and then (``MissingLoad``, as an adapter
  reports a stale or unreadable sample, never a zero: ``actors.ports.cpu_load``);
* ``absurd``: loads far beyond any pool (a runaway collector; still numbers ``>= 0``, which
  is all the port promises), so the load rings fill with samples over every bound.

At Katalyst v0.5.47 the suppression plugin also reads the reclaim pool's metrics
(``SimReclaimMetrics`` behind the ``ReclaimMetricsSource`` port): each CPU's busy share and the
reclaim cgroups' usage and CFS quota, in the same modes as the load source (the load fault
sets both): ``missing`` reports a CPU's usage or a cgroup's figures as ``MissingMetric`` now
and then (never a zero, which would inflate the supply), ``absurd`` busy shares and usages far
beyond any CPU (10⁶).

``active_pods`` is what kubelet's eviction manager sends with ``GetEvictPods``: the running
pods. At times it sends none of the reclaimed pods (a listing taken while they were being
deleted), which is the suppression plugin's early return that keeps the timers (katalyst-core
v0.5.3 ``pressure_suppression.go``; ``policy.cpu.pressure.suppression``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from random import Random

from actors.ports.cpu_load import ContainerKey, MissingLoad
from actors.ports.reclaim_metrics import CgroupCPU, MissingMetric, ReclaimReading
from policy.cpu.pressure import ActivePod
from qrmd.sim.dst.kubelet import KubeletPeer

__all__ = ["LOAD_MODES", "SimLoadSource", "SimReclaimMetrics", "active_pods"]

LOAD_MODES = ("healthy", "missing", "absurd")
#: Loads an ``absurd`` source reports: far above any pool of the simulated node.
ABSURD_LOADS = (1e6, 1e12)


class SimLoadSource:
    """``ContainerLoadSource`` whose samples the seed draws (module docstring)."""

    def __init__(self, rng: Random) -> None:
        self._rng = rng
        self.mode = "healthy"

    def sample(
        self, containers: Sequence[ContainerKey]
    ) -> Mapping[ContainerKey, float | MissingLoad]:
        out: dict[ContainerKey, float | MissingLoad] = {}
        for key in containers:
            if self.mode == "missing" and self._rng.random() < 0.5:
                out[key] = MissingLoad("no sample in the simulated collector")
            elif self.mode == "absurd" and self._rng.random() < 0.5:
                out[key] = self._rng.choice(ABSURD_LOADS)
            else:
                out[key] = round(self._rng.uniform(0.0, 3.0), 3)
        return out


class SimReclaimMetrics:
    """``ReclaimMetricsSource`` whose figures the seed draws, in the load source's mode
    (module docstring). Every reclaim cgroup exists: qrmd makes the per-NUMA ones under the
    root (katalyst-core v0.5.47 keeps them for the reclaim pool's NUMA parts).

    Args:
        rng: the seed's choices.
        loads: the load source whose mode this follows.
        cpus: the node's CPU ids.
    """

    def __init__(self, rng: Random, loads: SimLoadSource, cpus: Sequence[int]) -> None:
        self._rng = rng
        self._loads = loads
        self._cpus = tuple(cpus)
        self.reads = 0

    def cgroup_exists(self, relative_path: str) -> bool:
        del relative_path
        return True

    def read(self, cgroups: Sequence[str]) -> ReclaimReading:
        self.reads += 1
        rng, mode = self._rng, self._loads.mode
        if mode == "missing" and rng.random() < 0.3:
            missing = MissingMetric("no cpu.usage.ratio in the simulated malachite")
            return ReclaimReading(missing, dict.fromkeys(cgroups, missing))
        cores = {
            cpu: rng.choice(ABSURD_LOADS)
            if mode == "absurd" and rng.random() < 0.2
            else round(rng.uniform(0.0, 1.0), 3)
            for cpu in self._cpus
        }
        figures: dict[str, CgroupCPU | MissingMetric] = {}
        for path in cgroups:
            if mode == "missing" and rng.random() < 0.5:
                figures[path] = MissingMetric("no cpu.usage.cgroup in the simulated malachite")
                continue
            usage = rng.choice(ABSURD_LOADS) if mode == "absurd" else rng.uniform(0.0, 4.0)
            # Now and then a CFS quota (in CPUs: quota / period), else none (-1).
            quota = -1.0 if rng.random() < 0.7 else float(rng.choice((1, 2, 4))) * 100000.0
            figures[path] = CgroupCPU(round(usage, 3), quota, 100000.0)
        return ReclaimReading(cores, figures)


def active_pods(kubelet: KubeletPeer, with_reclaimed: bool) -> tuple[ActivePod, ...]:
    """The running pods as ``GetEvictPods`` sends them; reclaimed ones only if ``with_reclaimed``.

    The reclaimed pods' CPU request is their ``reclaimed_millicpu`` quantity, so the
    suppression plugin's rate (summed requests over the reclaim pool) moves with them.
    """
    pods = []
    for uid, pod in sorted(kubelet.pods.items()):
        if pod.phase != "running" or (pod.kind == "reclaimed" and not with_reclaimed):
            continue
        # A reclaimed pod's quantities are millicpu; the others' are CPUs.
        unit = "m" if pod.kind == "reclaimed" else ""
        containers = tuple((c.name, {"cpu": f"{c.quantity:g}{unit}"}) for c in pod.app_containers)
        pods.append(
            ActivePod(
                uid,
                "sim",
                f"pod-{uid}",
                pod.annotations(),
                containers=containers,
            )
        )
    return tuple(pods)
