"""The simulated host under the memory balancer: NUMA metrics, containers' memory, page moves.

The balancer subsystem is built as ``qrmd run`` builds it; only its three host ports are these
(``qrmd.subsystem.Host``):

* ``SimNumaMetrics`` (``NumaMetricSource``, memory-balancer §4.1): each round a latency and a
  bandwidth per NUMA node. Healthy, latencies sit below the grace threshold, and now and
  then one node is pressured (a latency past the force or the grace threshold, or a gap to
  its neighbour), with a bandwidth that makes it the source or sends the round to the
  bandwidth rules (§7.6, §7.7). The seed makes it misbehave (``mode``): ``missing`` samples
  (``MissingSample``, never a zero: the round fails, §4.1), ``absurd`` ones (10¹², or a zero
  that the zero guard must catch, §7.2).
* ``SimHostMemory`` as ``ContainerMemoryReader`` (§4.2): each running container's anonymous
  memory per NUMA node, drawn once per container from the seed and moved by migrations; a
  pod the kubelet does not run cannot be read (the round skips it).
* ``SimHostMemory`` as ``AdviceExecutor`` (§11): ``plan`` resolves each advised container to
  its cgroup (the ID the pod source gave) and drops an advice while a migration runs (the
  discard policy); ``start`` moves the pages as the memory plugin does (for each destination
  in the advice's order, every container whose own list holds it; stop once 70 % moved), on
  the virtual clock, and keeps a ``Migration`` record of what it did for the invariants
  (``qrmd.sim.dst.balancer_invariants``), with the durable balance section it was started on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from random import Random

from actors.ports.balancer import AnonMemoryUnavailable, PodAnonMemory
from actors.ports.migration import MigrationMode, MigrationPlan, PlannedTarget
from policy.balance import MemoryAdvice, MissingSample, NumaMetrics
from policy.balance.section import BalancerState
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.kubelet import KubeletPeer

__all__ = ["METRIC_MODES", "Migration", "Move", "SimHostMemory", "SimNumaMetrics"]

METRIC_MODES = ("healthy", "missing", "absurd")
GIB = 1 << 30
MIB = 1 << 20
#: How long a migration holds the executor, per GiB moved (virtual seconds): an advice that
#: comes meanwhile is dropped (§11 step 1).
MIGRATION_S_PER_GIB = 4.0


class SimNumaMetrics:
    """``NumaMetricSource`` of the simulated host (module docstring).

    Args:
        rng: the seed's generator.
    """

    def __init__(self, rng: Random) -> None:
        self._rng = rng
        self.mode = "healthy"

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        rng = self._rng
        if self.mode == "missing":
            gone = set(rng.sample(list(numa_ids), rng.randint(1, len(numa_ids))))
            return {
                n: NumaMetrics(
                    MissingSample("no sample (simulated)") if n in gone else 50.0,
                    MissingSample("metric data expired (simulated)") if n in gone else 20.0,
                )
                for n in numa_ids
            }
        latency = {n: rng.uniform(20.0, 60.0) for n in numa_ids}
        bandwidth = {n: rng.uniform(5.0, 40.0) for n in numa_ids}
        if self.mode == "absurd":
            odd = numa_ids[rng.randrange(len(numa_ids))]
            absurd = rng.choice((0.0, 1e12))
            if rng.random() < 0.5:
                latency[odd] = absurd
            else:
                bandwidth[odd] = absurd
        elif rng.random() < 0.4:
            # One node under pressure: past force (80), past grace (70), or 45 above the rest.
            hot = numa_ids[rng.randrange(len(numa_ids))]
            latency[hot] = rng.choice((rng.uniform(81.0, 160.0), 75.0, max(latency.values()) + 45))
            if rng.random() < 0.6:
                bandwidth[hot] = max(bandwidth.values()) * rng.uniform(1.0, 1.5)
        return {n: NumaMetrics(latency[n], bandwidth[n]) for n in numa_ids}


@dataclass(frozen=True, slots=True)
class Move:
    """Pages of one container moved from one NUMA node to another."""

    pod_uid: str
    container: str
    source: int
    dest: int
    bytes: int


@dataclass(slots=True)
class Migration:
    """What one ``start`` did: the plan, the moves, and the durable balance section then."""

    plan: MigrationPlan
    at: float
    balance: BalancerState | None
    moves: list[Move] = field(default_factory=list)


class SimHostMemory:
    """The containers' memory on the simulated host, and the page mover (module docstring).

    Args:
        seed: the run's seed (each container's memory is drawn from it and its name, so the
            order of reads does not change what a container holds).
        kubelet: whose running pods have memory.
        clock: the virtual clock (a migration's duration).
        numa_ids: the host's NUMA nodes.
        durable: the store's published balance section now (None while it is down).
        execute: ``--memory-balance-execute``: move pages; False: a dry run.
    """

    def __init__(
        self,
        seed: int,
        kubelet: KubeletPeer,
        clock: VirtualClock,
        numa_ids: Sequence[int],
        durable: Callable[[], BalancerState | None],
        *,
        execute: bool = True,
    ) -> None:
        self._seed = seed
        self._kubelet = kubelet
        self._clock = clock
        self._numa_ids = tuple(numa_ids)
        self._durable = durable
        self._execute = execute
        self._anon: dict[tuple[str, str], dict[int, int]] = {}
        self._busy_until = 0.0
        #: Every ``start``, in order (the invariants read them).
        self.migrations: list[Migration] = []
        #: The balancer invariants' memory between steps (``balancer_invariants``).
        self.invariant_witness: object = None

    # -- ContainerMemoryReader -----------------------------------------------------------------

    def anon_by_numa(self, pod_uid: str, container_ids: Sequence[str] | None) -> PodAnonMemory:
        pod = self._kubelet.pods.get(pod_uid)
        if pod is None or pod.phase != "running":
            raise AnonMemoryUnavailable(f"pod {pod_uid}: no memory cgroup (simulated host)")
        ids = list(container_ids) if container_ids else [self._container_id(pod_uid, pod.container)]
        containers = {cid: dict(self._memory(pod_uid, cid)) for cid in ids}
        total = {n: sum(c.get(n, 0) for c in containers.values()) for n in self._numa_ids}
        return PodAnonMemory(pod=total, containers=containers)

    def _container_id(self, pod_uid: str, container: str) -> str:
        # What the simulated pod source lists (qrmd.sim.dst.pod_source).
        return f"containerd://{pod_uid}-{container}"

    def _memory(self, pod_uid: str, container_id: str) -> dict[int, int]:
        key = (pod_uid, container_id)
        anon = self._anon.get(key)
        if anon is None:
            draw = Random(f"{self._seed}/{pod_uid}/{container_id}")
            anon = {n: draw.choice((0, 64 * MIB, 512 * MIB, 3 * GIB)) for n in self._numa_ids}
            self._anon[key] = anon
        return anon

    # -- AdviceExecutor ------------------------------------------------------------------------

    def plan(
        self, advice: MemoryAdvice, container_ids: Mapping[tuple[str, str], str]
    ) -> MigrationPlan:
        if self._clock.monotonic() < self._busy_until:
            return MigrationPlan(
                advice, MigrationMode.DROPPED, reason="a migration is still running"
            )
        targets = []
        for c in advice.migrate_containers:
            cid = container_ids.get((c.pod_uid, c.container_name))
            pod = self._kubelet.pods.get(c.pod_uid)
            error = ""
            if cid is None or pod is None or pod.phase != "running":
                error = f"container {c.pod_uid}/{c.container_name} has no cgroup (not running)"
            targets.append(
                PlannedTarget(
                    c.pod_uid,
                    (c.container_name,),
                    "" if error else f"/sys/fs/cgroup/memory/kubepods/pod{c.pod_uid}/{cid}",
                    () if error else (1,),
                    c.dest_numa_list,
                    error,
                )
            )
        mode = MigrationMode.EXECUTE if self._execute else MigrationMode.DRY_RUN
        return MigrationPlan(advice, mode, tuple(targets))

    def start(self, plan: MigrationPlan) -> None:
        migration = Migration(plan, self._clock.monotonic(), self._durable())
        self.migrations.append(migration)
        if plan.mode is not MigrationMode.EXECUTE:
            return
        advice = plan.advice
        source = advice.source_numa
        resolved = [t for t in plan.targets if not t.error]
        moved = 0
        for dest in advice.dest_numa_list:
            after_total = 0
            for target in resolved:
                name = target.container_names[0]
                anon = self._memory(target.pod_uid, self._container_id(target.pod_uid, name))
                before = anon.get(source, 0)
                if dest in target.dest_numas and before:
                    anon[source] = 0
                    anon[dest] = anon.get(dest, 0) + before
                    moved += before
                    migration.moves.append(Move(target.pod_uid, name, source, dest, before))
                after_total += anon.get(source, 0)
            # §11: success once what is left is under 30 % of the advice's total, or 70 % moved.
            total = advice.total_rss or 1.0
            if after_total / total < 1 - advice.threshold or moved / total >= advice.threshold:
                break
        self._busy_until = self._clock.monotonic() + MIGRATION_S_PER_GIB * moved / GIB
