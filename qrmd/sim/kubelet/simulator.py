"""A running kubelet simulator: plugin watchers and the reconcile loop on background threads.

The kubelet runs its plugin-watcher reconcile every 1 s (wire.md §8.1) and its QoS resource
manager reconcile every 3 s (``qosResourceManagerReconcilePeriod``, wire.md §9.2); both periods
are settable so tests and ``qrmd demo --fast`` can run quicker. Admission and pod deletion are
called by the user of the simulator on its own thread, as pod workers do in a kubelet.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from qrmd.sim.kubelet.kubelet import Kubelet, ReconcileReport
from qrmd.sim.kubelet.registration import (
    RESOURCE_PLUGIN_TYPE,
    PluginHandler,
    PluginWatcher,
    RegistrationOutcome,
)
from qrmd.sim.kubelet.topology_manager import TopologyPolicy

__all__ = ["KubeletSimulator"]

log = logging.getLogger(__name__)

WATCH_PERIOD_S = 1.0
RECONCILE_PERIOD_S = 3.0


class KubeletSimulator:
    """A kubelet's QRM side: watchers on socket directories plus a periodic reconcile.

    Args:
        socket_dirs: plugin-watcher directories.
        numa_nodes: the machine's NUMA nodes.
        topology_policy: the topology-manager policy.
        watch_period_s: how often the watchers look for sockets.
        reconcile_period_s: the QRM reconcile period.
        on_registration: called with each handshake outcome (from the watcher thread).
        on_reconcile: called with each reconcile report (from the reconcile thread).
    """

    def __init__(
        self,
        socket_dirs: Sequence[str | Path],
        numa_nodes: Sequence[int],
        *,
        topology_policy: TopologyPolicy = TopologyPolicy.BEST_EFFORT,
        watch_period_s: float = WATCH_PERIOD_S,
        reconcile_period_s: float = RECONCILE_PERIOD_S,
        on_registration: Callable[[RegistrationOutcome], None] | None = None,
        on_reconcile: Callable[[ReconcileReport], None] | None = None,
    ) -> None:
        if watch_period_s <= 0 or reconcile_period_s <= 0:
            raise ValueError(
                f"simulator periods must be positive: watch={watch_period_s} s, "
                f"reconcile={reconcile_period_s} s"
            )
        self.kubelet = Kubelet(numa_nodes, topology_policy=topology_policy)
        handlers: dict[str, PluginHandler] = {RESOURCE_PLUGIN_TYPE: self.kubelet.endpoints}
        self.watchers = [PluginWatcher(d, handlers) for d in socket_dirs]
        self.watch_period_s = watch_period_s
        self.reconcile_period_s = reconcile_period_s
        self._on_registration = on_registration
        self._on_reconcile = on_reconcile
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._passes = 0
        self._last_report: ReconcileReport | None = None
        self._pass_done = threading.Condition()

    def start(self) -> None:
        """Start the watcher and reconcile threads (idempotent while running)."""
        if self._threads:
            return
        self._stop.clear()
        self._threads = [
            threading.Thread(target=self._watch_loop, name="kubelet-sim-watch", daemon=True),
            threading.Thread(target=self._reconcile_loop, name="kubelet-sim-qrm", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop both threads; a call in flight finishes first (its deadline bounds it)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads = []

    def __enter__(self) -> KubeletSimulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def poll_watchers(self) -> list[RegistrationOutcome]:
        """One pass of every watcher (also what the watcher thread runs)."""
        outcomes = [o for w in self.watchers for o in w.poll_once()]
        for outcome in outcomes:
            if self._on_registration is not None:
                self._on_registration(outcome)
        return outcomes

    def reconcile(self) -> ReconcileReport:
        """One reconcile pass now (also what the reconcile thread runs)."""
        report = self.kubelet.reconcile_once()
        with self._pass_done:
            self._passes += 1
            self._last_report = report
            self._pass_done.notify_all()
        if self._on_reconcile is not None:
            self._on_reconcile(report)
        return report

    @property
    def passes(self) -> int:
        """How many reconcile passes have completed."""
        with self._pass_done:
            return self._passes

    def wait_for_pass(self, after: int, timeout_s: float) -> ReconcileReport:
        """Block until reconcile pass number ``after + 1`` (or later) has completed.

        Raises:
            TimeoutError: no such pass within ``timeout_s``.
        """
        with self._pass_done:
            if not self._pass_done.wait_for(lambda: self._passes > after, timeout=timeout_s):
                raise TimeoutError(f"no kubelet reconcile pass within {timeout_s:g} s")
            assert self._last_report is not None
            return self._last_report

    def _watch_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_watchers()
            except Exception:  # a bug in one pass must not end the watcher
                log.exception("plugin watcher pass failed")
            self._stop.wait(self.watch_period_s)

    def _reconcile_loop(self) -> None:
        while not self._stop.wait(self.reconcile_period_s):
            try:
                self.reconcile()
            except Exception:  # a bug in one pass must not end the loop
                log.exception("kubelet reconcile pass failed")
