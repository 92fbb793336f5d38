"""Balance rounds inside the daemon, each against a baseline measured in the same run.

Run: ``PYTHONPATH=. python bench/bench_balance_round.py [--quick] [--stages] [--profile P]
[--rows quiet|pressured]``
(``bench/bench_wire.py`` prints the same rows after its own). ``--stages`` also times the
pressured round's steps one by one (gather, decide, encode, msgpack) on the balancer's core.

The node: a 256-CPU, 2-socket, 32-NUMA synthetic machine whose CPU section holds 2,000 pods
(two in three in pool ``share`` on NUMA 0-15, one in three in ``reclaim`` on every node), each
with one to three containers holding anonymous memory on every NUMA node. The real
``MemoryBalancerActor`` runs on the real ``StateStoreActor`` (durability ``always``, a journal
in a temporary directory, its default checkpoint settings), with the ports the daemon wires
(``qrmd.balancer.subsystem``): the pods in pools from the store's snapshots, the topology's
distance lists, and at the machine's edge the stand-ins of ``qrmd.sim.host``
(``SimulatedNumaMetrics``, ``SimulatedContainerMemory``), a kubelet-like pod listing with
every container's ID, and the tests' recording executor in place of the cgroup migrator. The
heap built by the set-up is frozen (``gc.freeze``) as ``qrmd run`` freezes its start-up's.
Each figure is one ``Tick`` asked of the actor (gather, decide, commit, and the advice step),
timed from the caller.

* **Quiet round** (no NUMA node under pressure): the metrics are read, the round finds no
  pressure, so no pod is read (``round_reads_pods``). Journaled every round (``0 s`` summary
  period) and as the daemon does by default (coalesced: ``--balance-round-summary-every``
  3600 s, only a changed outcome is committed). Baseline: the planner alone (``plan_round``)
  on the very inputs the journal holds for that round. A committed round cannot go under the
  planner plus one fsync: that floor is printed too, the fsync timed as a raw append+fsync of
  as many bytes as one round adds to the journal, on the same disk, in the same blocks.
* **Pressured round** (NUMA 0 at a force-balance latency with high bandwidth): every pod's
  memory is read, a plan with an eviction offer and migrations is made, the round and its
  full inputs are journaled (the pods as columns, ``policy.balance.columns``) and fsynced,
  then the advice is taken (a second record, the migration plan in its cause). Ticks are
  31 s apart, past the cool-down. The simulated memory source hands each figure over as
  checked when it was set (``PodAnonMemory`` keeps a ``NumaAmounts`` as it is), every pod's
  in one call (``containers_anon_by_numa``); on a host, the cgroup reader opens, parses and
  checks some 6,000 ``memory.numa_stat`` files per round, pod by pod, which this row does
  not count. Baseline: ``msgpack.packb`` of the round's inputs in their
  plain-dict form (``RoundInputs.to_json``, as the journal held them before the columns), once.

The machine is shared and noisy: figure and baseline are measured in interleaved blocks, and
the p50 of each is compared; only the ratios are meant to be compared between runs.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.balancer_inputs import (
    checked_distances,
    metric_inputs,
    store_pods,
    with_container_ids,
    with_pods,
)
from actors.balancer_messages import RoundReport, Tick
from actors.balancer_ports import BalancerPorts
from actors.memory_balancer import MemoryBalancerActor, MemoryBalancerCore
from actors.ports.commit import StateStoreCommitter
from actors.ports.pod_source import PodListing, PodListSnapshot
from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import Commit, GetSnapshot
from journal import read_records
from policy.balance import BalancerConfig, RoundInputs, RoundResult, plan_round
from policy.balance.decide import balance_round, round_without_pods
from policy.balance.events import BalanceRoundRecorded
from policy.state.codec import decode_event, encode_event
from policy.state.entries import RECLAIMED_CORES, InPool
from policy.state.events import ContainerAllocated, PoolSet
from policy.state.pool_pods import PodsInPools
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import generate_dummy_cpu_topology
from qrmd.host.numa_distances import TopologyNumaDistances
from qrmd.sim.host.memory import SimulatedContainerMemory
from qrmd.sim.host.metrics import SimulatedNumaMetrics
from tests.actors.balancer_fakes import RecordingExecutor
from tests.policy.state_fixtures import container

NUMAS = 32
PODS = 2000
TOPOLOGY = generate_dummy_cpu_topology(256, 2, NUMAS)
GiB = 1 << 30
NOW = 1_795_994_721.5
TIMEOUT_S = 120.0

#: ``row(label, figure, baseline, target)``, as ``bench_wire.row`` prints it.
RowPrinter = Callable[[str, float, float, str], None]


def print_row(label: str, figure: float, baseline: float, target: str) -> None:
    """The format of ``bench_wire.row``, for a run of this script alone."""
    ratio = figure / baseline if baseline else float("nan")
    print(
        f"  {label:<58} {figure:9.3f} {'ms':<5} baseline {baseline:9.3f} {'ms':<5} "
        f"ratio {ratio:6.2f}x  (target {target})"
    )


@dataclass(frozen=True)
class SyntheticPod:
    uid: str
    pool: str
    containers: tuple[str, ...]

    def container_id(self, name: str) -> str:
        return f"containerd://{self.uid}-{name}"


def synthetic_pods(seed: int = 7) -> tuple[list[SyntheticPod], SimulatedContainerMemory]:
    """2,000 pods, two in three shared, one in three reclaimed, and their memory."""
    rng = random.Random(seed)
    memory = SimulatedContainerMemory()
    pods = []
    for i in range(PODS):
        pod = SyntheticPod(
            f"pod-{i:05d}",
            "reclaim" if i % 3 == 2 else "share",
            tuple(f"c{j}" for j in range(rng.randint(1, 3))),
        )
        for name in pod.containers:
            anon = {n: rng.randrange(0, 2 * GiB, 4096) for n in range(NUMAS)}
            memory.set_container(pod.uid, pod.container_id(name), anon)
        pods.append(pod)
    return pods, memory


def populate_cpu(store: Any, pods: list[SyntheticPod]) -> None:
    """The pods as the Allocator would have committed them, once their ramp-up is over:
    ``share`` on NUMA 0-15 (socket 0), ``reclaim`` on every node."""
    share = CPUSet.parse("0-63,128-191")
    events: list[Any] = [PoolSet("share", share), PoolSet("reclaim", CPUSet.parse("0-255"))]
    for pod in pods:
        qos = {"qos": RECLAIMED_CORES} if pod.pool == "reclaim" else {}
        for i, name in enumerate(pod.containers):
            entry = container(pod.uid, name, InPool(pod.pool), owner=pod.pool, **qos)  # type: ignore[arg-type]
            if i:
                entry = replace(entry, container_type="SIDECAR", container_index=i)
            events.append(ContainerAllocated(entry))
    store.ask(Commit(tuple(events), {"rpc": "bench"}), timeout=TIMEOUT_S)


class ListedPods:
    """A ``PodSource`` whose listing (as kubelet's ``/pods`` gives it) shows every container
    started, with its ID: each round reads and migrates per container cgroup."""

    def __init__(self, pods: list[SyntheticPod]) -> None:
        self._snapshot = PodListSnapshot.of(
            [
                PodListing(
                    p.uid,
                    "default",
                    f"name-{p.uid}",
                    "Running",
                    {name: p.container_id(name) for name in p.containers},
                )
                for p in pods
            ],
            NOW,
        )

    def latest(self) -> PodListSnapshot | None:
        return self._snapshot


class Profiles:
    """cProfile of each actor's thread while it serves a message, for ``--profile``: one
    profile per actor, enabled around ``on_receive`` once ``active``."""

    def __init__(self) -> None:
        self.active = False
        self.by_actor: dict[str, cProfile.Profile] = {}

    def serve(self, name: str, serve: Callable[[], Any]) -> Any:
        if not self.active:
            return serve()
        profile = self.by_actor.setdefault(name, cProfile.Profile())
        profile.enable()
        try:
            return serve()
        finally:
            profile.disable()

    def dump(self, prefix: str, scenario: str) -> None:
        for name, profile in self.by_actor.items():
            path = f"{prefix}-{scenario}-{name}.prof"
            profile.dump_stats(path)
            print(f"    profile of the {name} actor: {path}")
        self.by_actor.clear()
        self.active = False


PROFILES = Profiles()


class ProfiledStore(StateStoreActor):
    def on_receive(self, message: Any) -> Any:
        return PROFILES.serve("store", lambda: super(ProfiledStore, self).on_receive(message))


class ProfiledBalancer(MemoryBalancerActor):
    def on_receive(self, message: Any) -> Any:
        return PROFILES.serve("balancer", lambda: self.core.handle(message))


class BalancedNode:
    """The store and the balancer actor on the synthetic node, ticked by a fake clock."""

    def __init__(self, *, summary_every_s: float, pressured: bool) -> None:
        self.directory = tempfile.mkdtemp(dir="/tmp", prefix="qb")
        pods, memory = synthetic_pods()
        config = StoreConfig(directory=self.directory, node_name="bench", durability="always")
        self.store = ProfiledStore.start(lambda: StateStoreCore.open(config, TOPOLOGY))
        populate_cpu(self.store, pods)
        self.metrics = SimulatedNumaMetrics.quiet(range(NUMAS))
        if pressured:
            self.metrics.put_under_pressure(0)
        self.now = NOW
        committer = StateStoreCommitter(self.store)
        listing = ListedPods(pods)
        ports = BalancerPorts(
            metrics=self.metrics,
            distances=TopologyNumaDistances(TOPOLOGY.distances),
            memory=memory,
            pods=store_pods(committer),
            executor=RecordingExecutor(),
            pod_source=listing,
        )
        core = MemoryBalancerCore(
            self.store.ask(GetSnapshot(), timeout=TIMEOUT_S),
            committer,
            ports,
            BalancerConfig(),
            now_fn=lambda: self.now,
            cpu_vendor="GenuineIntel",
            round_summary_every_s=summary_every_s,
        )
        self.executor = ports.executor
        # For --stages only, used while the actor is idle between asks.
        self.core, self.ports, self.memory, self.listing = core, ports, memory, listing
        self.balancer = ProfiledBalancer.start(core)
        # As qrmd run does once start-up is over (qrmd/daemon.py, _collect_from_now_on): the
        # node's state built above leaves the collector's reach, so a round's collections walk
        # what the round allocates, not the 2,000 pods' entries the daemon would have frozen.
        gc.freeze()

    def tick(self, step_s: float) -> tuple[float, RoundReport]:
        """Seconds of one ``Tick`` ``step_s`` after the last, and its report."""
        self.now += step_s
        started = time.perf_counter()
        report = self.balancer.ask(Tick(self.now), timeout=TIMEOUT_S)
        return time.perf_counter() - started, report

    def journal_bytes(self) -> int:
        """The bytes of the journal's segment files."""
        return sum(path.stat().st_size for path in Path(self.directory).glob("*.seg"))

    def last_round_inputs(self) -> dict[str, Any]:
        """The journaled inputs of the newest round record."""
        found: dict[str, Any] | None = None
        for record in read_records(self.directory):
            for raw in record.events:
                event = decode_event(raw)
                if isinstance(event, BalanceRoundRecorded):
                    found = dict(event.inputs)
        assert found is not None, "no round was journaled"
        return found

    def close(self) -> None:
        self.balancer.stop()
        self.store.stop()
        # The next node freezes its own set-up only, as a freshly started daemon would.
        gc.unfreeze()
        shutil.rmtree(self.directory, ignore_errors=True)


def p50_ms(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[len(ordered) // 2] * 1000


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def quiet_rounds(blocks: int, samples: int, row: RowPrinter, profile: str | None) -> None:
    for summary_every_s, label in ((0.0, "every round committed"), (3600.0, "coalesced, default")):
        quiet = quiet_round(summary_every_s, blocks, samples, profile)
        row(f"quiet round ({label}) vs planner alone", p50_ms(quiet.figure),
            p50_ms(quiet.planner), "<= 2x")  # fmt: skip
        if quiet.synced:
            floor = p50_ms(quiet.planner) + p50_ms(quiet.synced)
            print(
                f"    (floor: planner + append+fsync of the round's {quiet.record_bytes:,} B "
                f"record {p50_ms(quiet.synced):.3f} ms = {floor:.3f} ms; the round is "
                f"{p50_ms(quiet.figure) / floor:.2f}x the floor)"
            )


@dataclass
class QuietTimes:
    """Seconds of quiet ticks and of their baselines (``quiet_round``)."""

    figure: list[float]
    planner: list[float]
    #: A raw write+fsync of one round's record, on the journal's disk (committed rounds only).
    synced: list[float]
    record_bytes: int = 0


def quiet_round(
    summary_every_s: float, blocks: int, samples: int, profile: str | None
) -> QuietTimes:
    """Seconds of quiet ticks, and of the planner alone on their journaled inputs; with every
    round committed, also of appending and fsyncing as many bytes as a round's record adds to
    the journal, to a file beside it (the floor a committed round cannot go under)."""
    node = BalancedNode(summary_every_s=summary_every_s, pressured=False)
    try:
        for _ in range(3):  # warm: the first round after start is always journaled
            _, report = node.tick(5.0)
            assert report.result is RoundResult.STORED and not report.error, report
        inputs = RoundInputs.from_json(node.last_round_inputs())
        assert not inputs.pods, "a quiet round reads no pod"
        before = node.journal_bytes()
        node.tick(5.0)
        record_bytes = node.journal_bytes() - before
        PROFILES.active = profile is not None
        times = QuietTimes([], [], [], record_bytes if not summary_every_s else 0)
        coalesced = 0
        payload = bytes(times.record_bytes)
        # Beside the journal's directory, on the same disk, as the journal's own file is.
        with open(f"{node.directory}-floor", "ab", buffering=0) as floor:
            for _ in range(blocks):
                for _ in range(samples):
                    seconds, report = node.tick(5.0)
                    assert report.result is RoundResult.STORED and not report.error, report
                    coalesced += report.coalesced
                    times.figure.append(seconds)
                times.planner.extend(timed(lambda: plan_round(inputs)) for _ in range(samples))
                if payload:
                    times.synced.extend(
                        timed(lambda: (floor.write(payload), os.fsync(floor.fileno())))
                        for _ in range(samples)
                    )
        if profile is not None:
            PROFILES.dump(profile, f"quiet-{'coalesced' if summary_every_s else 'journaled'}")
    finally:
        node.close()
        Path(f"{node.directory}-floor").unlink(missing_ok=True)
    assert (coalesced > 0) == (summary_every_s > 0)
    return times


def pressured_rounds(blocks: int, samples: int, row: RowPrinter, profile: str | None) -> None:
    node = BalancedNode(summary_every_s=0.0, pressured=True)
    try:
        for _ in range(2):  # warm
            _, report = node.tick(31.0)
            assert report.result is RoundResult.STORED and report.advice is not None, report
        plain = node.last_round_inputs()
        inputs = RoundInputs.from_json(plain)
        assert len(inputs.pods) == PODS
        outcome = plan_round(inputs)
        assert outcome.record is not None and outcome.record.balance_pods
        PROFILES.active = profile is not None
        figure: list[float] = []
        base: list[float] = []
        planner: list[float] = []
        for _ in range(blocks):
            for _ in range(samples):
                seconds, report = node.tick(31.0)
                assert report.result is RoundResult.STORED and report.advice is not None, report
                figure.append(seconds)
            base.extend(timed(lambda: msgpack.packb(plain)) for _ in range(samples))
            planner.extend(timed(lambda: plan_round(inputs)) for _ in range(samples))
        size = len(msgpack.packb(plain))
        journaled = len(msgpack.packb(inputs.to_journal()))
        if profile is not None:
            PROFILES.dump(profile, "pressured")
    finally:
        node.close()
    row("pressured round, inputs journaled vs msgpack of the inputs", p50_ms(figure), p50_ms(base),
        "<= 3x")  # fmt: skip
    print(
        f"    (inputs {size / 1e6:.2f} MB as msgpack, {journaled / 1e6:.2f} MB as journaled "
        f"(pods as columns); planner alone {p50_ms(planner):.3f} ms; "
        f"{len(outcome.record.balance_pods)} pods to migrate)"
    )


class Steps:
    """Seconds of each named step, for ``--stages``."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}

    def run(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        value = fn(*args, **kwargs)
        self.times.setdefault(name, []).append(time.perf_counter() - started)
        return value


def read_every_pod(memory: SimulatedContainerMemory, pods: PodsInPools) -> None:
    """Every pod's memory, as a round reads it: in one call for the pods with IDs."""
    listed = [(p.uid, p.container_ids) for p in pods.pods if p.container_ids is not None]
    memory.containers_anon_by_numa(listed)
    for pod in pods.pods:
        if pod.container_ids is None:
            memory.anon_by_numa(pod.uid, None)


def pressured_stages(samples: int) -> None:
    """The pressured round's steps one by one, each timed on its own (``--stages``): the
    balancer's core is driven from this thread between ticks, on the inputs the actor gathers,
    so each step's share of the round can be read without a profiler's overhead."""
    node = BalancedNode(summary_every_s=0.0, pressured=True)
    steps = Steps()
    try:
        for _ in range(2):  # warm
            node.tick(31.0)
        core, ports, listing = node.core, node.ports, node.listing
        distances = checked_distances(ports.distances.distances())
        for _ in range(samples):
            state = core.state
            inputs = steps.run(
                "metrics sampled (metric_inputs)", metric_inputs, now=node.now + 31.0,
                distances=distances, metrics=ports.metrics, config=BalancerConfig(),
                cpu_vendor="GenuineIntel", last=state.last,
            )  # fmt: skip
            steps.run(
                "planned without pods (round_without_pods)", round_without_pods, state, inputs
            )
            pods = steps.run("pods in pools (store snapshot)", ports.pods)
            listed = steps.run(
                "container IDs (with_container_ids)", with_container_ids, pods, listing.latest()
            )
            steps.run("  memory reads alone (every pod)", read_every_pod, node.memory, listed)
            full, _ = steps.run(
                "memory read, pods made (with_pods)", with_pods, inputs, listed, node.memory
            )
            decision = steps.run("decided (balance_round)", balance_round, state, full)
            steps.run("  of which: inputs as columns (to_journal)", full.to_journal)
            recorded = next(e for e in decision.events if isinstance(e, BalanceRoundRecorded))
            encoded = steps.run("encoded for the journal (encode_event)", encode_event, recorded)
            steps.run("msgpack of the encoded event", msgpack.packb, encoded)
    finally:
        node.close()
    print("  pressured round, step by step (p50 of each, timed apart from the round):")
    for name, seconds in steps.times.items():
        print(f"    {name:<46} {p50_ms(seconds):8.2f} ms")


def bench_balance_rounds(
    *,
    quick: bool,
    row: RowPrinter = print_row,
    profile: str | None = None,
    rows: str = "all",
) -> None:
    """Print the quiet and pressured round rows (module docstring), or those of ``rows``
    alone; with ``profile``, also write each actor's cProfile of the timed ticks to
    ``<profile>-<scenario>-<actor>.prof``."""
    blocks, samples = (2, 5) if quick else (5, 10)
    print(
        f"balance rounds inside the daemon ({NUMAS} NUMA, {PODS:,} pods, MemoryBalancer + "
        "StateStore), durability always:"
    )
    if rows in ("all", "quiet"):
        quiet_rounds(blocks, samples, row, profile)
    if rows in ("all", "pressured"):
        pressured_rounds(blocks, max(2, samples // 2), row, profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    parser.add_argument(
        "--profile", metavar="PREFIX", help="write the actors' cProfile to PREFIX-*.prof"
    )
    parser.add_argument(
        "--stages", action="store_true", help="also time the pressured round's steps one by one"
    )
    parser.add_argument(
        "--rows",
        choices=("all", "quiet", "pressured"),
        default="all",
        help="the quiet rows or the pressured row alone (default: all)",
    )
    args = parser.parse_args()
    bench_balance_rounds(quick=args.quick, profile=args.profile, rows=args.rows)
    if args.stages:
        pressured_stages(5 if args.quick else 15)


if __name__ == "__main__":
    main()
