"""The advice executor (memory-balancer §11) on a fake cgroup tree, with ``migrate_pages(2)``
behind its seam; and once for real on this process (a same-node migration is a no-op)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.ports.migration import AdviceExecutor, MigrationMode, MigrationPlan
from policy.balance import MemoryAdvice, MigrateContainer
from qrmd.host.kube_cgroups import CgroupDriver
from qrmd.host.migrate import (
    CgroupMigrator,
    MigratePagesError,
    cgroup_pids,
    syscall_migrate_pages,
)
from qrmd.host.numa_stat import CgroupAnonMemoryReader
from tests.host.cgroup_tree import numa_stat_text

GiB = 1 << 30
UID_A = "aaaaaaaa-0000-4000-8000-000000000001"
UID_B = "bbbbbbbb-0000-4000-8000-000000000002"
APP = "a1" * 32
SIDE = "b2" * 32
PAUSE = "c3" * 32


class FakeKernel:
    """A cgroup v2 tree (cgroupfs driver) whose ``migrate_pages`` moves anon between nodes.

    ``moves[dest]`` is the fraction of a cgroup's anon on the source that the first call for
    one of its processes moves to ``dest`` (1.0 unless set; the cgroup's other processes share
    those pages, so their calls move nothing more); ``refuse`` maps a pid to an errno.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.anon: dict[Path, dict[int, int]] = {}
        self.owner: dict[int, Path] = {}
        self.moves: dict[int, float] = {}
        self.refuse: dict[int, int] = {}
        self.calls: list[tuple[int, int, list[int], list[int]]] = []
        self.done: set[tuple[Path, int]] = set()

    def pod(self, uid: str) -> Path:
        path = self.root / "kubepods" / "burstable" / f"pod{uid}"
        path.mkdir(parents=True, exist_ok=True)
        (path / "cgroup.procs").write_text("")
        return path

    def container(self, uid: str, cid: str, anon: dict[int, int], pids: list[int]) -> Path:
        path = self.pod(uid) / cid
        path.mkdir()
        (path / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))
        self.anon[path] = dict(anon)
        for pid in pids:
            self.owner[pid] = path
        self._write(path)
        return path

    def _write(self, path: Path) -> None:
        (path / "memory.numa_stat").write_text(numa_stat_text(2, self.anon[path]))
        pod = path.parent
        total: dict[int, int] = {}
        for child, anon in self.anon.items():
            if child.parent == pod:
                for n, v in anon.items():
                    total[n] = total.get(n, 0) + v
        (pod / "memory.numa_stat").write_text(numa_stat_text(2, total))

    def migrate(self, pid: int, maxnode: int, old: frozenset[int], new: frozenset[int]) -> int:
        self.calls.append((pid, maxnode, sorted(old), sorted(new)))
        if pid in self.refuse:
            raise MigratePagesError(self.refuse[pid], f"pid {pid}: {os.strerror(self.refuse[pid])}")
        (source,), (dest,) = old, new
        path = self.owner[pid]
        if (path, dest) in self.done:
            return 0
        self.done.add((path, dest))
        anon = self.anon[path]
        moved = int(anon.get(source, 0) * self.moves.get(dest, 1.0))
        anon[source] = anon.get(source, 0) - moved
        anon[dest] = anon.get(dest, 0) + moved
        self._write(path)
        return 0


def migrator(
    kernel: FakeKernel, *, execute: bool = True, spawn: Callable[..., None] | None = None
) -> CgroupMigrator:
    reader = CgroupAnonMemoryReader(kernel.root, CgroupDriver.CGROUPFS)
    return CgroupMigrator(
        reader,
        numa_count=4,
        execute=execute,
        migrate=kernel.migrate,
        spawn=spawn or (lambda work: work()),
    )


def advice(
    *containers: tuple[str, str, tuple[int, ...]], dests=(1,), total=3 * GiB
) -> MemoryAdvice:  # type: ignore[no-untyped-def]
    return MemoryAdvice(
        dest_numa_list=tuple(dests),
        source_numa=0,
        migrate_containers=tuple(MigrateContainer(u, n, d) for u, n, d in containers),
        total_rss=float(total),
    )


IDS = {(UID_A, "app"): f"containerd://{APP}", (UID_A, "side"): f"containerd://{SIDE}"}


@pytest.fixture
def kernel(tmp_path: Path) -> FakeKernel:
    k = FakeKernel(tmp_path)
    k.container(UID_A, APP, {0: 2 * GiB, 1: 0}, [101, 102])
    k.container(UID_A, SIDE, {0: GiB, 1: 0}, [103])
    k.container(UID_A, PAUSE, {0: 4096, 1: 0}, [100])
    return k


def test_implements_the_port(kernel: FakeKernel) -> None:
    assert isinstance(migrator(kernel), AdviceExecutor)


def test_plan_resolves_containers_by_id_and_their_processes(kernel: FakeKernel) -> None:
    a = advice((UID_A, "app", (0, 1)), (UID_A, "side", (0, 1)))
    plan = migrator(kernel).plan(a, IDS)
    assert plan.mode is MigrationMode.EXECUTE
    assert [
        (t.container_names, Path(t.cgroup).name, t.pids, t.whole_pod) for t in plan.targets
    ] == [
        (("app",), APP, (101, 102), False),
        (("side",), SIDE, (103,), False),
    ]
    assert kernel.calls == [], "planning migrates nothing"


def test_without_container_ids_the_pod_cgroup_stands_for_its_containers(
    kernel: FakeKernel,
) -> None:
    a = advice((UID_A, "app", (0, 1)), (UID_A, "side", (0, 1)))
    plan = migrator(kernel).plan(a, {})
    (target,) = plan.targets
    assert target.container_names == ("app", "side") and target.whole_pod
    assert Path(target.cgroup).name == f"pod{UID_A}" and target.pids == (100, 101, 102, 103)
    result = migrator(kernel).run(plan)
    assert result.success and result.destinations[0].before == 3 * GiB + 4096


def test_executes_every_process_and_succeeds_at_the_first_destination(kernel: FakeKernel) -> None:
    m = migrator(kernel)
    plan = m.plan(advice((UID_A, "app", (0, 1)), (UID_A, "side", (0, 1)), dests=(1, 2)), IDS)
    m.start(plan)
    assert kernel.calls == [(p, 5, [0], [1]) for p in (101, 102, 103)]
    assert m.stats.results_total == {True: 1, False: 0}
    result = m.run(plan)  # nothing left to move: the figures still say success
    assert [d.dest_numa for d in result.destinations] == [1] and result.success


def test_a_destination_outside_a_containers_list_is_skipped_for_it(kernel: FakeKernel) -> None:
    a = advice((UID_A, "app", (0, 2)), (UID_A, "side", (0, 1)), dests=(1, 2), total=3 * GiB)
    result = migrator(kernel).run(migrator(kernel).plan(a, IDS))
    first, second = result.destinations
    assert (first.dest_numa, first.decreased, first.success) == (1, GiB, False)
    assert (second.dest_numa, second.decreased, second.success) == (2, 2 * GiB, True)
    assert [c[3] for c in kernel.calls] == [[1], [2], [2]]


@pytest.mark.parametrize(
    ("moved", "success"),
    [
        pytest.param(0.71, True, id="71 percent moved meets the 0.7 threshold"),
        pytest.param(0.69, False, id="69 percent moved and 31 percent left is not enough"),
    ],
)
def test_success_is_judged_by_re_reading_numa_stat(
    kernel: FakeKernel, moved: float, success: bool
) -> None:
    kernel.moves[1] = moved
    a = advice((UID_A, "app", (0, 1)), (UID_A, "side", (0, 1)), total=3 * GiB)
    (dest,) = migrator(kernel).run(migrator(kernel).plan(a, IDS)).destinations
    assert dest.success is success
    assert dest.before == 3 * GiB and dest.after == 3 * GiB - dest.decreased


def test_little_left_on_the_source_is_success_too(kernel: FakeKernel) -> None:
    """totalRSS larger than what is there: after / totalRSS < 0.3 wins on its own."""
    kernel.moves[1] = 0.5
    a = advice((UID_A, "app", (0, 1)), total=10 * GiB)
    (dest,) = migrator(kernel).run(migrator(kernel).plan(a, IDS)).destinations
    assert dest.after == GiB and dest.decreased == GiB and dest.success


def test_a_new_advice_is_dropped_while_a_migration_runs(kernel: FakeKernel) -> None:
    pending: list[Callable[[], None]] = []
    m = migrator(kernel, spawn=pending.append)
    a = advice((UID_A, "app", (0, 1)))
    m.start(m.plan(a, IDS))
    dropped = m.plan(a, IDS)
    assert dropped.mode is MigrationMode.DROPPED and "still running" in dropped.reason
    m.start(dropped)
    assert m.stats.dropped_total == 1 and not m.wait(0)
    pending.pop()()
    assert m.wait(0) and m.plan(a, IDS).mode is MigrationMode.EXECUTE
    assert len({c[0] for c in kernel.calls}) == 2, "one migration ran, for its two processes"


def test_dry_run_logs_and_migrates_nothing(
    kernel: FakeKernel, caplog: pytest.LogCaptureFixture
) -> None:
    m = migrator(kernel, execute=False)
    plan = m.plan(advice((UID_A, "app", (0, 1))), IDS)
    assert plan.mode is MigrationMode.DRY_RUN
    caplog.set_level("INFO", logger="qrmd.host.migrate")
    m.start(plan)
    assert kernel.calls == [] and m.stats.dry_runs_total == 1
    assert "would migrate pids [101, 102]" in caplog.text
    assert plan.to_json()["targets"][0]["pids"] == [101, 102]


def test_failures_are_reported_never_raised(kernel: FakeKernel) -> None:
    kernel.refuse[101] = errno.EPERM
    kernel.refuse[102] = errno.ESRCH  # exited meanwhile: nothing to report
    m = migrator(kernel)
    a = advice((UID_A, "app", (0, 1)), (UID_B, "gone", (0, 1)), (UID_A, "side", (0, 1)))
    plan = m.plan(a, IDS)
    assert plan.targets[1].error.startswith(f"pod {UID_B}: no cgroup found")
    m.start(plan)
    assert m.stats.results_total == {True: 0, False: 1}
    assert m.stats.migrate_errors_total == 1
    result = m.run(plan)
    assert not result.success
    assert any("pid 101" in e for e in result.destinations[0].errors)


def test_a_cgroup_that_vanishes_is_left_out_of_the_sums(kernel: FakeKernel) -> None:
    """O20, the preferred fix: an unreadable figure is neither zero nor a decrease."""
    a = advice((UID_A, "app", (0, 1)), total=2 * GiB)
    m = migrator(kernel)
    plan = m.plan(a, IDS)
    (Path(plan.targets[0].cgroup) / "memory.numa_stat").unlink()
    (dest,) = m.run(plan).destinations
    assert not dest.success and dest.decreased == 0
    assert "memory.numa_stat: missing" in dest.errors[0]


def test_cgroup_pids_walks_sub_cgroups(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "cgroup.procs").write_text("7\n3\n")
    (tmp_path / "a" / "cgroup.procs").write_text("5\n")
    (tmp_path / "a" / "b" / "cgroup.procs").write_text("3\n9\n")
    assert cgroup_pids(tmp_path) == (3, 5, 7, 9)
    (tmp_path / "cgroup.procs").write_text("x\n")
    with pytest.raises(OSError, match="not a list of process ids"):
        cgroup_pids(tmp_path)


def test_the_syscall_needs_a_known_architecture() -> None:
    with pytest.raises(OSError, match="no syscall number for 'riscv64'"):
        syscall_migrate_pages("riscv64")


def test_nodes_outside_maxnode_are_refused_before_the_call() -> None:
    migrate = _real_syscall()
    with pytest.raises(ValueError, match=r"NUMA node 2 is outside 0\.\.1"):
        migrate(os.getpid(), 3, frozenset({0}), frozenset({2}))


def _real_syscall() -> Callable[[int, int, frozenset[int], frozenset[int]], int]:
    try:
        return syscall_migrate_pages()
    except OSError as err:
        pytest.skip(str(err))


NODE0 = Path("/sys/devices/system/node/node0")


@pytest.mark.skipif(not NODE0.is_dir(), reason="this host exposes no NUMA node 0")
def test_real_same_node_migration_of_this_process_is_a_no_op() -> None:
    """The call is wired correctly: node 0 to node 0 moves nothing and succeeds."""
    migrate = _real_syscall()
    numa_count = len(list(NODE0.parent.glob("node[0-9]*")))
    assert migrate(os.getpid(), numa_count + 1, frozenset({0}), frozenset({0})) == 0


@pytest.mark.skipif(not NODE0.is_dir(), reason="this host exposes no NUMA node 0")
def test_real_errno_is_a_clear_error() -> None:
    migrate = _real_syscall()
    with pytest.raises(MigratePagesError, match="ESRCH: the process has exited") as info:
        migrate(2**30, 2, frozenset({0}), frozenset({0}))
    assert info.value.errno == errno.ESRCH


def test_a_plan_is_plain_data_for_the_journal(kernel: FakeKernel) -> None:
    plan: MigrationPlan = migrator(kernel).plan(advice((UID_A, "app", (0, 1))), IDS)
    assert plan.to_json() == {
        "mode": "execute",
        "source_numa": 0,
        "dest_numas": [1],
        "targets": [
            {
                "pod_uid": UID_A,
                "container_names": ["app"],
                "cgroup": str(kernel.root / "kubepods" / "burstable" / f"pod{UID_A}" / APP),
                "pids": [101, 102],
                "dest_numas": [0, 1],
                "error": "",
                "whole_pod": False,
            }
        ],
        "reason": "",
    }
