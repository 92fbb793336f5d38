"""Stateful property: whatever mix of appends, failed appends, checkpoints, torn tails and
restarts, reopening the journal yields exactly the acknowledged records (DESIGN.md, Journal:
for every durability setting, with injected write/fsync failures)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from journal import Journal, JournalWriteError, Retention, verify
from tests.journal.helpers import FakeClock, FaultyFileOps, newest_segment, open_journal


def state_after(records: list[tuple[dict[str, Any], list[Any]]]) -> dict[str, int]:
    """A stand-in for the state codec: what applying the records to an empty state gives."""
    return {"count": len(records), "total": sum(c["n"] for c, _ in records)}


class JournalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="journal-stateful-"))
        self.clock = FakeClock()
        self.fs = FaultyFileOps(self.clock)
        self.acked: list[tuple[dict[str, Any], list[Any]]] = []
        self.durability = "none"
        self.journal: Journal | None = None

    def _open(self) -> None:
        self.journal, recovery = open_journal(
            self.directory,
            durability=self.durability,
            fs=self.fs,
            clock=self.clock,
            segment_max_bytes=1024,
            checkpoint_every_records=5,
            retention=Retention(max_bytes=0, max_age_s=None),
        )
        # Checkpoint + the records after it == every acknowledged record, in order.
        start = recovery.checkpoint_seq or 0
        if recovery.checkpoint_seq is not None:
            assert recovery.checkpoint_state == state_after(self.acked[:start])
        assert [r.seq for r in recovery.records] == list(range(start + 1, len(self.acked) + 1))
        assert [(r.cause, r.events) for r in recovery.records] == self.acked[start:]

    @initialize(durability=st.sampled_from(["always", "none"]))
    def start(self, durability: str) -> None:
        self.durability = durability
        self._open()

    @rule(n=st.integers(0, 10**6), events=st.integers(0, 4))
    def append(self, n: int, events: int) -> None:
        assert self.journal is not None
        cause = {"rpc": "Allocate", "n": n}
        body = [
            {"kind": "container_allocated", "k": k, "pad": "x" * (n % 200)} for k in range(events)
        ]
        assert self.journal.append(cause, body) == len(self.acked) + 1
        self.acked.append((cause, body))

    @rule(op=st.sampled_from(["write", "fsync"]), partial=st.integers(0, 60))
    def failed_append(self, op: str, partial: int) -> None:
        assert self.journal is not None
        if op == "fsync" and self.durability == "none":
            op = "write"  # durability none never fsyncs a record
        self.fs.partial_write_bytes = partial
        self.fs.fail(op)
        with pytest.raises(JournalWriteError):
            self.journal.append({"rpc": "never-acknowledged", "n": -1}, [{"lost": True}])
        self.fs.pending.clear()
        self.fs.partial_write_bytes = 0

    @precondition(lambda self: self.journal is not None and self.journal.checkpoint_due())
    @rule()
    def checkpoint(self) -> None:
        assert self.journal is not None
        seq = len(self.acked)
        self.journal.write_checkpoint(seq, state_after(self.acked))

    @rule(seconds=st.floats(0, 600))
    def time_passes(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def restart(self) -> None:
        assert self.journal is not None
        self.journal.close()
        assert verify(str(self.directory)).ok
        self._open()

    @rule(garbage=st.binary(min_size=1, max_size=40))
    def crash_mid_write(self, garbage: bytes) -> None:
        """The process dies while writing a record: part of a frame is left at the end."""
        assert self.journal is not None
        self.journal.close()
        with newest_segment(self.directory).open("ab") as handle:
            handle.write(garbage)
        self._open()

    @invariant()
    def acknowledged_count_matches(self) -> None:
        if self.journal is not None:
            assert self.journal.healthy and self.journal.last_seq == len(self.acked)

    def teardown(self) -> None:
        if self.journal is not None:
            self.journal.close()
        shutil.rmtree(self.directory, ignore_errors=True)


JournalMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
test_journal_recovers_exactly_the_acknowledged_records = JournalMachine.TestCase
