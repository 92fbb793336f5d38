"""The demo's CPU pressure phase: the reclaim pool squeezed, a reclaimed pod offered for eviction
by ``cpu-pressure-suppression-plugin`` (spec cpu-policy §12.7; katalyst-core v0.5.3
``strategy/pressure_suppression.go``).

``qrmd run`` runs with ``--enable-cpu-pressure-eviction --eviction-suppression-enable`` from the
start. By this phase the share pool has grown over the ramp-up, squeezing the reclaim pool to a
few CPUs, while the reclaimed pods still ask for theirs. The phase plays katalyst-agent's
eviction manager on the suppression plugin's socket:

1. registers it (``GetInfo``, ``GetToken``, ``NotifyRegistrationStatus``);
2. ``GetEvictPods`` with the reclaimed pods as the agent sends them (their annotations, with
   the ``suppression_tolerance_rate`` of ``cpu_enhancement``, and their requests): the pool's
   rate ``Σ requests / |reclaim pool|`` is over a pod's tolerance, so its timer starts, but
   nothing is offered yet;
3. waits out ``--eviction-suppression-min-tolerance-duration`` and asks again: the pod is
   offered, with the reference's reason text.

A failed RPC, a socket that does not appear, or no offer raises ``PressurePhaseError`` with one
line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from qrmd.sim.kubelet import Pod
from wire.eviction_client import ActivePod, EvictionManager, Offer

__all__ = ["PressureOutcome", "PressurePhase", "PressurePhaseError", "active_pod"]

POLL_S = 0.1
SOCKET_WAIT_S = 10.0
#: The resource a reclaimed pod asks for, as its pod spec writes it.
RECLAIMED_MILLICPU = "resource.katalyst.kubewharf.io/reclaimed_millicpu"


class PressurePhaseError(Exception):
    """The plugin's socket did not appear, an RPC failed, or no pod was offered."""


@dataclass(frozen=True, slots=True)
class PressureOutcome:
    """What the phase showed: the offers of the first and the second ``GetEvictPods``."""

    first: tuple[Offer, ...]
    second: tuple[Offer, ...]


def active_pod(pod: Pod) -> ActivePod:
    """A kubelet-simulator pod as the eviction manager sends it: annotations, labels and each
    container's request as its pod spec writes it (``reclaimed_millicpu`` in millicores)."""
    containers = []
    for container in pod.containers:
        requests: tuple[tuple[str, str], ...] = ()
        if container.request is not None:
            resource, amount = container.request
            name = RECLAIMED_MILLICPU if resource.endswith("reclaimed_millicpu") else resource
            requests = ((name, f"{amount:g}"),)
        containers.append((container.name, requests))
    return ActivePod(
        pod.namespace,
        pod.name,
        pod.uid,
        pod.native_qos_class,
        tuple(sorted(pod.labels.items())),
        tuple(sorted(pod.annotations.items())),
        tuple(containers),
    )


class PressurePhase:
    """One run of the phase against a daemon started with the suppression plugin's flags.

    Args:
        console: where to show it.
        socket_path: ``<plugin-registration-dir>/cpu-pressure-suppression-plugin.sock``.
        min_duration_s: the daemon's ``--eviction-suppression-min-tolerance-duration``.
        check_alive: raises if the daemon has exited (called while waiting).
        sleep: waits that long (tests pass a fake).
    """

    def __init__(
        self,
        console: Console,
        socket_path: Path,
        *,
        min_duration_s: float,
        check_alive: Callable[[], None],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.console = console
        self.socket_path = socket_path
        self.min_duration_s = min_duration_s
        self._check_alive = check_alive
        self._sleep = sleep

    def run(self, pods: Sequence[Pod], reclaim_cpus: int) -> PressureOutcome:
        """Play the eviction manager on the suppression plugin (module docstring).

        Args:
            pods: the reclaimed pods still running.
            reclaim_cpus: the reclaim pool's CPUs now (for the story's line).

        Raises:
            PressurePhaseError: see the class.
        """
        self._wait_for_socket()
        active = [active_pod(p) for p in pods]
        self._say(
            f"the share pool grew over the ramp-up: the reclaim pool has [bold]{reclaim_cpus}"
            f"[/] CPUs left for {', '.join(p.name for p in pods)}"
        )
        manager = EvictionManager(self.socket_path)
        try:
            info = manager.register()
            self._say(
                f"katalyst-agent: registered {info.type} [bold]{info.name}[/] "
                f"({', '.join(info.versions)}) from {self.socket_path}"
            )
            first = tuple(manager.get_evict_pods(active))
            self._say(
                f"GetEvictPods({len(active)} reclaimed pods) → "
                f"{self._offers(first) or 'nothing yet: over its tolerance, its timer starts'}"
            )
            self._sleep(self.min_duration_s + 0.25)
            self._check_alive()
            second = tuple(manager.get_evict_pods(active))
            self._say(
                f"GetEvictPods again after {self.min_duration_s:g} s "
                f"(--eviction-suppression-min-tolerance-duration) → {self._offers(second)}"
            )
        except Exception as err:
            if isinstance(err, PressurePhaseError):
                raise
            raise PressurePhaseError(f"the suppression plugin: {err}") from None
        finally:
            manager.close()
        if not second:
            raise PressurePhaseError(
                "the suppression plugin offered no pod once the minimum duration had passed"
            )
        return PressureOutcome(first, second)

    def _wait_for_socket(self) -> None:
        deadline = time.monotonic() + SOCKET_WAIT_S
        while not self.socket_path.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise PressurePhaseError(
                    f"{self.socket_path} did not appear within {SOCKET_WAIT_S:g} s"
                )
            time.sleep(POLL_S)

    @staticmethod
    def _offers(offers: Sequence[Offer]) -> str:
        return "; ".join(f"[bold]{o.namespace}/{o.name}[/]: {o.reason}" for o in offers)

    def _say(self, text: str) -> None:
        self.console.print(f"  {text}", soft_wrap=True)
