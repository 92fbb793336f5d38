"""The state store's health while the journal refuses commits (actors.store_refusals): unhealthy
with the reason from the first refused commit, healthy again after the next successful write —
a commit, a checkpoint, or on an idle node the checkpoint tick's probe write.

Faults through the ``FileOps`` seam (``FaultyFileOps``: the next N writes fail with EIO); the
real full disk is in ``tests/integration/test_qrmd_run_full_disk.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from actors.state_store import StateStoreCore
from actors.store_messages import CommitOutcomeUnknown, CommitRefused
from actors.store_refusals import PROBE_FILE
from policy.state.events import PoolRemoved
from tests.actors.store_helpers import cause, open_store, share_pool
from tests.journal.helpers import FakeClock, FaultyFileOps

SINCE = "2023-11-14T22:13:20Z"  # the FakeClock's wall time


@pytest.fixture
def fs() -> FaultyFileOps:
    return FaultyFileOps()


@pytest.fixture
def store(tmp_path: Path, fs: FaultyFileOps) -> StateStoreCore:
    core = open_store(tmp_path, fs=fs, clock=FakeClock(), checkpoint_every_records=1000)
    core.commit([share_pool()], cause("Start"))
    return core


def refuse(store: StateStoreCore, fs: FaultyFileOps) -> None:
    fs.fail("write")
    with pytest.raises(CommitRefused):
        store.commit([share_pool("6-15")], cause("Allocate", "pod-a", "app"))


def test_a_commit_the_journal_refused_makes_the_store_unhealthy_with_the_reason(
    store: StateStoreCore, fs: FaultyFileOps
) -> None:
    assert store.status.health.healthy
    refuse(store, fs)
    reason = store.status.health.reason
    assert reason is not None and reason.startswith(
        f"state store refuses commits: 1 commit refused in a row since {SINCE}, the last: "
        "record 2 was not journaled ([Errno 5] injected write failure)"
    )
    refuse(store, fs)
    assert store.status.health.reason is not None
    assert store.status.health.reason.startswith(
        f"state store refuses commits: 2 commits refused in a row since {SINCE}"
    )


def test_the_first_refusal_warns_the_next_ones_do_not_and_the_end_is_said(
    store: StateStoreCore, fs: FaultyFileOps, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="actors.state_store"):
        refuse(store, fs)
        refuse(store, fs)
        store.commit([share_pool("6-15")], cause("Allocate", "pod-a", "app"))
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in lines] == ["WARNING", "INFO"]
    assert lines[0][1].startswith("state store unhealthy, the journal refused a commit: record 2")
    assert lines[1][1] == "state store healthy again: record 2 written after 2 refused commits"


def test_the_next_successful_commit_makes_it_healthy_again(
    store: StateStoreCore, fs: FaultyFileOps
) -> None:
    refuse(store, fs)
    store.commit([share_pool("6-15")], cause("Allocate", "pod-a", "app"))
    assert store.status.health.healthy


def test_on_an_idle_node_the_tick_probes_and_health_comes_back_without_a_commit(
    store: StateStoreCore, fs: FaultyFileOps, tmp_path: Path
) -> None:
    refuse(store, fs)
    seq = store.snapshot.seq
    fs.fail("write", 2)  # the disk is still full for two more writes
    for _ in range(2):
        assert store.checkpoint_if_due() is None
        assert not store.status.health.healthy
    store.checkpoint_if_due()  # the third probe fits
    assert store.status.health.healthy
    assert store.snapshot.seq == seq  # nothing was committed
    assert not (tmp_path / PROBE_FILE).exists()


def test_a_healthy_tick_makes_no_probe_write(store: StateStoreCore, fs: FaultyFileOps) -> None:
    writes = fs.calls["write"]
    store.checkpoint_if_due()
    assert fs.calls["write"] == writes


def test_a_refusal_that_is_not_the_disk_s_leaves_the_store_healthy(
    store: StateStoreCore,
) -> None:
    with pytest.raises(CommitRefused, match="nothing was written"):
        store.commit([PoolRemoved("no-such-pool")], cause("RemovePod", "pod-z"))
    assert store.status.health.healthy


def test_a_journal_that_could_not_cut_back_stays_unhealthy_whatever_the_probe_says(
    store: StateStoreCore, fs: FaultyFileOps
) -> None:
    fs.fail("write")
    fs.fail("truncate")
    with pytest.raises(CommitOutcomeUnknown):
        store.commit([share_pool("6-15")], cause("Allocate", "pod-a", "app"))
    store.checkpoint_if_due()
    reason = store.status.health.reason
    assert reason is not None and reason.startswith("state store refuses commits: ")
    assert "in a row" not in reason  # the failure's reason, not an episode's
