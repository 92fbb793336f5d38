"""The simulated node's qrmd process: ``qrmd run``'s own subsystem list on the simulation's ports.

A boot does what ``qrmd.daemon.Daemon.start`` does: it builds every enabled subsystem of
``qrmd.daemon.SUBSYSTEMS`` with ``assemble`` (the same ``build(settings, shared)`` of each, from
a configuration made of ``qrmd run`` flags, ``SIM_FLAGS``), supervises their children in the
same order under the same ``Supervisor``, starts it (the StateStore recovers from the
simulated disk, the Allocator starts from its snapshot, committing in its own turn through the
store's ``InTurnCommitter`` as in production, then the others), and calls each subsystem's
``start`` (the checkpoint ticker and the start record, the pod list's first fetch and the
checkers' tickers, the load and balance tickers, the advisor's silence ticker). It never calls
``serve``: no socket is opened; the simulated peers speak to the actors in the domain messages
the servers would convert to.

What differs is only what the ``Shared`` context injects (``qrmd.subsystem``): the ``Runtime``
(``SimRuntime``: actors on the seeded scheduler, tickers fired by the simulation on the virtual
clock, start-up work run at once) and the ``Host`` (the simulated disk under the journal's
``FileOps``, the pod list, cgroups, CPU loads, NUMA metrics and memory, the page mover and
sys-advisor). The Supervisor runs without its monitor thread: the simulation calls ``check``
when time passes, and its back-off waits move the virtual clock. A boot can fail (a disk fault
during recovery or start-up, a crash inside it, a refused start record): the process is then
down, and the simulation boots it again later, as kubelet's DaemonSet restarts a failed pod.

A crash kills every actor at once (nothing answered, inboxes lost) and keeps the disk; a power
loss also drops what was not synced (``qrmd.sim.dst.storage``). An actor crash (a message it
cannot handle, told) stops one actor; the Supervisor restarts it and the ones after it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pykka

from actors.advisor_link import AdvisorLinkActor, AdvisorLinkCore, LinkStats, Spawn, Timers
from actors.allocator import AllocatorActor, AllocatorCore
from actors.allocator_messages import GROUPED_CALLS, CommandGroup
from actors.cpu_pressure import CPUPressureActor, CPUPressureCore
from actors.cpu_pressure_messages import SuppressionEvictPods
from actors.ports.advisor import AdvisorClient
from actors.ports.balancer import ContainerMemoryReader, NumaMetricSource
from actors.ports.cgroups import CpusetReader
from actors.ports.cpu_load import ContainerLoadSource
from actors.ports.pod_source import PodListSnapshot
from actors.ports.reclaim_metrics import ReclaimMetricsSource
from actors.state_store import InTurnCommitter, StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import CommitInTurn, CommitRefused
from actors.supervisor import SupervisedRef, Supervisor
from actors.ticker import Tellable, Ticker
from journal import Retention
from journal.records import pack
from policy.cpu.context import PolicyContext
from policy.cpu.pressure import PressureSettings
from policy.cpu.reference import V0_5_3, V0_5_47, is_v0_5_47
from qrmd.advisor.subsystem import AdvisorWiring
from qrmd.config import DaemonConfig, load_config
from qrmd.daemon import assemble, watch_health
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.numa_host import SimHostMemory
from qrmd.sim.dst.runtime import Scheduler
from qrmd.sim.dst.storage import SimDisk, SimFileOps
from qrmd.status.health import HealthRegistry
from qrmd.status.metrics import DaemonMetrics, MetricSources
from qrmd.subsystem import Host, JournalStorage, Running, Shared, Subsystem

__all__ = [
    "JOURNAL_DIR",
    "PRESSURE_SETTINGS",
    "SIM_FLAGS",
    "V0_5_47_FLAGS",
    "Poison",
    "SimLinkActor",
    "SimNode",
    "SimRuntime",
    "SimTicker",
    "SimTimers",
    "SuppressionCall",
    "sim_config",
    "store_config",
]

JOURNAL_DIR = "/var/lib/qrmd/journal"
NODE_NAME = "sim-node"
#: Small segments, so rotation happens within a few hundred steps (no flag sets it).
SEGMENT_MAX_BYTES = 4096
#: ``qrmd run``'s flags of the simulated node: every subsystem on, with periods and bounds the
#: node meets within a few hundred steps. The journal: frequent checkpoints and retention.
#: The checkers: residual rounds every 2 s (three sightings, from the policy's context),
#: checkCPUSet every 5 s. CPU pressure: both eviction plugins, a reclaimed pod over its
#: tolerance as soon as its pool's rate exceeds 0.05, offered after 20 s of that. sys-advisor
#: (when the seed enables it): calls time out after 2 s, the fallback to request-based sizing
#: starts after 30 s of silence (its ticker every 3 s).
SIM_FLAGS: dict[str, object] = {
    "state-dir": JOURNAL_DIR,
    "node-name": NODE_NAME,
    "durability": "always",
    "checkpoint-every-records": 12,
    "checkpoint-every": "60s",
    "journal-retention-size": str(32 * 1024),
    "journal-retention-age": "none",
    "katalyst-checkpoint": "ignore",
    "pod-source": "kubelet",
    "residual-check-period": "2s",
    "cpuset-check-period": "5s",
    "enable-cpu-pressure-eviction": True,
    "eviction-load-enable": True,
    "eviction-load-metric-ring-size": 4,
    "eviction-load-cool-down-time": "30s",
    "eviction-load-sync-period": "5s",
    "eviction-suppression-enable": True,
    "eviction-suppression-max-tolerance-rate": 0.05,
    "eviction-suppression-min-tolerance-duration": "20s",
    "enable-memory-balancer": True,
    "memory-balance-execute": True,
    "qos-aware-sync-period": "5s",
    "cpu-advisor-call-timeout": "2s",
    "cpu-advisor-unhealthy-after": "30s",
}
#: What a v0.5.47 node adds to ``SIM_FLAGS``: the level, and the suppression's reclaim metrics
#: from the host port (``Host.reclaim_metrics``; the flag's value is never built).
V0_5_47_FLAGS: dict[str, object] = {
    "reference-version": V0_5_47,
    "reclaim-metrics-source": "simulated",
}
#: Back-off waits the Supervisor may make within one step (see ``SimNode._wait``).
WAITS_PER_STEP = 3
#: How often the Supervisor's monitor would poll (the simulation checks when time passes).
POLL_INTERVAL_S = 0.5
#: The children the simulation may crash with a message they cannot handle.
CRASHABLE = ("store", "allocator", "cpu_pressure", "memory_balancer")


@functools.cache
def sim_config(
    *,
    cpu_advisor: bool,
    reference_version: str = V0_5_3,
    reclaim_numa_binding: bool = False,
) -> DaemonConfig:
    """The simulated node's configuration: ``SIM_FLAGS``, and ``--enable-cpu-advisor``,
    ``--reference-version`` and (at v0.5.47) ``--enable-reclaim-numa-binding`` as the seed
    says. Validated by ``qrmd run``'s own loader (nothing of the host is read: the katalyst
    checkpoint is ignored, the node name given)."""
    flags: dict[str, object] = {**SIM_FLAGS, "enable-cpu-advisor": cpu_advisor}
    if is_v0_5_47(reference_version):
        flags.update(V0_5_47_FLAGS)
        flags["enable-reclaim-numa-binding"] = reclaim_numa_binding
    elif reclaim_numa_binding:
        raise ValueError("reclaimed NUMA binding exists at --reference-version v0.5.47 only")
    return load_config(flags)


#: The CPU pressure settings the flags make (the simulated eviction manager's period).
PRESSURE_SETTINGS: PressureSettings = sim_config(cpu_advisor=False).cpu_pressure


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
    """Where the simulated node's journal lives and whose it is (what an offline reader of
    the disk needs: the invariants recover a copy of it)."""
    config = sim_config(cpu_advisor=False)
    return StoreConfig(
        directory=config.state_dir,
        node_name=config.node_name,
        durability=config.durability,
        segment_max_bytes=SEGMENT_MAX_BYTES,
        checkpoint_every_records=config.checkpoint_every_records,
        checkpoint_every_s=config.checkpoint_every_s,
        retention=Retention(
            max_bytes=config.journal_retention_max_bytes,
            max_age_s=config.journal_retention_max_age_s,
        ),
    )


class SimTicker(Ticker):
    """A production ``Ticker`` without its thread: started, it waits in its runtime's list
    until the simulation fires it (``SimRuntime.fire_due``) on the virtual clock."""

    def __init__(self, runtime: SimRuntime, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._runtime = runtime
        self.due_at: float | None = None

    def start(self) -> None:
        if self.due_at is not None:
            raise RuntimeError(f"ticker {self.name!r} was started before")
        self.due_at = self._runtime.clock.monotonic() + self.period_s
        self._runtime.tickers.append(self)

    def stop(self, timeout_s: float = 5.0) -> None:
        del timeout_s
        if self in self._runtime.tickers:
            self._runtime.tickers.remove(self)


class _Done:
    """``Joinable`` of work that has run already."""

    def join(self, timeout: float | None = None) -> None:
        del timeout


class SimRuntime:
    """The ``Runtime`` of the simulated process (``qrmd.subsystem``): actors on the seeded
    scheduler, tickers on the virtual clock, one-off background work run at once.

    A few production actor classes are started as observed subclasses (their behaviour the
    parent's, with a record taken around it for the invariants), and the advisor link as
    ``SimLinkActor`` (its thread timers and stream reader replaced).
    """

    def __init__(self, node: SimNode) -> None:
        self.node = node
        self.clock = node.clock
        self.tickers: list[SimTicker] = []

    def spawn(self, actor_class: type[pykka.Actor], /, *args: Any) -> pykka.ActorRef[Any]:
        node = self.node
        actor = node.scheduler.actor_class
        if actor_class is StateStoreActor:
            return actor(_ObservedStore).start(*args, node)
        if actor_class is AllocatorActor:
            return actor(_ObservedAllocator).start(*args, node)
        if actor_class is CPUPressureActor:
            return actor(_ObservedPressure).start(*args, node)
        if actor_class is AdvisorLinkActor:
            return actor(SimLinkActor).start(*args, self.clock)
        return actor(actor_class).start(*args)

    def ticker(
        self,
        target: Tellable,
        period_s: float,
        now: Callable[[], float],
        make_tick: Callable[[float], Any],
        *,
        name: str,
    ) -> Ticker:
        return SimTicker(self, target, period_s, now, make_tick, name=name)

    def run(self, work: Callable[[], None], *, name: str) -> _Done:
        del name
        work()
        return _Done()

    def fire_due(self) -> list[str]:
        """Tick every ticker whose period has passed, in the order they were started; the
        names of those that ticked (a tick its target could not take is counted missed, the
        ticker's own rule)."""
        now = self.clock.monotonic()
        fired = []
        for ticker in list(self.tickers):
            if ticker.due_at is not None and ticker.due_at <= now:
                ticker.due_at = now + ticker.period_s
                ticker.tick()
                fired.append(ticker.name)
        return fired


class SimNode:
    """The qrmd process of the simulated node (module docstring).

    Args:
        scheduler: runs the actors.
        disk: the node's disk, which outlives the process.
        clock: the virtual clock.
        ctx: the CPU policy's topology, reserve and settings (the ``machine`` of ``Shared``;
            ``advisor_enabled`` says whether the node runs ``--enable-cpu-advisor``).
        pod_list: the pod list fetch of the pod source subsystem.
        cgroups: the cgroups port checkCPUSet reads.
        loads: the CPU load port of the CPU pressure actor.
        reclaim_metrics: its reclaim metrics port (read at v0.5.47).
        advisor: sys-advisor (with ``ctx.advisor_enabled``).
        numa_metrics, memory, page_mover: the memory balancer's host (its NUMA metric source,
            the containers' memory, the page mover).
    """

    def __init__(
        self,
        scheduler: Scheduler,
        disk: SimDisk,
        clock: VirtualClock,
        ctx: PolicyContext,
        *,
        pod_list: Callable[[], PodListSnapshot],
        cgroups: CpusetReader,
        loads: ContainerLoadSource,
        reclaim_metrics: ReclaimMetricsSource | None = None,
        advisor: AdvisorClient | None = None,
        numa_metrics: NumaMetricSource | None = None,
        memory: ContainerMemoryReader | None = None,
        page_mover: SimHostMemory | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.disk = disk
        self.clock = clock
        self.ctx = ctx
        self.settings = sim_config(
            cpu_advisor=ctx.advisor_enabled,
            reference_version=ctx.reference_version,
            reclaim_numa_binding=ctx.reference.enable_reclaim_numa_binding,
        )
        self.config = store_config()
        self._pod_list = pod_list
        self._cgroups = cgroups
        self._loads = loads
        self._reclaim_metrics = reclaim_metrics
        self._advisor = advisor
        self._numa_metrics = numa_metrics
        self._memory = memory
        #: The simulated host's memory and page mover (the balancer invariants read it).
        self.page_mover = page_mover
        self.runtime = SimRuntime(self)
        self.subsystems: list[Subsystem] = []
        self.shared: Shared | None = None
        #: The advisor link's figures of the last process (its subsystem's).
        self.link_stats = LinkStats()
        #: The ``GetEvictPods`` calls served since the invariants last read them.
        self.suppression_calls: list[SuppressionCall] = []
        #: Told each commit an in-turn committer refused with ``CommitRefused``: (seq, cause).
        self.on_refused: Callable[[int, bytes], None] | None = None
        #: The state each command of a served ``CommandGroup`` was answered from, by the
        #: group's ``id``, with the group itself (kept, so that its ``id`` is not reused while
        #: the entry lasts; the plugin socket takes them as its callers' witnesses).
        self.group_witnesses: dict[int, tuple[Any, list[tuple[int, Any]]]] = {}
        #: The state the Allocator held as it began each kubelet call (of a group, or alone),
        #: by the message's ``id``, with the message (kept as ``group_witnesses`` are).
        self.befores: dict[int, tuple[Any, list[Any]]] = {}
        #: Told the seqs of the records each in-turn commit (or group sync) made durable.
        self.on_committed: Callable[[list[int]], None] | None = None
        self.supervisor: Supervisor | None = None
        self.allocator: SupervisedRef | None = None
        self.store: SupervisedRef | None = None
        self.boots = 0
        self.last_boot_error: str | None = None
        self._waits_left = WAITS_PER_STEP

    @property
    def up(self) -> bool:
        """Whether the process runs and its actors are available."""
        return self.supervisor is not None and self.supervisor.available()

    @property
    def latest(self) -> Any:
        """The store's latest durable snapshot, as the subsystems read it (None: down)."""
        return None if self.shared is None else self.shared.ports.latest()

    def healthz(self) -> list[str]:
        """What ``/healthz`` would answer now: every reason to be unhealthy (empty: ok), from
        the daemon's own health wiring (``qrmd.daemon.watch_health``). Down: one reason."""
        if self.shared is None or self.supervisor is None:
            return ["qrmd is not running"]
        return list(self.shared.health.check().reasons)

    def find(self, kind: type[Any]) -> Any:
        """The running subsystem of this type, or None."""
        for part in self.subsystems:
            if isinstance(part, kind):
                return part
        return None

    def boot(self) -> bool:
        """Start the process as ``qrmd run`` does (module docstring). False if it failed (the
        process is down)."""
        self.boots += 1
        fs = SimFileOps(self.disk)  # a new process: no descriptors, no locks
        host = Host(
            journal=JournalStorage(fs, SEGMENT_MAX_BYTES),
            pod_list=self._pod_list,
            cpusets=self._cgroups,
            cpu_loads=self._loads,
            reclaim_metrics=self._reclaim_metrics,
            cpu_vendor="GenuineIntel",
            numa_metrics=self._numa_metrics,
            container_memory=self._memory,
            page_mover=self.page_mover,
            advisor=self._advisor,
            advisor_checkpoint=_own_socket,
        )
        health = HealthRegistry(self.clock.monotonic)
        shared = Shared(self.ctx, self.clock, health, runtime=self.runtime, host=host)
        self.shared = shared
        try:
            self.subsystems = [part for _, part in assemble(self.settings, shared)]
            link = self.find(AdvisorWiring)
            self.link_stats = LinkStats() if link is None else link.stats
            supervisor = Supervisor(
                [child for part in self.subsystems for child in part.children()],
                poll_interval_s=POLL_INTERVAL_S,
                clock=self.clock,
                wait=self._wait,
                monitor=False,
            )
            watch_health(health, supervisor, self.subsystems)
            supervisor.start()
            self.supervisor = supervisor
            running = Running(supervisor, DaemonMetrics(MetricSources()))
            for part in self.subsystems:
                part.start(running)
        except Exception as err:
            # What makes ``qrmd run`` exit at start (a SupervisorError from recovery or
            # StartPolicy, a DaemonError from the start record): the process is down.
            self.last_boot_error = str(err)
            self.crash()
            return False
        self.store = supervisor.ref("store")
        self.allocator = supervisor.ref("allocator")
        self.last_boot_error = None
        return True

    def crash(self) -> None:
        """The process dies: every actor at once; the disk keeps what was written."""
        self.scheduler.kill_all()
        self.runtime.tickers.clear()
        self.group_witnesses.clear()
        self.befores.clear()
        self.supervisor = self.store = self.allocator = None
        self.subsystems = []
        self.shared = None

    def crash_actor(self, name: str) -> bool:
        """Tell ``name`` (one of ``CRASHABLE``) a message it cannot handle; it dies when the
        scheduler delivers it. False when the actor is not running."""
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

    def fire_tickers(self) -> list[str]:
        """The subsystems' tickers whose period passed tick (``SimRuntime.fire_due``)."""
        return self.runtime.fire_due()

    def ref(self, name: str) -> SupervisedRef | None:
        """The supervised child ``name`` (None while the process is down or has no such
        child)."""
        if self.supervisor is None:
            return None
        if name not in (c.name for c in self.supervisor.status().children):
            return None
        return self.supervisor.ref(name)

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

    def link_actor(self) -> SimLinkActor | None:
        """The running AdvisorLink actor (the simulation fires its timers, the advisor speaks
        to it)."""
        for actor in self.scheduler.actors:
            if isinstance(actor, SimLinkActor) and not actor.actor_stopped.is_set():
                return actor
        return None

    def dead_children(self) -> list[str]:
        """Names of the supervised actors that are not alive."""
        if self.supervisor is None:
            return []
        return [c.name for c in self.supervisor.status().children if not c.alive]

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

    def committed(self, seqs: list[int]) -> None:
        """In-turn commits made the records at ``seqs`` durable (and answered them)."""
        if self.on_committed is not None:
            self.on_committed(seqs)

    def refused(self, seq: int, cause: Mapping[str, Any]) -> None:
        """An in-turn commit at ``seq`` was refused with ``CommitRefused`` (nothing of it
        persisted): the witness of ``journal-holds-no-refused-record``."""
        if self.on_refused is not None:
            self.on_refused(seq, pack(dict(cause), "cause"))


class _OwnSocket:
    """qrmd's own GetCheckpoint socket (``CheckpointSocket``) in the simulated process: it
    answers while the process runs, which is whenever the link does (no socket is opened)."""

    def serve(self) -> None:
        """Nothing to open."""

    def served(self) -> bool:
        return True

    def restart(self) -> None:
        """Nothing to open."""

    def stop(self) -> None:
        """Nothing to close."""

    def check(self, timeout_s: float) -> None:
        del timeout_s


def _own_socket(latest_cpu: Callable[[], Any]) -> _OwnSocket:
    del latest_cpu  # the simulated sys-advisor reads the state through its own port
    return _OwnSocket()


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


class _ObservedCommitter(InTurnCommitter):
    """The production in-turn committer, each commit it refuses with ``CommitRefused``
    (nothing persisted) told to the node with its seq and cause; in a group, the records a
    failed write or sync cut back are refused too (the behaviour is the parent's)."""

    def __init__(self, core: StateStoreCore, node: SimNode) -> None:
        super().__init__(core)
        self._node = node
        self._written: list[tuple[int, Mapping[str, Any]]] = []

    def commit(self, events: Any, cause: Mapping[str, Any]) -> Any:
        core = self._core
        seq = (core.pending or core.snapshot).seq + 1
        try:
            snapshot = super().commit(events, cause)
        except CommitRefused:  # StoreUnavailable too: nothing was persisted
            self._node.refused(seq, cause)
            if self.broken:
                self._refuse_group()
            raise
        if self._grouping:
            self._written.append((snapshot.seq, cause))
        else:
            self._node.committed([snapshot.seq])
        return snapshot

    @contextmanager
    def group(self) -> Iterator[None]:
        self._written = []
        with super().group():
            yield

    def sync(self) -> Any:
        try:
            snapshot = super().sync()
        except CommitRefused:
            self._refuse_group()
            raise
        finally:
            written, self._written = self._written, []
        self._node.committed([seq for seq, _ in written])
        return snapshot

    def _refuse_group(self) -> None:
        # Records the store published all the same (synced before a rotation) are not refused.
        published = self._core.snapshot.seq
        self._node.committed([seq for seq, _ in self._written if seq <= published])
        for seq, cause in self._written:
            if seq > published:
                self._node.refused(seq, cause)
        self._written = []


class _ObservedStore(StateStoreActor):
    """The production store, its in-turn committers observed (``_ObservedCommitter``)."""

    def __init__(self, *args: Any) -> None:
        *given, node = args
        super().__init__(*given)
        self._node = node

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, CommitInTurn):
            return _ObservedCommitter(self.core, self._node)
        return super().on_receive(message)


class _ObservedAllocator(AllocatorActor):
    """The production Allocator, the state each command of a ``CommandGroup`` was answered
    from recorded (the state after its own record: the group's later records, synced with it,
    are not what its answer says). The behaviour is the parent's."""

    def __init__(self, core: AllocatorCore, node: SimNode) -> None:
        super().__init__(core)
        self._node = node

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, GROUPED_CALLS):
            self._node.befores[id(message)] = (message, [self.core.snapshot.state])
            return super().on_receive(message)
        if not isinstance(message, CommandGroup):
            return super().on_receive(message)
        core = self.core
        served = core._outcome
        witnesses: list[tuple[int, Any]] = []
        befores: list[Any] = []
        self._node.befores[id(message)] = (message, befores)

        def outcome(command: Any) -> Any:
            befores.append(core.snapshot.state)
            result = served(command)
            witnesses.append((core.snapshot.seq, core.snapshot.state))
            return result

        core._outcome = outcome  # type: ignore[method-assign]
        try:
            return super().on_receive(message)
        finally:
            del core._outcome
            self._node.group_witnesses[id(message)] = (message, witnesses)


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
            # The durable timers again: an early return commits nothing, so a core still
            # holding a snapshot older than the durable one (its earlier commit went
            # unanswered and landed later) changes nothing by answering from it.
            durable = self._node.latest
            held = self.core.history if durable is None else durable.state.cpu_pressure
            after = dict(held.tolerance_since)
            size = None if reclaim is None else reclaim.size()
            call = SuppressionCall(message, size, before, after, answered)
            self._node.suppression_calls.append(call)
