"""The AdvisorLink: qrmd's connection to sys-advisor (cpu-policy §11.2–§11.5; wire.md §10;
DESIGN.md "AdvisorLink").

It drives the advisor-link machine (``machines.advisor_link``) through one attempt after
another:

1. **dialing** — qrmd's own checkpoint socket must answer (``CheckpointProbe``, the reference's
   self-dial), then the advisor's socket must accept a connection (5 s each, §14);
2. **syncing** — ``push_cpu_advisor`` (§11.3): ``AddContainer`` for every stored container of
   the latest durable state. A container the advisor *refuses* is logged and skipped (one
   container cannot keep the link down); a *sick* advisor ends the attempt;
3. **watching** — ListAndWatch: a reader thread delivers each response, which the link
   forwards to the Allocator as ``ApplyAdvice`` (the Allocator decides and commits it: one
   mailbox orders it with kubelet's calls). The stream's end, or a sick advisor reported by the
   Allocator (``ReportSickAdvisor``), ends the attempt;
4. **backing_off** — the §11.2 back-off (``actors.advisor_timing.Backoff``), then ``RetryLink``.

At Katalyst v0.5.47 (``--reference-version v0.5.47``) an attempt first asks ``GetAdvice``
(``getAdviceFromAdvisorLoop``, ``policy_advisor_handler.go``:377-419 and ``policy.go``:426-458
at tag v0.5.47): the request carries every stored entry (``policy.cpu.advisor.advice``), so
there is no push. When the advisor answers anything but ``UNIMPLEMENTED``, the link watches by
polling: every ``--cpu-resource-plugin-advisor-interval`` (``PollAdvice``) it asks again, and
each reply whose feature gates are acceptable is forwarded as ``ApplyAdvice``. A failed poll is
logged and the next one comes at the interval, as the reference's loop goes on; there is no
stream, so no receive-stuck monitor. ``UNIMPLEMENTED`` means a v0.5.3 advisor: the attempt
goes on with the push and ListAndWatch as at v0.5.3 (met while polling, it ends the attempt,
and the next one falls back the same way after the back-off).

Every state change is told to the Allocator (``AdvisorLinkChanged``): while the link is not
watching, Allocate and RemovePod answer without the advisor. The receive-stuck monitor checks
every 30 s from one period after a stream opens (§11.2 step 7). The link commits nothing: the
responses it forwards are the Allocator's decisions.

``AdvisorLinkCore`` is the behaviour, driven by tests with a fake client, fake timers and an
injected clock; ``AdvisorLinkActor`` is the thin pykka shell, whose timers and reader thread
``tell`` the actor itself.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

import pykka

from actors.advisor_messages import (
    AdvisorLinkChanged,
    ApplyAdvice,
    CheckReceive,
    GetLinkStatus,
    LinkCommand,
    PollAdvice,
    ReportSickAdvisor,
    RetryLink,
    StartLink,
    StopLink,
    StreamEnded,
    StreamReceived,
)
from actors.advisor_timing import Backoff, ReceiveMonitor
from actors.ports.advisor import (
    AdviceClient,
    AdvisorCallError,
    AdvisorClient,
    AdvisorRefused,
    AdvisorSick,
    CheckpointProbe,
    ResponseStream,
)
from machines import advisor_link as machine
from policy.cpu.advisor.advice import (
    AdviceReply,
    AdviceRequestError,
    advice_request,
    negotiate,
    snb_entries,
)
from policy.cpu.advisor.push import ContainerMetadata, PushRefusal, push_failure_message, push_list
from policy.state.sections import State

__all__ = [
    "DIAL_TIMEOUT_S",
    "AdvisorLinkActor",
    "AdvisorLinkCore",
    "LinkStats",
    "LinkStatus",
    "Teller",
    "Timers",
]

logger = logging.getLogger(__name__)

#: §14: the socket dial timeout, for the self-dial and the advisor's socket.
DIAL_TIMEOUT_S: Final = 5.0
#: The status a v0.5.3 advisor answers GetAdvice with (``general.IsUnimplementedError``).
UNIMPLEMENTED: Final = "UNIMPLEMENTED"


class Teller(Protocol):
    """What the link needs of an actor ref: a ``tell`` (pykka ``ActorRef.tell``)."""

    def tell(self, message: Any) -> None: ...


class Timers(Protocol):
    """Delivers ``message`` to the link after ``delay_s`` seconds (a real timer, or a test's)."""

    def after(self, delay_s: float, message: Any) -> None: ...


#: Runs a stream reader; the shell starts a daemon thread, tests run it inline or not at all.
Spawn = Callable[[Callable[[], None]], None]


@dataclass(frozen=True, slots=True)
class LinkStatus:
    """The link's state and figures, as ``GetLinkStatus`` answers and metrics read them."""

    state: str
    attempt: int
    responses_forwarded: int
    stream_failures: int
    recv_stuck_checks: int
    push_refused: int
    last_error: str


@dataclass
class LinkStats:
    """Counters the metrics collector reads from another thread (a lock keeps them whole).

    The link counts what it sees; the Allocator reports each response's outcome
    (:meth:`record_outcome`) since it decides them.
    """

    state: str = machine.DISABLED
    responses_forwarded: int = 0
    stream_failures: int = 0
    recv_stuck_checks: int = 0
    push_refused: int = 0
    applied: int = 0
    refused_by_stage: dict[str, int] = field(default_factory=dict)
    last_applied_at: float | None = None
    last_applied_wall: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record_outcome(
        self, applied: bool, stage: str, now: float, *, wall: float | None = None
    ) -> None:
        """One response decided: applied, or refused at ``stage`` (monotonic ``now``; ``wall``
        the wall time, which the fallback's silence is counted on)."""
        with self._lock:
            if applied:
                self.applied += 1
                self.last_applied_at = now
                if wall is not None:
                    self.last_applied_wall = wall
            else:
                self.refused_by_stage[stage] = self.refused_by_stage.get(stage, 0) + 1

    def bump(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def set_state(self, state: str) -> None:
        with self._lock:
            self.state = state

    def read(self) -> dict[str, Any]:
        """A consistent copy of every figure."""
        with self._lock:
            return {
                "state": self.state,
                "responses_forwarded": self.responses_forwarded,
                "stream_failures": self.stream_failures,
                "recv_stuck_checks": self.recv_stuck_checks,
                "push_refused": self.push_refused,
                "applied": self.applied,
                "refused_by_stage": dict(self.refused_by_stage),
                "last_applied_at": self.last_applied_at,
                "last_applied_wall": self.last_applied_wall,
            }


class _Model:
    """The machine's model: the link's state and its guards' answers."""

    def __init__(self, enabled: bool, backoff: Callable[[], Backoff], now: Callable[[], float]):
        self.state = machine.DISABLED
        self._enabled = enabled
        self._backoff = backoff
        self._now = now

    @property
    def advisor_enabled(self) -> bool:
        return self._enabled

    def backoff_reset_due(self) -> bool:
        return self._backoff().reset_due(self._now())


class AdvisorLinkCore:
    """The link's behaviour; see the module docstring.

    Args:
        enabled: ``--enable-cpu-advisor``; a disabled link stays ``disabled``.
        client: sys-advisor's ``CPUAdvisor``.
        probe: qrmd's own ``CPUPlugin`` socket.
        latest_state: the latest durable state (the push reads its containers).
        allocator: where ``ApplyAdvice`` and ``AdvisorLinkChanged`` go.
        timers: delivers ``RetryLink`` and ``CheckReceive`` back to this link.
        spawn: runs the stream reader (the reader tells this link ``StreamReceived`` and
            ``StreamEnded`` through ``deliver``).
        deliver: how the reader reaches this link (the actor's own ``tell``).
        monotonic: the monotonic clock.
        call_timeout_s: ``--cpu-advisor-call-timeout``, for each AddContainer of the push
            and each GetAdvice.
        stats: the figures metrics read.
        advice: sys-advisor's ``GetAdvice`` (Katalyst v0.5.47); None at v0.5.3.
        advice_interval_s: ``--cpu-resource-plugin-advisor-interval``, between two GetAdvice.
    """

    def __init__(
        self,
        *,
        enabled: bool,
        client: AdvisorClient,
        probe: CheckpointProbe,
        latest_state: Callable[[], State],
        allocator: Teller,
        timers: Timers,
        spawn: Spawn,
        deliver: Callable[[Any], None],
        monotonic: Callable[[], float],
        call_timeout_s: float,
        stats: LinkStats | None = None,
        advice: AdviceClient | None = None,
        advice_interval_s: float = 5.0,
    ) -> None:
        if not advice_interval_s > 0:
            raise ValueError(f"advice_interval_s must be positive, got {advice_interval_s} s")
        self._client = client
        self._advice = advice
        self._advice_interval_s = advice_interval_s
        self._polling = False
        self._probe = probe
        self._latest_state = latest_state
        self._allocator = allocator
        self._timers = timers
        self._spawn = spawn
        self._deliver = deliver
        self._now = monotonic
        self._call_timeout_s = call_timeout_s
        self.stats = stats or LinkStats()
        self._backoff = Backoff()
        self._monitor = ReceiveMonitor()
        self._model = _Model(enabled, lambda: self._backoff, monotonic)
        self._lifecycle = machine.lifecycle()
        self._attempt = 0
        self._stream: ResponseStream | None = None
        self._last_error = ""

    @property
    def state(self) -> str:
        """The machine's state (``machines.advisor_link``)."""
        return self._model.state

    def handle(self, command: LinkCommand) -> Any:
        """The link's single dispatch.

        Returns:
            ``LinkStatus`` for ``GetLinkStatus``; None otherwise.

        Raises:
            TypeError: not a link command.
        """
        match command:
            case StartLink():
                self._start()
            case StopLink():
                self._stop()
            case RetryLink(attempt):
                if attempt == self._attempt and self.state == machine.BACKING_OFF:
                    self._fire("retry")
                    self._run_attempt()
            case StreamReceived(attempt, response):
                if self._current_stream(attempt):
                    now = self._now()
                    self._monitor = self._monitor.received(now)
                    self._fire("receive_result")
                    self.stats.bump("responses_forwarded")
                    self._allocator.tell(ApplyAdvice(response, now))
            case StreamEnded(attempt, error):
                if self._current_stream(attempt):
                    self._monitor = self._monitor.received(self._now()).stream_closed()
                    self._stream = None
                    self.stats.bump("stream_failures")
                    self._fail("stream_failed", error)
            case ReportSickAdvisor(reason):
                if self.state == machine.WATCHING:
                    self._close_stream()
                    self._fail("advisor_sick", reason)
            case CheckReceive():
                self._check_receive()
            case PollAdvice(attempt):
                if attempt == self._attempt and self.state == machine.WATCHING and self._polling:
                    self._poll_again()
            case GetLinkStatus():
                return self.status()
            case _:
                raise TypeError(f"the AdvisorLink has no command {type(command).__name__}")
        return None

    def status(self) -> LinkStatus:
        """The link's state and figures."""
        figures = self.stats.read()
        return LinkStatus(
            state=self.state,
            attempt=self._attempt,
            responses_forwarded=figures["responses_forwarded"],
            stream_failures=figures["stream_failures"],
            recv_stuck_checks=figures["recv_stuck_checks"],
            push_refused=figures["push_refused"],
            last_error=self._last_error,
        )

    # -- the attempt -------------------------------------------------------------------------

    def _start(self) -> None:
        if self.state != machine.DISABLED:
            return  # a second start is a no-op, as the reference's Start (§12.1)
        if self._fire("start") is None:
            logger.info("sys-advisor link disabled (--enable-cpu-advisor is off)")
            return
        self._run_attempt()

    def _run_attempt(self) -> None:
        """Dial, push, open the stream; any failure backs off (§11.2 step 4)."""
        self._attempt += 1
        # 1. Dialing: our checkpoint socket first (sys-advisor reads it right away), then the
        # advisor's socket.
        try:
            self._probe.check(DIAL_TIMEOUT_S)
            self._client.connect(DIAL_TIMEOUT_S)
        except AdvisorCallError as err:
            self._fail("dial_failed", str(err))
            return
        self._fire("connected")
        # 2. At v0.5.47: GetAdvice first; anything but UNIMPLEMENTED means polling.
        if self._advice is not None:
            first = self._get_advice()
            if first is not None:
                self._polling = True
                self._fire("synced")
                self._use_advice(first)
                self._timers.after(self._advice_interval_s, PollAdvice(self._attempt))
                return
            logger.info("advisor does not implement GetAdvice, fall back to ListAndWatch")
        # 2. Syncing: every stored container.
        try:
            self._push()
        except AdvisorSick as err:
            self._fail("push_failed", str(err))
            return
        self._fire("synced")
        # 3. Watching.
        stream = self._client.list_and_watch()
        self._stream = stream
        self._monitor = self._monitor.stream_opened(self._now())
        self._schedule_receive_check()
        attempt = self._attempt
        self._spawn(lambda: _read_stream(stream, attempt, self._deliver))

    def _push(self) -> None:
        """``push_cpu_advisor`` (§11.3): refused containers skipped, a sick advisor raised."""
        items = push_list(self._latest_state().cpu)
        pushed = 0
        for item in items:
            if isinstance(item, PushRefusal):
                self.stats.bump("push_refused")
                logger.warning("%s; skipped", item.message)
                continue
            assert isinstance(item, ContainerMetadata)
            try:
                self._client.add_container(item, self._call_timeout_s)
            except AdvisorRefused as err:
                self.stats.bump("push_refused")
                logger.warning("%s; skipped", push_failure_message(item, str(err)))
                continue
            except AdvisorSick as err:
                raise AdvisorSick(
                    err.method, err.code, push_failure_message(item, err.details)
                ) from err
            pushed += 1
        logger.info("pushed %d of %d containers to sys-advisor", pushed, len(items))

    # -- GetAdvice (Katalyst v0.5.47) ---------------------------------------------------------

    def _get_advice(self) -> AdviceReply | str | None:
        """One GetAdvice: the reply, the failure's message, or None for UNIMPLEMENTED."""
        assert self._advice is not None
        try:
            request = advice_request(self._latest_state().cpu)
        except AdviceRequestError as err:
            return str(err)
        try:
            reply = self._advice.get_advice(request, self._call_timeout_s)
        except AdvisorCallError as err:
            if isinstance(err, AdvisorRefused) and err.code == UNIMPLEMENTED:
                return None
            return f"GetAdvice failed with error: {err.details}, grpc code: {err.code}"
        agreed = negotiate(request.wanted_feature_gates, reply.supported_feature_gates)
        if agreed.refusal:
            return agreed.refusal
        if agreed.not_supported:
            logger.warning(
                "feature gates wanted by QRM that are not supported by cpu sysadvisor: %s",
                ", ".join(agreed.not_supported),
            )
        # The answer is checked against what was asked when it is applied (ValidateRequest).
        asked = replace(reply.response, asked_snb_entries=snb_entries(request))
        return replace(reply, response=asked)

    def _use_advice(self, outcome: AdviceReply | str) -> None:
        """Forward a reply to the Allocator; log a failed poll (the next one still comes)."""
        if isinstance(outcome, str):
            self._last_error = outcome
            logger.warning("get advice from cpu advisor failed with error: %s", outcome)
            return
        self._fire("receive_result")
        self.stats.bump("responses_forwarded")
        self._allocator.tell(ApplyAdvice(outcome.response, self._now()))

    def _poll_again(self) -> None:
        outcome = self._get_advice()
        if outcome is None:
            self._polling = False
            self._fail("stream_failed", "the advisor no longer implements GetAdvice")
            return
        self._use_advice(outcome)
        self._timers.after(self._advice_interval_s, PollAdvice(self._attempt))

    def _fail(self, trigger: str, reason: str) -> None:
        """End the attempt with ``trigger`` and back off by the §11.2 rule."""
        self._polling = False
        now = self._now()
        step = self._fire(trigger)
        assert step is not None  # every failure record set is complete (reset or double)
        delay, self._backoff = self._backoff.start(now, reset="reset_backoff" in step.actions)
        self._last_error = reason
        logger.warning(
            "sys-advisor link: %s (%s); retrying in %.1f s",
            trigger.replace("_", " "),
            reason,
            delay,
        )
        self._timers.after(delay, RetryLink(self._attempt))

    def _stop(self) -> None:
        self._polling = False
        self._close_stream()
        if self.state != machine.DISABLED:
            self._fire("stop")
        self._client.close()

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
            self._stream = None
        self._monitor = self._monitor.stream_closed()

    # -- helpers -------------------------------------------------------------------------------

    def _current_stream(self, attempt: int) -> bool:
        """Only the open stream of the current attempt counts; older ones are stale."""
        return attempt == self._attempt and self.state == machine.WATCHING

    def _check_receive(self) -> None:
        stuck, self._monitor = self._monitor.check(self._now())
        if stuck:
            self.stats.bump("recv_stuck_checks")
            logger.warning(
                "sys-advisor: no ListAndWatch response for more than 30 s (lw_recv_stuck)"
            )
        if stuck is not None:
            self._schedule_receive_check()

    def _schedule_receive_check(self) -> None:
        due = self._monitor.next_check
        if due is not None:
            self._timers.after(max(due - self._now(), 0.0), CheckReceive())

    def _fire(self, trigger: str) -> Any:
        before = self._model.state
        step = self._lifecycle.fire(self._model, trigger)
        if step is not None and step.changed_state:
            self.stats.set_state(step.dest)
            logger.info("sys-advisor link: %s -> %s", before, step.dest)
            self._allocator.tell(AdvisorLinkChanged(step.dest, self._now()))
        return step


def _read_stream(stream: ResponseStream, attempt: int, deliver: Callable[[Any], None]) -> None:
    """Read one stream until it ends, delivering each response and the end (§11.5)."""
    try:
        for response in stream:
            deliver(StreamReceived(attempt, response))
    except AdvisorCallError as err:
        deliver(
            StreamEnded(
                attempt,
                f"receive ListAndWatch response of CPUAdvisorServer failed with error: "
                f"{err.details}, grpc code: {err.code}",
            )
        )
        return
    deliver(StreamEnded(attempt, "ListAndWatch stream ended"))


class _ThreadTimers:
    """``Timers`` on daemon ``threading.Timer``s that tell the actor."""

    def __init__(self, tell: Callable[[Any], None]) -> None:
        self._tell = tell
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()

    def after(self, delay_s: float, message: Any) -> None:
        timer = threading.Timer(delay_s, self._tell, (message,))
        timer.daemon = True
        with self._lock:
            self._timers = [t for t in self._timers if t.is_alive()]
            self._timers.append(timer)
        timer.start()

    def cancel_all(self) -> None:
        with self._lock:
            for timer in self._timers:
                timer.cancel()
            self._timers.clear()


def _spawn_thread(run: Callable[[], None]) -> None:
    threading.Thread(target=run, name="advisor-stream", daemon=True).start()


class AdvisorLinkActor(pykka.ThreadingActor):
    """The pykka shell: one mailbox in front of an ``AdvisorLinkCore``; its timers and the
    stream reader ``tell`` it (a dead actor drops them, pykka's rule).

    Args:
        build: makes the core from the shell's ``timers``, ``spawn`` and ``deliver``.
    """

    def __init__(
        self, build: Callable[[Timers, Spawn, Callable[[Any], None]], AdvisorLinkCore]
    ) -> None:
        super().__init__()
        self._timers = _ThreadTimers(self._tell_self)
        self.core = build(self._timers, _spawn_thread, self._tell_self)

    def _tell_self(self, message: Any) -> None:
        # Stopped: late timers and readers have nobody to tell.
        with contextlib.suppress(pykka.ActorDeadError):
            self.actor_ref.tell(message)

    def on_start(self) -> None:
        self.core.handle(StartLink())

    def on_stop(self) -> None:
        self._timers.cancel_all()
        self.core.handle(StopLink())

    def on_receive(self, message: Any) -> Any:
        """Serve one command (see ``AdvisorLinkCore.handle``)."""
        return self.core.handle(message)
