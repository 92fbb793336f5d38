"""A journal that fails to open, or fails to close, leaves no descriptor open (journal.writer).

``Journal.open`` takes the directory's lock and opens (or creates) the newest segment, then
fsyncs it and the directory and applies retention. Whatever step fails, what it had opened is
closed before the error goes on: a leaked segment descriptor is a leaked file, and a leaked
lock keeps this very process's next attempt (the Supervisor restarting the StateStore) out of
its own directory. The failures are injected through ``FileOps``, which also counts the
descriptors: every one ``open_append`` or ``lock`` handed out must be closed again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from journal import Journal, JournalWriteError
from journal.records import SegmentHeader
from journal.segments import create_segment
from journal.syncer import Syncer
from tests.journal.helpers import (
    NODE,
    TOPOLOGY,
    FakeClock,
    FaultyFileOps,
    cause_of,
    events_of,
    open_journal,
    write_records,
)


class Interrupted(BaseException):
    """Not an ``OSError`` (nor an ``Exception``): a failure the old paths did not close on."""


class CountingFileOps(FaultyFileOps):
    """``FaultyFileOps`` that knows which descriptors are open, and can fail the n-th call of an
    operation (``fail_call``) with an ``OSError`` or with ``raising``."""

    def __init__(self) -> None:
        super().__init__(FakeClock())
        self.open_fds: set[int] = set()
        self.nth: dict[str, tuple[int, BaseException]] = {}
        self.seen: Counter[str] = Counter()
        self.failing_close: set[int] = set()

    def fail_call(self, op: str, nth: int, raising: BaseException | None = None) -> None:
        """Fail the ``nth`` call of ``op`` from now on (1: the next one)."""
        self.nth[op] = (self.seen[op] + nth, raising or OSError(5, f"injected {op} failure"))

    def _count(self, op: str) -> None:
        self.seen[op] += 1
        planned = self.nth.get(op)
        if planned is not None and planned[0] == self.seen[op]:
            del self.nth[op]
            raise planned[1]

    def open_append(self, path: str, *, create: bool) -> int:
        fd = super().open_append(path, create=create)
        self.open_fds.add(fd)
        return fd

    def lock(self, path: str) -> int:
        fd = super().lock(path)
        self.open_fds.add(fd)
        return fd

    def close(self, fd: int) -> None:
        self.open_fds.discard(fd)
        super().close(fd)  # close(2) releases the descriptor even when it reports an error
        if fd in self.failing_close:
            raise OSError(5, "injected close failure")

    def write(self, fd: int, data: bytes) -> int:
        self._count("write")
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self._count("fsync")
        super().fsync(fd)

    def fsync_dir(self, directory: str) -> None:
        self._count("fsync_dir")
        super().fsync_dir(directory)

    def rename(self, src: str, dst: str) -> None:
        self._count("rename")
        super().rename(src, dst)

    def restrict_to_owner(self, directory: str) -> int | None:
        self._count("restrict_to_owner")
        return super().restrict_to_owner(directory)

    def listdir(self, directory: str) -> list[str]:
        self._count("listdir")
        return super().listdir(directory)


def _open(directory: Path, fs: CountingFileOps) -> Journal:
    journal, _ = open_journal(directory, fs=fs, durability="always")
    return journal


def _existing(directory: Path) -> None:
    write_records(directory, 3)


def _empty(directory: Path) -> None:
    del directory  # the journal directory is created by the open


@pytest.mark.parametrize(
    ("prepare", "fail"),
    [
        pytest.param(
            _existing,
            lambda fs: fs.fail_call("fsync", 1),
            id="the fsync of the reopened newest segment fails",
        ),
        pytest.param(
            _existing,
            lambda fs: fs.fail_call("fsync_dir", 1),
            id="the directory fsync after reopening the newest segment fails",
        ),
        pytest.param(
            _existing,
            lambda fs: fs.fail_call("restrict_to_owner", 1, Interrupted()),
            id="taking the lock is interrupted by something other than an OSError",
        ),
        pytest.param(
            _empty,
            lambda fs: fs.fail_call("write", 1),
            id="writing the first segment's header fails",
        ),
        pytest.param(
            _empty,
            lambda fs: fs.fail_call("write", 1, Interrupted()),
            id="writing the first segment's header is interrupted",
        ),
        pytest.param(
            _empty,
            lambda fs: fs.fail_call("fsync_dir", 2),
            id="the directory fsync after creating the first segment fails",
        ),
        pytest.param(
            _empty,
            lambda fs: fs.fail_call("fsync_dir", 2, Interrupted()),
            id="the directory fsync after creating the first segment is interrupted",
        ),
    ],
)
def test_a_failed_open_closes_what_it_opened(
    tmp_path: Path,
    prepare: Callable[[Path], None],
    fail: Callable[[CountingFileOps], None],
) -> None:
    directory = tmp_path / "journal"
    prepare(directory)
    fs = CountingFileOps()
    fail(fs)
    with pytest.raises((OSError, Interrupted)):
        _open(directory, fs)
    assert fs.open_fds == set()
    assert not fs.nth, "the injected failure was never reached"
    # The lock went with them: this process opens the directory again at once.
    again = CountingFileOps()
    _open(directory, again).close()
    assert again.open_fds == set()


def test_a_failed_retention_pass_at_open_closes_the_segment_and_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _existing(tmp_path)
    fs = CountingFileOps()

    def broken_retention(*_: object) -> list[str]:
        raise RuntimeError("a bug in retention")

    monkeypatch.setattr("journal.writer.apply_retention", broken_retention)
    with pytest.raises(RuntimeError, match="a bug in retention"):
        _open(tmp_path, fs)
    assert fs.open_fds == set()


def test_a_failed_segment_close_still_releases_the_lock(tmp_path: Path) -> None:
    fs = CountingFileOps()
    journal = _open(tmp_path, fs)
    journal.append(cause_of(1), events_of(1))
    segment_fd = journal._fd
    assert segment_fd is not None
    fs.failing_close.add(segment_fd)
    with pytest.raises(OSError, match="injected close failure"):
        journal.close()
    assert fs.open_fds == set()
    journal.close()  # a second close does nothing, and raises nothing
    reopened, recovery = open_journal(tmp_path, fs=CountingFileOps())
    with reopened:
        assert recovery.last_seq == 1


@pytest.mark.parametrize(
    ("fail", "raises"),
    [
        pytest.param(lambda fs: fs.fail_call("write", 1), OSError, id="its header write fails"),
        pytest.param(lambda fs: fs.fail_call("fsync", 1), OSError, id="its header fsync fails"),
        pytest.param(lambda fs: fs.fail_call("rename", 1), OSError, id="its rename fails"),
        pytest.param(
            lambda fs: fs.fail_call("fsync_dir", 1),
            OSError,
            id="its directory fsync fails (and it is taken back)",
        ),
        pytest.param(
            lambda fs: fs.fail_call("write", 1, Interrupted()),
            Interrupted,
            id="its header write is interrupted",
        ),
        pytest.param(
            lambda fs: fs.fail_call("fsync_dir", 1, Interrupted()),
            Interrupted,
            id="its directory fsync is interrupted",
        ),
    ],
)
def test_a_segment_that_cannot_be_created_is_not_left_open(
    tmp_path: Path, fail: Callable[[CountingFileOps], None], raises: type[BaseException]
) -> None:
    fs = CountingFileOps()
    fail(fs)
    syncer = Syncer(fs, FakeClock(), enabled=True)
    header = SegmentHeader(NODE, TOPOLOGY, 1, 0.0)
    with pytest.raises(raises):
        create_segment(fs, syncer, str(tmp_path), header)
    assert fs.open_fds == set()


def test_a_rotation_that_fails_keeps_only_the_previous_segment_open(tmp_path: Path) -> None:
    fs = CountingFileOps()
    journal, _ = open_journal(tmp_path, fs=fs, durability="always", segment_max_bytes=1024)
    with journal:
        first_segment = journal._fd
        fs.fail("rename")  # only a rotation renames: creating the next segment fails
        with pytest.raises(JournalWriteError, match="could not be started"):
            for n in range(1, 100):
                journal.append(cause_of(n), events_of(n))
        assert fs.open_fds == {first_segment, journal._lock_fd}
    assert fs.open_fds == set()
