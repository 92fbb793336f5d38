"""A journaled balance round read back, to be re-run (memory-balancer §6.2; DESIGN.md, "any
decision can be re-run from the journal alone").

A round's journal record holds one round event, ``BalanceRoundRecorded`` or
``BalanceRoundFailed``, whose ``inputs`` is the round's ``RoundInputs.to_json()``: everything
the round read (metrics, distances, pools and pods with their memory, configuration, CPU
vendor, the last emitted round and the time). The inputs live in the event, not a second time
in the record's cause (``{"command": "Tick", "now"}``): a round every five seconds would
otherwise journal them twice. ``round_inputs_of`` decodes them, and
``policy.balance.decide.balance_round`` on the balance section as it was before the record
gives the same events and reply; ``rerun_round`` does both.

A round that ended a stretch of coalesced rounds (``policy.balance.coalesce``) shares its record
with their summary, ``BalanceRoundsCoalesced``: what the live balancer counted of rounds it did
not journal, data rather than a decision. A re-run carries it over as journaled, before the
round's own events, so that a record's events and its re-run compare whole.

A "taken" record (``BalanceAdviceTaken``, ``BalanceEvictionTaken``) keeps its request as the
record's cause (``AdviceRequest.to_cause``, ``EvictionRequest.to_cause``, plus what was handed
out); ``request_of`` reads it back, and ``rerun_record`` re-runs any balancer record.

A round whose inputs could not be read (``decide.unreadable_round``: a port failed) journaled
only its time and reason: there is nothing to re-run, and that is said in so many words.

Nothing here reads a file: the caller (``qrmd``'s journal commands) reads the records and
decodes their events with the state codec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from policy.balance.columns import JournaledInputs
from policy.balance.decide import (
    AdviceRequest,
    EvictionRequest,
    RoundReply,
    balance_round,
    get_advices,
    get_evict_pods,
)
from policy.balance.decode import as_float, as_list, as_object, as_str, required
from policy.balance.errors import BalanceError
from policy.balance.events import (
    BalanceAdviceTaken,
    BalanceEvictionTaken,
    BalanceRoundFailed,
    BalanceRoundRecorded,
    BalanceRoundsCoalesced,
)
from policy.balance.gojson import format_time
from policy.balance.inputs import PlainInputs, RoundInputs
from policy.balance.section import BalancerState
from policy.decision import Decision, Event

__all__ = ["journaled_round", "request_of", "rerun_record", "rerun_round", "round_inputs_of"]

#: A round event, the one a round's record holds.
RoundEvent = BalanceRoundRecorded | BalanceRoundFailed


def journaled_round(events: Sequence[Event]) -> RoundEvent | None:
    """The round event of a record's decoded events; None when the record is not a round's.

    Raises:
        BalanceError: the record holds more than one round event (no decision writes that).
    """
    rounds = [e for e in events if isinstance(e, BalanceRoundRecorded | BalanceRoundFailed)]
    if len(rounds) > 1:
        kinds = [type(e).__name__ for e in rounds]
        raise BalanceError(f"a record holds {len(rounds)} balance rounds {kinds}, not one")
    return rounds[0] if rounds else None


def round_inputs_of(events: Sequence[Event], where: str = "record") -> RoundInputs | None:
    """The inputs of the round a record journaled, decoded.

    Args:
        events: the record's events, decoded (``policy.state.codec.decode_event``).
        where: how to name the record in an error (``"record 17"``).

    Returns:
        The round's inputs; None when the record is not a round's.

    Raises:
        BalanceError: the round failed before its inputs were read (nothing to re-run), or
            its inputs are malformed; the message names the record and the field.
    """
    event = journaled_round(events)
    if event is None:
        return None
    # ``unreadable_round`` journals the time and nothing else: all that round read.
    if isinstance(event, BalanceRoundFailed) and set(event.inputs) <= {"now"}:
        now = event.inputs.get("now")
        when = format_time(now) if isinstance(now, int | float) else repr(now)
        raise BalanceError(
            f"{where}: the balance round at {when} failed before its inputs were read "
            f"({event.error}); there is nothing to re-run"
        )
    return RoundInputs.from_json(event.inputs, f"{where}.inputs")


def rerun_round(
    section_before: BalancerState, events: Sequence[Event], where: str = "record"
) -> Decision[RoundReply] | None:
    """Re-run the round a record journaled, on the balance section as it was before it.

    Args:
        section_before: the balance section replayed up to the record before this one.
        events: the record's events, decoded.
        where: how to name the record in an error.

    Returns:
        The round's decision again (its events equal the record's when the journal is the
        live one, a summary of coalesced rounds carried over first); None when the record is
        not a round's.

    Raises:
        BalanceError: as ``round_inputs_of``, or the inputs' last emitted round is not the
            section's (``section_before`` is not the state the round was decided on).
    """
    inputs = round_inputs_of(events, where)
    if inputs is None:
        return None
    again = _in_the_journaled_form(balance_round(section_before, inputs), journaled_round(events))
    summaries = tuple(e for e in events if isinstance(e, BalanceRoundsCoalesced))
    if not summaries:
        return again
    return replace(again, events=(*summaries, *again.events))


def _in_the_journaled_form(
    again: Decision[RoundReply], journaled: RoundEvent | None
) -> Decision[RoundReply]:
    """The re-run's round event holding its inputs in the form the journaled one holds them.

    A live round journals its pods as columns (``policy.balance.codec``); a journal written
    before them holds the pod maps. Re-run from such a journal, the round's event carries its
    inputs as those maps (``to_json``), so that it encodes as the record does and a re-run
    compares like for like with what the journal holds.
    """
    if journaled is None or isinstance(journaled.inputs, JournaledInputs):
        return again
    events = tuple(
        replace(e, inputs=e.inputs.packable())
        if isinstance(e, BalanceRoundRecorded | BalanceRoundFailed)
        and isinstance(e.inputs, PlainInputs)
        else e
        for e in again.events
    )
    return replace(again, events=events)


def request_of(
    cause: Mapping[str, Any], events: Sequence[Event], where: str = "record"
) -> AdviceRequest | EvictionRequest | None:
    """The request a "taken" record was decided on, from its cause.

    Args:
        cause: the record's cause.
        events: the record's events, decoded.
        where: how to name the record in an error.

    Returns:
        The ``GetAdvices`` request of a record holding ``BalanceAdviceTaken``, the
        ``GetEvictPods`` one of a record holding ``BalanceEvictionTaken``; None otherwise.

    Raises:
        BalanceError: the cause lacks a field or holds a wrong one (named with its path).
    """
    at = f"{where}.cause"
    obj = as_object(cause, at)
    if any(isinstance(e, BalanceAdviceTaken) for e in events):
        command = as_str(required(obj, "command", at), f"{at}.command")
        if command not in ("Tick", "GetAdvices"):
            raise BalanceError(
                f"{at}.command: an advice is taken by Tick or GetAdvices, not {command!r}"
            )
        now = as_float(required(obj, "now", at), f"{at}.now")
        return AdviceRequest(now, from_tick=command == "Tick")
    if any(isinstance(e, BalanceEvictionTaken) for e in events):
        uids = as_list(required(obj, "active_pod_uids", at), f"{at}.active_pod_uids")
        active = tuple(as_str(u, f"{at}.active_pod_uids[{i}]") for i, u in enumerate(uids))
        return EvictionRequest(active, as_float(required(obj, "now", at), f"{at}.now"))
    return None


def rerun_record(
    section_before: BalancerState,
    cause: Mapping[str, Any],
    events: Sequence[Event],
    where: str = "record",
) -> Decision[Any] | None:
    """Re-run whichever balancer decision a record journaled: a round, or a "taken" step.

    Args:
        section_before: the balance section replayed up to the record before this one.
        cause: the record's cause.
        events: the record's events, decoded.
        where: how to name the record in an error.

    Returns:
        The decision again; None when the record is none of the balancer's.

    Raises:
        BalanceError: as ``round_inputs_of`` and ``request_of``.
    """
    again = rerun_round(section_before, events, where)
    if again is not None:
        return again
    request = request_of(cause, events, where)
    if isinstance(request, AdviceRequest):
        return get_advices(section_before, request)
    if isinstance(request, EvictionRequest):
        return get_evict_pods(section_before, request)
    return None
