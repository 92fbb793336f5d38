"""Batched ``move_pages(2)`` (``qrmd.host.page_mover``, a deviation from memory-balancer §11): a
fake process
behind the system call's seam, a fake ``/proc``, a fake clock that each call advances by the
pages it touches; and once for real on this process's own memory (one NUMA node here, so the
real call shows the wiring, not a move)."""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from policy.balance import MemoryAdvice, MigrateContainer
from qrmd.balancer.metrics import BalancerCollector
from qrmd.host.kube_cgroups import CgroupDriver
from qrmd.host.migrate import CgroupMigrator
from qrmd.host.numa_stat import CgroupAnonMemoryReader
from qrmd.host.page_mover import (
    MAX_BATCH_PAGES,
    TARGET_BATCH_S,
    BatchMover,
    anon_ranges,
    syscall_move_pages,
)
from tests.host.cgroup_tree import numa_stat_text

PAGE = 4096
PID = 4242
UID = "aaaaaaaa-0000-4000-8000-000000000001"
CID = "a1" * 32


class FakeProcess:
    """One process's pages (address → node), its ``/proc`` files, and the call's cost.

    Each ``move_pages`` call advances the clock by ``cost_per_page_s`` per page asked, so a
    batch's time follows its size as on a real machine.
    """

    def __init__(self, proc: Path, mappings: list[tuple[int, int, dict[int, int]]]) -> None:
        self.proc = proc
        self.now = 100.0
        self.cost_per_page_s = 0.0001  # 200 pages make the 20 ms target
        self.node: dict[int, int] = {}
        self.calls: list[tuple[int, bool]] = []
        self.on_move = lambda: None
        self.mappings = mappings
        for start, pages, layout in mappings:
            address = start
            for node, count in layout.items():
                for _ in range(count):
                    self.node[address] = node
                    address += PAGE
            assert address <= start + pages * PAGE
        self.write_proc()

    def write_proc(self) -> None:
        root = self.proc / str(PID)
        root.mkdir(parents=True, exist_ok=True)
        maps, numa = [], []
        for start, pages, _ in self.mappings:
            maps.append(f"{start:x}-{start + pages * PAGE:x} rw-p 00000000 00:00 0")
            counts: dict[int, int] = {}
            for address in range(start, start + pages * PAGE, PAGE):
                if address in self.node:
                    counts[self.node[address]] = counts.get(self.node[address], 0) + 1
            per_node = " ".join(f"N{n}={c}" for n, c in sorted(counts.items()))
            numa.append(
                f"{start:x} default anon={sum(counts.values())} {per_node} kernelpagesize_kB=4"
            )
        numa.append("7f0000000000 default file=/usr/lib/libc.so mapped=9 N0=9 kernelpagesize_kB=4")
        (root / "maps").write_text("\n".join(maps) + "\n")
        (root / "numa_maps").write_text("\n".join(numa) + "\n")

    def monotonic(self) -> float:
        return self.now

    def move_pages(self, pid: int, pages: Sequence[int], nodes: Sequence[int] | None) -> list[int]:
        assert pid == PID
        self.now += self.cost_per_page_s * len(pages)
        self.calls.append((len(pages), nodes is not None))
        if nodes is None:
            return [self.node.get(a, -2) for a in pages]  # -ENOENT: not present
        for address, node in zip(pages, nodes, strict=True):
            self.node[address] = node
        self.on_move()
        return [self.node[a] for a in pages]

    def on(self, node: int) -> int:
        return sum(1 for n in self.node.values() if n == node)


@pytest.fixture
def process(tmp_path: Path) -> FakeProcess:
    # 4000 pages on node 0, 500 on node 2 (left alone), in a mapping with a hole at the end.
    return FakeProcess(tmp_path / "proc", [(0x10000000, 5000, {0: 4000, 2: 500})])


def mover(process: FakeProcess) -> BatchMover:
    return BatchMover(process.move_pages, monotonic=process.monotonic, proc_root=process.proc)


def test_numa_maps_name_the_anonymous_mappings_on_the_source(process: FakeProcess) -> None:
    [mapping] = anon_ranges(PID, 0, process.proc)
    assert (mapping.start, mapping.end, mapping.page_size, mapping.on_source) == (
        0x10000000, 0x10000000 + 5000 * PAGE, PAGE, 4000,
    )  # fmt: skip
    assert anon_ranges(PID, 1, process.proc) == []  # file mappings are never visited


def test_only_the_source_pages_move_and_every_one_of_them(process: FakeProcess) -> None:
    report = mover(process).move(PID, 0, 1, keep_going=lambda: True)
    assert (process.on(0), process.on(1), process.on(2)) == (0, 4000, 500)
    assert report.bytes_moved == 4000 * PAGE and report.pages_failed == 0
    assert not report.stopped_early and report.error == ""


def test_batches_adapt_to_about_twenty_milliseconds(process: FakeProcess) -> None:
    m = mover(process)
    report = m.move(PID, 0, 1, keep_going=lambda: True)
    # 0.1 ms a page, asked once and moved once: ~100 pages make 20 ms.
    assert 80 <= m.batch_pages <= 125
    assert report.longest_batch_s <= 2.5 * TARGET_BATCH_S
    assert report.batches > 20
    assert max(size for size, _ in process.calls) <= MAX_BATCH_PAGES


def test_a_slow_machine_gets_small_batches_and_none_holds_long(process: FakeProcess) -> None:
    process.cost_per_page_s = 0.002  # 10 pages make 20 ms
    m = mover(process)
    report = m.move(PID, 0, 1, keep_going=lambda: True)
    assert m.batch_pages == 16  # the floor: a batch still makes progress
    assert report.bytes_moved == 4000 * PAGE


def test_the_move_stops_between_batches_once_it_no_longer_pays(process: FakeProcess) -> None:
    report = mover(process).move(PID, 0, 1, keep_going=lambda: process.on(1) < 1000)
    assert report.stopped_early
    assert 1000 <= process.on(1) < 1000 + MAX_BATCH_PAGES
    assert process.on(0) > 2000 and report.bytes_moved == process.on(1) * PAGE


def test_an_exited_process_is_reported_not_raised(tmp_path: Path) -> None:
    report = BatchMover(lambda *a: [], proc_root=tmp_path).move(PID, 0, 1, lambda: True)
    assert report.gone and "cannot read its memory map" in report.error


# -- the executor: the 0.7 threshold re-checked between batches ------------------------------


def test_the_executor_stops_a_move_once_the_threshold_is_met(
    tmp_path: Path, process: FakeProcess
) -> None:
    root = tmp_path / "cgroup"
    container = root / "kubepods" / "burstable" / f"pod{UID}" / CID
    container.mkdir(parents=True)
    (container.parent / "cgroup.procs").write_text("")
    (container / "cgroup.procs").write_text(f"{PID}\n")

    def publish() -> None:  # memory.numa_stat follows the pages, as the kernel's does
        anon = {n: process.on(n) * PAGE for n in (0, 1, 2)}
        (container / "memory.numa_stat").write_text(numa_stat_text(3, anon))
        (container.parent / "memory.numa_stat").write_text(numa_stat_text(3, anon))

    publish()
    process.on_move = publish
    migrator = CgroupMigrator(
        CgroupAnonMemoryReader(root, CgroupDriver.CGROUPFS),
        numa_count=3,
        execute=True,
        move_pages=process.move_pages,
        monotonic=process.monotonic,
        proc_root=process.proc,
        spawn=lambda work: work(),
    )
    total = 4000 * PAGE
    advice = MemoryAdvice(
        dest_numa_list=(1,),
        source_numa=0,
        migrate_containers=(MigrateContainer(UID, "app", (1,)),),
        total_rss=float(total),
    )
    result = migrator.run(migrator.plan(advice, {(UID, "app"): f"containerd://{CID}"}))
    assert result.success
    [dest] = result.destinations
    # Stopped once 70 % had moved, well before all of it: the rest no longer pays.
    assert 0.7 * total <= dest.decreased < 0.8 * total
    assert process.on(0) > 0.2 * 4000
    stats = migrator.stats
    assert stats.bytes_moved_total == dest.decreased and stats.stopped_early_total == 1
    assert stats.batches_total > 0 and 0 < stats.longest_batch_s <= 2.5 * TARGET_BATCH_S


# -- the real system call --------------------------------------------------------------------


def test_the_syscall_needs_a_known_architecture() -> None:
    with pytest.raises(OSError, match="no syscall number for 'riscv64'"):
        syscall_move_pages("riscv64")


NODE0 = Path("/sys/devices/system/node/node0")


@pytest.mark.skipif(not NODE0.is_dir(), reason="this host exposes no NUMA node 0")
def test_real_move_of_this_process_own_memory_from_node_0_to_node_0() -> None:
    """The wiring, for real: numa_maps parsed, pages asked and moved to the node they are on."""
    try:
        call = syscall_move_pages()
    except OSError as err:
        pytest.skip(str(err))
    size = 8 << 20
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        for offset in range(0, size, PAGE):
            region[offset] = 1  # touch every page: now resident, on node 0
        report = BatchMover(call).move(os.getpid(), 0, 0, keep_going=lambda: True)
        assert report.error == "", report.error
        assert report.bytes_moved >= size  # at least the region's pages, all "moved" to node 0
        assert report.batches > 0 and report.longest_batch_s < 5.0
    finally:
        region.close()


def test_the_moves_are_exported_as_metrics() -> None:
    counts = {"handled": 1, "results": {True: 1}, "moved": (8192, 3, 0.018)}
    registry = CollectorRegistry()
    registry.register(BalancerCollector(lambda: None, lambda: counts, lambda: 0))
    text = generate_latest(registry).decode()
    assert "qrmd_migration_bytes_moved_total 8192.0" in text
    assert "qrmd_migration_batches_total 3.0" in text
    assert "qrmd_migration_longest_batch_seconds 0.018" in text
