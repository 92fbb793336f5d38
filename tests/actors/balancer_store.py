"""The MemoryBalancer on the real StateStore: a store on a journal directory, example 2's CPU
section committed to it, and a balancer core whose pods come from the store's snapshots."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from actors.balancer_inputs import store_pods
from actors.memory_balancer import MemoryBalancerActor, MemoryBalancerCore
from actors.ports.commit import StateStoreCommitter
from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import Commit, GetSnapshot, Snapshot
from policy.balance import BalancerConfig
from policy.state.entries import RECLAIMED_CORES, InPool
from policy.state.events import ContainerAllocated, PoolSet
from policy.topology.cpuset import CPUSet
from tests.actors.balancer_fakes import Balancer, FakeMemory, RecordingExecutor
from tests.policy.balance.examples import EX2_PODS
from tests.policy.state_fixtures import SYNTH_16_2_4, container

__all__ = ["balancer_on", "populate_cpu", "start_store"]


def start_store(directory: Path) -> Any:
    config = StoreConfig(directory=str(directory), node_name="node-a", durability="none")
    return StateStoreActor.start(lambda: StateStoreCore.open(config, SYNTH_16_2_4))


def populate_cpu(store: Any) -> None:
    """Example 2's pods as the Allocator would have committed them: share on NUMA 0-1,
    reclaim on NUMA 0-3 of SYNTH_16_2_4 (the pools overlap, as example 2's do)."""
    events: list[Any] = [
        PoolSet("share", CPUSet.parse("0-3,8-11")),
        PoolSet("reclaim", CPUSet.parse("0-15")),
    ]
    for p in EX2_PODS:
        qos = {"qos": RECLAIMED_CORES} if p.pool == "reclaim" else {}
        for i, c in enumerate(p.containers):
            entry = container(p.uid, c.name, InPool(p.pool), owner=p.pool, **qos)  # type: ignore[arg-type]
            if i:
                entry = replace(entry, container_type="SIDECAR", container_index=i)
            events.append(ContainerAllocated(entry))
    store.ask(Commit(tuple(events), {"rpc": "test"}), timeout=10)


def balancer_on(
    store: Any, clock_now: list[float], *, summary_every_s: float = 0.0
) -> tuple[Any, MemoryBalancerCore]:
    fakes = Balancer()  # its metric, distance and memory fakes; its own store is unused
    committer = StateStoreCommitter(store)
    ports = replace(fakes.ports, pods=store_pods(committer), memory=FakeMemory(EX2_PODS))
    ports = replace(ports, executor=RecordingExecutor())
    snapshot = store.ask(GetSnapshot(), timeout=10)
    assert isinstance(snapshot, Snapshot)
    core = MemoryBalancerCore(
        snapshot,
        committer,
        ports,
        BalancerConfig(),
        now_fn=lambda: clock_now[0],
        round_summary_every_s=summary_every_s,
    )
    return MemoryBalancerActor.start(core), core
