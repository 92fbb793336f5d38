"""Move a process's anonymous pages between NUMA nodes with ``move_pages(2)``, in batches that
each take about 20 ms (a deviation from memory-balancer §11; a deviation from memory-balancer §11).

The reference of §11 moves a process with one ``migrate_pages(2)`` call, which holds the
process's memory map for the whole move: Katalyst saw this block workloads "for minutes" and
moved to ``move_pages(2)`` in adaptive batches (katalyst-core #477 and its follow-ups). qrmd
does the same, with its own rules:

1. **Where the pages are.** ``/proc/PID/numa_maps`` lists every mapping with its page counts
   per node; only anonymous mappings (``anon=``) with pages on the source node (``N<src>=``)
   are visited, their extent read from ``/proc/PID/maps``. Within a mapping, the pages are
   asked where they are (``move_pages`` with no target nodes: a status per page) and only
   those on the source node are moved, so nothing elsewhere is disturbed; a mapping is left
   once as many source pages as ``numa_maps`` counted have been seen.
2. **Bounded batches.** Each ``move_pages`` call covers one batch of addresses, so the kernel
   holds the process's memory only that long. The batch starts at :data:`FIRST_BATCH_PAGES`
   and adapts after every batch toward :data:`TARGET_BATCH_S` (20 ms): the next size is the
   number of pages the last batch's rate would fit in the target (pages asked × target /
   elapsed), at most double or half the current size, within [:data:`MIN_BATCH_PAGES`,
   :data:`MAX_BATCH_PAGES`]. Measuring a rate rather than a time keeps a mapping's short last
   batch from swinging the size.
3. **Stop when it no longer pays.** Between two batches the caller's ``keep_going`` is asked
   (the executor re-checks the advice's 0.7 threshold on the cgroup's ``memory.numa_stat``):
   once it says no, the move stops, leaving the rest where it is.

Time is read from an injected monotonic clock; the system call is behind the ``MovePages``
seam (``syscall_move_pages`` is the real one, through libc's ``syscall``), and ``/proc`` is a
root directory that tests point at a tree of their own.
"""

from __future__ import annotations

import ctypes
import errno
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from qrmd.host.migrate_pages import libc_syscall

__all__ = [
    "FIRST_BATCH_PAGES",
    "MAX_BATCH_PAGES",
    "MIN_BATCH_PAGES",
    "SYS_MOVE_PAGES",
    "TARGET_BATCH_S",
    "AnonRange",
    "BatchMover",
    "MovePages",
    "MoveReport",
    "anon_ranges",
    "syscall_move_pages",
]

#: ``__NR_move_pages`` by ``platform.machine()``: x86_64's table and the generic one (arm64).
SYS_MOVE_PAGES: Final[Mapping[str, int]] = {"x86_64": 279, "amd64": 279, "aarch64": 239}
#: ``MPOL_MF_MOVE``: move only pages mapped by this process alone (not shared ones).
MPOL_MF_MOVE: Final = 1 << 1

#: The time one batch should take (the figure Katalyst settled on).
TARGET_BATCH_S = 0.020
#: Small, so the first batch (before anything is measured) is short even on a slow machine.
FIRST_BATCH_PAGES = 64
MIN_BATCH_PAGES = 16
#: 64 MiB of 4 KiB pages: a bound even on a fast machine, so one call never holds long.
MAX_BATCH_PAGES = 16_384

#: ``(pid, page addresses, target nodes or None to ask where they are) -> status per page``:
#: a node number, or a negative errno (``-ENOENT``: not present, ``-EFAULT``: not mapped).
#: Raises ``OSError`` for a failure of the whole call (ESRCH: the process exited; EPERM).
MovePages = Callable[[int, Sequence[int], Sequence[int] | None], list[int]]


def syscall_move_pages(machine: str | None = None) -> MovePages:
    """The real ``move_pages(2)``, through libc's ``syscall``.

    Args:
        machine: the architecture (default ``platform.machine()``).

    Returns:
        The call.

    Raises:
        OSError: no syscall number is known for the architecture.
    """
    syscall, number = libc_syscall("move_pages", SYS_MOVE_PAGES, machine)

    def move(pid: int, pages: Sequence[int], nodes: Sequence[int] | None) -> list[int]:
        count = len(pages)
        if count == 0:
            return []
        addresses = (ctypes.c_void_p * count)(*pages)
        targets = None if nodes is None else (ctypes.c_int * count)(*nodes)
        status = (ctypes.c_int * count)()
        ctypes.set_errno(0)
        result = syscall(
            ctypes.c_long(number),
            ctypes.c_long(pid),
            ctypes.c_ulong(count),
            addresses,
            targets,
            status,
            ctypes.c_int(MPOL_MF_MOVE),
        )
        if result < 0:
            code = ctypes.get_errno()
            name = errno.errorcode.get(code, str(code))
            raise OSError(
                code, f"move_pages(pid={pid}, {count} pages): {name}: {os.strerror(code)}"
            )
        return list(status)

    return move


@dataclass(frozen=True, slots=True)
class AnonRange:
    """An anonymous mapping of a process with pages on the source node.

    Attributes:
        start: its first address.
        end: the address just past it.
        page_size: bytes per page (``kernelpagesize_kB``).
        on_source: pages ``numa_maps`` counted on the source node.
    """

    start: int
    end: int
    page_size: int
    on_source: int


def anon_ranges(pid: int, source_numa: int, proc_root: Path = Path("/proc")) -> list[AnonRange]:
    """The anonymous mappings of ``pid`` with pages on ``source_numa`` (rule 1).

    Args:
        pid: the process.
        source_numa: the node pages are moved from.
        proc_root: where ``/proc`` is (tests use a tree of their own).

    Returns:
        The mappings in address order.

    Raises:
        OSError: ``numa_maps`` or ``maps`` cannot be read (ENOENT: the process exited).
    """
    extents = {}
    for line in (proc_root / str(pid) / "maps").read_text().splitlines():
        span = line.split(maxsplit=1)[0] if line else ""
        if "-" in span:
            low, high = span.split("-", 1)
            extents[int(low, 16)] = int(high, 16)
    node_key = f"N{source_numa}"
    found = []
    for line in (proc_root / str(pid) / "numa_maps").read_text().splitlines():
        fields = line.split()
        if not fields or not any(f.startswith("anon=") for f in fields):
            continue
        counts = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
        on_source = int(counts.get(node_key, "0"))
        start = int(fields[0], 16)
        if on_source <= 0 or start not in extents:
            continue
        page_size = int(counts.get("kernelpagesize_kB", "4")) * 1024
        found.append(AnonRange(start, extents[start], page_size, on_source))
    return sorted(found, key=lambda r: r.start)


@dataclass(slots=True)
class MoveReport:
    """What moving one process did.

    Attributes:
        pid: the process.
        bytes_moved: bytes now on the destination that were on the source.
        pages_failed: source pages the kernel would not move (busy, shared, no memory).
        batches: ``move_pages`` batches made (each a query and, if needed, a move).
        longest_batch_s: the longest batch, in seconds.
        stopped_early: ``keep_going`` said no before every source page was visited.
        error: why the process could not be moved (not permitted, exited), or "".
        gone: the process exited before or while it was moved (nothing left to move).
    """

    pid: int
    bytes_moved: int = 0
    pages_failed: int = 0
    batches: int = 0
    longest_batch_s: float = 0.0
    stopped_early: bool = False
    error: str = ""
    gone: bool = False


class BatchMover:
    """Moves one process's source-node pages in adaptive, time-bounded batches (module rules).

    Args:
        move_pages: the system call seam.
        monotonic: the clock batches are timed on.
        proc_root: where ``/proc`` is.
        target_batch_s: the time one batch should take.
    """

    def __init__(
        self,
        move_pages: MovePages,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        proc_root: Path = Path("/proc"),
        target_batch_s: float = TARGET_BATCH_S,
    ) -> None:
        self._move_pages = move_pages
        self._monotonic = monotonic
        self._proc_root = proc_root
        self._target_s = target_batch_s
        self.batch_pages = FIRST_BATCH_PAGES

    def move(self, pid: int, source: int, dest: int, keep_going: Callable[[], bool]) -> MoveReport:
        """Move ``pid``'s anonymous pages on ``source`` to ``dest``, batch by batch.

        Args:
            pid: the process.
            source: the node pages leave.
            dest: the node they go to.
            keep_going: asked between batches; False stops the move (rule 3).

        Returns:
            The report; never raises for the process (an exited process is an ``error``).
        """
        report = MoveReport(pid)
        try:
            ranges = anon_ranges(pid, source, self._proc_root)
        except OSError as err:
            report.error = f"pid {pid}: cannot read its memory map: {err}"
            report.gone = err.errno in (errno.ENOENT, errno.ESRCH)
            return report
        try:
            for mapping in ranges:
                if not self._move_range(pid, mapping, (source, dest), keep_going, report):
                    report.stopped_early = True
                    break
        except OSError as err:
            report.error = f"pid {pid}: {err}"
            report.gone = err.errno == errno.ESRCH
        return report

    def _move_range(
        self,
        pid: int,
        mapping: AnonRange,
        nodes: tuple[int, int],
        keep_going: Callable[[], bool],
        report: MoveReport,
    ) -> bool:
        """Move one mapping's source pages batch by batch; False once ``keep_going`` said no."""
        source, dest = nodes
        seen = 0
        address = mapping.start
        while address < mapping.end and seen < mapping.on_source:
            count = min(self.batch_pages, (mapping.end - address) // mapping.page_size)
            if count <= 0:
                break
            asked = [address + i * mapping.page_size for i in range(count)]
            address += count * mapping.page_size
            # One batch: ask where the pages are, move those on the source. Both calls are
            # timed: each holds the process's memory map while it runs.
            started = self._monotonic()
            where = self._move_pages(pid, asked, None)
            on_source = [a for a, node in zip(asked, where, strict=True) if node == source]
            moved = failed = 0
            if on_source:
                moved, failed = self._move_batch(pid, on_source, source, dest)
            elapsed = self._monotonic() - started
            seen += len(on_source)
            report.batches += 1
            report.longest_batch_s = max(report.longest_batch_s, elapsed)
            report.bytes_moved += moved * mapping.page_size
            report.pages_failed += failed
            self._adapt(elapsed, count)
            if not keep_going():
                return False
        return True

    def _move_batch(self, pid: int, pages: list[int], source: int, dest: int) -> tuple[int, int]:
        status = self._move_pages(pid, pages, [dest] * len(pages))
        moved = sum(1 for s in status if s == dest)
        # A page that stayed (a negative errno, or still on the source) is a failure; one that
        # is elsewhere by now was moved by someone else and is neither.
        failed = sum(1 for s in status if s < 0 or s == source)
        return moved, failed

    def _adapt(self, elapsed_s: float, asked: int) -> None:
        """Size the next batch to the target time at the last batch's rate (rule 2)."""
        current = self.batch_pages
        ideal = 2.0 * current if elapsed_s <= 0 else asked * self._target_s / elapsed_s
        bounded = min(2.0 * current, max(current / 2.0, ideal))
        self.batch_pages = int(min(MAX_BATCH_PAGES, max(MIN_BATCH_PAGES, bounded)))
