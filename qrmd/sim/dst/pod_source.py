"""The simulated pod source: kubelet's ``/pods`` listing behind the ``PodSource`` port.

Healthy, it lists the simulated kubelet's pods as ``Running`` (a pod still being admitted as
``Pending``), refreshed whenever the simulation polls it. The seed makes it misbehave
(``mode``): ``stale`` keeps serving the listing it last took, ``failing`` never lists again
(the port keeps the previous snapshot, whose age grows), ``empty`` lists no pod at all (a
kubelet that answers before it has synced its pods).
"""

from __future__ import annotations

from actors.ports.pod_source import PodListing, PodListSnapshot
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.kubelet import KubeletPeer

__all__ = ["SimPodSource"]

MODES = ("healthy", "stale", "failing", "empty")


class SimPodSource:
    """``PodSource`` fed from the simulated kubelet (module docstring)."""

    def __init__(self, kubelet: KubeletPeer, clock: VirtualClock) -> None:
        self._kubelet = kubelet
        self._clock = clock
        self._latest: PodListSnapshot | None = None
        self.mode = "healthy"

    def poll(self) -> None:
        """Take a listing now, as the background poller does (unless the mode says not)."""
        if self.mode in ("stale", "failing"):
            return
        now = self._clock.time()
        if self.mode == "empty":
            self._latest = PodListSnapshot.of([], now)
            return
        pods = []
        for p in self._kubelet.pods.values():
            admitting = p.phase in ("hints", "allocate")
            ids = (
                {}
                if admitting
                else {c.name: f"containerd://{p.uid}-{c.name}" for c in p.app_containers}
            )
            phase = "Pending" if admitting else "Running"
            pods.append(PodListing(p.uid, "sim", f"pod-{p.uid}", phase, ids))
        self._latest = PodListSnapshot.of(pods, now)

    def latest(self) -> PodListSnapshot | None:
        return self._latest
