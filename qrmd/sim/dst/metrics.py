"""The simulated CPU load source: containers' 1-minute load behind the ``ContainerLoadSource``
port, and the eviction manager's ``GetEvictPods`` requests of the suppression plugin.

Healthy, each container asked for has a load the seed draws (0 to a few runnable tasks). The
seed makes the source misbehave (``mode``):

* ``missing``: a container's sample is absent now and then (``MissingLoad``, as an adapter
  reports a stale or unreadable sample, never a zero: ``actors.ports.cpu_load``);
* ``absurd``: loads far beyond any pool (a runaway collector; still numbers ``>= 0``, which
  is all the port promises), so the load rings fill with samples over every bound.

``active_pods`` is what kubelet's eviction manager sends with ``GetEvictPods``: the running
pods. At times it sends none of the reclaimed pods (a listing taken while they were being
deleted), which is the suppression plugin's early return that keeps the timers (katalyst-core
v0.5.3 ``pressure_suppression.go``; ``policy.cpu.pressure.suppression``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from random import Random

from actors.ports.cpu_load import ContainerKey, MissingLoad
from policy.cpu.pressure import ActivePod
from policy.cpu.qos import QOS_LEVEL_KEY
from qrmd.sim.dst.kubelet import KubeletPeer

__all__ = ["LOAD_MODES", "SimLoadSource", "active_pods"]

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


def active_pods(kubelet: KubeletPeer, with_reclaimed: bool) -> tuple[ActivePod, ...]:
    """The running pods as ``GetEvictPods`` sends them; reclaimed ones only if ``with_reclaimed``.

    The reclaimed pods' CPU request is their ``reclaimed_millicpu`` quantity, so the
    suppression plugin's rate (summed requests over the reclaim pool) moves with them.
    """
    pods = []
    for uid, pod in sorted(kubelet.pods.items()):
        if pod.phase != "running" or (pod.kind == "reclaimed" and not with_reclaimed):
            continue
        level = "dedicated_cores" if pod.kind.startswith("dedicated") else f"{pod.kind}_cores"
        # A reclaimed pod's quantities are millicpu; the others' are CPUs.
        unit = "m" if pod.kind == "reclaimed" else ""
        containers = tuple((c.name, {"cpu": f"{c.quantity:g}{unit}"}) for c in pod.app_containers)
        pods.append(
            ActivePod(
                uid,
                "sim",
                f"pod-{uid}",
                {QOS_LEVEL_KEY: level},
                containers=containers,
            )
        )
    return tuple(pods)
