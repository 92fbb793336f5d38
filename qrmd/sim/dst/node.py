"""The simulated node's qrmd process: the real StateStore and Allocator under the real Supervisor.

A boot does what ``qrmd run``'s state store and CPU plugin subsystems do
(``qrmd.store.subsystem``, ``qrmd.cpu_plugin.subsystem``), with the simulation's ports: the
Supervisor starts the StateStore, which opens the journal on the simulated disk with the
virtual clock (and so recovers from whatever the disk kept), then the Allocator, built from
the store's recovered snapshot and committing through the real ``StateStoreCommitter``, ready
once ``StartPolicy`` made the pools (cpu-policy §6.2). The Supervisor runs without its monitor
thread: the simulation calls ``check`` when time passes, and its back-off waits move the
virtual clock. A boot can fail (a disk fault during recovery or start-up, a crash inside it):
the process is then down, and the simulation boots it again later, as kubelet's DaemonSet
restarts a failed pod.

A crash kills every actor at once (nothing answered, inboxes lost) and keeps the disk; a power
loss also drops what was not synced (``qrmd.sim.dst.storage``). An actor crash (a message it
cannot handle, told) stops one actor; the Supervisor restarts it and the ones after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pykka

from actors.advisor_link import (
    AdvisorLinkActor,
    AdvisorLinkCore,
    LinkStats,
    Spawn,
    Timers,
)
from actors.allocator import AllocatorActor, AllocatorCore
from actors.allocator_advisor import AdvisorCalls
from actors.allocator_messages import AllocatorUnavailable, StartPolicy
from actors.checkers import CheckersActor, CheckersCore, CheckersPorts
from actors.checkers_messages import CheckerSettings
from actors.cpu_pressure import CPUPressureActor, CPUPressureCore, PressurePorts
from actors.cpu_pressure_messages import SuppressionEvictPods
from actors.ports.advisor import AdvisorClient
from actors.ports.cgroups import CpusetReader
from actors.ports.commit import StateStoreCommitter
from actors.ports.cpu_load import ContainerLoadSource
from actors.ports.pod_source import PodSource
from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import GetSnapshot, Snapshot
from actors.supervisor import ChildSpec, SupervisedRef, Supervisor, SupervisorError
from journal import Retention
from policy.cpu.context import PolicyContext
from policy.cpu.pressure import PressureSettings
from policy.state.sections import State
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.runtime import Scheduler
from qrmd.sim.dst.storage import SimDisk, SimFileOps

__all__ = [
    "JOURNAL_DIR",
    "PRESSURE_SETTINGS",
    "Poison",
    "SimLinkActor",
    "SimNode",
    "SimTimers",
    "SuppressionCall",
    "store_config",
]

JOURNAL_DIR = "/var/lib/qrmd/journal"
STORE_CHILD = "store"
ALLOCATOR_CHILD = "allocator"
CHECKERS_CHILD = "checkers"
PRESSURE_CHILD = "cpu_pressure"
ADVISOR_CHILD = "advisor_link"
#: ``--cpu-advisor-call-timeout`` and ``--cpu-advisor-unhealthy-after`` of the simulated node:
#: short, so that stalls and the fallback to request-based sizing happen within a few hundred
#: steps.
ADVISOR_CALL_TIMEOUT_S = 2.0
ADVISOR_UNHEALTHY_AFTER_S = 30.0
#: Both eviction plugins on, with bounds the simulated node meets within a few hundred steps:
#: a reclaimed pod is over its tolerance as soon as its pool's rate exceeds 0.05, and offered
#: after 20 s of that.
PRESSURE_SETTINGS = PressureSettings(
    enable_load_eviction=True,
    load_metric_ring_size=4,
    load_eviction_cool_down_s=30.0,
    load_eviction_sync_period_s=5.0,
    enable_suppression_eviction=True,
    max_suppression_tolerance_rate=0.05,
    min_suppression_tolerance_duration_s=20.0,
)
#: The checkers' periods (seconds), short so that residual rounds happen within a few hundred
#: steps; the sightings come from the policy's context, as the pods subsystem takes them.
RESIDUAL_PERIOD_S = 2.0
CPUSET_PERIOD_S = 5.0
#: Back-off waits the Supervisor may make within one step (see ``SimNode._wait``).
WAITS_PER_STEP = 3
#: How often the Supervisor's monitor would poll (the simulation checks when time passes).
POLL_INTERVAL_S = 0.5


@dataclass(frozen=True, slots=True)
class SuppressionCall:
    """One ``GetEvictPods`` the CPU pressure actor served, as the invariants see it.

    Attributes:
        message: the request.
        reclaim_pool_size: the reclaim pool's size in the state it was decided on (None: none).
        before: the durable tolerance timers before the call.
        after: the timers after it (the durable section, committed or not).
        answered: whether it was answered (False: its commit refused, or an error).
    """

    message: SuppressionEvictPods
    reclaim_pool_size: int | None
    before: dict[str, float]
    after: dict[str, float]
    answered: bool


class Poison:
    """A message no actor handles: told, it raises in the actor and stops it (a bug's crash)."""


def store_config() -> StoreConfig:
    """The journal settings of the simulated node: small segments and frequent checkpoints
    and retention, so rotation, checkpoints and deletion happen within a few hundred steps."""
    return StoreConfig(
        directory=JOURNAL_DIR,
        node_name="sim-node",
        durability="always",
        segment_max_bytes=4096,
        checkpoint_every_records=12,
        checkpoint_every_s=60.0,
        retention=Retention(max_bytes=32 * 1024, max_age_s=None),
    )


class SimNode:
    """The qrmd process of the simulated node (module docstring).

    Args:
        scheduler: runs the actors.
        disk: the node's disk, which outlives the process.
        clock: the virtual clock.
        ctx: the CPU policy's topology, reserve and settings.
        pods: the pod source port the Allocator and the checkers read.
        cgroups: the cgroups port checkCPUSet reads (None: no checkers run).
        loads: the CPU load port of the CPU pressure actor (None: it does not run).
        advisor: sys-advisor (None: ``--enable-cpu-advisor`` off; with it, ``ctx`` has
            ``advisor_enabled``).
    """

    def __init__(
        self,
        scheduler: Scheduler,
        disk: SimDisk,
        clock: VirtualClock,
        ctx: PolicyContext,
        pods: PodSource | None = None,
        *,
        cgroups: CpusetReader | None = None,
        loads: ContainerLoadSource | None = None,
        advisor: AdvisorClient | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.advisor = advisor
        #: The link's figures, one set per process (the advisor subsystem's).
        self.link_stats = LinkStats()
        self._started_at = 0.0
        self.loads = loads
        #: The ``GetEvictPods`` calls served since the invariants last read them.
        self.suppression_calls: list[SuppressionCall] = []
        self.cgroups = cgroups
        self.latest: Snapshot | None = None
        #: handler → its last error (None: Ready), as the checkers report to /healthz.
        self.checks: dict[str, str | None] = {}
        self.disk = disk
        self.clock = clock
        self.ctx = ctx
        self.pods = pods
        self.config = store_config()
        self.supervisor: Supervisor | None = None
        self.allocator: SupervisedRef | None = None
        self.store: SupervisedRef | None = None
        self.checkers: SupervisedRef | None = None
        self.pressure: SupervisedRef | None = None
        self.boots = 0
        self.last_boot_error: str | None = None
        self._fs: SimFileOps | None = None
        self._waits_left = WAITS_PER_STEP

    @property
    def up(self) -> bool:
        """Whether the process runs and its actors are available."""
        return self.supervisor is not None and self.supervisor.available()

    def boot(self) -> bool:
        """Start the process: the Supervisor starts the store (recovery), then the Allocator
        (``StartPolicy``). False if it failed (the process is down)."""
        self.boots += 1
        self.link_stats = LinkStats()
        self._started_at = self.clock.time()
        self._fs = SimFileOps(self.disk)  # a new process: no descriptors, no locks
        supervisor = Supervisor(
            (
                ChildSpec(STORE_CHILD, self._start_store, _wait_recovered),
                ChildSpec(
                    ALLOCATOR_CHILD,
                    lambda refs: self._start_allocator(refs[STORE_CHILD]),
                    _start_policy,
                    unavailable=AllocatorUnavailable,
                ),
                *(
                    ()
                    if self.cgroups is None or self.pods is None
                    else (
                        ChildSpec(
                            CHECKERS_CHILD,
                            lambda refs: self._start_checkers(refs[ALLOCATOR_CHILD]),
                        ),
                    )
                ),
                *(
                    ()
                    if self.advisor is None
                    else (
                        ChildSpec(
                            ADVISOR_CHILD,
                            lambda refs: self._start_link(refs[ALLOCATOR_CHILD]),
                        ),
                    )
                ),
                *(
                    ()
                    if self.loads is None
                    else (
                        ChildSpec(
                            PRESSURE_CHILD,
                            lambda refs: self._start_pressure(refs[STORE_CHILD]),
                        ),
                    )
                ),
            ),
            poll_interval_s=POLL_INTERVAL_S,
            clock=self.clock,
            wait=self._wait,
            monitor=False,
        )
        try:
            supervisor.start()
        except SupervisorError as err:
            self.last_boot_error = str(err)
            self.crash()
            return False
        self.supervisor = supervisor
        self.store = supervisor.ref(STORE_CHILD)
        self.allocator = supervisor.ref(ALLOCATOR_CHILD)
        if self.cgroups is not None and self.pods is not None:
            self.checkers = supervisor.ref(CHECKERS_CHILD)
        if self.loads is not None:
            self.pressure = supervisor.ref(PRESSURE_CHILD)
        self.last_boot_error = None
        return True

    def crash(self) -> None:
        """The process dies: every actor at once; the disk keeps what was written."""
        self.scheduler.kill_all()
        self.supervisor = self.store = self.allocator = self.checkers = self.pressure = None
        self.latest = None

    def crash_actor(self, name: str) -> bool:
        """Tell ``name`` (``store``, ``allocator``, ``cpu_pressure``) a message it cannot
        handle; it dies when the scheduler delivers it. False when the actor is not running."""
        if self.supervisor is None:
            return False
        try:
            self.supervisor.current(name).tell(Poison())
        except Exception:
            return False
        return True

    def watch(self) -> bool:
        """The Supervisor's monitor, one poll: restart a dead actor (and those after it)."""
        return self.supervisor is not None and self.supervisor.check()

    def store_core(self) -> StateStoreCore | None:
        """The StateStore's core while it runs (the invariants read its published state)."""
        for actor in self.scheduler.actors:
            if isinstance(actor, StateStoreActor) and not actor.actor_stopped.is_set():
                return actor._core
        return None

    def allocator_core(self) -> AllocatorCore | None:
        """The Allocator's core while it runs."""
        for actor in self.scheduler.actors:
            if isinstance(actor, AllocatorActor) and not actor.actor_stopped.is_set():
                return actor.core
        return None

    def dead_children(self) -> list[str]:
        """Names of the supervised actors that are not alive."""
        if self.supervisor is None:
            return []
        return [c.name for c in self.supervisor.status().children if not c.alive]

    # -- the children, as the store and CPU plugin subsystems start them ----------------------

    def _start_store(self, _refs: Mapping[str, Any]) -> pykka.ActorRef[Any]:
        fs, config, topology, clock = self._fs, self.config, self.ctx.topology, self.clock

        def opener() -> StateStoreCore:
            core = StateStoreCore.open(config, topology, fs=fs, clock=clock)
            self.latest = core.snapshot
            return core

        return self.scheduler.actor_class(StateStoreActor).start(opener, [self._publish])

    def _publish(self, snapshot: Snapshot) -> None:
        """The store's snapshot subscriber (what the pods subsystem keeps for the checkers)."""
        self.latest = snapshot

    def _start_checkers(self, allocator: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
        assert self.pods is not None and self.cgroups is not None
        ports = CheckersPorts(
            pods=self.pods,
            state=self._latest_state,
            allocator=allocator,
            cpusets=self.cgroups,
            report=self._report,
        )
        settings = CheckerSettings(
            residual_sightings=self.ctx.residual_sightings,
            residual_period_s=RESIDUAL_PERIOD_S,
            cpuset_period_s=CPUSET_PERIOD_S,
        )
        core = CheckersCore(ports, self.ctx, settings)
        return self.scheduler.actor_class(CheckersActor).start(core)

    def _start_pressure(self, store: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
        """The CPU pressure actor, as the cpu_pressure subsystem starts it, observed."""
        assert self.loads is not None
        snapshot = store.ask(GetSnapshot(), timeout=600.0)
        if not isinstance(snapshot, Snapshot):
            raise TypeError(f"the state store answered GetSnapshot with {snapshot!r}")
        core = CPUPressureCore(
            snapshot,
            StateStoreCommitter(store),
            PressurePorts(self.loads),
            PRESSURE_SETTINGS,
            reserved=self.ctx.reserved,
            now_fn=self.clock.time,
        )
        return self.scheduler.actor_class(_ObservedPressure).start(core, self)

    def _start_link(self, allocator: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
        """The AdvisorLink, as the advisor subsystem starts it, on simulated timers."""
        assert self.advisor is not None
        client = self.advisor

        def latest_state() -> State:
            assert self.latest is not None  # the store published at its start
            return self.latest.state

        def build(timers: Timers, spawn: Spawn, deliver: Callable[[Any], None]) -> AdvisorLinkCore:
            return AdvisorLinkCore(
                enabled=True,
                client=client,
                probe=_OwnSocket(),
                latest_state=latest_state,
                allocator=allocator,
                timers=timers,
                spawn=spawn,
                deliver=deliver,
                monotonic=self.clock.monotonic,
                call_timeout_s=ADVISOR_CALL_TIMEOUT_S,
                stats=self.link_stats,
            )

        return self.scheduler.actor_class(SimLinkActor).start(build, self.clock)

    def link_actor(self) -> SimLinkActor | None:
        """The running AdvisorLink actor (the simulation fires its timers, the advisor speaks
        to it)."""
        for actor in self.scheduler.actors:
            if isinstance(actor, SimLinkActor) and not actor.actor_stopped.is_set():
                return actor
        return None

    def _tell_link(self, message: Any) -> None:
        """``ReportSickAdvisor`` from the Allocator (dropped while the link is not running)."""
        if self.supervisor is None:
            return
        with contextlib.suppress(Exception):
            self.supervisor.current(ADVISOR_CHILD).tell(message)

    def _latest_state(self) -> State | None:
        return None if self.latest is None else self.latest.state

    def _report(self, handler: str, error: str | None) -> None:
        self.checks[handler] = error

    def _start_allocator(self, store: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
        snapshot = store.ask(GetSnapshot(), timeout=600.0)
        if not isinstance(snapshot, Snapshot):
            raise TypeError(f"the state store answered GetSnapshot with {snapshot!r}")
        calls = None
        if self.advisor is not None:
            calls = AdvisorCalls(
                client=self.advisor,
                call_timeout_s=ADVISOR_CALL_TIMEOUT_S,
                unhealthy_after_s=ADVISOR_UNHEALTHY_AFTER_S,
                report_sick=self._tell_link,
                stats=self.link_stats,
                health=None,
                monotonic=self.clock.monotonic,
                started_at=self._started_at,
            )
        core = AllocatorCore(
            snapshot,
            self.ctx,
            StateStoreCommitter(store),
            self.clock.time,
            self.pods,
            advisor=calls,
        )
        return self.scheduler.actor_class(AllocatorActor).start(core)

    def begin_step(self) -> None:
        """A new step of the simulation: the Supervisor may wait again (``_wait``)."""
        self._waits_left = WAITS_PER_STEP

    def _wait(self, seconds: float) -> bool:
        """The Supervisor's back-off wait: virtual time passes. A restart that keeps failing
        retries for ever on a real node, while the world goes on; here the world moves between
        steps only, so after a few waits in one step the wait answers "stopping": the
        Supervisor gives up this round and its next ``check`` tries again."""
        self.clock.advance(seconds)
        self._waits_left -= 1
        return self._waits_left < 0


class _OwnSocket:
    """qrmd's own GetCheckpoint socket (the link's self-dial): it answers while the process
    runs, which is whenever the link does."""

    def check(self, timeout_s: float) -> None:
        del timeout_s


class SimTimers:
    """The link's ``Timers`` on the virtual clock: due messages wait here until the simulation
    fires them (``due``), as ``threading.Timer``s would tell the actor."""

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock
        self._pending: list[tuple[float, int, Any]] = []
        self._count = 0

    def after(self, delay_s: float, message: Any) -> None:
        self._count += 1
        self._pending.append((self._clock.monotonic() + delay_s, self._count, message))

    def due(self) -> list[Any]:
        """The messages due now, in the order they were set, taken off."""
        now = self._clock.monotonic()
        ready = sorted(t for t in self._pending if t[0] <= now)
        self._pending = [t for t in self._pending if t[0] > now]
        return [message for _, _, message in ready]

    def cancel_all(self) -> None:
        self._pending.clear()


class SimLinkActor(AdvisorLinkActor):
    """The production link shell with its thread timers and stream reader replaced: timers on
    the virtual clock (``SimTimers``), and no reader thread (the simulated advisor tells the
    link what the reader would, ``qrmd.sim.dst.advisor``). Its behaviour is the core's."""

    def __init__(
        self,
        build: Callable[[Timers, Spawn, Callable[[Any], None]], AdvisorLinkCore],
        clock: VirtualClock,
    ) -> None:
        pykka.ThreadingActor.__init__(self)
        self.sim_timers = SimTimers(clock)
        self._timers = self.sim_timers  # type: ignore[assignment]
        self.core = build(self.sim_timers, _no_reader, self._tell_self)

    def tell_self(self, message: Any) -> None:
        """What a timer or the stream reader does: tell this actor (dropped once it stopped)."""
        self._tell_self(message)


def _no_reader(run: Callable[[], None]) -> None:
    del run  # the simulated advisor speaks instead (SimLinkActor)


class _ObservedPressure(CPUPressureActor):
    """The production actor, its ``GetEvictPods`` calls recorded for the invariants (the
    behaviour is the parent's; the record is taken around it)."""

    def __init__(self, core: CPUPressureCore, node: SimNode) -> None:
        super().__init__(core)
        self._node = node

    def on_receive(self, message: Any) -> Any:
        if not isinstance(message, SuppressionEvictPods):
            return super().on_receive(message)
        latest = self._node.latest
        reclaim = None if latest is None else latest.state.cpu.pools.get("reclaim")
        # The durable timers (the store's published state), not the ones the core holds: a
        # core whose earlier commit went unanswered re-reads them before deciding.
        held = self.core.history if latest is None else latest.state.cpu_pressure
        before = dict(held.tolerance_since)
        answered = False
        try:
            reply = super().on_receive(message)
            answered = True
            return reply
        finally:
            after = dict(self.core.history.tolerance_since)
            size = None if reclaim is None else reclaim.size()
            call = SuppressionCall(message, size, before, after, answered)
            self._node.suppression_calls.append(call)


def _wait_recovered(ref: pykka.ActorRef[Any]) -> None:
    ref.ask(GetSnapshot(), timeout=600.0)


def _start_policy(ref: pykka.ActorRef[Any]) -> None:
    ref.ask(StartPolicy(), timeout=60.0)
