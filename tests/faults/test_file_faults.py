"""EIO and short writes through the ``FileOps`` seam, under a stream of commits (the fault
suite; DESIGN.md, the commit protocol, step 3).

Each schedule fails some writes (some after writing part of the frame: a disk that filled up
mid-record), fsyncs or truncations of the StateStore's journal while commits go on. A refused
commit changes nothing; a failed cut-back leaves that commit's outcome unknown (it may be
replayed) and makes the store refuse every later commit (unhealthy with the reason). After a
restart on the real file system the store holds every acknowledged commit, no refused one,
and nothing else but the commits whose outcome was unknown.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from actors.store_messages import CommitOutcomeUnknown, CommitRefused
from tests.actors.store_helpers import open_store, share_pool, shared_container
from tests.faults.ledger import Ledger
from tests.journal.helpers import FaultyFileOps

COMMITS = 150


def durable_pods(directory: Path) -> set[str]:
    store = open_store(directory)
    try:
        return {entry.pod_uid for entry in store.snapshot.state.cpu.entries()}
    finally:
        store.close(checkpoint=False)


@pytest.mark.parametrize(
    ("seed", "ops", "partial"),
    [
        pytest.param(1, ("write",), 0, id="EIO on writes"),
        pytest.param(2, ("write",), 37, id="short writes: part of a frame, then EIO"),
        pytest.param(3, ("fsync",), 0, id="EIO on fsyncs after the write"),
        pytest.param(4, ("write", "fsync"), 11, id="short writes and failed fsyncs mixed"),
    ],
)
def test_io_faults_lose_nothing_acknowledged_and_add_nothing_refused(
    tmp_path: Path, seed: int, ops: tuple[str, ...], partial: int
) -> None:
    rng = random.Random(seed)
    fs = FaultyFileOps()
    fs.partial_write_bytes = partial
    store = open_store(tmp_path, durability="always", fs=fs, checkpoint_every_records=40)
    ledger = Ledger()
    store.commit([share_pool()], {"rpc": "Start", "request": {}})
    for n in range(COMMITS):
        if rng.random() < 0.2:
            fs.fail(rng.choice(ops), rng.choice((1, 1, 2)))
        pod = f"pod-{n}"
        try:
            store.commit([shared_container(pod)], {"rpc": "Allocate", "request": {"pod": pod}})
        except CommitRefused as err:  # StoreUnavailable too, once the store refuses all
            ledger.refuse(pod, str(err))
        except CommitOutcomeUnknown as err:
            # Two faults in a row failed the cut-back's fsync too: this record may stay, and
            # the store refuses every later commit (reported unhealthy) until a restart.
            ledger.doubt(pod, str(err))
        else:
            ledger.ack(pod)
    fs.pending.clear()
    store.close(checkpoint=False)
    assert ledger.refused and ledger.acknowledged, "the schedule must exercise both outcomes"
    ledger.check(durable_pods(tmp_path))


@pytest.mark.parametrize(
    ("fault", "partial", "replayed"),
    [
        pytest.param("write", 20, False, id="a partial frame stays: a torn tail at the restart"),
        pytest.param("fsync", 0, True, id="a whole record stays: replayed at the restart"),
    ],
)
def test_a_failed_cut_back_refuses_every_later_commit_and_loses_nothing(
    tmp_path: Path, fault: str, partial: int, replayed: bool
) -> None:
    fs = FaultyFileOps()
    store = open_store(tmp_path, durability="always", fs=fs)
    ledger = Ledger()
    store.commit([share_pool()], {"rpc": "Start", "request": {}})
    for n in range(20):
        pod = f"pod-{n}"
        if n == 12:
            fs.partial_write_bytes = partial
            fs.fail(fault)
            fs.fail("truncate")  # the cut-back fails too: the tail keeps what was written
        try:
            store.commit([shared_container(pod)], {"rpc": "Allocate", "request": {"pod": pod}})
        except CommitRefused as err:
            ledger.refuse(pod, str(err))
        except CommitOutcomeUnknown as err:
            ledger.doubt(pod, str(err))
        else:
            ledger.ack(pod)
    health = store.status.health
    assert not health.healthy and "could not be cut" in (health.reason or "")
    assert ledger.acknowledged == {f"pod-{n}" for n in range(12)}
    assert ledger.in_doubt == {"pod-12"}  # never told "refused": it may come back
    store.close(checkpoint=False)
    durable = durable_pods(tmp_path)
    ledger.check(durable)
    assert ("pod-12" in durable) is replayed
