"""A group commit whose next record starts a new segment (DESIGN.md "Journal", the commit
protocol): a group never spans segments, so the journal makes the group's records so far
durable before it rotates. When the rotation or the new record's write then fails, those
records are on disk, and the store publishes them: the state it answers from must be the one
the next start replays, never one that lags it (found by the simulation with group commit at
the plugin socket).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.state_store import StateStoreCore
from actors.store_messages import CommitRefused
from tests.actors.store_helpers import cause, open_store, share_pool, shared_container
from tests.journal.helpers import FakeClock, FaultyFileOps

#: A segment that holds the start record and one allocation (300 and 880 bytes), not two.
SEGMENT = 1200


def store_on(directory: Path, fs: FaultyFileOps) -> StateStoreCore:
    return open_store(
        directory,
        durability="always",
        fs=fs,
        clock=FakeClock(),
        segment_max_bytes=SEGMENT,
        checkpoint_every_records=1000,
    )


@pytest.mark.parametrize(
    "failing",
    [
        pytest.param("write", id="the new segment cannot be written"),
        pytest.param("fsync_dir", id="the new segment's directory entry cannot be synced"),
    ],
)
def test_a_group_synced_before_a_failed_rotation_is_published_as_the_disk_holds_it(
    tmp_path: Path, failing: str
) -> None:
    fs = FaultyFileOps()
    store = store_on(tmp_path, fs)
    store.commit([share_pool()], cause("Start"))
    with store.group():
        written = store.write([shared_container("pod-a")], cause("Allocate", "pod-a", "app"))
        fs.fail(failing)
        with pytest.raises(CommitRefused):
            store.write([shared_container("pod-b")], cause("Allocate", "pod-b", "app"))
    # The first record went to disk with the rotation's sync: it is the published state.
    assert store.snapshot == written
    assert store.status.last_seq == written.seq
    store.close(checkpoint=False)
    recovered = store_on(tmp_path, FaultyFileOps())
    assert recovered.snapshot == written
    recovered.close()


@pytest.mark.parametrize(
    "ending",
    [
        pytest.param("sync", id="the group's own sync fails"),
        pytest.param("abandon", id="the group ends without its sync"),
    ],
)
def test_a_group_that_rotated_keeps_what_the_rotation_synced_however_it_ends(
    tmp_path: Path, ending: str
) -> None:
    fs = FaultyFileOps()
    store = store_on(tmp_path, fs)
    store.commit([share_pool()], cause("Start"))
    with pytest.raises(CommitRefused if ending == "sync" else RuntimeError), store.group():
        store.write([shared_container("pod-a")], cause("Allocate", "pod-a", "app"))
        # Each starts a new segment: the records before it are synced first.
        written = store.write([shared_container("pod-b")], cause("Allocate", "pod-b", "app"))
        store.write([shared_container("pod-c")], cause("Allocate", "pod-c", "app"))
        if ending == "sync":
            fs.fail("fsync")
            store.sync()
        raise RuntimeError("the writer gave up before its sync")
    assert store.snapshot == written
    store.close(checkpoint=False)
    recovered = store_on(tmp_path, FaultyFileOps())
    assert recovered.snapshot == written
    recovered.close()


def test_a_group_whose_sync_before_the_rotation_fails_is_cut_back_whole(tmp_path: Path) -> None:
    fs = FaultyFileOps()
    store = store_on(tmp_path, fs)
    started = store.commit([share_pool()], cause("Start"))
    with store.group():
        store.write([shared_container("pod-a")], cause("Allocate", "pod-a", "app"))
        fs.fail("fsync")
        with pytest.raises(CommitRefused):
            store.write([shared_container("pod-b")], cause("Allocate", "pod-b", "app"))
    assert store.snapshot == started
    store.close(checkpoint=False)
    recovered = store_on(tmp_path, FaultyFileOps())
    assert recovered.snapshot == started
    recovered.close()
