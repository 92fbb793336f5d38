"""The gRPC servers' call observer while the metrics registry is not built yet (``qrmd.daemon``:
kubelet is served first, the registry right after).

The servers are handed this relay when they start; a call answered before the registry
exists is kept (method, seconds, code) and replayed into it when it is attached, so
``qrmd_rpc_duration_seconds`` and the failure counts (spec cpu-policy §14) miss no call of
that window. From then on every call goes straight to the registry.

No ``prometheus_client`` here: the relay exists before it is imported.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wire.rpc import RpcObserver

__all__ = ["ObserverRelay"]


class ObserverRelay:
    """An ``RpcObserver`` that holds calls until ``attach`` gives it the one to tell."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[tuple[str, float, str]] = []
        self._target: RpcObserver | None = None

    def observe(self, rpc: str, seconds: float, code: str) -> None:
        """Tell the attached observer about one call, or hold it until one is attached."""
        target = self._target
        if target is None:
            with self._lock:
                target = self._target
                if target is None:
                    self._held.append((rpc, seconds, code))
                    return
        target.observe(rpc, seconds, code)

    def attach(self, target: RpcObserver) -> None:
        """Replay the held calls into ``target``, in the order they were answered, then send
        it every later call. A call answered during the replay waits for it (the lock), so
        none is lost or told twice."""
        with self._lock:
            for rpc, seconds, code in self._held:
                target.observe(rpc, seconds, code)
            self._held = []
            self._target = target

    @property
    def held(self) -> int:
        """How many calls wait for an observer."""
        with self._lock:
            return len(self._held)
