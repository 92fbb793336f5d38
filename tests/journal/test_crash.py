"""Crash test with real processes: SIGKILL at random moments never loses an acknowledged record.

A writer process (``crash_writer.py``) commits in a loop with durability ``always`` and prints
each acknowledged seq; it is killed with SIGKILL at a random moment, at least 50 times. After
each kill recovery must hold every acknowledged seq, in order, with the right payloads and all
of each record's events (nothing half-applied), at most the one record that was in flight when
the kill came, and the next writer must continue from the recovered seq.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from journal import Journal, read_records
from tests.journal import crash_writer as writer

WRITER = Path(writer.__file__)
REPO = WRITER.parents[2]
KILLS = 50


def run_and_kill(directory: Path, rng: random.Random) -> tuple[int | None, list[int]]:
    """Start a writer and SIGKILL it at a random moment; return its start seq and its acks.

    One kill in five lands at a random time after the spawn, which can be during start-up and
    recovery; the others land at a random time after the writer started committing.
    """
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(directory)], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    head = b""
    if rng.random() < 0.2:
        time.sleep(rng.uniform(0.0, 0.4))
    else:
        head = proc.stdout.readline()
        time.sleep(rng.uniform(0.0, 0.15))
    proc.kill()
    rest, _ = proc.communicate()
    assert proc.returncode == -9, f"writer exited by itself ({proc.returncode})"
    lines = (head + rest).decode().splitlines()
    if not lines:
        return None, []  # killed before the journal was open
    assert lines[0].startswith("start ")
    return int(lines[0].split()[1]), [int(line) for line in lines[1:]]


def check_after_kill(directory: Path, acknowledged: int) -> int:
    """Recover; every acknowledged record must be there, whole. Returns the recovered seq."""
    journal, recovery = Journal.open(
        str(directory), node_name=writer.NODE, topology_fingerprint=writer.TOPOLOGY
    )
    journal.close()
    # At most one record was in flight: written (maybe fsynced) but not yet reported.
    assert acknowledged <= recovery.last_seq <= acknowledged + 1
    start = (recovery.checkpoint_seq or 0) + 1
    assert [r.seq for r in recovery.records] == list(range(start, recovery.last_seq + 1))
    for record in recovery.records:
        assert record.cause == writer.cause_of(record.seq)
        assert record.events == writer.events_of(record.seq)
    if recovery.checkpoint_seq is not None:
        assert recovery.checkpoint_state == writer.expected_state(recovery.checkpoint_seq)
    assert writer.recovered_state(recovery) == writer.expected_state(recovery.last_seq)
    return recovery.last_seq


@pytest.mark.slow
def test_sigkill_never_loses_an_acknowledged_record(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    directory = tmp_path / "journal"
    recovered = 0
    acknowledged = 0
    kills_after_acks = 0
    for _ in range(KILLS):
        start, acks = run_and_kill(directory, rng)
        if start is not None:
            assert start == recovered  # the writer continues from what recovery found
            assert acks == list(range(start + 1, start + 1 + len(acks)))
        if acks:
            acknowledged = acks[-1]
            kills_after_acks += 1
        recovered = check_after_kill(directory, max(acknowledged, recovered))
        acknowledged = recovered
    # The kills landed while commits were flowing, not only during start-up.
    assert kills_after_acks >= KILLS // 2
    history = list(read_records(str(directory)))
    assert [r.seq for r in history] == list(range(1, recovered + 1))
    assert all(r.events == writer.events_of(r.seq) for r in history)
