"""Containers' CPU loads set by hand, for tests and simulations of CPU pressure eviction (spec
cpu-policy §12.7).

The ``ContainerLoadSource`` port on loads a caller sets from its own thread while the plugin
samples from another; a container never set is idle (load 0), as with the daemon's own
``simulated`` source (``qrmd.host.cpu_load_sources.FixedContainerLoads``)::

    loads = SimulatedContainerLoads()
    loads.set_load("uid-web", "main", 3.5)
    loads.make_unreadable("uid-api", "main", "collector down")   # MissingLoad from now on
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from actors.ports.cpu_load import ContainerKey, MissingLoad
from qrmd.host.cpu_load_sources import FixedContainerLoads, Loads

__all__ = ["SimulatedContainerLoads"]


class SimulatedContainerLoads:
    """Loads set by hand; thread-safe, as a test sets them from outside the plugin's actor."""

    def __init__(self, loads: Mapping[ContainerKey, float] | None = None) -> None:
        self._lock = threading.Lock()
        self._loads: dict[ContainerKey, float | MissingLoad] = dict(loads or {})

    def set_load(self, pod_uid: str, container: str, load: float) -> None:
        """The container's load from now on."""
        with self._lock:
            self._loads[(pod_uid, container)] = load

    def make_unreadable(
        self, pod_uid: str, container: str, reason: str = "simulated failure"
    ) -> None:
        """The container's load is missing from now on."""
        with self._lock:
            self._loads[(pod_uid, container)] = MissingLoad(reason)

    def sample(self, containers: Sequence[ContainerKey]) -> Loads:
        """The loads set; a container never set has load 0 (the simulator's idle default)."""
        with self._lock:
            now = FixedContainerLoads(self._loads)
        return now.sample(containers)
