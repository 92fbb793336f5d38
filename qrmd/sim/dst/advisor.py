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
* ``garbage``: responses the validator must refuse (``qrmd.sim.advisor.faults.corrupt``),
  responses that pass it but that applying must refuse (a pool entry naming another pool as
  its owner, §11.8 step 1), or bytes that are no response at all (the stream is then of no
  use, as ``GrpcResponseStream`` decides);
* ``refused``: calls answer ``INVALID_ARGUMENT`` (the advisor's refusal, not sickness);
* ``lagging``: a response read on the open stream reaches the link only after that stream
  broke and a newer one has spoken: the production reader of a replaced stream can still tell
  the link what it had read, under the old stream's attempt (the link must drop it).

On a Katalyst v0.5.47 node (``at_v0_5_47``) it is a v0.5.47 sys-advisor: it answers
``GetAdvice`` (the link polls it instead of opening the stream) with the demo simulator's
v0.5.47 plan (``plan_response(at_v0_5_47=True)``: blocks by NUMA node, and the per-NUMA
reclaim headroom ``cpu_numa_headroom`` that hints reclaimed pods bound to a NUMA node),
planned from the request's containers and allocations, through both halves of the reply's
wire conversion. The modes apply to the call as to the others; ``garbage`` replies are the
stream's garbage (bytes that are no reply are refused ``INTERNAL``, as the gRPC client
refuses them), and ``lagging`` has no stream to lag on (a poll is one call). Each dial opens a
new session, numbered as the streams are, so the invariants read the order of the replies.

What the advisor sent is kept for the invariants (``sent``: fingerprint → ``Sent``): what it
said and whether it was made invalid on purpose. Every block id carries the stream's number
(``s<N>.``), so the response a journal record holds names the stream it came on (the
fingerprint renames block ids: one plan sent on two streams has one fingerprint, which qrmd
coalesces).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from random import Random
from typing import Any

from actors.advisor_messages import StreamEnded, StreamReceived
from actors.ports.advisor import AdvisorRefused, AdvisorSick
from policy.cpu.advisor.advice import AdviceReply, AdviceRequest
from policy.cpu.advisor.checkpoint import checkpoint_entries
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse, Block, CalculationInfo
from policy.state.sections import State
from qrmd.sim.advisor.faults import INVALID_KINDS, corrupt
from qrmd.sim.advisor.model import LoadModel, plan_response
from qrmd.sim.advisor.model import SimNode as AdvisorView
from qrmd.sim.dst.clock import VirtualClock
from wire.advisor_convert import (
    AdvisorWireError,
    advice_reply_from_bytes,
    advice_reply_to_bytes,
    response_from_bytes,
    response_to_bytes,
)

__all__ = ["ADVISOR_MODES", "Sent", "SimAdvisor", "SimStream"]

ADVISOR_MODES = ("healthy", "slow", "stalled", "disconnecting", "garbage", "refused", "lagging")
#: Bytes that are no ListAndWatchResponse (a truncated length-delimited field).
NOT_A_RESPONSE = b"\x0a\xff\x01garbage"


@dataclass(frozen=True, slots=True)
class Sent:
    """One response the advisor sent, as the invariants read it.

    Attributes:
        response: the response as qrmd read it (after the wire's round trip).
        stream: the number of the stream it was last sent on (1 for the first).
        invalid: made invalid on purpose (``garbage``): qrmd must refuse it.
    """

    response: AdvisorResponse
    stream: int
    invalid: bool


class SimStream:
    """An open ListAndWatch stream (``ResponseStream``); the simulation speaks on it."""

    def __init__(self, number: int = 0) -> None:
        self.cancelled = False
        self.number = number

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
        at_v0_5_47: a Katalyst v0.5.47 sys-advisor (module docstring).
    """

    def __init__(
        self,
        rng: Random,
        clock: VirtualClock,
        numa_cpus: dict[int, int],
        latest: Callable[[], State | None],
        *,
        at_v0_5_47: bool = False,
    ) -> None:
        self.at_v0_5_47 = at_v0_5_47
        self._rng = rng
        self._clock = clock
        self._view = AdvisorView(numa_cpus)
        self._latest = latest
        self.mode = "healthy"
        self.containers: dict[tuple[str, str], ContainerMetadata] = {}
        self.stream: SimStream | None = None
        self.counts: dict[str, int] = {}
        self.streams = 0
        #: fingerprint → what was sent (module docstring).
        self.sent: dict[str, Sent] = {}
        #: A response read on a stream that broke, not delivered yet, and the reader's way to
        #: tell its link (the link that opened the stream: a restarted link drops it).
        self.held: tuple[int, int, AdvisorResponse, Callable[[Any], None]] | None = None

    # -- AdvisorClient --------------------------------------------------------------------

    def connect(self, timeout_s: float) -> None:
        self._call("dial", timeout_s, refusable=False)
        if self.at_v0_5_47:
            self.streams += 1  # a new session: its replies are numbered after it

    def get_advice(self, request: AdviceRequest, timeout_s: float) -> AdviceReply:
        """Katalyst v0.5.47's GetAdvice (module docstring)."""
        if not self.at_v0_5_47:
            raise AdvisorRefused("GetAdvice", "UNIMPLEMENTED", "unknown method GetAdvice")
        self._call("GetAdvice", timeout_s)
        checkpoint = {
            name: {sub: item.allocation for sub, item in subs.items()}
            for name, subs in request.entries.items()
        }
        self.containers = {
            (name, sub): item.metadata
            for name, subs in request.entries.items()
            for sub, item in subs.items()
            if sub
        }
        plan = plan_response(
            self._view, checkpoint, self.containers, LoadModel(load=1.5), at_v0_5_47=True
        )
        bad = self._garbage(plan) if self.mode == "garbage" else plan
        if bad is None:
            raise AdvisorRefused("GetAdvice", "INTERNAL", "the reply does not decode")
        try:
            reply = advice_reply_from_bytes(
                advice_reply_to_bytes(AdviceReply(_numbered(bad, self.streams)))
            )
        except AdvisorWireError as err:
            raise AdvisorRefused("GetAdvice", "INTERNAL", str(err)) from err
        response = reply.response
        self.sent[response.fingerprint()] = Sent(response, self.streams, bad != plan)
        return reply

    def _garbage(self, plan: AdvisorResponse) -> AdvisorResponse | None:
        """What a ``garbage`` advisor sends instead of ``plan``: None for bytes that are no
        response; else a plan the validator refuses or one applying refuses, as many of
        each (a corruption that finds nothing to corrupt leaves the plan as it was)."""
        roll = self._rng.random()
        if roll < 0.2:
            return None
        if roll < 0.6:
            return _pool_owner_mismatch(plan)
        return corrupt(plan, self._rng.choice(sorted(INVALID_KINDS)), self._view)

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
        self.streams += 1
        self.stream = SimStream(self.streams)
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
            # A v0.5.47 link polls GetAdvice instead (its timers are the link's own).
            return "advisor: polled, no stream" if self.at_v0_5_47 else "advisor: no stream open"
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
        invalid = self.mode == "garbage"
        if invalid:
            bad = self._garbage(plan)
            if bad is None:
                raw = NOT_A_RESPONSE
            else:
                invalid = bad != plan
                raw = response_to_bytes(_numbered(bad, stream.number))
        else:
            raw = response_to_bytes(_numbered(plan, stream.number))
        try:
            response = response_from_bytes(raw)
        except AdvisorWireError as err:
            # ``GrpcResponseStream``: a message qrmd cannot read makes the stream useless.
            stream.cancel()
            self.stream = None
            deliver(StreamEnded(attempt, _reader_error("INTERNAL", str(err))))
            return "advisor: unreadable bytes, stream dropped"
        self.sent[response.fingerprint()] = Sent(response, stream.number, invalid)
        if self.mode == "lagging" and self.held is None:
            # Read by the reader, which stalls before telling the link; then the stream breaks.
            self.held = (attempt, stream.number, response, deliver)
            stream.cancel()
            self.stream = None
            deliver(StreamEnded(attempt, _reader_error("UNAVAILABLE", "connection reset")))
            return "advisor: response held by a lagging reader, stream broken"
        deliver(StreamReceived(attempt, response))
        out = f"advisor: {self.mode} response"
        held = self.held
        if held is not None and held[1] < stream.number:
            # The old reader wakes up after the new stream spoke: its response comes late.
            self.held = None
            # Through the old reader's link: after a restart of the link (or of the process)
            # the old actor is gone and the late words with it.
            held[3](StreamReceived(held[0], held[2]))
            out += f"; a late response of stream {held[1]} (attempt {held[0]})"
        return out


def _pool_owner_mismatch(plan: AdvisorResponse) -> AdvisorResponse:
    """``plan`` with a pool entry qrmd does not have whose owner is another pool: no block, so
    every §11.6 rule holds, but applying refuses it ("pool entryName: %s and OwnerPoolName: %s
    mismatch", §11.8 step 1)."""
    entries = {name: subs for name, subs in plan.entries.items()}
    entries["stray"] = {"": CalculationInfo("share", {})}
    return replace(plan, entries=entries)


def _numbered(response: AdvisorResponse, stream: int) -> AdvisorResponse:
    """``response`` with every block id prefixed by the stream's number (module docstring);
    blocks that shared an id still do."""

    def blocks(found: tuple[Block, ...] | None) -> tuple[Block, ...] | None:
        if found is None:
            return None
        return tuple(Block(b.result, f"s{stream}.{b.block_id}", b.overlap_targets) for b in found)

    def info(found: CalculationInfo | None) -> CalculationInfo | None:
        if found is None:
            return None
        numa = {n: blocks(b) for n, b in found.numa_blocks.items()}
        return CalculationInfo(found.owner_pool_name, numa)

    entries = {
        name: None if subs is None else {sub: info(i) for sub, i in subs.items()}
        for name, subs in response.entries.items()
    }
    return replace(response, entries=entries)


def _reader_error(code: str, details: str) -> str:
    """The production reader's ``StreamEnded`` text (``actors.advisor_link._read_stream``)."""
    return (
        f"receive ListAndWatch response of CPUAdvisorServer failed with error: "
        f"{details}, grpc code: {code}"
    )
