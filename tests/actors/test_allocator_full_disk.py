"""kubelet's reconcile keeps working when the disk refuses the ramp-up it would settle
(cpu-policy §10.1; DESIGN.md, the commit protocol step 3).

GetResourcesAllocation commits the ramp-ups that ended (and re-stamps bad timestamps). When
that commit is refused, the call answers from the durable state as it is — the containers
stay ramping — and the next call tries again. Through an in-memory committer that refuses,
and through the real StateStore on a small tmpfs the test fills (a real ENOSPC).
"""

from __future__ import annotations

import errno
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.allocator import AllocatorCore
from actors.allocator_messages import (
    Allocate,
    AllocatorUnavailable,
    GetResourcesAllocation,
    StartPolicy,
)
from actors.state_store import StateStoreCore, StoreConfig
from actors.store_messages import Snapshot
from policy.state.events import Event
from tests.actors.fakes import FakeClock
from tests.actors.test_allocator import CTX, T0, Node
from tests.mounts import small_tmpfs
from tests.policy.decision_fixtures import request
from tests.topologies import SYNTH_16_2_4

RAMPING = "1,3-15"
POOLED = "1,3-6,9,11-14"  # §9.10: pod-a's pool once its ramp-up ended


def ramped_node() -> Node:
    """A started node with pod-a ramping, its transition period passed."""
    node = Node()
    node.core.handle(Allocate(request("pod-a", cpu=2)))
    node.clock.advance(31)
    return node


def test_a_refused_ramp_up_commit_answers_from_the_state_as_it_is() -> None:
    node = ramped_node()
    before = node.core.snapshot
    node.store.refuse_next("No space left on device")
    listing = node.core.handle(GetResourcesAllocation())
    assert str(listing.pod_resources["pod-a"]["app"].allocation_result) == RAMPING
    assert node.core.snapshot is before  # nothing settled
    entry = node.core.snapshot.state.cpu.require_entry("pod-a", "app")
    assert entry.ramp_up  # still ramping


def test_the_next_reconcile_settles_the_ramp_up_the_refused_one_left() -> None:
    node = ramped_node()
    node.store.refuse_next("No space left on device")
    node.core.handle(GetResourcesAllocation())
    assert node.listed("pod-a") == RAMPING  # this call commits the ramp-up's end
    assert node.pools()["share"] == POOLED
    assert node.listed("pod-a") == POOLED
    assert node.store.replayed() == node.core.snapshot.state


def test_refused_reconciles_warn_once_and_say_when_they_settle_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = ramped_node()
    with caplog.at_level(logging.INFO, logger="actors.allocator"):
        for _ in range(3):
            node.store.refuse_next("No space left on device")
            node.core.handle(GetResourcesAllocation())
        node.core.handle(GetResourcesAllocation())
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert lines == [
        (
            "WARNING",
            "GetResourcesAllocation: 5 events not committed, answering from the state as it "
            "is (ramp-ups stay pending until a commit succeeds): No space left on device",
        ),
        ("INFO", "GetResourcesAllocation: settled again, the commit succeeded"),
    ]


def test_a_reconcile_whose_commit_goes_unanswered_is_still_unavailable() -> None:
    """No answer: the record may be on disk, so the held state is not known to be durable."""
    node = ramped_node()
    node.store.apply_next_silently()
    with pytest.raises(AllocatorUnavailable, match="unconfirmed"):
        node.core.handle(GetResourcesAllocation())


def test_an_allocate_on_a_refusing_disk_is_still_unavailable() -> None:
    node = Node()
    node.store.refuse_next("No space left on device")
    with pytest.raises(AllocatorUnavailable, match="No space left on device"):
        node.core.handle(Allocate(request("pod-a", cpu=2)))


# -- a real full disk ---------------------------------------------------------------------------

DISK_BYTES = 1 << 20


@pytest.fixture
def disk() -> Iterator[Path]:
    with (
        tempfile.TemporaryDirectory(dir="/tmp", prefix="qd") as root,
        small_tmpfs(Path(root) / "disk", DISK_BYTES) as mounted,
    ):
        yield mounted


def fill(disk: Path) -> Path:
    """Grow a ballast file until ENOSPC (again: a failed append that was cut back may have
    given a page back)."""
    ballast = disk / "ballast"
    chunk = b"\0" * (16 << 10)
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, chunk)
    except OSError as err:
        assert err.errno == errno.ENOSPC, err
    finally:
        os.close(fd)
    # Single bytes too: not even a short record fits.
    fd = os.open(ballast, os.O_WRONLY | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0")
    except OSError as err:
        assert err.errno == errno.ENOSPC, err
    finally:
        os.close(fd)
    return ballast


#: Pods ramping when the disk fills: the record that ends their ramp-up (~1.4 kB) is larger
#: than an Allocate's (~0.9 kB), so once an Allocate does not fit, it does not either.
RAMPING_PODS = tuple(f"pod-{c}" for c in "abcdef")


def fill_the_segment_s_last_page(allocator: AllocatorCore, disk: Path) -> int:
    """Allocate pods until the disk refuses one (a tmpfs file has room up to the end of its
    last page, so the first records after ENOSPC may still fit); returns the refusals."""
    for i in range(200):
        try:
            allocator.handle(Allocate(request(f"pod-filler-{i}", cpu=1)))
        except AllocatorUnavailable as err:
            assert "No space left on device" in str(err), err
            fill(disk)
            return 1
    raise AssertionError("the full disk took 200 records")


class StoreCommitter:
    """The real StateStoreCore as a ``Committer``, called on this thread."""

    def __init__(self, core: StateStoreCore) -> None:
        self.core = core

    def commit(self, events: tuple[Event, ...], cause: object) -> Snapshot:
        return self.core.commit(events, cause)  # type: ignore[arg-type]

    def latest(self) -> Snapshot:
        return self.core.snapshot


def test_on_a_full_disk_kubelet_s_reconcile_answers_and_settles_once_space_is_freed(
    disk: Path,
) -> None:
    config = StoreConfig(str(disk / "state"), "node-a", checkpoint_every_records=1000)
    core = StateStoreCore.open(config, SYNTH_16_2_4)
    try:
        clock = FakeClock(T0)
        allocator = AllocatorCore(core.snapshot, CTX, StoreCommitter(core), clock.time)
        allocator.handle(StartPolicy())
        for pod in RAMPING_PODS:
            allocator.handle(Allocate(request(pod, cpu=1)))
        ballast = fill(disk)
        filled = fill_the_segment_s_last_page(allocator, disk)
        clock.advance(31)
        seq = core.snapshot.seq
        for _ in range(3):  # kubelet's reconcile, every few seconds
            listing = allocator.handle(GetResourcesAllocation())
            assert str(listing.pod_resources["pod-a"]["app"].allocation_result) == RAMPING
        assert core.snapshot.seq == seq and core.status.commit_failures_total == filled + 3
        ballast.unlink()
        # The first reconcile after it commits the ramp-up's end (its reply is §15.6's
        # pre-adjustment cpuset) ...
        listing = allocator.handle(GetResourcesAllocation())
        assert str(listing.pod_resources["pod-a"]["app"].allocation_result) == RAMPING
        assert core.snapshot.seq == seq + 1
        # ... and the next one lists the pool.
        listing = allocator.handle(GetResourcesAllocation())
        share = allocator.snapshot.state.cpu.pools["share"]
        assert str(listing.pod_resources["pod-a"]["app"].allocation_result) == str(share)
    finally:
        core.close()
