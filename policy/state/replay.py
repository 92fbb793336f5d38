"""Rebuild the state from what the journal holds: a checkpoint's state plus the records after it.

This is the per-section registry's replay side: how each owner's section is decoded from a
checkpoint (``policy.state.codec.SECTION_CODECS``) and how its events are applied
(``policy.state.sections.SECTION_APPLY``), for the whole state or for one section alone
(:func:`section_from_checkpoint`, :func:`apply_section_events`: a balance round or a CPU
pressure decision is re-run on its own section, without the topology).

The rule (DESIGN.md, Journal): replaying needs no policy code and is deterministic.
A checkpoint's payload is decoded with the state codec for this node's topology (or the state
is empty when there is none); every later record's events are decoded and applied in seq
order, all of a record or none of it. A record that cannot be decoded or whose events do not
fit the state is never skipped: ``ReplayError`` names its seq and says what to do, because
skipping it would rebuild a state that was never acknowledged.

The StateStore recovers with these functions, and the offline tools replay with the same ones
through the one journal walk (``journal.walk``, ``qrmd.offline.walk``): ``qrmd journal verify``
checks that replay from empty equals every checkpoint it passes.

Records come in as anything with a ``seq`` and encoded ``events`` (``journal.Record`` is one):
the policy does not import the journal. Nothing here pauses the garbage collector; callers
that replay a long journal do (``journal.recovery.collector_paused``, the why).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

import immutables

from policy.balance import BalancerState
from policy.errors import ErrorKind, PolicyError, StateError
from policy.state.codec import SECTION_CODECS, decode_event, decode_state
from policy.state.codec_fast import fast_allocated_entry
from policy.state.cpu_apply import allocate_all
from policy.state.cpu_state import CPUState
from policy.state.entries import ContainerEntry
from policy.state.events import ContainerAllocated, Event
from policy.state.sections import (
    BALANCE_SECTION,
    CPU_SECTION,
    SECTION_APPLY,
    State,
    apply_to_sections,
    empty_state,
)
from policy.topology.model import CPUTopology

__all__ = [
    "JournaledEvents",
    "LoneAllocation",
    "ReplayError",
    "SectionReplayer",
    "StateReplayer",
    "apply_section_events",
    "decode_events",
    "read_events",
    "replay_records",
    "section_from_checkpoint",
    "state_from_checkpoint",
]


class JournaledEvents(Protocol):
    """A journal record as replay reads it: its seq and its encoded events."""

    @property
    def seq(self) -> int: ...

    @property
    def events(self) -> Sequence[Any]: ...


class ReplayError(PolicyError):
    """The journal holds a checkpoint or record the state model cannot take back.

    Retrying will not help (kind ``INTERNAL``): the operator must look at the journal.

    Attributes:
        seq: the record's seq or the checkpoint's seq.
    """

    kind = ErrorKind.INTERNAL

    def __init__(self, seq: int, message: str) -> None:
        super().__init__(message)
        self.seq = seq


class LoneAllocation(list[ContainerEntry]):
    """A record's events as :func:`read_events` keeps them when they are one well-formed
    ``ContainerAllocated``: its entry alone, already decoded."""

    __slots__ = ()


def read_events(events: list[Any]) -> list[Any]:
    """A record's events as the StateStore's recovery keeps them while reading the journal
    (``journal.records.EventsReader``): one allocation the codec's fast path decodes becomes
    a :class:`LoneAllocation` of its entry, and anything else stays the msgpack it was.

    Decoding as each record is read drops the record's msgpack (maps of a dozen strings)
    at once, instead of holding every record's until the replay; what the replay gets from a
    ``LoneAllocation`` is the very event :func:`decode_events` would decode. Never raises.
    """
    if len(events) != 1:
        return events
    raw = events[0]
    try:
        entry = fast_allocated_entry(raw)
        if entry is None:
            if type(raw) is not dict or raw.get("kind") != ContainerAllocated.__name__:
                return events  # another event: decoded once, by the replay
            # A cpuset text seen for the first time (or anything unusual): the checked
            # decoder, which also makes the text known to the fast path for the records that
            # follow.
            event = decode_event(raw)
            if type(event) is not ContainerAllocated:
                return events
            entry = event.entry
    except Exception:  # refused again, and reported, by the replay in its turn
        return events
    return LoneAllocation((entry,))


def decode_events(record: JournaledEvents) -> list[Event]:
    """The events of one record, decoded.

    Raises:
        ReplayError: an event is malformed; names the record's seq and the event's position.
    """
    if type(record.events) is LoneAllocation:
        return [ContainerAllocated(record.events[0])]
    events = []
    for position, raw in enumerate(record.events):
        try:
            events.append(decode_event(raw))
        except StateError as err:
            raise ReplayError(
                record.seq, f"record {record.seq}, event {position} cannot be decoded: {err}"
            ) from err
    return events


def state_from_checkpoint(
    payload: Any, seq: int | None, topology: CPUTopology, path: str | None = None
) -> State:
    """The state a checkpoint payload holds, or the empty state when there is no checkpoint.

    Args:
        payload: the checkpoint's state payload (``Recovery.checkpoint_state``), or None.
        seq: the seq the checkpoint covers (for the error message), or None.
        topology: this node's topology; the checkpoint must have been written for it.
        path: the checkpoint file (``Recovery.checkpoint_path``), named in the error message.

    Returns:
        The decoded state, its indexes rebuilt.

    Raises:
        ReplayError: the payload is not a state of this schema and topology.
    """
    if payload is None:
        return empty_state(topology)
    try:
        return decode_state(payload, topology)
    except StateError as err:
        named = f"checkpoint at seq {seq}" if path is None else f"checkpoint at seq {seq} ({path})"
        verify = "Run `qrmd journal verify` on the journal directory"
        raise ReplayError(seq or 0, f"{named} cannot be decoded: {err}. {verify}") from err


def replay_records(state: State, records: Iterable[JournaledEvents]) -> tuple[State, int, int]:
    """Apply every record's events in order.

    Args:
        state: the state before the first record (a checkpoint's, or empty).
        records: consecutive records, ascending.

    Returns:
        ``(state, records applied, events applied)``.

    Raises:
        ReplayError: a record cannot be decoded or its events do not fit the state; nothing
            after it is applied.
    """
    count = 0
    events_applied = 0
    # The sections are kept in a plain dict from one record to the next and the state is
    # built once at the end: the same state apply_all gives record after record
    # (policy.state.sections.apply_to_sections), without a State per event. A record that
    # does not fit ends the replay, so the partly applied dict is never used.
    sections = dict(state.sections)
    batch = _NewEntries()
    # Every state rebuilt on the way is kept alive by the records and the next state: a caller
    # replaying many records pauses the cyclic collector around this call (the StateStore's
    # recovery, journal.walk), or its collections walk all of them again and again.
    remaining = iter(records)
    pending: JournaledEvents | None = None  # read, and not taken by a run of allocations
    while True:
        try:
            record = pending if pending is not None else next(remaining, None)
            pending = None
            if record is None:
                break
            # Most records are one allocation of a new container: its entry is decoded
            # straight from the record's msgpack and batched, without building the event
            # (the event decode_events gives holds this very entry). Anything else takes the
            # checked path below, in the same order.
            raw = record.events
            cpu = sections.get(CPU_SECTION)
            if type(raw) is LoneAllocation and isinstance(cpu, CPUState):
                # Decoded as it was read (read_events): it and the run that follows it.
                taken, pending = batch.took_allocations(record, remaining, cpu)
                if taken:
                    count += taken
                    events_applied += taken
                    continue
            entry = None
            if type(raw) is LoneAllocation:
                entry = raw[0]
            elif type(raw) is list and len(raw) == 1:
                entry = fast_allocated_entry(raw[0])
            if entry is not None and batch.took_entry(record, entry, cpu):
                count += 1
                events_applied += 1
                continue
            events = decode_events(record)
        except Exception:
            # Without batches, the batched records were applied before this failure, and
            # one that does not fit was refused first: keep that order of errors.
            batch.flush(sections)
            raise
        if not batch.took(record, events, sections.get(CPU_SECTION)):
            batch.flush(sections)
            _apply_record(sections, record, events)
        count += 1
        events_applied += len(events)
    batch.flush(sections)
    if not count:
        return state, 0, 0
    return State(immutables.Map(sections)), count, events_applied


def section_from_checkpoint(
    payload: Any, name: str, seq: int, topology: CPUTopology | None = None
) -> object:
    """One section of a checkpoint payload, decoded by its owner's codec.

    A section's re-run needs only its section: the balance and CPU pressure sections decode
    without the topology (their decoders ignore it), so ``topology`` may be None for them.

    Args:
        payload: the checkpoint's state payload.
        name: the section (``policy.state.sections``' names).
        seq: the seq the checkpoint covers (for the error message).
        topology: the node's topology, for a section whose values name CPUs.

    Returns:
        The section's value; its empty value when the checkpoint was written before the
        section existed and the section has one.

    Raises:
        ReplayError: the checkpoint holds no such section (and it has no empty value), or it
            does not decode.
    """
    codec = SECTION_CODECS[name]
    sections = payload.get("sections") if isinstance(payload, dict) else None
    if not isinstance(sections, dict) or name not in sections:
        if codec.empty is not None:
            return codec.empty()
        raise ReplayError(seq, f"the checkpoint at seq {seq} holds no {name} section")
    try:
        return codec.decode_section(sections[name], topology)  # type: ignore[arg-type]
    except StateError as err:
        raise ReplayError(
            seq, f"the {name} section of the checkpoint at seq {seq} cannot be decoded: {err}"
        ) from err


def apply_section_events(value: object, name: str, events: Iterable[Event]) -> object:
    """``value`` (section ``name``) after the events of that section; others pass by.

    Raises:
        StateError: an event does not fit the section.
    """
    apply = SECTION_APPLY[name]
    for event in events:
        if event.section == name:
            value = apply(value, event)
    return value


def _apply_record(
    sections: dict[str, object], record: JournaledEvents, events: list[Event]
) -> None:
    try:
        apply_to_sections(sections, events)
    except StateError as err:
        raise ReplayError(
            record.seq,
            f"record {record.seq} does not fit the state rebuilt before it: {err}. "
            f"Run `qrmd journal verify` on the journal directory",
        ) from err


class _NewEntries:
    """Consecutive records that only allocate containers not in the state yet, applied at once.

    Most of a journal is such records (one Allocate, one ``ContainerAllocated``), and
    ``cpu_apply.allocate_all`` gives the state those events give one by one at a fraction
    of the cost (the pod map mutated once, the indexes built once; a hypothesis property
    holds the two together). Any other record first flushes the batch, so every event still
    meets the state in journal order. Should a batched entry not fit, the batch is applied
    again record by record from the state before it, which refuses with the very error,
    naming the very record, that replaying without batches gives.
    """

    def __init__(self) -> None:
        self._entries: list[ContainerEntry] = []
        self._keys: set[tuple[str, str]] = set()
        # Each record with its events, or None for one taken by took_entry (decoded again,
        # the same way, only should the batch not fit).
        self._records: list[tuple[JournaledEvents, list[Event] | None]] = []

    def took_entry(self, record: JournaledEvents, entry: ContainerEntry, cpu: object) -> bool:
        """Whether ``record``, whose one event allocates ``entry``, joined the batch: as
        ``took(record, [ContainerAllocated(entry)], cpu)``."""
        key = (entry.pod_uid, entry.container_name)
        if key in self._keys or not isinstance(cpu, CPUState):
            return False
        # cpu.entry(*key), without its calls: most batched entries are a new pod's.
        containers = cpu.pods.get(key[0])
        if containers is not None and key[1] in containers:
            return False
        self._keys.add(key)
        self._entries.append(entry)
        self._records.append((record, None))
        return True

    def took_allocations(
        self, record: JournaledEvents, remaining: Iterator[JournaledEvents], cpu: CPUState
    ) -> tuple[int, JournaledEvents | None]:
        """``took_entry`` for ``record``, whose events are a :class:`LoneAllocation`, then for
        each record of ``remaining`` after it that is one too, in one loop: a journal is mostly
        runs of them.

        Returns:
            How many records joined the batch, and the record read after them that did not
            (None at the end of ``remaining``); ``(0, None)`` when ``record`` itself did not.
        """
        keys, entries, batched = self._keys, self._entries, self._records
        pods = cpu.pods
        taken = 0
        while True:
            entry = record.events[0]
            pod_uid, name = entry.pod_uid, entry.container_name
            key = (pod_uid, name)
            if key in keys:
                break
            containers = pods.get(pod_uid)
            if containers is not None and name in containers:
                break
            keys.add(key)
            entries.append(entry)
            batched.append((record, None))
            taken += 1
            following = next(remaining, None)
            if following is None or type(following.events) is not LoneAllocation:
                return taken, following
            record = following
        return taken, record if taken else None

    def took(self, record: JournaledEvents, events: list[Event], cpu: object) -> bool:
        """Whether ``record`` joined the batch: every event allocates a container that
        neither ``cpu`` (the CPU section before the batch) nor the batch holds."""
        if not events or not isinstance(cpu, CPUState):
            return False
        keys = []
        for event in events:
            if type(event) is not ContainerAllocated:
                return False
            entry = event.entry
            key = (entry.pod_uid, entry.container_name)
            if key in self._keys or key in keys or cpu.entry(*key) is not None:
                return False
            keys.append(key)
        self._keys.update(keys)
        self._entries.extend(e.entry for e in events if isinstance(e, ContainerAllocated))
        self._records.append((record, events))
        return True

    def flush(self, sections: dict[str, object]) -> None:
        """Apply the batch to ``sections`` and empty it.

        Raises:
            ReplayError: a batched record does not fit (its seq and the plain path's message).
        """
        if not self._records:
            return
        cpu = sections[CPU_SECTION]
        assert isinstance(cpu, CPUState)  # took() batched nothing otherwise
        try:
            sections[CPU_SECTION] = allocate_all(cpu, self._entries)
        except StateError as err:
            for record, events in self._records:
                _apply_record(sections, record, decode_events(record) if events is None else events)
            # Unreachable: allocate_all refuses only what the events refuse.
            first = self._records[0][0].seq
            raise ReplayError(first, f"records from {first} do not fit: {err}") from err
        finally:
            self._entries, self._keys, self._records = [], set(), []


class StateReplayer:
    """The whole state, as the journal walk rebuilds it (``journal.walk.Replayer``): the
    StateStore's decode and apply, for the node's topology."""

    def __init__(self, topology: CPUTopology) -> None:
        self.topology = topology

    def empty(self) -> State:
        """Every section empty."""
        return empty_state(self.topology)

    def from_checkpoint(self, payload: Any, seq: int) -> State:
        """A checkpoint's state (:func:`state_from_checkpoint`)."""
        return state_from_checkpoint(payload, seq, self.topology)

    def apply(self, state: State, records: Sequence[JournaledEvents]) -> State:
        """The state after ``records`` (:func:`replay_records`)."""
        return replay_records(state, records)[0]


class SectionReplayer:
    """One owner's section alone (``journal.walk.Replayer``): a balance round or a CPU
    pressure decision is re-run on its own section, which decodes without the topology.

    Events of other sections pass by, but every event is decoded: a record that does not
    decode refuses the walk as it would the StateStore's recovery.
    """

    def __init__(self, name: str, topology: CPUTopology | None = None) -> None:
        if name not in SECTION_CODECS:
            raise ValueError(f"no state section {name!r}; sections: {sorted(SECTION_CODECS)}")
        self.name = name
        self.topology = topology

    def empty(self) -> object:
        """The section before record 1."""
        codec = SECTION_CODECS[self.name]
        if codec.empty is not None:
            return codec.empty()
        if self.name == BALANCE_SECTION:
            return BalancerState()
        if self.topology is None:
            raise ValueError(f"the empty {self.name} section needs the topology")
        return empty_state(self.topology).section(self.name)

    def from_checkpoint(self, payload: Any, seq: int) -> object:
        """The section a checkpoint holds (:func:`section_from_checkpoint`)."""
        return section_from_checkpoint(payload, self.name, seq, self.topology)

    def apply(self, value: object, records: Sequence[JournaledEvents]) -> object:
        """The section after ``records``' events of it.

        Raises:
            ReplayError: a record does not decode, or its events do not fit the section.
        """
        for record in records:
            events = decode_events(record)
            try:
                value = apply_section_events(value, self.name, events)
            except StateError as err:
                raise ReplayError(
                    record.seq,
                    f"record {record.seq} does not fit the {self.name} section rebuilt before "
                    f"it: {err}. Run `qrmd journal verify` on the journal directory",
                ) from err
        return value
