"""Fakes at the MemoryBalancer's edge: a journaling committer, metric, distance, memory and pod
sources, and an executor that records what it is handed.

The committer passes every commit through the journal's path (the state codec, then msgpack,
then decoding) before applying it, so what a test sees applied is what a restart would replay,
and a cause that msgpack cannot hold fails the test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgpack

from actors.memory_balancer import BalancerPorts, MemoryBalancerCore
from actors.ports.balancer import AnonMemoryUnavailable, PodAnonMemory
from actors.ports.migration import MigrationMode, MigrationPlan, PlannedTarget
from actors.store_messages import Snapshot
from policy.balance import (
    BalancerConfig,
    MemoryAdvice,
    MissingSample,
    NumaDistance,
    NumaMetrics,
    Pod,
)
from policy.state.codec import decode_event, encode_event
from policy.state.events import Event
from policy.state.pool_pods import PodsInPools, PoolPod
from policy.state.sections import State, apply_all, empty_state
from tests.actors.fakes import ApplyingCommitter, FakeClock
from tests.policy.balance.examples import EX2_B, EX2_L, EX2_PODS, NOW, POOLS, T4
from tests.policy.state_fixtures import SYNTH_16_2_4


class JournalingCommitter(ApplyingCommitter):
    """An ``ApplyingCommitter`` whose events go through the codec and msgpack first; each
    applied commit is also kept whole in ``records`` as (cause, events)."""

    def __init__(self, state: State) -> None:
        super().__init__(state)
        self.records: list[tuple[Mapping[str, Any], tuple[Event, ...]]] = []

    def commit(self, events: tuple[Event, ...], cause: Mapping[str, Any]) -> Snapshot:
        packed = msgpack.packb({"cause": dict(cause), "events": [encode_event(e) for e in events]})
        record = msgpack.unpackb(packed)
        decoded = tuple(decode_event(e) for e in record["events"])
        before = len(self.events)
        try:
            return super().commit(decoded, record["cause"])
        finally:
            if len(self.events) > before:
                self.records.append((record["cause"], decoded))

    def kinds(self) -> list[str]:
        """The committed events' kinds, in order."""
        return [type(e).__name__ for e in self.events]


class FakeMetrics:
    """Per-NUMA latency and bandwidth the test sets; a NUMA in ``missing`` has no bandwidth."""

    def __init__(self, latency: Sequence[float], bandwidth: Sequence[float]) -> None:
        self.latency = list(latency)
        self.bandwidth = list(bandwidth)
        self.missing: set[int] = set()

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        return {
            n: NumaMetrics(
                self.latency[n],
                MissingSample() if n in self.missing else self.bandwidth[n],
            )
            for n in numa_ids
        }


class FakeDistances:
    def __init__(self, table: Mapping[int, Sequence[tuple[int, int]]]) -> None:
        self.table = table

    def distances(self) -> Mapping[int, tuple[NumaDistance, ...]]:
        return {k: tuple(NumaDistance(n, d) for n, d in row) for k, row in self.table.items()}


def container_id(pod: str, name: str) -> str:
    return f"containerd://{pod}-{name}"


class FakeMemory:
    """Per-container anon per NUMA by container ID, from the examples' pods."""

    def __init__(self, pods: Sequence[Pod]) -> None:
        self.pods: dict[str, dict[str, dict[int, int]]] = {}
        self.set_pods(pods)
        self.reads = 0

    def set_pods(self, pods: Sequence[Pod]) -> None:
        self.pods = {
            p.uid: {
                container_id(p.uid, c.name): {n: int(v) for n, v in c.anon.items()}
                for c in p.containers
            }
            for p in pods
        }

    def anon_by_numa(self, pod_uid: str, container_ids: Sequence[str] | None) -> PodAnonMemory:
        self.reads += 1
        containers = self.pods.get(pod_uid)
        if containers is None:
            raise AnonMemoryUnavailable(f"pod {pod_uid}: no cgroup")
        total: dict[int, int] = {}
        for anon in containers.values():
            for n, v in anon.items():
                total[n] = total.get(n, 0) + v
        wanted = list(containers) if container_ids is None else list(container_ids)
        return PodAnonMemory(pod=total, containers={c: containers[c] for c in wanted})


class FakePods:
    """The pods in pools, as the CPU snapshot would list them, with container IDs."""

    def __init__(self, pods: Sequence[Pod], pools: Mapping[str, tuple[int, ...]] = POOLS) -> None:
        self.pools = dict(pools)
        self.set_pods(pods)

    def set_pods(self, pods: Sequence[Pod], *, with_ids: bool = True) -> None:
        self.listed = tuple(
            PoolPod(
                uid=p.uid,
                namespace=p.namespace,
                name=p.name,
                pool=p.pool,
                containers=tuple(c.name for c in p.containers),
                container_ids=tuple(container_id(p.uid, c.name) for c in p.containers)
                if with_ids
                else None,
            )
            for p in pods
        )

    def __call__(self) -> PodsInPools:
        return PodsInPools(self.pools, self.listed)


class RecordingExecutor:
    """An ``AdviceExecutor`` that plans every container by its ID and records what it starts."""

    def __init__(self, mode: MigrationMode = MigrationMode.DRY_RUN) -> None:
        self.mode = mode
        self.planned: list[MemoryAdvice] = []
        self.started: list[MigrationPlan] = []

    def plan(
        self, advice: MemoryAdvice, container_ids: Mapping[tuple[str, str], str]
    ) -> MigrationPlan:
        self.planned.append(advice)
        targets = tuple(
            PlannedTarget(
                pod_uid=c.pod_uid,
                container_names=(c.container_name,),
                cgroup=container_ids.get((c.pod_uid, c.container_name), ""),
                pids=(),
                dest_numas=c.dest_numa_list,
            )
            for c in advice.migrate_containers
        )
        return MigrationPlan(advice, self.mode, targets)

    def start(self, plan: MigrationPlan) -> None:
        self.started.append(plan)


class Balancer:
    """A core on example 2's node (T4, share {0,1}, reclaim {0..3}) with fakes at its edge."""

    def __init__(
        self,
        *,
        latency: Sequence[float] = EX2_L,
        bandwidth: Sequence[float] = EX2_B,
        pods: Sequence[Pod] = EX2_PODS,
        table: Mapping[int, Sequence[tuple[int, int]]] = T4,
        pools: Mapping[str, tuple[int, ...]] = POOLS,
        state: State | None = None,
        executor: RecordingExecutor | None = None,
        summary_every_s: float = 0.0,
    ) -> None:
        self.summary_every_s = summary_every_s
        self.clock = FakeClock(NOW)
        self.store = JournalingCommitter(state or empty_state(SYNTH_16_2_4))
        self.metrics = FakeMetrics(latency, bandwidth)
        self.memory = FakeMemory(pods)
        self.pods = FakePods(pods, pools)
        self.executor = executor if executor is not None else RecordingExecutor()
        self.ports = BalancerPorts(
            metrics=self.metrics,
            distances=FakeDistances(table),
            memory=self.memory,
            pods=self.pods,
            executor=self.executor,
        )
        self.core = self.restart()

    def restart(self) -> MemoryBalancerCore:
        """A new core on the store's durable state, as after a daemon restart."""
        self.core = MemoryBalancerCore(
            self.store.latest(),
            self.store,
            self.ports,
            BalancerConfig(),
            now_fn=self.clock.time,
            cpu_vendor="GenuineIntel",
            round_summary_every_s=self.summary_every_s,
        )
        return self.core

    def at(self, t: float) -> float:
        """Move the clock to NOW + t and return it."""
        self.clock.now = NOW + t
        return self.clock.now

    def replayed(self) -> State:
        return apply_all(empty_state(SYNTH_16_2_4), self.store.events)
