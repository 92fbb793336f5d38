"""The sys-advisor link inside ``qrmd run`` (cpu-policy §11, §12.1 step 5, §14; wire.md §10;
DESIGN.md "AdvisorLink").

With ``--enable-cpu-advisor`` the daemon gains:

1. the policy context with ``advisor_enabled`` (pools sized by sys-advisor's results, §9.1
   step 3), and the Allocator's advisor calls (``actors.allocator_advisor``): ``AddContainer``
   after each Allocate, ``RemovePod`` before each removal, both bounded by
   ``--cpu-advisor-call-timeout``, the responses applied in its mailbox;
2. the ``CPUPlugin`` server on ``--cpu-plugin-socket`` (GetCheckpoint from the latest durable
   snapshot, owner-only), started before the link: sys-advisor reads it as soon as it is
   dialled, and the link's first step is to dial it. A watchdog checks every
   ``CHECKPOINT_WATCH_S`` that the socket still answers and, if it does not (the file was
   removed, the server failed), serves it again, backing off from 0.8 s to 30 s as the
   reference's ``serveForAdvisor`` loop does;
3. the ``advisor_link`` child of the Supervisor, after the Allocator (rest-for-one: a restarted
   StateStore or Allocator restarts the link, which then pushes every stored container again);
4. a ticker telling the Allocator ``CheckAdvisorSilence`` so the request-based fallback starts
   at most a tick after ``--cpu-advisor-unhealthy-after``;
5. the link's metrics (``qrmd.advisor.metrics``), the ``communicate_with_advisor`` check and
   the fallback on ``/healthz``.

Without the flag, none of it exists: no socket, no child, no metrics, exactly as before.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import pykka

from actors.advisor_link import AdvisorLinkActor, AdvisorLinkCore, LinkStats, Spawn, Timers
from actors.advisor_messages import CheckAdvisorSilence
from actors.allocator_advisor import AdvisorCalls
from actors.ports.advisor import AdviceClient, AdvisorClient
from actors.ports.clock import Clock
from actors.store_messages import Snapshot
from actors.supervisor import ChildSpec, Supervisor
from actors.threads import THREADS
from actors.ticker import Ticker
from qrmd.advisor.health import register_advisor_health
from qrmd.advisor.settings import AdvisorLinkConfig, AdvisorSettings
from qrmd.status.health import HandlerHealth, HealthRegistry
from qrmd.subsystem import (
    ALLOCATOR_CHILD,
    CheckpointSocket,
    Joinable,
    Running,
    Runtime,
    Shared,
    SubsystemParts,
)
from wire.advisor_checkpoint import CheckpointServer, GrpcCheckpointProbe, is_served
from wire.advisor_client import GrpcAdvisorClient

if TYPE_CHECKING:
    from prometheus_client.registry import Collector

    from qrmd.advisor.metrics import AdvisorLinkCollector

__all__ = [
    "ADVISOR_CHILD",
    "CHECKPOINT_WATCH_S",
    "AdvisorWiring",
    "build",
    "silence_tick_period",
]

_log = logging.getLogger("qrmd.advisor")

#: The link's name among the Supervisor's children.
ADVISOR_CHILD: Final = "advisor_link"
#: How often the watchdog checks that the checkpoint socket answers.
CHECKPOINT_WATCH_S: Final = 5.0
#: The watchdog's back-off between failed restarts (§11.2's numbers).
_RESTART_FIRST_S: Final = 0.8
_RESTART_MAX_S: Final = 30.0
#: The silence ticker's longest period.
MAX_SILENCE_TICK_S: Final = 5.0


def silence_tick_period(unhealthy_after_s: float) -> float:
    """Seconds between two ``CheckAdvisorSilence`` ticks: a tenth of the limit, at most 5 s,
    so the fallback starts at most that late."""
    return min(unhealthy_after_s / 10.0, MAX_SILENCE_TICK_S)


class _Tell:
    """Tells an actor, dropping the message when it has stopped (a restart then builds a new
    link and Allocator, which start from the published state). Never takes the Supervisor's
    lock: a tell from inside a child while the Supervisor stops or restarts must not wait
    for it."""

    def __init__(self, name: str, ref: pykka.ActorRef[Any] | None = None) -> None:
        self.name = name
        self.ref = ref

    def tell(self, message: Any) -> None:
        ref = self.ref
        if ref is None:
            _log.info("%s not running: %s dropped", self.name, type(message).__name__)
            return
        try:
            ref.tell(message)
        except pykka.ActorDeadError:
            _log.info("%s stopped: %s dropped", self.name, type(message).__name__)


def build(settings: AdvisorSettings, shared: Shared) -> AdvisorWiring:
    """The advisor link subsystem; it offers the Allocator its calls to sys-advisor."""
    ports = shared.ports

    def latest() -> Snapshot | None:
        # Read through the ports at each call: whoever offers the snapshot, built before or after.
        return ports.latest()

    host = shared.host
    advisor = AdvisorWiring(
        settings.cpu_advisor,
        shared.clock,
        shared.health,
        latest,
        client=host.advisor,
        checkpoint=host.advisor_checkpoint,
        runtime=shared.runtime,
        at_v0_5_47=shared.machine.at_v0_5_47,
    )
    ports.advisor = advisor.advisor_calls
    return advisor


class AdvisorWiring(SubsystemParts):
    """Everything ``--enable-cpu-advisor`` adds to the daemon; see the module docstring.

    Args:
        config: the link's validated settings.
        clock: the daemon's clock.
        health: the daemon's health registry (the ``communicate_with_advisor`` check and the
            fallback go there).
        latest: the latest durable snapshot (GetCheckpoint, the push, ``/healthz``).
        watch_period_s: how often the watchdog checks the GetCheckpoint socket.
        client: the sys-advisor client (default: gRPC on the advisor's socket).
        checkpoint: makes the GetCheckpoint socket from the latest CPU state (default: the
            gRPC server on the plugin socket).
        runtime: starts the link, the ticker and the watchdog (default: threads).
        at_v0_5_47: speak Katalyst v0.5.47's protocol (GetAdvice polled, fields 11-12,
            extra entries, GetCheckpoint's reclaimed assignments).
    """

    def __init__(
        self,
        config: AdvisorLinkConfig,
        clock: Clock,
        health: HealthRegistry,
        latest: Callable[[], Snapshot | None],
        watch_period_s: float = CHECKPOINT_WATCH_S,
        *,
        client: AdvisorClient | None = None,
        checkpoint: Callable[[Callable[[], Any]], CheckpointSocket] | None = None,
        runtime: Runtime | None = None,
        at_v0_5_47: bool = False,
    ) -> None:
        self.config = config
        self._runtime = runtime or THREADS
        self.at_v0_5_47 = at_v0_5_47
        self._watch_period_s = watch_period_s
        self._clock = clock
        self._latest = latest
        self.stats = LinkStats()
        self.health: HandlerHealth = register_advisor_health(health, clock.monotonic)
        health.add_source(self._fallback_problems)
        self.client: AdvisorClient = client or GrpcAdvisorClient(
            config.advisor_socket, at_v0_5_47=at_v0_5_47
        )
        make_checkpoint = checkpoint or functools.partial(
            GrpcCheckpoint, config.plugin_socket, at_v0_5_47=at_v0_5_47
        )
        self.checkpoint: CheckpointSocket = make_checkpoint(self._latest_cpu)
        self._started_at = clock.time()
        self._link = _Tell(ADVISOR_CHILD)
        self._ticker: Ticker | None = None
        self._watch_stop = threading.Event()
        self._watchdog: Joinable | None = None

    # -- the subsystem ---------------------------------------------------------------------

    def children(self) -> Sequence[ChildSpec]:
        """The link, the last child: rest-for-one restarts it with the Allocator (it then
        pushes again)."""
        return (self.child_spec(),)

    def collectors(self) -> Sequence[Collector]:
        """The link's metrics."""
        return (self.collector(),)

    def start(self, running: Running) -> None:
        """The fallback's silence ticker (the link runs)."""
        self.start_ticker(running.supervisor)

    def serve(self, running: Running) -> None:
        """The checkpoint watchdog (the socket itself is served as the link starts)."""
        del running
        self.start_watchdog()

    def serving(self) -> str:
        """The sockets it dials and serves, for the serving line."""
        link = self.config
        return f"sys-advisor: dialling {link.advisor_socket}, GetCheckpoint on {link.plugin_socket}"

    # -- the Allocator's side ----------------------------------------------------------------

    def advisor_calls(self) -> AdvisorCalls:
        """The advisor calls of one Allocator core (a restarted Allocator gets new ones)."""
        return AdvisorCalls(
            client=self.client,
            call_timeout_s=self.config.call_timeout_s,
            unhealthy_after_s=self.config.unhealthy_after_s,
            report_sick=self._link.tell,
            stats=self.stats,
            health=self.health,
            monotonic=self._clock.monotonic,
            started_at=self._started_at,
        )

    # -- the link child ----------------------------------------------------------------------

    def child_spec(self) -> ChildSpec:
        """The Supervisor's ``advisor_link`` child (after the Allocator)."""
        return ChildSpec(ADVISOR_CHILD, self._start_link)

    def _start_link(self, refs: Mapping[str, pykka.ActorRef[Any]]) -> pykka.ActorRef[Any]:
        self.serve_checkpoint()
        # The Allocator's own ref: rest-for-one restarts the link whenever the Allocator
        # restarts, so this ref is the running Allocator's for the link's whole life.
        allocator = _Tell(ALLOCATOR_CHILD, refs[ALLOCATOR_CHILD])

        def build(timers: Timers, spawn: Spawn, deliver: Callable[[Any], None]) -> AdvisorLinkCore:
            return AdvisorLinkCore(
                enabled=True,
                client=self.client,
                probe=self.checkpoint,
                latest_state=self._latest_state,
                allocator=allocator,
                timers=timers,
                spawn=spawn,
                deliver=deliver,
                monotonic=self._clock.monotonic,
                call_timeout_s=self.config.call_timeout_s,
                stats=self.stats,
                advice=self._advice_client(),
                advice_interval_s=self.config.advice_interval_s,
            )

        ref = self._runtime.spawn(AdvisorLinkActor, build)
        self._link.ref = ref
        return ref

    def _advice_client(self) -> AdviceClient | None:
        """The client GetAdvice is asked through at v0.5.47 (the advisor client itself)."""
        if not self.at_v0_5_47:
            return None
        if not isinstance(self.client, AdviceClient):
            raise TypeError(
                f"at v0.5.47 the sys-advisor client must answer GetAdvice; "
                f"{type(self.client).__name__} does not"
            )
        return self.client

    def start_ticker(self, supervisor: Supervisor) -> None:
        """Tell the Allocator ``CheckAdvisorSilence`` every tick period (the actors run)."""
        self._ticker = self._runtime.ticker(
            supervisor.ref(ALLOCATOR_CHILD),
            silence_tick_period(self.config.unhealthy_after_s),
            self._clock.time,
            CheckAdvisorSilence,
            name="advisor-silence-ticker",
        )
        self._ticker.start()

    def start_watchdog(self) -> None:
        """Check the GetCheckpoint socket every period, serving it again when it is gone."""
        self._watchdog = self._runtime.run(
            self._watch_checkpoint, name="advisor-checkpoint-watchdog"
        )

    def stop(self) -> None:
        """Stop the ticker and the watchdog (the Supervisor stops the link); then, once the
        link is stopped, :meth:`close`. Safe to call twice."""
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        self._watch_stop.set()
        if self._watchdog is not None:
            self._watchdog.join(max(self._watch_period_s, _RESTART_MAX_S))
            self._watchdog = None

    def close(self) -> None:
        """Stop the checkpoint server and close the advisor's channel (after the link)."""
        self.checkpoint.stop()
        self.client.close()

    def collector(self) -> AdvisorLinkCollector:
        """The link's metrics (``qrmd.advisor.metrics``)."""
        # The daemon asks once kubelet is served: prometheus_client loads then, not at start.
        from qrmd.advisor.metrics import AdvisorLinkCollector  # noqa: PLC0415 (after serving)

        return AdvisorLinkCollector(self.stats, self._clock.monotonic, self._sizing)

    def _sizing(self) -> str | None:
        snapshot = self._latest()
        return None if snapshot is None else snapshot.state.advisor.sizing

    # -- helpers -------------------------------------------------------------------------------

    def serve_checkpoint(self) -> None:
        """Serve GetCheckpoint unless it is served already (idempotent across link restarts).

        Raises:
            ServingError: the socket cannot be served (another process serves it).
        """
        self.checkpoint.serve()

    def _watch_checkpoint(self) -> None:
        delay = _RESTART_FIRST_S
        wait = self._watch_period_s
        while not self._watch_stop.wait(wait):
            if self.checkpoint.served():
                delay, wait = _RESTART_FIRST_S, self._watch_period_s
                continue
            path = self.config.plugin_socket
            _log.warning("GetCheckpoint socket %s does not answer: serving it again", path)
            try:
                self.checkpoint.restart()
            except Exception as err:
                _log.warning("cannot serve GetCheckpoint (retrying in %.1f s): %s", delay, err)
                wait, delay = delay, min(delay * 2, _RESTART_MAX_S)
                continue
            delay, wait = _RESTART_FIRST_S, self._watch_period_s

    def _latest_snapshot(self) -> Snapshot:
        snapshot = self._latest()
        if snapshot is None:
            raise RuntimeError("no durable state yet (the state store is recovering)")
        return snapshot

    def _latest_cpu(self) -> Any:
        return self._latest_snapshot().state.cpu

    def _latest_state(self) -> Any:
        return self._latest_snapshot().state

    def _fallback_problems(self) -> list[str]:
        snapshot = self._latest()
        if snapshot is None or not snapshot.state.advisor.is_sized_by_requests():
            return []
        last = self.stats.read()["last_applied_wall"]
        since = _iso(last if last is not None else self._started_at)
        return [
            f"pools sized by requests: no sys-advisor result applied since {since} "
            f"(--cpu-advisor-unhealthy-after {self.config.unhealthy_after_s:g} s)"
        ]


class GrpcCheckpoint:
    """``CheckpointSocket``: the gRPC GetCheckpoint server on ``--cpu-plugin-socket`` and the
    link's self-dial of it.

    Args:
        path: the socket's path.
        latest_cpu: the latest durable CPU state (what GetCheckpoint answers).
        at_v0_5_47: answer as Katalyst v0.5.47 (its reclaimed assignments).
    """

    def __init__(
        self, path: str, latest_cpu: Callable[[], Any], *, at_v0_5_47: bool = False
    ) -> None:
        self.server = CheckpointServer(path, latest_cpu, at_v0_5_47=at_v0_5_47)
        self._probe = GrpcCheckpointProbe(path)

    def serve(self) -> None:
        """Serve unless something answers on the socket already.

        Raises:
            ServingError: the socket cannot be served (another process serves it).
        """
        if not self.served():
            self.restart()

    def served(self) -> bool:
        """Whether something accepts connections on the socket."""
        return is_served(self.server.path)

    def restart(self) -> None:
        """Stop the server (its socket removed) and serve it again."""
        self.server.stop()
        self.server.start()

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()

    def check(self, timeout_s: float) -> None:
        """GetCheckpoint on the socket; raises ``AdvisorSick`` when it does not answer."""
        self._probe.check(timeout_s)


def _iso(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="seconds")
