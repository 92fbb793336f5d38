"""Kubelet-like load on a real ``qrmd run``: client threads each allocating new pods through
their own connection, every answer written into a ``Ledger`` (the fault suite).

An answer the daemon gave (its status message starts with the RPC's name) is an
acknowledgement or a refusal; anything else — a deadline passed, a connection broken or
refused — leaves the call in doubt (it may have been committed before the answer was lost,
which kubelet's idempotent retry settles). So does the daemon's own "no answer from the
allocator in time": the gRPC thread stopped waiting, but the request stays in the Allocator's
mailbox and may still be decided and committed after that answer (kubelet's retry then gets
the same allocation back).
"""

from __future__ import annotations

import threading
import time

import grpc

from tests.faults.ledger import Ledger
from tests.integration.daemon_process import PluginClient, shared_request


class Burst:
    """``clients`` threads allocating ``burst-<client>-<n>`` pods until stopped.

    Args:
        socket_path: the daemon's plugin socket.
        ledger: where every outcome goes.
        clients: concurrent connections (kubelet has one; the agent and retries add more).
        timeout_s: each call's deadline.
        prefix: the pod UIDs' prefix, so that bursts against one daemon do not collide.
    """

    def __init__(
        self,
        socket_path: str,
        ledger: Ledger,
        *,
        clients: int = 4,
        timeout_s: float = 2.0,
        prefix: str = "burst",
    ) -> None:
        self._socket_path = socket_path
        self._ledger = ledger
        self._timeout_s = timeout_s
        self._prefix = prefix
        self._stop = threading.Event()
        self.sent = 0
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._client, args=(c,), daemon=True) for c in range(clients)
        ]

    def start(self) -> Burst:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def wait_for_sent(self, count: int, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while self.sent < count:
            assert time.monotonic() < deadline, f"only {self.sent} of {count} calls sent"
            time.sleep(0.01)

    def _client(self, c: int) -> None:
        client = PluginClient(self._socket_path)  # type: ignore[arg-type]
        try:
            n = 0
            while not self._stop.is_set():
                pod = f"{self._prefix}-{c}-{n}"
                n += 1
                with self._lock:
                    self.sent += 1
                self._call(client, pod)
        finally:
            client.close()

    def _call(self, client: PluginClient, pod: str) -> None:
        try:
            client.plugin.Allocate(shared_request(pod, 0.1), timeout=self._timeout_s)
        except grpc.RpcError as err:
            details = err.details() or ""  # type: ignore[attr-defined]
            if details.startswith("Allocate: ") and "no answer from the allocator" not in details:
                self._ledger.refuse(pod, f"{err.code()}: {details}")  # type: ignore[attr-defined]
            else:
                self._ledger.doubt(pod, f"{err.code()}: {details}")  # type: ignore[attr-defined]
                time.sleep(0.05)  # the daemon is away: back off as kubelet does
        else:
            self._ledger.ack(pod)


def durable_pods(socket_path: str) -> set[str]:
    """The pods a (restarted) daemon holds, from its allocation listing."""
    client = PluginClient(socket_path)  # type: ignore[arg-type]
    try:
        return set(client.allocations())
    finally:
        client.close()
