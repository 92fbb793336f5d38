"""Rebuild the state from what the journal holds: a checkpoint's state plus the records after it.

The rule (DESIGN.md, Journal): replaying needs no policy code and is deterministic.
A checkpoint's payload is decoded with the state codec for this node's topology (or the state
is empty when there is none); every later record's events are decoded and applied in seq
order, all of a record or none of it. A record that cannot be decoded or whose events do not
fit the state is never skipped: ``ReplayError`` names its seq and says what to do, because
skipping it would rebuild a state that was never acknowledged.

The StateStore recovers with these functions, and ``qrmd journal verify`` uses the same ones
to check that replay from empty equals the newest checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import immutables

from actors.errors import ActorError
from journal import Record
from journal.recovery import collector_paused
from policy.errors import ErrorKind, StateError
from policy.state.codec import decode_event, decode_state
from policy.state.events import Event
from policy.state.sections import State, apply_to_sections, empty_state
from policy.topology.model import CPUTopology

__all__ = ["ReplayError", "decode_events", "replay_records", "state_from_checkpoint"]


class ReplayError(ActorError):
    """The journal holds a checkpoint or record the state model cannot take back.

    Attributes:
        seq: the record's seq or the checkpoint's seq.
    """

    kind = ErrorKind.INTERNAL

    def __init__(self, seq: int, message: str) -> None:
        super().__init__(message)
        self.seq = seq


def decode_events(record: Record) -> list[Event]:
    """The events of one record, decoded.

    Raises:
        ReplayError: an event is malformed; names the record's seq and the event's position.
    """
    events = []
    for position, raw in enumerate(record.events):
        try:
            events.append(decode_event(raw))
        except StateError as err:
            raise ReplayError(
                record.seq, f"record {record.seq}, event {position} cannot be decoded: {err}"
            ) from err
    return events


def state_from_checkpoint(payload: Any, seq: int | None, topology: CPUTopology) -> State:
    """The state a checkpoint payload holds, or the empty state when there is no checkpoint.

    Args:
        payload: the checkpoint's state payload (``Recovery.checkpoint_state``), or None.
        seq: the seq the checkpoint covers (for the error message), or None.
        topology: this node's topology; the checkpoint must have been written for it.

    Returns:
        The decoded state, its indexes rebuilt.

    Raises:
        ReplayError: the payload is not a state of this schema and topology.
    """
    if payload is None:
        return empty_state(topology)
    try:
        with collector_paused():  # a checkpoint is thousands of entries (collector_paused)
            return decode_state(payload, topology)
    except StateError as err:
        raise ReplayError(
            seq or 0,
            f"checkpoint at seq {seq} cannot be decoded: {err}. Run `qrmd journal verify` "
            f"on the journal directory",
        ) from err


def replay_records(state: State, records: Iterable[Record]) -> tuple[State, int, int]:
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
    # Every state rebuilt on the way is kept alive by the records and the next state: with
    # the collector running, its collections walked all of them again and again, which took
    # longer than the replay itself (journal.recovery.collector_paused, the why).
    with collector_paused():
        for record in records:
            events = decode_events(record)
            try:
                apply_to_sections(sections, events)
            except StateError as err:
                raise ReplayError(
                    record.seq,
                    f"record {record.seq} does not fit the state rebuilt before it: {err}. "
                    f"Run `qrmd journal verify` on the journal directory",
                ) from err
            count += 1
            events_applied += len(events)
    if not count:
        return state, 0, 0
    return State(immutables.Map(sections)), count, events_applied
