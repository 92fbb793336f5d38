"""The simulated node's qrmd process: the real StateStore and Allocator actors on the scheduler.

A boot does what ``qrmd run``'s state store and CPU plugin subsystems do
(``qrmd.store.subsystem``, ``qrmd.cpu_plugin.subsystem``), with the simulation's ports: the
StateStore opens the journal on the simulated disk with the virtual clock (and so recovers
from whatever the disk kept), the Allocator starts from the store's recovered snapshot and
commits through the real ``StateStoreCommitter``, and ``StartPolicy`` makes the pools
(cpu-policy §6.2). A boot can fail (a disk fault during recovery or start-up, a crash inside
it): the process is then down, and the simulation boots it again later, as kubelet's
DaemonSet restarts a failed pod.

A crash kills every actor at once (nothing answered, inboxes lost) and keeps the disk; a power
loss also drops what was not synced (``qrmd.sim.dst.storage``).
"""

from __future__ import annotations

from typing import Any

import pykka

from actors.allocator import AllocatorActor, AllocatorCore
from actors.allocator_messages import StartPolicy
from actors.ports.commit import StateStoreCommitter
from actors.ports.pod_source import PodSource
from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import GetSnapshot, Snapshot
from journal import Retention
from policy.cpu.context import PolicyContext
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.runtime import Scheduler
from qrmd.sim.dst.storage import SimDisk, SimFileOps

__all__ = ["JOURNAL_DIR", "SimNode", "store_config"]

JOURNAL_DIR = "/var/lib/qrmd/journal"


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
        pods: the pod source port the Allocator reads.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        disk: SimDisk,
        clock: VirtualClock,
        ctx: PolicyContext,
        pods: PodSource | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.disk = disk
        self.clock = clock
        self.ctx = ctx
        self.pods = pods
        self.config = store_config()
        self.store: Any = None
        self.allocator: Any = None
        self.boots = 0
        self.last_boot_error: str | None = None

    @property
    def up(self) -> bool:
        """Whether the process serves (both actors alive)."""
        return (
            self.store is not None
            and self.allocator is not None
            and self.store.is_alive()
            and self.allocator.is_alive()
        )

    def boot(self) -> bool:
        """Start the process: recover, start the Allocator, StartPolicy. False if it failed."""
        self.boots += 1
        fs = SimFileOps(self.disk)
        config, topology, clock = self.config, self.ctx.topology, self.clock

        def opener() -> StateStoreCore:
            return StateStoreCore.open(config, topology, fs=fs, clock=clock)

        store = self.scheduler.actor_class(StateStoreActor).start(opener)
        try:
            if not store.is_alive():
                raise RuntimeError("the state store failed to open its journal")
            snapshot = store.ask(GetSnapshot(), timeout=600.0)
            assert isinstance(snapshot, Snapshot)
            core = AllocatorCore(
                snapshot, self.ctx, StateStoreCommitter(store), clock.time, self.pods
            )
            allocator = self.scheduler.actor_class(AllocatorActor).start(core)
            allocator.ask(StartPolicy(), timeout=60.0)
        except (Exception, pykka.Timeout) as err:
            self.last_boot_error = f"{type(err).__name__}: {err}"
            self.scheduler.kill_all()
            self.store = self.allocator = None
            return False
        self.store, self.allocator = store, allocator
        self.last_boot_error = None
        return True

    def crash(self) -> None:
        """The process dies: every actor at once; the disk keeps what was written."""
        self.scheduler.kill_all()
        self.store = self.allocator = None

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
