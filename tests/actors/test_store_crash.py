"""Crash test with real processes through the StateStore (DESIGN.md, the commit protocol:
nothing acknowledged is lost).

A writer process (``store_crash_writer.py``) commits CPU events through ``StateStoreCore``
with durability ``always`` and prints each acknowledged seq; it is killed with SIGKILL at a
random moment, at least 50 times. After each kill the recovered store must hold every
acknowledged commit and at most the one in flight, and its state must be exactly the state
those commits build (no record half-applied), whichever checkpoint it started from.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actors.state_store import StateStoreCore
from journal import read_records
from policy.state.codec import encode_event
from tests.actors import store_crash_writer as writer

WRITER = Path(writer.__file__)
REPO = WRITER.parents[2]
KILLS = 50


def run_and_kill(directory: Path, rng: random.Random) -> tuple[int | None, list[int]]:
    """Start a writer, SIGKILL it at a random moment; return its start seq and its acks."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(directory)], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    head = b""
    if rng.random() < 0.15:
        time.sleep(rng.uniform(0.0, 0.5))  # may land during start-up and recovery
    else:
        head = proc.stdout.readline()
        time.sleep(rng.uniform(0.0, 0.12))
    proc.kill()
    rest, _ = proc.communicate()
    assert proc.returncode == -9, f"writer exited by itself ({proc.returncode})"
    lines = (head + rest).decode().splitlines()
    if not lines:
        return None, []
    assert lines[0].startswith("start ")
    return int(lines[0].split()[1]), [int(line) for line in lines[1:]]


def check_after_kill(directory: Path, acknowledged: int) -> int:
    """Recover through the store; returns the recovered seq."""
    store = StateStoreCore.open(writer.config(str(directory)), writer.TOPO)
    store.close(checkpoint=False)
    recovered = store.snapshot.seq
    # Every acknowledged commit is there; at most one more was in flight when the kill came.
    assert acknowledged <= recovered <= acknowledged + 1
    assert store.snapshot.state == writer.expected_state(recovered)
    return recovered


@pytest.mark.slow
def test_sigkill_never_loses_an_acknowledged_commit(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    directory = tmp_path / "journal"
    recovered = 0
    kills_after_acks = 0
    for _ in range(KILLS):
        start, acks = run_and_kill(directory, rng)
        if start is not None:
            assert start == recovered  # the writer continues from what recovery found
            assert acks == list(range(start + 1, start + 1 + len(acks)))
        if acks:
            kills_after_acks += 1
        recovered = check_after_kill(directory, acks[-1] if acks else recovered)
    assert kills_after_acks >= KILLS // 2
    history = list(read_records(str(directory)))
    assert [r.seq for r in history] == list(range(1, recovered + 1))
    for record in history:
        assert record.events == [encode_event(e) for e in writer.events_of(record.seq)]
        assert record.cause == writer.cause_of(record.seq)
