"""The simulated sys-advisor: the ``AdvisorClient`` port the AdvisorLink and the Allocator call,
and the ListAndWatch stream it answers on (cpu-policy §11; wire.md §6, §10).

It knows what the link pushed (``AddContainer``) and reads qrmd's checkpoint (the latest
durable state, as sys-advisor reads ``GetCheckpoint``), and plans its answers with the demo
simulator's load model (``qrmd.sim.advisor.model.plan_response``). Each answer goes through
both halves of the wire conversion (``response_to_bytes`` then ``response_from_bytes``), as a
Go advisor's bytes would reach qrmd.

The stream has no reader thread: the link's ``spawn`` opens nothing, and when the simulation
lets the advisor speak (``speak``) it tells the link what the production reader
(``actors.advisor_link._read_stream``) would: ``StreamReceived`` for a response,
``StreamEnded`` with the reader's message for a broken stream.

How it behaves is the seed's (``mode``):

* ``healthy``: dials, calls and responses answer at once; responses are valid plans;
* ``slow``: every call takes a while, within the call timeout;
* ``stalled``: calls run into their timeout (``AdvisorSick``, the clock moves by the timeout);
  the stream says nothing (the link's receive-stuck monitor notices);
* ``disconnecting``: dials and calls fail ``UNAVAILABLE``; an open stream breaks;
* ``garbage``: responses the validator must refuse (``qrmd.sim.advisor.faults.corrupt``), or
  bytes that are no response at all (the stream is then of no use, as ``GrpcResponseStream``
  decides);
* ``refused``: calls answer ``INVALID_ARGUMENT`` (the advisor's refusal, not sickness).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from random import Random
from typing import Any

from actors.advisor_messages import StreamEnded, StreamReceived
from actors.ports.advisor import AdvisorRefused, AdvisorSick
from policy.cpu.advisor.checkpoint import checkpoint_entries
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse
from policy.state.sections import State
from qrmd.sim.advisor.faults import INVALID_KINDS, corrupt
from qrmd.sim.advisor.model import LoadModel, plan_response
from qrmd.sim.advisor.model import SimNode as AdvisorView
from qrmd.sim.dst.clock import VirtualClock
from wire.advisor_convert import AdvisorWireError, response_from_bytes, response_to_bytes

__all__ = ["ADVISOR_MODES", "SimAdvisor", "SimStream"]

ADVISOR_MODES = ("healthy", "slow", "stalled", "disconnecting", "garbage", "refused")
#: Bytes that are no ListAndWatchResponse (a truncated length-delimited field).
NOT_A_RESPONSE = b"\x0a\xff\x01garbage"


class SimStream:
    """An open ListAndWatch stream (``ResponseStream``); the simulation speaks on it."""

    def __init__(self) -> None:
        self.cancelled = False

    def __iter__(self) -> Iterator[AdvisorResponse]:
        # Never iterated: no reader thread runs in the simulation (module docstring).
        return iter(())

    def cancel(self) -> None:
        self.cancelled = True


class SimAdvisor:
    """sys-advisor's ``CPUAdvisor`` service as the seed has it behave (module docstring).

    Args:
        rng: the seed's choices.
        clock: the virtual clock (slow and stalled calls move it).
        numa_cpus: CPUs per NUMA node, for the plans.
        latest: the latest durable state (qrmd's GetCheckpoint), None while qrmd is down.
    """

    def __init__(
        self,
        rng: Random,
        clock: VirtualClock,
        numa_cpus: dict[int, int],
        latest: Callable[[], State | None],
    ) -> None:
        self._rng = rng
        self._clock = clock
        self._view = AdvisorView(numa_cpus)
        self._latest = latest
        self.mode = "healthy"
        self.containers: dict[tuple[str, str], ContainerMetadata] = {}
        self.stream: SimStream | None = None
        self.counts: dict[str, int] = {}

    # -- AdvisorClient --------------------------------------------------------------------

    def connect(self, timeout_s: float) -> None:
        self._call("dial", timeout_s, refusable=False)

    def add_container(self, metadata: ContainerMetadata, timeout_s: float) -> None:
        self._call("AddContainer", timeout_s)
        self.containers[(metadata.pod_uid, metadata.container_name)] = metadata

    def remove_pod(self, pod_uid: str, timeout_s: float) -> None:
        self._call("RemovePod", timeout_s)
        for key in [k for k in self.containers if k[0] == pod_uid]:
            del self.containers[key]

    def list_and_watch(self) -> SimStream:
        if self.stream is not None:
            self.stream.cancel()
        self.stream = SimStream()
        return self.stream

    def close(self) -> None:
        if self.stream is not None:
            self.stream.cancel()
        self.stream = None

    def _call(self, method: str, timeout_s: float, *, refusable: bool = True) -> None:
        self.counts[f"{method}:{self.mode}"] = self.counts.get(f"{method}:{self.mode}", 0) + 1
        if self.mode == "slow":
            self._clock.advance(self._rng.uniform(0.05, 0.8) * timeout_s)
        elif self.mode == "stalled":
            self._clock.advance(timeout_s)
            code = "TIMEOUT" if method == "dial" else "DEADLINE_EXCEEDED"
            raise AdvisorSick(method, code, f"no answer within {timeout_s:g} s")
        elif self.mode == "disconnecting":
            raise AdvisorSick(method, "UNAVAILABLE", "connection reset by the simulated advisor")
        elif self.mode == "refused" and refusable:
            raise AdvisorRefused(method, "INVALID_ARGUMENT", "refused by the simulated advisor")

    # -- the stream ----------------------------------------------------------------------------

    def speak(self, attempt: int, deliver: Callable[[Any], None]) -> str:
        """Send on the open stream what the mode says, told as the link's reader would; a
        phrase for the trace."""
        stream = self.stream
        if stream is None or stream.cancelled:
            return "advisor: no stream open"
        if self.mode == "stalled":
            return "advisor: stream silent"
        if self.mode == "disconnecting":
            stream.cancel()
            self.stream = None
            deliver(StreamEnded(attempt, _reader_error("UNAVAILABLE", "connection reset")))
            return "advisor: stream broken"
        state = self._latest()
        if state is None:
            return "advisor: no checkpoint to read"
        plan = plan_response(
            self._view, checkpoint_entries(state.cpu), self.containers, LoadModel(load=1.5)
        )
        if self.mode == "garbage":
            if self._rng.random() < 0.2:
                raw = NOT_A_RESPONSE
            else:
                kinds = sorted(INVALID_KINDS)
                raw = response_to_bytes(corrupt(plan, self._rng.choice(kinds), self._view))
        else:
            raw = response_to_bytes(plan)
        try:
            response = response_from_bytes(raw)
        except AdvisorWireError as err:
            # ``GrpcResponseStream``: a message qrmd cannot read makes the stream useless.
            stream.cancel()
            self.stream = None
            deliver(StreamEnded(attempt, _reader_error("INTERNAL", str(err))))
            return "advisor: unreadable bytes, stream dropped"
        deliver(StreamReceived(attempt, response))
        return f"advisor: {self.mode} response"


def _reader_error(code: str, details: str) -> str:
    """The production reader's ``StreamEnded`` text (``actors.advisor_link._read_stream``)."""
    return (
        f"receive ListAndWatch response of CPUAdvisorServer failed with error: "
        f"{details}, grpc code: {code}"
    )
