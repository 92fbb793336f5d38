"""The StateStore inside ``qrmd run``: the Supervisor's first child and its checkpoint ticker
(DESIGN.md "Actors and messages", the commit protocol step 5; DESIGN.md "Journal":
checkpoints "every N records", and qrmd's time limit besides).

Rules:

* The store is the Supervisor's ``store`` child. Its first start recovers in the daemon's
  thread, so a journal that cannot be opened is one clear error at start; a restart recovers
  in the new actor's ``on_start`` (a restarted store holds only what the disk holds).
* The store checks whether a checkpoint is due after each commit, so on a node that stops
  committing the time limit (``--checkpoint-every``) would never be checked. A ``Ticker``
  therefore tells the store ``CheckpointIfDue`` every ``checkpoint_tick_period`` seconds — a
  quarter of the limit, at most ``MAX_CHECKPOINT_TICK_S`` — so a checkpoint is at most that
  late. The store decides on its own clock and writes nothing when nothing is new.
* The ticker starts after the Supervisor has started the store and stops before the
  Supervisor stops it. It tells the store through a ``SupervisedRef``, so it follows the
  store across a restart; a tick while the store is down is counted as missed, not an error.
* Once the store runs, the daemon's start is its first record of the run (version, settings,
  what recovery did: ``qrmd.store.start_record``).
* The metrics and the health check never touch the store's core (its owner is the actor's
  thread): the store publishes a frozen ``StoreStatus`` at every change — health and its
  reason, commits and refusals, journal figures, recovery — and the wiring keeps the latest
  one, as it keeps the latest snapshot. Reading a kept value from the HTTP thread is safe
  because the value never changes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pykka

from actors.ports.clock import Clock
from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import (
    CheckpointIfDue,
    Commit,
    CommitRefused,
    GetSnapshot,
    Snapshot,
)
from actors.store_status import StoreStatus
from actors.supervisor import ChildSpec, Supervisor
from actors.threads import THREADS
from actors.ticker import Ticker
from journal.fileops import FileOps
from policy.cpu.context import PolicyContext
from policy.topology.model import CPUTopology
from qrmd.status.health import ProblemSource
from qrmd.store.katalyst_takeover import adopt_katalyst_state
from qrmd.store.settings import StoreSettings
from qrmd.store.start_record import start_cause
from qrmd.subsystem import (
    RECOVERY_TIMEOUT_S,
    STORE_CHILD,
    DaemonError,
    Running,
    Runtime,
    Shared,
    SubsystemParts,
)

__all__ = [
    "MAX_CHECKPOINT_TICK_S",
    "RECOVERY_TIMEOUT_S",
    "STORE_CHILD",
    "StoreWiring",
    "build",
    "checkpoint_tick_period",
]

_log = logging.getLogger("qrmd.store")

#: The checkpoint ticker's longest period: how late a time-due checkpoint may be at worst.
MAX_CHECKPOINT_TICK_S = 30.0


def checkpoint_tick_period(checkpoint_every_s: float) -> float:
    """Seconds between two ``CheckpointIfDue`` ticks for a checkpoint every so many seconds.

    Args:
        checkpoint_every_s: the checkpoint time limit, positive.

    Returns:
        A quarter of it, at most ``MAX_CHECKPOINT_TICK_S``: a checkpoint is written at most
        that long after it became due.

    Raises:
        ValueError: ``checkpoint_every_s`` is not positive.
    """
    if not checkpoint_every_s > 0:
        raise ValueError(f"the checkpoint interval must be positive, got {checkpoint_every_s} s")
    return min(checkpoint_every_s / 4, MAX_CHECKPOINT_TICK_S)


def build(settings: StoreSettings, shared: Shared) -> StoreWiring:
    """The state store subsystem; it offers the others its latest snapshot and status.

    Before anything opens the journal, katalyst-agent's checkpoint is taken over or the start
    refused, as ``--import-katalyst-if-present`` says (``qrmd.store.katalyst_takeover``).
    """
    adopt_katalyst_state(
        settings.takeover, settings.state_dir, settings.node_name, shared.machine.topology
    )
    storage = shared.host.journal
    config = StoreConfig(
        settings.state_dir,
        settings.node_name,
        settings.durability,
        checkpoint_every_records=settings.checkpoint_every_records,
        checkpoint_every_s=settings.checkpoint_every_s,
        retention=settings.retention(),
        checkpoint_form=settings.checkpoint_form,
    )
    if storage is not None and storage.segment_max_bytes is not None:
        config = dataclasses.replace(config, segment_max_bytes=storage.segment_max_bytes)
    store = StoreWiring(
        config,
        shared.machine.topology,
        shared.clock,
        machine=shared.machine,
        runtime=shared.runtime,
        fs=None if storage is None else storage.files,
    )
    shared.ports.latest = lambda: store.latest
    shared.ports.store_status = lambda: store.status
    return store


class StoreWiring(SubsystemParts):
    """Opens the StateStore for its actor, ticks its checkpoints, and keeps what it publishes
    for the metrics and health (the latest snapshot and the latest status).

    Args:
        config: the journal directory and settings.
        topology: this node's topology; the journal must have been written for it.
        clock: the daemon's clock: the journal's, and the time the ticks carry.
        machine: the daemon's machine, written into its start record.
        runtime: starts the actor and the ticker (default: threads).
        fs: the journal's file operations (default: the OS's).
    """

    def __init__(
        self,
        config: StoreConfig,
        topology: CPUTopology,
        clock: Clock,
        *,
        machine: PolicyContext,
        runtime: Runtime | None = None,
        fs: FileOps | None = None,
    ) -> None:
        self.config = config
        self._runtime = runtime or THREADS
        self._fs = fs
        self._topology = topology
        self._clock = clock
        self._machine = machine
        self.open_error: Exception | None = None
        self.latest: Snapshot | None = None
        self.status: StoreStatus | None = None
        self.ticker: Ticker | None = None

    # -- the supervised actor ----------------------------------------------------------------

    def child_spec(self) -> ChildSpec:
        """The Supervisor's ``store`` child (its first child: the others commit through it)."""
        return ChildSpec(STORE_CHILD, self.start_actor, self.wait_recovered)

    def open(self) -> StateStoreCore:
        """The actor's opener: runs in ``on_start``, so a restarted store reloads from disk."""
        self.open_error = None
        try:
            core = StateStoreCore.open(self.config, self._topology, fs=self._fs, clock=self._clock)
        except Exception as err:
            self.open_error = err
            raise
        self.latest, self.status = core.snapshot, core.status
        return core

    def publish(self, snapshot: Snapshot) -> None:
        """Subscriber: remember the latest durable snapshot (pool sizes for the metrics)."""
        self.latest = snapshot

    def publish_status(self, status: StoreStatus) -> None:
        """Status subscriber: remember the store's latest health and figures."""
        self.status = status

    def start_actor(self, _refs: Mapping[str, pykka.ActorRef[Any]]) -> pykka.ActorRef[Any]:
        """Start the store's actor (the first time, recovery runs here: module rules)."""
        spawn = self._runtime.spawn
        if self.status is None:
            core = self.open()
            return spawn(StateStoreActor, lambda: core, [self.publish], [self.publish_status])
        return spawn(StateStoreActor, self.open, [self.publish], [self.publish_status])

    def wait_recovered(self, ref: pykka.ActorRef[Any]) -> None:
        """Wait until the actor has recovered; re-raise why it could not open."""
        try:
            ref.ask(GetSnapshot(), timeout=RECOVERY_TIMEOUT_S)
        except pykka.ActorDeadError:
            if self.open_error is not None:
                raise self.open_error from None
            raise

    # -- the checkpoint ticker -----------------------------------------------------------------

    def start_ticker(self, supervisor: Supervisor) -> None:
        """Tell the supervised store ``CheckpointIfDue`` every tick period (the store runs).

        Raises:
            RuntimeError: started before.
        """
        if self.ticker is not None:
            raise RuntimeError("the checkpoint ticker was started before")
        period = checkpoint_tick_period(self.config.checkpoint_every_s)
        self.ticker = self._runtime.ticker(
            supervisor.ref(STORE_CHILD),
            period,
            self._clock.time,
            CheckpointIfDue,
            name="checkpoint-ticker",
        )
        self.ticker.start()
        _log.debug(
            "checkpoints every %d records or %g s; checked every %g s",
            self.config.checkpoint_every_records,
            self.config.checkpoint_every_s,
            period,
        )

    def stop_ticker(self) -> None:
        """Stop ticking (before the store stops); safe to call twice or before starting."""
        if self.ticker is not None:
            self.ticker.stop()

    def tick(self) -> bool:
        """Tell one ``CheckpointIfDue`` now (tests drive it with a fake clock this way).

        Returns:
            Whether the store took it (False while it is down or restarting).

        Raises:
            RuntimeError: the ticker is not started.
        """
        if self.ticker is None:
            raise RuntimeError("the checkpoint ticker is not started")
        return self.ticker.tick()

    # -- the subsystem -------------------------------------------------------------------------

    def children(self) -> Sequence[ChildSpec]:
        """The store, the Supervisor's first child."""
        return (self.child_spec(),)

    def health_sources(self) -> Sequence[ProblemSource]:
        """The store's own health (``problems``)."""
        return (self.problems,)

    def start(self, running: Running) -> None:
        """Tick the checkpoints, then journal the daemon's start (the store has recovered)."""
        self.start_ticker(running.supervisor)
        self._journal_start(running.supervisor)

    def stop(self) -> None:
        """Stop the checkpoint ticker (before the Supervisor stops the store)."""
        self.stop_ticker()

    def serving(self) -> str:
        """What recovery did, for the serving line."""
        if self.status is None:
            return "nothing recovered"
        r = self.status.recovery
        return (
            f"recovered seq {r.last_seq} from {r.directory} ({r.records_replayed} records "
            f"replayed, {r.bytes_truncated} bytes truncated, in {r.elapsed_s:.3f} s)"
        )

    def _journal_start(self, supervisor: Supervisor) -> None:
        # The Supervisor has started the store: it recovered and published its status.
        assert self.status is not None
        try:
            # Blocking on the store is the commit protocol's one wait (DESIGN.md): it calls no one.
            supervisor.ref(STORE_CHILD).ask(
                Commit((), start_cause(self._machine, self.status.recovery)),
                timeout=RECOVERY_TIMEOUT_S,
            )
        except CommitRefused as err:
            raise DaemonError(f"cannot journal the daemon's start: {err}") from err

    # -- observability -------------------------------------------------------------------------

    def problems(self) -> list[str]:
        """Health: why the store is unhealthy (its latest status's reason), or nothing."""
        status = self.status
        if status is not None and status.health.reason is not None:
            return [status.health.reason]
        return []
