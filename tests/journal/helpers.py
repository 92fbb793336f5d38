"""Test doubles at the journal's edges (clock and file system) and small builders.

The fakes implement the same interfaces as the real seams (STYLE.md, Tests): ``FakeClock`` is a
``journal.Clock`` that tests ``advance()``; ``FaultyFileOps`` is the real ``OsFileOps`` with
failures injected on demand.
"""

from __future__ import annotations

import errno
import os
from collections import Counter
from pathlib import Path
from typing import Any

from journal import Journal, Recovery
from journal.fileops import OsFileOps
from journal.segments import list_segments, scan_segment

NODE = "node-a"
TOPOLOGY = "synthetic:cpus=16,sockets=2,numas=4"


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, wall: float = 1_700_000_000.0, mono: float = 500.0) -> None:
        self.wall = wall
        self.mono = mono

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


class FaultyFileOps(OsFileOps):
    """Real files; the next N calls of an operation fail with EIO when ``fail(op, N)`` asks.

    ``partial_write_bytes`` makes a failing write first write that many bytes (a disk that
    filled up mid-record). ``fsync_cost_s`` advances ``clock`` on every fsync (a slow disk).
    """

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.pending: Counter[str] = Counter()
        self.partial_write_bytes = 0
        self.fsync_cost_s = 0.0
        self.clock = clock
        self.calls: Counter[str] = Counter()

    def fail(self, op: str, times: int = 1) -> None:
        self.pending[op] += times

    def _maybe_fail(self, op: str) -> None:
        self.calls[op] += 1
        if self.pending[op] > 0:
            self.pending[op] -= 1
            raise OSError(errno.EIO, f"injected {op} failure")

    def write(self, fd: int, data: bytes) -> int:
        if self.pending["write"] and self.partial_write_bytes:
            os.write(fd, data[: self.partial_write_bytes])
        self._maybe_fail("write")
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        if self.clock is not None:
            self.clock.advance(self.fsync_cost_s)
        self._maybe_fail("fsync")
        super().fsync(fd)

    def fsync_dir(self, directory: str) -> None:
        self._maybe_fail("fsync_dir")
        super().fsync_dir(directory)

    def truncate(self, fd: int, length: int) -> None:
        self._maybe_fail("truncate")
        super().truncate(fd, length)

    def rename(self, src: str, dst: str) -> None:
        self._maybe_fail("rename")
        super().rename(src, dst)

    def open_append(self, path: str, *, create: bool) -> int:
        self._maybe_fail("open_append")
        return super().open_append(path, create=create)


def open_journal(directory: Path, **settings: Any) -> tuple[Journal, Recovery]:
    """Open with the test node's identity, a fake clock and no fsync unless told otherwise."""
    settings.setdefault("node_name", NODE)
    settings.setdefault("topology_fingerprint", TOPOLOGY)
    settings.setdefault("durability", "none")
    settings.setdefault("clock", FakeClock())
    return Journal.open(str(directory), **settings)


def cause_of(n: int) -> dict[str, Any]:
    """The cause recorded for the n-th test commit: an RPC as received."""
    return {"rpc": "Allocate", "pod_uid": f"pod-{n}", "container": "main", "request": n * 100}


def events_of(n: int) -> list[Any]:
    """The events of the n-th test commit (their count varies, so records differ in size)."""
    return [
        {"kind": "container_allocated", "pod": f"pod-{n}", "cpus": [n % 16, k]}
        for k in range(n % 3 + 1)
    ]


def write_records(directory: Path, count: int, **settings: Any) -> None:
    """Append commits 1..count to a journal (opened and closed here)."""
    journal, _ = open_journal(directory, **settings)
    with journal:
        for n in range(1, count + 1):
            assert journal.append(cause_of(n), events_of(n)) == n


def assert_holds_exactly(recovered: list[Any], first: int, last: int) -> None:
    """The records are commits first..last, in order, with their exact causes and events."""
    assert [r.seq for r in recovered] == list(range(first, last + 1))
    for record in recovered:
        assert record.cause == cause_of(record.seq)
        assert record.events == events_of(record.seq)


def newest_segment(directory: Path) -> Path:
    return Path(list_segments(OsFileOps(), str(directory))[-1][1])


def record_offsets(segment: Path) -> list[int]:
    """Frame offsets of the records in one (undamaged) segment."""
    return scan_segment(segment.read_bytes(), str(segment)).offsets


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file's name and content, to prove a read-only call changed nothing."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name != "journal.lock"}
