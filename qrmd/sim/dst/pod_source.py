"""The simulated pod source: kubelet's ``/pods`` listing, as the pod source subsystem fetches it.

It is the fetch of the real ``PodListPublisher`` (``Host.pod_list``): the publisher's ticker
fetches every period, publishes the listing to the Allocator and the checkers, and tells the
checkers ``PodListFetched``. Healthy, it lists the simulated kubelet's pods as ``Running`` (a
pod still being admitted as ``Pending``). The seed makes it misbehave (``mode``): ``stale``
keeps answering the listing it last took (its fetch time too), ``failing`` fails every fetch
(the publisher keeps the previous snapshot, whose age grows), ``empty`` lists no pod at all (a
kubelet that answers before it has synced its pods).
"""

from __future__ import annotations

from actors.ports.pod_source import PodListing, PodListSnapshot
from qrmd.host.kubelet_pods import PodListError
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.kubelet import KubeletPeer

__all__ = ["SimPodSource"]

MODES = ("healthy", "stale", "failing", "empty")


class SimPodSource:
    """The pod list fetch fed from the simulated kubelet (module docstring)."""

    def __init__(self, kubelet: KubeletPeer, clock: VirtualClock) -> None:
        self._kubelet = kubelet
        self._clock = clock
        self._latest: PodListSnapshot | None = None
        self.mode = "healthy"

    def fetch(self) -> PodListSnapshot:
        """One fetch of the pod list, as the mode says.

        Raises:
            PodListError: the mode is ``failing`` (or ``stale`` before any listing).
        """
        if self.mode == "failing" or (self.mode == "stale" and self._latest is None):
            raise PodListError("GET http://localhost:10255/pods: connection refused (simulated)")
        if self.mode == "stale":
            assert self._latest is not None
            return self._latest
        now = self._clock.time()
        if self.mode == "empty":
            self._latest = PodListSnapshot.of([], now)
            return self._latest
        pods = []
        for p in self._kubelet.pods.values():
            admitting = p.phase in ("hints", "allocate")
            ids = {} if admitting else {p.container: f"containerd://{p.uid}-{p.container}"}
            phase = "Pending" if admitting else "Running"
            pods.append(PodListing(p.uid, "sim", f"pod-{p.uid}", phase, ids))
        self._latest = PodListSnapshot.of(pods, now)
        return self._latest
