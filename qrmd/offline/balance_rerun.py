"""A journaled balance round, found and re-computed (``qrmd balance plan --from-journal DIR
--seq N``; memory-balancer §6.2; DESIGN.md "any decision can be re-run from the journal alone").

The round of record N is re-run on the balance section as it stood after record N - 1:

1. on the one journal walk (``journal.walk``) with the balance section's replayer
   (``policy.state.replay.SectionReplayer``): the section starts from the newest checkpoint
   at or before N - 1 whose following records are kept (only its ``balance`` section is
   read, so no topology is needed), or empty when record 1 is kept and none is;
2. the balance events of every record up to N - 1 are applied to it (``apply_balance_event``,
   the same update the StateStore's replay applies);
3. record N's events are decoded and re-run with ``policy.balance.rerun.rerun_round``: today's
   policy code on the journaled inputs. The round matches when the re-run's events equal the
   record's (a summary of coalesced rounds carried over, ``policy.balance.coalesce``).

Reading is lock-free and read-only: a copy of a node's journal, or the live one, will do.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from journal import JournalError, read_records
from journal.walk import NoStart, find_start, replay_to, span
from policy.balance import BalanceError, BalancerState, RoundInputs
from policy.balance.decide import RoundReply
from policy.balance.events import BALANCE_SECTION
from policy.balance.rerun import journaled_round, rerun_round, round_inputs_of
from policy.decision import Decision, Event
from policy.errors import StateError
from policy.state.codec import decode_event, encode_event
from policy.state.replay import ReplayError, SectionReplayer

__all__ = ["JournaledRoundRerun", "rerun_journaled_round"]


@dataclass(frozen=True, slots=True)
class JournaledRoundRerun:
    """A journaled round and its re-computation.

    Attributes:
        seq: the record's seq.
        inputs: the round's inputs, decoded.
        journaled: the record's events.
        again: the re-run's decision.
    """

    seq: int
    inputs: RoundInputs
    journaled: tuple[Event, ...]
    again: Decision[RoundReply]

    @property
    def matches(self) -> bool:
        """The re-run decided exactly what the journal holds."""
        return self.again.events == self.journaled

    def document(self) -> dict[str, Any]:
        """``{"seq", "matches", "journaled", "recomputed"}``, events in the journal's form."""
        return {
            "seq": self.seq,
            "matches": self.matches,
            "journaled": [encode_event(e) for e in self.journaled],
            "recomputed": [encode_event(e) for e in self.again.events],
        }


def rerun_journaled_round(directory: str, seq: int) -> JournaledRoundRerun:
    """Re-run the round record ``seq`` of the journal in ``directory`` holds.

    Args:
        directory: a journal directory (a copy is fine).
        seq: the record's seq.

    Returns:
        The round and its re-run.

    Raises:
        ValueError: no record ``seq``; the record is not a balance round; the round failed
            before its inputs were read; the journal cannot be read (the message names the
            directory, the record or the checkpoint).
    """
    if seq < 1:
        raise ValueError(f"--seq {seq}: a record's seq is 1 or more")
    replayer = SectionReplayer(BALANCE_SECTION)
    first_seq = None
    try:
        first = span(directory, whole=False).first
        first_seq = None if first is None else first.seq
        start = find_start(
            directory, replayer, first_seq, at_most=seq - 1, skip=(JournalError, ReplayError)
        )
        section, _ = replay_to(directory, replayer, start, seq - 1)
        record = next(iter(read_records(directory, from_seq=seq, to_seq=seq)), None)
        found = None if record is None else tuple(decode_event(raw) for raw in record.events)
    except NoStart:
        raise ValueError(
            f"{directory}: records before seq {first_seq} are gone and no checkpoint before "
            f"seq {seq} covers them"
        ) from None
    except JournalError as err:
        raise ValueError(f"{directory}: {err}") from None
    except (StateError, ReplayError) as err:  # a record that does not decode or fit
        raise ValueError(f"{directory}: {err}") from None
    if found is None:
        raise ValueError(f"{directory}: no record with seq {seq}")
    assert isinstance(section, BalancerState)
    where = f"record {seq}"
    if journaled_round(found) is None:
        counts = Counter(type(e).__name__ for e in found)
        kinds = ", ".join(k if n == 1 else f"{k} ×{n}" for k, n in counts.items()) or "no events"
        raise ValueError(f"{where} is not a balance round ({kinds})")
    try:
        inputs = round_inputs_of(found, where)
        again = rerun_round(section, found, where)
    except BalanceError as err:
        raise ValueError(str(err)) from None
    assert inputs is not None and again is not None  # a round record, checked above
    return JournaledRoundRerun(seq, inputs, found, again)
