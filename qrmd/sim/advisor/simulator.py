"""The simulated sys-advisor: a ``CPUAdvisor`` server with a load model and fault modes.

Like the real one (wire.md §10.1 step 4), every period it reads qrmd's checkpoint from the
plugin socket, computes pool sizes (``qrmd.sim.advisor.model``) and sends the result on every
open ListAndWatch stream; a stream opened while the checkpoint cannot be read ends with
UNAVAILABLE. ``set_fault`` switches the behaviour at any time (``qrmd.sim.advisor.faults``).

As a Katalyst v0.5.47 sys-advisor (``at_v0_5_47``) it also answers ``GetAdvice``: the request
carries every container and qrmd's allocations, so it plans from those (no checkpoint read), with
the v0.5.47 model (``plan_response(at_v0_5_47=True)``); ListAndWatch then plans the same way. As
a v0.5.3 one it answers GetAdvice ``UNIMPLEMENTED``.

Time: the period and the fault delays are waited on an ``Event``, so ``stop`` ends every wait
at once; tests use short periods.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from policy.cpu.advisor.advice import AdviceReply, AdviceRequest
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse
from qrmd.sim.advisor.faults import Fault, corrupt
from qrmd.sim.advisor.model import LoadModel, SimNode, plan_response
from wire.advisor_checkpoint import read_checkpoint
from wire.advisor_server import AdvisorStatus, CPUAdvisorServer

__all__ = ["SimStats", "SysAdvisorSimulator"]

logger = logging.getLogger(__name__)


@dataclass
class SimStats:
    """What the simulator saw and did, for tests and the demo."""

    added: list[ContainerMetadata] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    streams_opened: int = 0
    responses_sent: int = 0
    checkpoint_reads: int = 0
    advice_calls: int = 0
    last_response: AdvisorResponse | None = None


class SysAdvisorSimulator:
    """A simulated sys-advisor on ``socket_path``, reading qrmd's checkpoint on ``plugin_socket``.

    Args:
        socket_path: where to serve ``CPUAdvisor`` (qrmd's ``--cpu-advisor-socket``).
        plugin_socket: qrmd's ``--cpu-plugin-socket``.
        node: CPUs per NUMA node.
        model: the load model.
        period_s: how often a result is sent (sys-advisor's sync period, 5 s by default).
        at_v0_5_47: answer as a Katalyst v0.5.47 sys-advisor (see the module docstring).
    """

    def __init__(
        self,
        socket_path: str,
        plugin_socket: str,
        node: SimNode,
        model: LoadModel | None = None,
        period_s: float = 5.0,
        *,
        at_v0_5_47: bool = False,
    ) -> None:
        self.socket_path = socket_path
        self.at_v0_5_47 = at_v0_5_47
        self.plugin_socket = plugin_socket
        self.node = node
        self.model = model or LoadModel()
        self.period_s = period_s
        self.stats = SimStats()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._containers: dict[tuple[str, str], ContainerMetadata] = {}
        self._fault = Fault.HEALTHY
        self._invalid_kind = "reserve_size"
        self._slow_s = 0.0
        self._flap_s = 1.0
        self._flap_epoch = time.monotonic()
        self._server = CPUAdvisorServer(socket_path, self, advice=self if at_v0_5_47 else None)

    # -- control -------------------------------------------------------------------------------

    def start(self) -> None:
        """Serve (a stale socket file is removed)."""
        self._stopped.clear()
        self._server.start()
        logger.info("simulated sys-advisor serving on %s", self.socket_path)

    def stop(self) -> None:
        """Stop serving; every wait and stream ends."""
        self._stopped.set()
        self._server.stop()

    def set_fault(
        self,
        fault: Fault,
        *,
        invalid_kind: str | None = None,
        slow_s: float | None = None,
        flap_s: float | None = None,
    ) -> None:
        """Switch the behaviour (see ``qrmd.sim.advisor.faults``)."""
        with self._lock:
            self._fault = fault
            if invalid_kind is not None:
                self._invalid_kind = invalid_kind
            if slow_s is not None:
                self._slow_s = slow_s
            if flap_s is not None:
                self._flap_s = flap_s
            self._flap_epoch = time.monotonic()

    def set_model(self, model: LoadModel) -> None:
        """Change the load model (the next result follows it)."""
        with self._lock:
            self.model = model

    def containers(self) -> dict[tuple[str, str], ContainerMetadata]:
        """The containers it was told about."""
        with self._lock:
            return dict(self._containers)

    def _current(self) -> Fault:
        with self._lock:
            fault = self._fault
            if fault is Fault.FLAP:
                phase = int((time.monotonic() - self._flap_epoch) // self._flap_s)
                return Fault.HEALTHY if phase % 2 == 0 else Fault.UNAVAILABLE
            return fault

    def _wait(self, seconds: float) -> bool:
        """Wait ``seconds``; False when stopped meanwhile."""
        return not self._stopped.wait(seconds)

    # -- AdvisorBehaviour ------------------------------------------------------------------------

    def _call_fault(self, method: str) -> None:
        fault = self._current()
        if fault is Fault.UNAVAILABLE:
            raise AdvisorStatus("UNAVAILABLE", f"simulated sys-advisor: {method} unavailable")
        if fault is Fault.STALL:
            self._wait(3600.0)  # the caller's deadline ends it first
            raise AdvisorStatus("UNAVAILABLE", "simulated sys-advisor stopped")
        if fault is Fault.SLOW:
            self._wait(self._slow_s)

    def add_container(self, metadata: ContainerMetadata) -> None:
        self._call_fault("AddContainer")
        if self._current() is Fault.REFUSE_ADD:
            raise AdvisorStatus(
                "INVALID_ARGUMENT",
                f"simulated sys-advisor refuses pod {metadata.pod_uid} container "
                f"{metadata.container_name}",
            )
        with self._lock:
            self._containers[(metadata.pod_uid, metadata.container_name)] = metadata
            self.stats.added.append(metadata)

    def remove_pod(self, pod_uid: str) -> None:
        self._call_fault("RemovePod")
        with self._lock:
            for key in [k for k in self._containers if k[0] == pod_uid]:
                del self._containers[key]
            self.stats.removed.append(pod_uid)

    def list_and_watch(self, is_active: Callable[[], bool]) -> Iterator[AdvisorResponse]:
        with self._lock:
            self.stats.streams_opened += 1
        while is_active() and not self._stopped.is_set():
            fault = self._current()
            if fault is Fault.UNAVAILABLE:
                raise AdvisorStatus("UNAVAILABLE", "simulated sys-advisor dropped the stream")
            if fault is Fault.STALL:
                if not self._wait(min(self.period_s, 0.2)):
                    return
                continue
            response = self._result(fault)
            if response is None:
                raise AdvisorStatus("UNAVAILABLE", "cannot read the cpu plugin's checkpoint")
            with self._lock:
                self.stats.responses_sent += 1
                self.stats.last_response = response
            yield response
            if fault is Fault.DROP_STREAM:
                raise AdvisorStatus("UNAVAILABLE", "simulated sys-advisor dropped the stream")
            if not self._wait(self.period_s):
                return

    def get_advice(self, request: AdviceRequest) -> AdviceReply:
        """Katalyst v0.5.47's GetAdvice: plan from the request's containers and allocations
        (every fault applies as to the other calls; a stalled advisor never answers)."""
        self._call_fault("GetAdvice")
        fault = self._current()
        checkpoint = {
            name: {sub: item.allocation for sub, item in subs.items()}
            for name, subs in request.entries.items()
        }
        containers = {
            (name, sub): item.metadata
            for name, subs in request.entries.items()
            for sub, item in subs.items()
            if sub
        }
        with self._lock:
            self._containers = dict(containers)
            self.stats.advice_calls += 1
            model, kind = self.model, self._invalid_kind
        response = plan_response(self.node, checkpoint, containers, model, at_v0_5_47=True)
        if fault is Fault.INVALID:
            response = corrupt(response, kind, self.node)
        with self._lock:
            self.stats.responses_sent += 1
            self.stats.last_response = response
        return AdviceReply(response)

    def _result(self, fault: Fault) -> AdvisorResponse | None:
        try:
            checkpoint = read_checkpoint(self.plugin_socket, timeout_s=2.0)
        except Exception as err:  # any failure to read: the real advisor fails the stream
            logger.warning("simulated sys-advisor cannot read the checkpoint: %s", err)
            return None
        with self._lock:
            self.stats.checkpoint_reads += 1
            containers = dict(self._containers)
            model, kind = self.model, self._invalid_kind
        response = plan_response(
            self.node, checkpoint, containers, model, at_v0_5_47=self.at_v0_5_47
        )
        if fault is Fault.INVALID:
            response = corrupt(response, kind, self.node)
        return response
