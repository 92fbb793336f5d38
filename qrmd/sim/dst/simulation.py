"""The simulation: one seed, a number of steps, every invariant after each (DESIGN.md
"Subsystems and simulation"; STYLE.md, FoundationDB / TigerBeetle).

A step is one thing happening on the node, the seed choosing which:

* the scheduler delivers one actor message (an Allocator call, a commit, a tick);
* the kubelet acts (a new pod's hints, an Allocate, a listing, a RemovePod, a retry);
* time passes (up to a few seconds): the subsystems' tickers whose period passed fire (the
  store's checkpoints, the pod list fetch and the checkers, the CPU load collection, the
  advisor's silence check, the balance rounds), the eviction manager calls, sys-advisor
  speaks, the Supervisor polls its actors, and kubelet's liveness probe restarts a qrmd whose
  store has refused every commit for 30 s;
* a fault from the enabled kinds (``qrmd.sim.dst.faults``);
* while the process is down, it boots again (recovering from the disk).

Then the kubelet reads the answers that came, and every invariant is checked
(``qrmd.sim.dst.invariants``). Each step adds one line to the trace; ``trace_digest`` is the
SHA-256 of the lines, so the same seed gives the same digest and a changed behaviour a
different one. The seed is the only source of choices: one ``random.Random(seed)`` drives the
scheduler, the peers, the faults and the disk.

Logging is silenced while a simulation runs: the production code logs every fault it meets,
and a seed meets hundreds.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from random import Random
from typing import Any

from actors.balancer_messages import GetEvictPods
from actors.cpu_pressure_messages import SuppressionEvictPods
from actors.store_messages import Commit, CommitRefused, Snapshot
from journal.records import pack
from policy.balance.section import BalancerState
from policy.cpu.context import PolicyContext
from policy.cpu.reference import REFERENCE_VERSIONS, V0_5_3, V0_5_47, ReferenceOptions, is_v0_5_47
from policy.state.sections import State
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import generate_dummy_cpu_topology
from qrmd.sim.dst import faults as fault_kinds
from qrmd.sim.dst.advisor import SimAdvisor
from qrmd.sim.dst.cgroups import SimCgroups
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.defects import planted
from qrmd.sim.dst.invariants import INVARIANTS, World
from qrmd.sim.dst.kubelet import KubeletPeer
from qrmd.sim.dst.metrics import SimLoadSource, SimReclaimMetrics, active_pods
from qrmd.sim.dst.node import PRESSURE_SETTINGS, SimNode
from qrmd.sim.dst.numa_host import SimHostMemory, SimNumaMetrics
from qrmd.sim.dst.plugin_socket import SimPluginSocket
from qrmd.sim.dst.pod_source import SimPodSource
from qrmd.sim.dst.runtime import Scheduler, SimCrash, SimFuture
from qrmd.sim.dst.storage import SimDisk

__all__ = ["Failure", "Outcome", "Simulation", "run"]

#: How long /healthz may fail before kubelet's liveness probe restarts qrmd (virtual seconds).
LIVENESS_S = 30.0
#: Fault probability per step when faults are enabled.
FAULT_RATE = 0.04
#: Above this, faults would crowd out the deliveries (a step is a delivery below 0.5).
MAX_FAULT_RATE = 0.4


@dataclass(frozen=True, slots=True)
class Failure:
    """One broken invariant: where, which, and what it saw."""

    step: int
    invariant: str
    message: str


@dataclass(slots=True)
class Outcome:
    """What one run did (``qrmd sim run --json`` prints it)."""

    seed: int
    steps: int
    trace_digest: str
    faults_injected: dict[str, int]
    invariants_checked: int
    failures: list[Failure]
    kubelet_calls: dict[str, int] = field(default_factory=dict)
    boots: int = 0
    trace: list[str] = field(default_factory=list)
    cpu_advisor: bool = False
    #: Groups of kubelet calls served with one fsync (the plugin socket's group commit).
    group_commits: int = 0
    #: The Katalyst release the node reproduced (``--reference-version``).
    reference_version: str = V0_5_3
    #: ``--enable-reclaim-numa-binding`` (v0.5.47 only).
    reclaim_numa_binding: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "steps": self.steps,
            "trace_digest": self.trace_digest,
            "faults_injected": dict(sorted(self.faults_injected.items())),
            "invariants_checked": self.invariants_checked,
            "invariants": [name for name, _ in INVARIANTS],
            "failures": [
                {"step": f.step, "invariant": f.invariant, "message": f.message}
                for f in self.failures
            ],
            "kubelet_calls": dict(sorted(self.kubelet_calls.items())),
            "boots": self.boots,
            "cpu_advisor": self.cpu_advisor,
            "group_commits": self.group_commits,
            "reference_version": self.reference_version,
            "reclaim_numa_binding": self.reclaim_numa_binding,
        }


class Simulation:
    """One seeded run of the simulated node (module docstring).

    Args:
        seed: the seed.
        faults: the fault kinds that may be injected.
        fault_budget: at most this many faults (None: no limit); ``qrmd sim shrink`` lowers it.
        defect: a planted defect to switch on for the run (``qrmd.sim.dst.defects``).
        fault_rate: the chance that a step (of a running process) is a fault.
        cpu_advisor: run the node with ``--enable-cpu-advisor`` and a simulated sys-advisor
            (None: the seed picks, half the seeds each way, as a fleet runs both).
        reference_version: the Katalyst release the node reproduces, ``v0.5.3`` or ``v0.5.47``
            (None: the seed picks, half the seeds each way; at v0.5.47 the seed also switches
            reclaimed NUMA binding on for half of them). Picked from a generator of its own,
            so a v0.5.3 seed makes the same choices it made before the level could vary.
    """

    def __init__(
        self,
        seed: int,
        faults: tuple[str, ...] = fault_kinds.FAULT_KINDS,
        fault_budget: int | None = None,
        defect: str | None = None,
        fault_rate: float = FAULT_RATE,
        *,
        cpu_advisor: bool | None = None,
        reference_version: str | None = None,
    ) -> None:
        if not 0 <= fault_rate <= MAX_FAULT_RATE:
            raise ValueError(f"the fault rate must lie in [0, {MAX_FAULT_RATE}], got {fault_rate}")
        self.seed = seed
        self.defect = defect
        self.fault_rate = fault_rate
        self.rng = Random(seed)
        picked = self.rng.random() < 0.5
        self.cpu_advisor = picked if cpu_advisor is None else cpu_advisor
        level = Random(f"reference-version {seed}")
        at_v0_5_47 = level.random() < 0.5
        if reference_version is not None:
            if reference_version not in REFERENCE_VERSIONS:
                raise ValueError(
                    f"the reference version must be one of {', '.join(REFERENCE_VERSIONS)}, "
                    f"got {reference_version!r}"
                )
            at_v0_5_47 = is_v0_5_47(reference_version)
        self.reference_version = V0_5_47 if at_v0_5_47 else V0_5_3
        self.reclaim_numa_binding = at_v0_5_47 and level.random() < 0.5
        self.clock = VirtualClock()
        self.scheduler = Scheduler(self.rng, self.clock)
        self.disk = SimDisk(self.rng, self.clock)
        topology = generate_dummy_cpu_topology(16, 2, 4)
        # Three sightings: residual rounds remove pods within a few hundred steps.
        self.ctx = PolicyContext(
            topology=topology,
            reserved=CPUSet.parse("0,2"),
            residual_sightings=3,
            advisor_enabled=self.cpu_advisor,
            reference_version=self.reference_version,
            reference=ReferenceOptions(enable_reclaim_numa_binding=self.reclaim_numa_binding),
        )
        self.kubelet = KubeletPeer(
            self.rng,
            self.clock,
            at_v0_5_47=at_v0_5_47,
            reclaim_numa_binding=self.reclaim_numa_binding,
        )
        self.kubelet.seq_now = self._seq
        self.pod_source = SimPodSource(self.kubelet, self.clock)
        self.cgroups = SimCgroups(self.kubelet, topology.cpu_details.cpus())
        self.loads = SimLoadSource(self.rng)
        self.reclaim_metrics = SimReclaimMetrics(
            self.rng, self.loads, sorted(topology.cpu_details.cpus())
        )
        numa_cpus = {n: topology.cpus_in_numa(n).size() for n in range(topology.num_numa_nodes)}
        self.advisor = SimAdvisor(
            self.rng, self.clock, numa_cpus, self._latest_state, at_v0_5_47=at_v0_5_47
        )
        self.numa_metrics = SimNumaMetrics(self.rng)
        self.host_memory = SimHostMemory(
            seed,
            self.kubelet,
            self.clock,
            range(topology.num_numa_nodes),
            self._durable_balance,
        )
        self.node = SimNode(
            self.scheduler,
            self.disk,
            self.clock,
            self.ctx,
            pod_list=self.pod_source.fetch,
            cgroups=self.cgroups,
            loads=self.loads,
            reclaim_metrics=self.reclaim_metrics if at_v0_5_47 else None,
            advisor=self.advisor if self.cpu_advisor else None,
            numa_metrics=self.numa_metrics,
            memory=self.host_memory,
            page_mover=self.host_memory,
        )
        self.node.on_refused = self._refused_in_turn
        self.node.on_committed = self._committed_in_turn
        advisor = self.advisor if self.cpu_advisor else None
        self.world = World(self.node, self.disk, self.kubelet, self.ctx, advisor=advisor)
        self.kinds = faults
        self.fault_budget = fault_budget
        self.faults_injected: dict[str, int] = {}
        self.held: dict[str, int] = {}
        self.step_no = 0
        self.next_evict = 0.0
        #: The plugin socket kubelet calls through (None while the process is down).
        self.plugin: SimPluginSocket | None = None
        self.group_commits = 0
        self.next_advice = 0.0
        self.unhealthy_since: float | None = None
        self.trace: list[str] = []
        self.invariants_checked = 0
        self.failures: list[Failure] = []
        self.scheduler.on_resolved = self._witness
        self.scheduler.on_error_reply = self._refused
        self.scheduler.on_reply = self._acknowledged

    # -- the loop -----------------------------------------------------------------------------

    def run(self, steps: int) -> Outcome:
        """Run ``steps`` steps, stopping at the first step that breaks an invariant."""
        with _quiet(), planted(self.defect):
            self._do(self._boot)
            for _ in range(steps):
                self.step_no += 1
                self._do(self._step)
                self._check()
                if self.failures:
                    break
            if self.plugin is not None:
                self.group_commits += self.plugin.groups
            self.node.crash()
        digest = hashlib.sha256("\n".join(self.trace).encode()).hexdigest()
        return Outcome(
            self.seed,
            self.step_no,
            digest,
            dict(self.faults_injected),
            self.invariants_checked,
            list(self.failures),
            dict(self.kubelet.counts),
            self.node.boots,
            self.trace,
            self.cpu_advisor,
            self.group_commits,
            self.reference_version,
            self.reclaim_numa_binding,
        )

    def _do(self, action: Any) -> None:
        try:
            line = action()
        except SimCrash as crash:
            self.crash_process()
            line = f"process crashed: {crash}"
        self.trace.append(f"{self.step_no} t={self.clock.monotonic():.4f} {line}")
        for reply in self.kubelet.collect():
            self.trace.append(f"{self.step_no}   {reply}")

    def _step(self) -> str:
        self._expire()
        self.node.begin_step()
        if self.plugin is not None:
            self.plugin.pump()
        if self.node.supervisor is None:
            if self.rng.random() < 0.5:
                return self._boot()
            self.clock.advance(self.rng.uniform(0.1, 2.0))
            return "process down"
        roll = self.rng.random()
        if roll < self.fault_rate:
            # The kind is drawn from every kind, enabled or not, and a fault left out (its
            # kind disabled, the budget spent) is a step where nothing happens: the rest of
            # the run makes the same choices, so a shrunk run stays close to the original.
            kind = fault_kinds.FAULT_KINDS[self.rng.randrange(len(fault_kinds.FAULT_KINDS))]
            spent = sum(self.faults_injected.values())
            if kind not in self.kinds or (
                self.fault_budget is not None and spent >= self.fault_budget
            ):
                return f"fault {kind} left out"
            self.faults_injected[kind] = self.faults_injected.get(kind, 0) + 1
            return f"fault {kind}: {fault_kinds.FAULTS[kind](self)}"
        if roll < 0.50 and self.scheduler.runnable():
            self.scheduler.step()
            return f"delivered (seq {self._seq()})"
        if roll < 0.85:
            return self.kubelet.act(self.plugin)
        self.clock.advance(self.rng.uniform(0.01, 4.0))
        what = "time passes"
        fired = self.node.fire_tickers()
        if fired:
            what += "; ticks " + ", ".join(fired)
        what += self._pressure_calls()
        what += self._advisor_turn()
        if self._watch():
            what += "; the supervisor restarted actors"
        if self._liveness_failed():
            self.crash_process()
            return f"{what}; /healthz failed for {LIVENESS_S:g} s: kubelet restarts qrmd"
        return what

    def _pressure_calls(self) -> str:
        """The eviction manager's calls to the suppression plugin and the memory balancer's:
        now and then a ``GetEvictPods``, at times without the reclaimed pods (the load ticker
        is the subsystem's own)."""
        pressure = self.node.ref("cpu_pressure")
        now = self.clock.monotonic()
        if pressure is None or now < self.next_evict:
            return ""
        # The eviction manager polls on a period of its own, drawn here.
        self.next_evict = now + PRESSURE_SETTINGS.load_eviction_sync_period_s
        if self.rng.random() >= 0.5:
            return ""
        with_reclaimed = self.rng.random() < 0.7
        pods = active_pods(self.kubelet, with_reclaimed)
        balancer = self.node.ref("memory_balancer")
        try:
            # Asked, as the plugins' servers ask (an error is the caller's answer, never the
            # actor's death); the answer is not read: the manager only polls.
            pressure.ask(SuppressionEvictPods(pods), block=False)
            # The same poll reaches the memory balancer's plugin (§9.1): its offers, once.
            if balancer is not None:
                balancer.ask(GetEvictPods(tuple(p.uid for p in pods)), block=False)
        except Exception as err:  # a call to an actor being restarted is lost
            return f"; GetEvictPods not told: {type(err).__name__}"
        return "; GetEvictPods" + ("" if with_reclaimed else " (no reclaimed)")

    def _advisor_turn(self) -> str:
        """The link's timers that came due and sys-advisor's stream: what happens on the
        advisor's side while time passes (the silence ticker is the subsystem's own)."""
        link = self.node.link_actor()
        if link is None:
            return ""
        out = ""
        for message in link.sim_timers.due():
            link.tell_self(message)
            out += f"; link timer {type(message).__name__}"
        now = self.clock.monotonic()
        if now >= self.next_advice:
            # sys-advisor's own period: a result every few seconds.
            self.next_advice = now + self.rng.uniform(2.0, 6.0)
            out += "; " + self.advisor.speak(link.core.status().attempt, link.tell_self)
        return out

    def _durable_balance(self) -> BalancerState | None:
        core = self.node.store_core()
        return None if core is None else core.snapshot.state.balance

    def _latest_state(self) -> State | None:
        return None if self.node.latest is None else self.node.latest.state

    def _watch(self) -> bool:
        """The Supervisor's poll; a restarted store recovered, and nothing dead before the poll
        may stay dead (one that died during it, a message delivered while another restarted,
        is the next poll's)."""
        before = set(self.node.dead_children())
        restarted = self.node.watch()
        if restarted:
            core = self.node.store_core()
            if core is not None:
                self.world.recoveries.append((core.snapshot.seq, core.snapshot.state))
        supervisor = self.node.supervisor
        if supervisor is None:
            return restarted
        dead = [c for c in supervisor.status().children if not c.alive]
        if dead and not restarted:
            names = ", ".join(c.name for c in dead)
            self.world.unsupervised.append(
                f"actors {names} are dead and the supervisor's poll did not notice"
            )
        elif (dead := [c for c in dead if c.name in before]) and not self._disk_faulty():
            failures = "; ".join(f"{c.name}: {c.last_failure}" for c in dead)
            self.world.unsupervised.append(
                f"actors still dead after the supervisor's poll on a healthy disk ({failures})"
            )
        return restarted

    def _liveness_failed(self) -> bool:
        """kubelet's liveness probe: a store that refuses every commit (its journal could not
        undo a failed write) reports unhealthy; after ``LIVENESS_S`` of that, the pod restarts
        and the next start decides from what the disk holds (DESIGN.md, the commit protocol)."""
        core = self.node.store_core()
        if core is None or core.accepts_commits or core.status.health.healthy:
            self.unhealthy_since = None
            return False
        now = self.clock.monotonic()
        if self.unhealthy_since is None:
            self.unhealthy_since = now
        return now - self.unhealthy_since >= LIVENESS_S

    def _disk_faulty(self) -> bool:
        """Whether a disk fault may keep a restart from succeeding (a slow fsync past the
        commit timeout fails ``StartPolicy``, as it would on a node)."""
        f = self.disk.faults
        return (
            f.full
            or bool(f.write_eio_p or f.fsync_eio_p or f.slow_fsync_s)
            or f.crash_in_ops is not None
        )

    def _boot(self) -> str:
        if not self.node.boot():
            return f"boot failed: {self.node.last_boot_error}"
        core = self.node.store_core()
        assert core is not None
        self.world.recoveries.append((core.snapshot.seq, core.snapshot.state))
        assert self.node.allocator is not None
        self.plugin = SimPluginSocket(
            self.node.allocator,
            self.scheduler,
            self.kubelet.deadline_s,
            self.node.group_witnesses,
            self.node.befores,
        )
        self.kubelet.restarted(self.plugin)
        return f"booted at seq {core.snapshot.seq}"

    def _check(self) -> None:
        for name, invariant in INVARIANTS:
            self.invariants_checked += 1
            try:
                found = invariant(self.world)
            except Exception as err:  # an invariant that cannot be evaluated is a failure too
                found = [f"could not check: {type(err).__name__}: {err}"]
            self.failures.extend(Failure(self.step_no, name, m) for m in found)

    # -- what faults call ---------------------------------------------------------------------

    def crash_process(self) -> None:
        """The qrmd process dies (kubelet's calls in flight fail)."""
        self.node.crash()
        if self.plugin is not None:
            self.group_commits += self.plugin.groups
        self.plugin = None
        self.disk.faults.crash_in_ops = None
        self.kubelet.connection_lost()

    def hold(self, kind: str, longest: int = 25) -> int:
        """Keep the timed fault ``kind`` for a number of steps the seed picks (3 up to
        ``longest``); returns it."""
        steps = self.rng.randrange(3, longest)
        self.held[kind] = self.step_no + steps
        return steps

    def _expire(self) -> None:
        for kind, until in list(self.held.items()):
            if self.step_no >= until:
                fault_kinds.clear(self, kind)
                del self.held[kind]

    # -- witnesses ----------------------------------------------------------------------------

    def _seq(self) -> int:
        core = self.node.store_core()
        return -1 if core is None else core.snapshot.seq

    def _witness(self, future: SimFuture) -> None:
        core = self.node.store_core()
        if core is not None:
            future.witness = (core.snapshot.seq, core.snapshot.state)

    def _refused_in_turn(self, seq: int, cause: bytes) -> None:
        self.world.refused[seq] = cause

    def _acknowledged(self, message: Any, reply: Any) -> None:
        # A commit acknowledged at a seq once refused is a new record there: the refusal's
        # cause may come again (a restart's start record after a refused one, a retried
        # call), and that record is no refused one.
        if isinstance(message, Commit) and isinstance(reply, Snapshot):
            self.world.refused.pop(reply.seq, None)

    def _committed_in_turn(self, seqs: list[int]) -> None:
        for seq in seqs:
            self.world.refused.pop(seq, None)

    def _refused(self, message: Any, error: BaseException) -> None:
        # Every ``CommitRefused`` (``StoreUnavailable`` too) promises that nothing was
        # persisted; a commit whose cut-back failed is answered ``CommitOutcomeUnknown``.
        if isinstance(message, Commit) and isinstance(error, CommitRefused):
            core = self.node.store_core()
            if core is not None:
                self.world.refused[core.snapshot.seq + 1] = pack(dict(message.cause), "cause")


@contextmanager
def _quiet() -> Iterator[None]:
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


def run(
    seed: int,
    steps: int,
    faults: tuple[str, ...] = fault_kinds.FAULT_KINDS,
    fault_budget: int | None = None,
    defect: str | None = None,
    *,
    fault_rate: float = FAULT_RATE,
    cpu_advisor: bool | None = None,
    reference_version: str | None = None,
) -> Outcome:
    """Run one seed; see ``Simulation``."""
    return Simulation(
        seed,
        faults,
        fault_budget,
        defect,
        fault_rate,
        cpu_advisor=cpu_advisor,
        reference_version=reference_version,
    ).run(steps)
