"""The named invariants, checked after every step of the simulation (DESIGN.md "Subsystems and
simulation").

Each is a function of the simulated world returning the violations it sees (an empty list when
it holds). The names are what ``qrmd sim run`` prints and ``--json`` lists:

* ``exclusive-cpus-disjoint``: no CPU in the dedicated allocations of two pods.
* ``pools-as-spec``: the pools keep spec cpu-policy's rules (``policy.cpu.invariants``:
  reserve exact, reclaim non-empty, pools disjoint or identical, nothing on reserved CPUs).
* ``replay-equals-live``: the journal as a crash would leave it now, recovered, is the
  StateStore's published state at the same seq.
* ``acknowledged-survive``: after every recovery (crash, power loss), the journal holds every
  seq an answer to kubelet was given from, and every container kubelet was told it has.
* ``allocated-stay``: a container kubelet was allocated (or runs, and was listed since) stays
  in the live state until kubelet sends its pod's RemovePod (the residual checker removes only
  pods the pod list misses).
* ``kubelet-answer-agrees``: each Allocate answer names the cpuset the durable state held when
  it was given, and each allocation listing names exactly the containers the state held.
* ``journal-holds-no-refused-record``: a commit refused with ``CommitRefused`` (nothing was
  persisted) never shows up in the journal at the seq it would have had.
* ``health-truthful``: the store reports itself healthy only while it accepts commits.
* ``suppression-timers-kept``: the suppression plugin's tolerance timers follow the
  reference's rule (katalyst-core v0.5.3 ``pressure_suppression.go``): a ``GetEvictPods``
  that returns early (no reclaimed pod among the request's, the reclaim pool missing or
  empty) leaves every timer as it was, and an answered full pass keeps timers only for the
  request's reclaimed pods (a refused commit keeps the durable timers, whatever they were).
  Modelled from the request alone, not from the plugin's code.
* ``actors-supervised``: no actor dead without its supervisor knowing: a poll that leaves an
  actor dead noticed it (and tried to restart it), and with no disk fault in the way of a
  restart every supervised actor is alive again after the poll.

The v0.5.47 node's own (SNB pools, non-binding pools, RNB containers) are in
``qrmd.sim.dst.v0547_invariants``.

To add one: write a function here taking the ``World`` and returning messages, and add it to
``INVARIANTS``; docs/simulation.md says more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random
from typing import Any

from journal import Journal
from journal.records import pack
from policy.cpu.context import PolicyContext
from policy.cpu.invariants import check_invariants
from policy.cpu.qos import QOS_LEVEL_KEY
from policy.state.entries import DEDICATED_OWNER
from policy.state.replay import replay_records, state_from_checkpoint
from policy.state.sections import State
from policy.topology.cpuset import CPUSet
from qrmd.sim.dst.advisor import SimAdvisor
from qrmd.sim.dst.advisor_invariants import (
    advice_applied_as_said,
    advice_in_stream_order,
    refused_advice_changes_nothing,
)
from qrmd.sim.dst.balancer_invariants import BALANCER_INVARIANTS
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.kubelet import KubeletPeer
from qrmd.sim.dst.node import SimNode
from qrmd.sim.dst.storage import SimDisk, SimFileOps
from qrmd.sim.dst.v0547_invariants import V0547_INVARIANTS

__all__ = ["INVARIANTS", "World", "recovered_view"]


@dataclass(slots=True)
class World:
    """What the invariants read: the node, its disk, kubelet, and what was refused.

    Attributes:
        refused: seq → packed cause of each commit the store refused when that seq was next.
        recoveries: seqs and states recovered by boots not checked yet.
    """

    node: SimNode
    disk: SimDisk
    kubelet: KubeletPeer
    ctx: PolicyContext
    refused: dict[int, bytes] = field(default_factory=dict)
    recoveries: list[tuple[int, State]] = field(default_factory=list)
    checked_version: int = -1
    checked_seq: int = -1
    records: list[Any] = field(default_factory=list)
    unsupervised: list[str] = field(default_factory=list)
    #: sys-advisor (None: the node runs without it).
    advisor: SimAdvisor | None = None
    #: The journal as ``replay-equals-live`` recovered it this step (its checkpoint's state and
    #: the records after it); None when the disk did not change.
    journal: tuple[State, list[Any]] | None = None
    #: The advisor invariants' bookkeeping (``qrmd.sim.dst.advisor_invariants``).
    advice_seen: set[tuple[int, float]] = field(default_factory=set)
    advice_scan: Any = None
    advice_fresh: list[Any] = field(default_factory=list)
    advice_stream: int = 0


def recovered_view(disk: SimDisk, node: SimNode) -> tuple[int, State, list[Any]]:
    """Recover a copy of the disk as a crash would leave it now: (last seq, state, records).

    Read-only and on a copy with its own clock, so checking changes nothing the simulation
    will see.
    """
    last_seq, _, state, records = _recover(disk, node)
    return last_seq, state, records


def _recover(disk: SimDisk, node: SimNode) -> tuple[int, State, State, list[Any]]:
    """``recovered_view`` and the checkpoint's state the records apply to."""
    copy = disk.copy()
    copy.rng = Random(0)
    copy.clock = VirtualClock(disk.clock.time())
    config = node.config
    journal, found = Journal.open(
        config.directory,
        node_name=config.node_name,
        topology_fingerprint=node.ctx.topology.fingerprint(),
        fs=SimFileOps(copy),
        clock=copy.clock,
        read_only=True,
    )
    journal.close()
    base = state_from_checkpoint(found.checkpoint_state, found.checkpoint_seq, node.ctx.topology)
    state, _, _ = replay_records(base, found.records)
    return found.last_seq, base, state, found.records


def exclusive_cpus_disjoint(world: World) -> list[str]:
    state = _live_state(world)
    if state is None:
        return []
    cpu = state.cpu
    owned: dict[int, str] = {}
    out = []
    for key in sorted(cpu.dedicated_containers()):
        entry = cpu.require_entry(*key)
        if entry.owner_pool_name != DEDICATED_OWNER:
            continue
        cpus, _ = cpu.placement_cpus(entry.placement)
        for c in cpus:
            other = owned.setdefault(c, entry.pod_uid)
            if other != entry.pod_uid:
                out.append(
                    f"CPU {c} is in the dedicated allocations of {other} and {entry.pod_uid}"
                )
    return out


def pools_as_spec(world: World) -> list[str]:
    state = _live_state(world)
    if state is None or not state.cpu.pools:
        return []
    return [str(v) for v in check_invariants(state.cpu, world.ctx)]


def replay_equals_live(world: World) -> list[str]:
    core = world.node.store_core()
    if core is None:
        return []
    seq = core.snapshot.seq
    world.journal = None
    if world.disk.version == world.checked_version and seq == world.checked_seq:
        return []
    world.checked_version, world.checked_seq = world.disk.version, seq
    last_seq, base, state, records = _recover(world.disk, world.node)
    world.journal = (base, records)
    out = []
    if last_seq != seq:
        out.append(f"the journal recovers to seq {last_seq}, the store published seq {seq}")
    elif state != core.snapshot.state:
        out.append(f"the state replayed from the journal at seq {seq} differs from the live one")
    world.records = records
    return out


def journal_holds_no_refused_record(world: World) -> list[str]:
    records, world.records = world.records, []
    out = []
    for record in records:
        refused = world.refused.get(record.seq)
        if refused is not None and pack(record.cause, "cause") == refused:
            out.append(f"record {record.seq} is in the journal, but its commit was refused")
    return out


def acknowledged_survive(world: World) -> list[str]:
    out = []
    kubelet = world.kubelet
    for seq, state in world.recoveries:
        if seq < kubelet.acked_seq:
            out.append(
                f"recovered to seq {seq}, but kubelet was answered from seq {kubelet.acked_seq}"
            )
        for (uid, container), answer in sorted(kubelet.answers.items()):
            if uid in kubelet.removal_sent or answer.rpc != "Allocate":
                continue
            if state.cpu.entry(uid, container) is None:
                out.append(f"{uid}/{container} was allocated {answer.cpus} but is lost")
    world.recoveries.clear()
    return out


def allocated_stay(world: World) -> list[str]:
    state = _live_state(world)
    if state is None:
        return []
    kubelet = world.kubelet
    out = []
    for (uid, container), answer in sorted(kubelet.answers.items()):
        held = state.cpu.entry(uid, container) is not None
        pod = kubelet.pods.get(uid)
        # Allocated, or running and listed since (a listing's answer replaces the Allocate's).
        runs = answer.rpc == "Allocate" or (pod is not None and pod.phase == "running")
        if runs and uid not in kubelet.removal_sent and not held:
            out.append(f"{uid}/{container} runs on {answer.cpus} but the state dropped it")
    return out


def kubelet_answer_agrees(world: World) -> list[str]:
    kubelet = world.kubelet
    out = list(kubelet.disagreements)
    kubelet.disagreements.clear()
    for (uid, container), answer in kubelet.fresh:
        if answer.rpc != "Allocate" or answer.state is None:
            continue
        cpu = answer.state.cpu
        entry = cpu.entry(uid, container)
        if entry is None:
            out.append(f"Allocate told {uid}/{container} {answer.cpus}; the state has no entry")
            continue
        held, _ = cpu.placement_cpus(entry.placement)
        told = CPUSet.parse(answer.cpus)
        if held != told and not _pooled_before(answer, entry, told):
            out.append(f"Allocate told {uid}/{container} {answer.cpus}; the state holds {held}")
    kubelet.fresh.clear()
    return out


def _pooled_before(answer: Any, entry: Any, told: CPUSet) -> bool:
    """Whether ``told`` is the CPUs a shared container already in its pool held before the
    Allocate that answered it: the pool then grows by the request and the reply carries the
    CPUs from before (spec cpu-policy §15.2; katalyst-core drops ``doAndCheckPutAllocationInfo``'s
    adjusted result). At v0.5.3 the regeneration rarely moves such a pool; at v0.5.47 it does
    once an SNB pool's NUMA node is freed."""
    before = answer.before
    if before is None or not entry.is_shared() or entry.ramp_up:
        return False
    earlier = before.cpu.entry(entry.pod_uid, entry.container_name)
    if earlier is None or earlier.ramp_up or earlier.owner_pool_name != entry.owner_pool_name:
        return False
    held, _ = before.cpu.placement_cpus(earlier.placement)
    return bool(held == told)


def sidecar_mirrors_main(world: World) -> list[str]:
    """A dedicated NUMA-binding pod's sidecar holds exactly its main container's CPUs, current
    and original (spec cpu-policy §7.5.2 step 2; the advisor gives a pod's containers one set
    of blocks, §11.8), and is never stored without its main container (§7.5.2 step 1)."""
    state = _live_state(world)
    if state is None:
        return []
    cpu = state.cpu
    out = []
    for entry in cpu.entries():
        if not (entry.is_sidecar() and entry.is_dedicated_numa_binding()):
            continue
        where = f"{entry.pod_uid}/{entry.container_name}"
        main = cpu.main_container_entry(entry.pod_uid)
        if main is None:
            out.append(f"sidecar {where} is stored but its pod has no main container")
            continue
        held = cpu.placement_cpus(entry.placement)
        mains = cpu.placement_cpus(main.placement)
        if held != mains:
            out.append(
                f"sidecar {where} holds {held[0]} (original {held[1]}); its main container "
                f"{main.container_name} holds {mains[0]} (original {mains[1]})"
            )
    return out


def removed_pods_stay_gone(world: World) -> list[str]:
    """A pod whose RemovePod kubelet saw answered holds no container in the live state: every
    container of it went (spec cpu-policy §10.6 step 2 deletes the pod key), and nothing
    brings it back (kubelet never calls for it again)."""
    state = _live_state(world)
    if state is None:
        return []
    removed = world.kubelet.removed
    out = []
    for uid in sorted(u for u in state.cpu.pods if u in removed):
        held = sorted(state.cpu.pod_containers(uid))
        if held:
            out.append(f"{uid}'s RemovePod was answered, but the state holds its {held}")
    return out


def health_truthful(world: World) -> list[str]:
    core = world.node.store_core()
    if core is None or core.accepts_commits or not core.status.health.healthy:
        return []
    return ["the store refuses every commit but reports itself healthy"]


def suppression_timers_kept(world: World) -> list[str]:
    calls, world.node.suppression_calls = world.node.suppression_calls, []
    out = []
    for call in calls:
        reclaimed = {
            p.uniq_key
            for p in call.message.active_pods
            if p.annotations.get(QOS_LEVEL_KEY) == "reclaimed_cores"
        }
        early = not reclaimed or not call.reclaim_pool_size
        if early and call.after != call.before:
            out.append(
                f"GetEvictPods returned early (reclaimed pods {len(reclaimed)}, reclaim pool "
                f"{call.reclaim_pool_size}) but changed the timers {call.before} to {call.after}"
            )
        elif not early and call.answered and not set(call.after) <= reclaimed:
            stray = sorted(set(call.after) - reclaimed)
            out.append(f"GetEvictPods kept timers of pods it was not sent: {stray}")
    return out


def actors_supervised(world: World) -> list[str]:
    out, world.unsupervised = world.unsupervised, []
    return out


def _live_state(world: World) -> State | None:
    core = world.node.store_core()
    return None if core is None else core.snapshot.state


INVARIANTS: tuple[tuple[str, Callable[[World], list[str]]], ...] = (
    ("exclusive-cpus-disjoint", exclusive_cpus_disjoint),
    ("pools-as-spec", pools_as_spec),
    ("replay-equals-live", replay_equals_live),
    ("acknowledged-survive", acknowledged_survive),
    ("allocated-stay", allocated_stay),
    ("kubelet-answer-agrees", kubelet_answer_agrees),
    ("sidecar-mirrors-main", sidecar_mirrors_main),
    ("removed-pods-stay-gone", removed_pods_stay_gone),
    ("journal-holds-no-refused-record", journal_holds_no_refused_record),
    ("health-truthful", health_truthful),
    ("suppression-timers-kept", suppression_timers_kept),
    ("actors-supervised", actors_supervised),
    ("refused-advice-changes-nothing", refused_advice_changes_nothing),
    ("advice-in-stream-order", advice_in_stream_order),
    ("advice-applied-as-said", advice_applied_as_said),
    *BALANCER_INVARIANTS,
    *V0547_INVARIANTS,
)
