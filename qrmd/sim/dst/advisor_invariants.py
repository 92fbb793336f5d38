"""Invariants of the sys-advisor path, checked on the journal's records (spec cpu-policy
§11.5–§11.8; ``policy.cpu.advisor.decision``).

Every response the Allocator decides is journaled (unless it repeats the previous one with the
same outcome, which commits nothing): applied, one record with its CPU events and
``AdvisorResponseApplied``; refused, one record with ``AdvisorResponseRefused`` only. The
simulated advisor keeps what it sent (``SimAdvisor.sent``: the stream, whether it was made
invalid on purpose), so each record is checked against what sys-advisor actually said:

* ``refused-advice-changes-nothing``: a record refusing a response carries no other event
  (state unchanged, §11.5 "leaves state unchanged"), and no response the advisor made invalid
  (a §11.6 rejection by name, ``qrmd.sim.advisor.faults``) is ever applied;
* ``advice-in-stream-order``: the responses decided come in the order the advisor's streams
  were opened: none from a stream older than one already decided (the link drops what a
  replaced stream's reader still tells it);
* ``advice-applied-as-said``: after an applied response (the state replayed to its record),
  every pool and dedicated container it names holds as many CPUs as its distinct blocks say
  (per NUMA node for NUMA-specific blocks, §11.7), entries sharing no block share no CPU, the
  reserve keeps its CPUs, pools it leaves out are gone (but ``reclaim``, §11.8 step 3),
  dedicated containers it names stop ramping, and shared and reclaimed containers that do not
  ramp hold their pool's CPUs (§11.8 step 4).

Each record is looked at once: the first step its journal shows it (a record a checkpoint
covered before any step saw it is not checked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policy.cpu.advisor.response import NO_NUMA, POOL_SUB_ENTRY, AdvisorResponse
from policy.state.advisor_section import AdvisorResponseApplied, AdvisorResponseRefused
from policy.state.entries import DEDICATED_OWNER
from policy.state.replay import ReplayError, decode_events, replay_records
from policy.state.sections import State
from policy.topology.cpuset import CPUSet

if TYPE_CHECKING:
    from qrmd.sim.dst.invariants import World

__all__ = [
    "AdviceRecord",
    "advice_applied_as_said",
    "advice_in_stream_order",
    "refused_advice_changes_nothing",
]

RESERVE = "reserve"
RECLAIM = "reclaim"


@dataclass(slots=True)
class AdviceRecord:
    """A journal record that decided a response, first seen this step.

    Attributes:
        before / after: the state replayed to just before / after it (applied ones only).
    """

    seq: int
    fingerprint: str
    applied: bool
    events: list[Any]
    stream: int | None = None
    before: State | None = None
    after: State | None = None


def fresh_advice(world: World) -> list[AdviceRecord]:
    """The records deciding a response that no step saw before (scanned once per recovery
    of the journal, ``replay-equals-live``'s)."""
    journal = world.journal
    if journal is None:
        return []
    if world.advice_scan is journal:
        return world.advice_fresh
    base, records = journal
    fresh: list[AdviceRecord] = []
    positions: list[int] = []
    for position, record in enumerate(records):
        key = (record.seq, record.monotonic_time)
        if key in world.advice_seen:
            continue
        world.advice_seen.add(key)
        try:
            events = decode_events(record)
        except ReplayError:
            continue  # replay-equals-live reports a journal that does not replay
        for event in events:
            if isinstance(event, AdvisorResponseApplied | AdvisorResponseRefused):
                applied = isinstance(event, AdvisorResponseApplied)
                stream = _stream_of(record.cause)
                fresh.append(AdviceRecord(record.seq, event.fingerprint, applied, events, stream))
                positions.append(position)
                break
    if any(r.applied for r in fresh):
        _replay_around(base, records, fresh, positions)
    world.advice_scan, world.advice_fresh = journal, fresh
    return fresh


def _stream_of(cause: Any) -> int | None:
    """The number of the stream a journaled response came on, from its block ids (``s<N>.``,
    ``qrmd.sim.dst.advisor``); None for a response without blocks. The fingerprint cannot
    tell: it renames block ids, so one plan sent on two streams has one fingerprint."""
    try:
        entries = cause["response"]["entries"]
    except (KeyError, TypeError):
        return None
    for subs in entries.values():
        for info in (subs or {}).values():
            for blocks in (info or {}).get("numas", {}).values():
                for block in blocks or ():
                    head, dot, _ = str(block.get("block_id", "")).partition(".")
                    if dot and head.startswith("s") and head[1:].isdigit():
                        return int(head[1:])
    return None


def _replay_around(
    base: State, records: list[Any], fresh: list[AdviceRecord], positions: list[int]
) -> None:
    """Fill ``before``/``after`` of the applied records by replaying the journal one record
    at a time from its checkpoint."""
    wanted = {p: r for p, r in zip(positions, fresh, strict=True) if r.applied}
    state = base
    for position, record in enumerate(records[: max(wanted) + 1]):
        try:
            after, _, _ = replay_records(state, [record])
        except ReplayError:
            return
        found = wanted.get(position)
        if found is not None:
            found.before, found.after = state, after
        state = after


def refused_advice_changes_nothing(world: World) -> list[str]:
    advisor = world.advisor
    out = []
    for record in fresh_advice(world):
        if not record.applied:
            others = sorted(
                {
                    type(e).__name__
                    for e in record.events
                    if not isinstance(e, AdvisorResponseRefused)
                }
            )
            if others:
                out.append(
                    f"record {record.seq} refuses response {record.fingerprint[:12]} but also "
                    f"commits {', '.join(others)}"
                )
            continue
        sent = None if advisor is None else advisor.sent.get(record.fingerprint)
        if sent is not None and sent.invalid:
            out.append(
                f"record {record.seq} applies response {record.fingerprint[:12]}, which the "
                f"advisor made invalid (stream {record.stream})"
            )
    return out


def advice_in_stream_order(world: World) -> list[str]:
    advisor = world.advisor
    out: list[str] = []
    if advisor is None:
        return out
    for record in fresh_advice(world):
        stream = record.stream
        if stream is None:
            continue
        if stream < world.advice_stream:
            verb = "applies" if record.applied else "refuses"
            out.append(
                f"record {record.seq} {verb} a response of stream {stream} after one of "
                f"stream {world.advice_stream} was decided"
            )
        world.advice_stream = max(world.advice_stream, stream)
    return out


def advice_applied_as_said(world: World) -> list[str]:
    advisor = world.advisor
    out: list[str] = []
    if advisor is None:
        return out
    for record in fresh_advice(world):
        sent = advisor.sent.get(record.fingerprint)
        if not record.applied or sent is None or sent.invalid:
            continue
        if record.before is None or record.after is None:
            continue
        found = _as_said(sent.response, record.before, record.after)
        out.extend(f"record {record.seq} (stream {record.stream}): {m}" for m in found)
    return out


def _as_said(response: AdvisorResponse, before: State, after: State) -> list[str]:
    cpu_before, cpu = before.cpu, after.cpu
    out = []
    # What each pool and dedicated container of the response was given: its blocks.
    targets: dict[tuple[str, str], tuple[frozenset[str], CPUSet]] = {}
    for name, sub, info in response.walk():
        if sub != POOL_SUB_ENTRY and info.owner_pool_name != DEDICATED_OWNER:
            continue
        where = name if sub == POOL_SUB_ENTRY else f"{name}/{sub}"
        if sub == POOL_SUB_ENTRY:
            held = cpu.pool_cpus(name)
            if name == RESERVE:
                if held != cpu_before.pool_cpus(RESERVE):
                    out.append(f"the reserve moved from {cpu_before.pool_cpus(RESERVE)} to {held}")
                continue
        else:
            entry = cpu.entry(name, sub)
            held = None if entry is None else cpu.placement_cpus(entry.placement)[0]
            if entry is not None and entry.ramp_up:
                out.append(f"{where} was given dedicated blocks but still ramps up")
        if held is None:
            out.append(f"{where} is in the response but not in the state")
            continue
        distinct: dict[str, tuple[int, int]] = {}
        for numa, blocks in info.numa_blocks.items():
            for block in blocks or ():
                distinct[block.block_id] = (numa, block.result)
        want = sum(result for _, result in distinct.values())
        if held.size() != want:
            out.append(f"{where} holds {held.size()} CPUs ({held}); its blocks say {want}")
        per_numa: dict[int, int] = {}
        for numa, result in distinct.values():
            per_numa[numa] = per_numa.get(numa, 0) + result
        if NO_NUMA not in per_numa:
            topology = cpu.topology
            for numa, result in sorted(per_numa.items()):
                inside = held.intersection(topology.cpu_details.cpus_in_numa_nodes(numa)).size()
                if inside != result:
                    out.append(
                        f"{where} holds {inside} CPUs in NUMA {numa}; its blocks say {result}"
                    )
        targets[(name, sub)] = (frozenset(distinct), held)
    # Entries that share no block share no CPU (§11.7: one block, one set of CPUs).
    keys = sorted(targets)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            (ids_a, cpus_a), (ids_b, cpus_b) = targets[a], targets[b]
            if ids_a & ids_b:
                continue
            both = cpus_a.intersection(cpus_b)
            if not both.is_empty():
                out.append(f"{_name(a)} and {_name(b)} share no block but share CPUs {both}")
    # Pools the response leaves out are dropped, but reclaim (§11.8 steps 1 and 3).
    for pool in sorted(cpu.pools):
        if pool != RECLAIM and response.info(pool, POOL_SUB_ENTRY) is None:
            out.append(f"pool {pool} stays although the response leaves it out")
    # Shared and reclaimed containers that do not ramp follow their pool (§11.8 step 4).
    for entry in cpu.entries():
        if entry.owner_pool_name == DEDICATED_OWNER or entry.is_dedicated() or entry.ramp_up:
            continue
        said = response.info(entry.pod_uid, entry.container_name)
        named = said.owner_pool_name if said is not None else ""
        pool = named or entry.pool_name()
        pool_cpus = cpu.pool_cpus(pool)
        held = cpu.placement_cpus(entry.placement)[0]
        if pool_cpus is not None and held != pool_cpus:
            out.append(
                f"{entry.pod_uid}/{entry.container_name} holds {held}, its pool {pool} {pool_cpus}"
            )
    return out


def _name(key: tuple[str, str]) -> str:
    return key[0] if key[1] == POOL_SUB_ENTRY else f"{key[0]}/{key[1]}"
