"""The disk model (qrmd.sim.dst.storage): written versus synced bytes and names, what a crash
and a power loss keep, and the faults the seed arms."""

from __future__ import annotations

import errno
from collections.abc import Callable
from random import Random

import pytest

from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.runtime import SimCrash
from qrmd.sim.dst.storage import SimDisk, SimFileOps

D = "/j"
F = "/j/seg"


def disk(seed: int = 0) -> tuple[SimDisk, SimFileOps]:
    d = SimDisk(Random(seed), VirtualClock())
    fs = SimFileOps(d)
    fs.makedirs(D)
    return d, fs


def durable_file(fs: SimFileOps, data: bytes) -> int:
    """A file created, written, fsynced, and its name fsynced."""
    fd = fs.open_append(F, create=True)
    fs.write(fd, data)
    fs.fsync(fd)
    fs.fsync_dir(D)
    return fd


def unsynced_append(fs: SimFileOps) -> None:
    fs.write(durable_file(fs, b"abc"), b"def")


def unsynced_truncate(fs: SimFileOps) -> None:
    fs.truncate(durable_file(fs, b"abcdef"), 3)


def synced_truncate(fs: SimFileOps) -> None:
    fd = durable_file(fs, b"abcdef")
    fs.truncate(fd, 3)
    fs.fsync(fd)


def unsynced_name(fs: SimFileOps) -> None:
    fd = fs.open_append(F, create=True)
    fs.write(fd, b"abc")
    fs.fsync(fd)


def unsynced_rename(fs: SimFileOps) -> None:
    durable_file(fs, b"abc")
    fs.rename(F, F + ".new")


@pytest.mark.parametrize(
    ("damage", "after_crash", "after_power_loss"),
    [
        pytest.param(
            unsynced_append,
            {F: b"abcdef"},
            {F: (b"abc", b"abcdef")},
            id="an unsynced append survives a crash and may survive a power loss torn",
        ),
        pytest.param(
            unsynced_truncate,
            {F: b"abc"},
            {F: (b"abcdef",)},
            id="an unsynced truncation is undone by a power loss",
        ),
        pytest.param(
            synced_truncate,
            {F: b"abc"},
            {F: (b"abc",)},
            id="a synced truncation survives a power loss",
        ),
        pytest.param(
            unsynced_name,
            {F: b"abc"},
            {},
            id="a file whose name was never synced is gone after a power loss",
        ),
        pytest.param(
            unsynced_rename,
            {F + ".new": b"abc"},
            {F: (b"abc",)},
            id="an unsynced rename is undone by a power loss",
        ),
    ],
)
def test_what_a_crash_and_a_power_loss_keep(
    damage: Callable[[SimFileOps], None],
    after_crash: dict[str, bytes],
    after_power_loss: dict[str, tuple[bytes, ...]],
) -> None:
    for seed in range(8):
        d, fs = disk(seed)
        damage(fs)
        crashed = SimFileOps(d)  # a new process: the page cache survived
        assert {
            f"{D}/{n}": crashed.read_file(f"{D}/{n}") for n in crashed.listdir(D)
        } == after_crash
        d.power_loss()
        after = SimFileOps(d)
        kept = {f"{D}/{n}": after.read_file(f"{D}/{n}") for n in after.listdir(D)}
        assert set(kept) == set(after_power_loss)
        for path, content in kept.items():
            low, *high = after_power_loss[path]
            # A torn tail keeps a prefix of the unsynced bytes: between the synced and written.
            assert content.startswith(low) and (high[0] if high else low).startswith(content)


def test_a_full_disk_writes_a_prefix_then_refuses() -> None:
    d, fs = disk()
    fd = fs.open_append(F, create=True)
    d.faults.full = True
    written = []
    with pytest.raises(OSError) as err:
        for _ in range(50):
            written.append(fs.write(fd, b"x" * 100))
    assert err.value.errno == errno.ENOSPC and all(0 < n <= 100 for n in written)
    assert sum(written) < 512


def test_an_fsync_error_is_eio_and_a_slow_fsync_costs_virtual_time() -> None:
    d, fs = disk()
    fd = fs.open_append(F, create=True)
    d.faults.slow_fsync_s = 12.0
    fs.fsync(fd)
    assert d.clock.monotonic() >= 12.0
    d.faults.fsync_eio_p = 1.0
    with pytest.raises(OSError) as err:
        fs.fsync(fd)
    assert err.value.errno == errno.EIO


def test_an_armed_crash_fires_inside_the_nth_disk_operation() -> None:
    d, fs = disk()
    fd = fs.open_append(F, create=True)
    d.faults.crash_in_ops = 2
    fs.write(fd, b"a")
    fs.write(fd, b"b")
    with pytest.raises(SimCrash):
        fs.fsync(fd)
    assert d.faults.crash_in_ops is None and fs.read_file(F) == b"ab"


def test_the_lock_is_per_process_and_released_by_its_death() -> None:
    d, fs = disk()
    fs.lock(D)
    with pytest.raises(BlockingIOError):
        fs.lock(D)
    SimFileOps(d).lock(D)  # a new process after a crash
