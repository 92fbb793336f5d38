"""Carry out memory advices by moving cgroup processes' pages (memory-balancer §11).

``CgroupMigrator`` implements the ``AdviceExecutor`` port (``actors.ports.migration``):

* **plan**: each migrate container's memory cgroup is found from its pod UID and container ID
  (``CgroupAnonMemoryReader.pod_cgroup`` and ``kube_cgroups``); a container whose ID is not
  known is represented by its pod's cgroup, once per pod (every process of the pod, sandbox
  included, since the containers cannot be told apart without their IDs). Its processes are
  the ``cgroup.procs`` of the cgroup and of every cgroup beneath it. What cannot be resolved
  is left out and named in the plan (§11 step 2). While a migration runs, a new advice is
  **dropped** (the reference's discard policy, §11 step 1).
* **run**, one destination at a time in the advice's order: for each resolved cgroup, read
  its anonymous memory on the source NUMA from ``memory.numa_stat`` (``before``); if the
  destination is in the container's own list, move every process's pages there; read again
  (``after``). The pages are moved with ``move_pages(2)`` in batches of about 20 ms each
  (``qrmd.host.page_mover``), and between two batches the advice's threshold is re-checked
  on every cgroup's figure: once the destination has succeeded (below), the move stops —
  the rest no longer pays for the time the workload's memory is held. **This deviates from
  §11**, which reproduces the reference's one ``migrate_pages(pid, NumNUMANodes + 1,
  {source}, {destination})`` per process: that call holds the process's memory for the whole
  move, which Katalyst saw stall workloads for minutes (katalyst-core #477). The
  ``migrate_pages`` path is kept behind its own seam (``migrate=``) for kernels or tests
  that want the reference's behaviour.
  The destination succeeded if the total left on the source is under ``1 - threshold`` of
  the advice's ``totalRSS`` or the decrease reaches ``threshold`` of it (0.3 and 0.7); on
  success the later destinations are not tried. A cgroup whose figure cannot be read is left
  out of both sums (the preferred fix of O20, instead of the reference's counting it as
  zero, which reports success for a vanished container); if none could be read the
  destination did not succeed.
* **dry run** (``execute=False``, the default): the plan is logged and nothing is migrated.

Execution runs on one worker thread, so the actor that hands advices over never waits on the
kernel; the result is logged, counted in ``stats`` and given to ``on_result``. Nothing here
raises into the caller: a failed migration is never fatal to the daemon.

The system calls go through seams: ``MovePages`` (``qrmd.host.page_mover.syscall_move_pages``,
the default) and ``MigratePages`` (``syscall_migrate_pages``, the reference's call), each
``ctypes`` over ``syscall(2)`` with the number of this architecture. ``stats`` counts bytes
moved, batches and the longest batch, for the metrics.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from actors.ports.migration import MigrationMode, MigrationPlan, PlannedTarget
from policy.balance import MemoryAdvice
from qrmd.host.kube_cgroups import CgroupDriver, container_cgroup_names
from qrmd.host.migrate_pages import (
    SYS_MIGRATE_PAGES,
    MigratePages,
    MigratePagesError,
    syscall_migrate_pages,
)
from qrmd.host.numa_stat import V1_PAGE_SIZE, CgroupAnonMemoryReader, NumaStatError, read_numa_stat
from qrmd.host.page_mover import BatchMover, MovePages, syscall_move_pages

__all__ = [
    "SYS_MIGRATE_PAGES",
    "CgroupMigrator",
    "DestinationResult",
    "MigratePages",
    "MigratePagesError",
    "MigrationResult",
    "MigratorStats",
    "MovePages",
    "cgroup_pids",
    "syscall_migrate_pages",
]

_log = logging.getLogger(__name__)


def cgroup_pids(cgroup: Path) -> tuple[int, ...]:
    """The processes of a cgroup and of every cgroup beneath it, ascending.

    Raises:
        OSError: the cgroup's own ``cgroup.procs`` cannot be read (a vanished sub-cgroup is
            skipped: it may go away while being walked).
    """
    pids: set[int] = set(_procs(cgroup / "cgroup.procs"))
    for directory, subdirs, _ in os.walk(cgroup):
        for sub in subdirs:
            try:
                pids.update(_procs(Path(directory, sub, "cgroup.procs")))
            except FileNotFoundError:
                continue
    return tuple(sorted(pids))


def _procs(path: Path) -> list[int]:
    text = path.read_text(encoding="ascii")
    try:
        return [int(line) for line in text.split()]
    except ValueError:
        raise OSError(errno.EINVAL, f"{path}: not a list of process ids") from None


@dataclass(frozen=True, slots=True)
class DestinationResult:
    """One destination's attempt: bytes on the source before and after, and the verdict."""

    dest_numa: int
    before: int
    after: int
    decreased: int
    success: bool
    pages_not_moved: int = 0
    errors: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The plain form, for logs."""
        return {
            "dest_numa": self.dest_numa,
            "before": self.before,
            "after": self.after,
            "decreased": self.decreased,
            "success": self.success,
            "pages_not_moved": self.pages_not_moved,
            "errors": list(self.errors),
        }


@dataclass(frozen=True, slots=True)
class MigrationResult:
    """A migration's outcome: the destinations tried, in order, and whether one succeeded."""

    source_numa: int
    destinations: tuple[DestinationResult, ...]

    @property
    def success(self) -> bool:
        """Whether a destination met the threshold (the ``success`` tag of §11)."""
        return any(d.success for d in self.destinations)


@dataclass(slots=True)
class MigratorStats:
    """Counters: ``memory_handle_numa_balance`` and ``memory_numa_balance_result`` (§11)."""

    handled_total: int = 0
    dry_runs_total: int = 0
    dropped_total: int = 0
    results_total: dict[bool, int] = field(default_factory=lambda: {True: 0, False: 0})
    migrate_errors_total: int = 0
    #: Bytes ``move_pages`` moved from a source to a destination NUMA node.
    bytes_moved_total: int = 0
    #: ``move_pages`` batches (each a query and, if needed, a move).
    batches_total: int = 0
    #: The longest batch, in seconds: what a workload's memory was held for at most.
    longest_batch_s: float = 0.0
    #: Moves stopped between batches because the destination already met the threshold.
    stopped_early_total: int = 0


class CgroupMigrator:
    """The ``AdviceExecutor`` port on a host's cgroup tree (module docstring).

    Args:
        reader: finds pod cgroups (its ``pod_cgroup``) under the memory controller's mount.
        numa_count: the host's NUMA node count (``maxnode`` is this plus one).
        execute: migrate (``--memory-balance-execute``); False: dry run.
        migrate: the reference's ``migrate_pages(2)`` seam; when given (and ``move_pages``
            is not), each process is moved with one call, as §11 reproduces.
        move_pages: the ``move_pages(2)`` seam of the batched move (the default); default
            ``syscall_move_pages()``, built on first use.
        monotonic: the clock batches are timed on.
        proc_root: where ``/proc`` is (``numa_maps`` and ``maps`` are read there).
        page_size: bytes per page of a cgroup v1 count.
        on_result: told each finished migration's result, from the worker thread.
        spawn: runs a migration in the background; default a daemon thread.
    """

    def __init__(
        self,
        reader: CgroupAnonMemoryReader,
        numa_count: int,
        *,
        execute: bool = False,
        migrate: MigratePages | None = None,
        move_pages: MovePages | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        proc_root: Path = Path("/proc"),
        page_size: int = V1_PAGE_SIZE,
        on_result: Callable[[MigrationResult], None] | None = None,
        spawn: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        if numa_count < 1:
            raise ValueError(f"numa_count must be at least 1, got {numa_count}")
        self.stats = MigratorStats()
        self._reader = reader
        self._maxnode = numa_count + 1
        self._execute = execute
        self._migrate = migrate
        self._batched = move_pages is not None or migrate is None
        self._move_pages = move_pages
        self._monotonic = monotonic
        self._proc_root = proc_root
        self._page_size = page_size
        self._on_result = on_result
        self._spawn = spawn or _daemon_thread
        self._lock = threading.Lock()
        self._running: MemoryAdvice | None = None
        self._idle = threading.Event()
        self._idle.set()

    # -- the port ----------------------------------------------------------------------------

    def plan(
        self, advice: MemoryAdvice, container_ids: Mapping[tuple[str, str], str]
    ) -> MigrationPlan:
        """Resolve cgroups and processes, or drop the advice while a migration runs (port)."""
        with self._lock:
            running = self._running
        if running is not None:
            reason = (
                f"a migration from NUMA {running.source_numa} to {list(running.dest_numa_list)} "
                "is still running"
            )
            return MigrationPlan(advice, MigrationMode.DROPPED, reason=reason)
        mode = MigrationMode.EXECUTE if self._execute else MigrationMode.DRY_RUN
        return MigrationPlan(advice, mode, self._targets(advice, container_ids))

    def start(self, plan: MigrationPlan) -> None:
        """Run the plan on the worker, log it (dry run), or drop it (port). Never raises."""
        self.stats.handled_total += 1
        advice = plan.advice
        if plan.mode is MigrationMode.DROPPED:
            self.stats.dropped_total += 1
            _log.info("numa balance advice dropped: %s", plan.reason)
            return
        for target in plan.targets:
            if target.error:
                _log.warning("numa balance: %s/%s skipped: %s", target.pod_uid,
                             ",".join(target.container_names), target.error)  # fmt: skip
        if plan.mode is MigrationMode.DRY_RUN:
            self.stats.dry_runs_total += 1
            for target in plan.targets:
                if not target.error:
                    _log.info(
                        "numa balance dry run: would migrate pids %s of %s from NUMA %d to "
                        "the first of %s that it may use (%s)",
                        list(target.pids), target.cgroup, advice.source_numa,
                        list(advice.dest_numa_list), list(target.dest_numas),
                    )  # fmt: skip
            return
        with self._lock:
            if self._running is not None:  # only if start() is called without plan()
                self.stats.dropped_total += 1
                return
            self._running = advice
            self._idle.clear()
        try:
            self._spawn(lambda: self._work(plan))
        except Exception:
            _log.exception("numa balance: cannot start the migration worker")
            self._finish()

    # -- the work item -----------------------------------------------------------------------

    def run(self, plan: MigrationPlan) -> MigrationResult:
        """Carry out a plan now, on the calling thread (§11 step 2; module docstring)."""
        advice = plan.advice
        resolved = [t for t in plan.targets if not t.error]
        tried: list[DestinationResult] = []
        for dest in advice.dest_numa_list:
            result = self._try_destination(advice, resolved, dest)
            tried.append(result)
            if result.success:
                break
        return MigrationResult(advice.source_numa, tuple(tried))

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until no migration runs; whether that happened within the timeout."""
        return self._idle.wait(timeout_s)

    def _work(self, plan: MigrationPlan) -> None:
        try:
            result = self.run(plan)
            self.stats.results_total[result.success] += 1
            _log.info(
                "numa balance from NUMA %d: success=%s %s",
                result.source_numa,
                result.success,
                [d.to_json() for d in result.destinations],
            )
            if self._on_result is not None:
                self._on_result(result)
        except Exception:
            self.stats.results_total[False] += 1
            _log.exception("numa balance migration failed")
        finally:
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            self._running = None
            self._idle.set()

    def _try_destination(
        self, advice: MemoryAdvice, targets: list[PlannedTarget], dest: int
    ) -> DestinationResult:
        if self._batched:
            return self._try_destination_in_batches(advice, targets, dest)
        source = advice.source_numa
        before_total = after_total = decreased = not_moved = counted = 0
        errors: list[str] = []
        for target in targets:
            before = self._anon(target, source, errors)
            if dest in target.dest_numas:
                not_moved += self._migrate_cgroup(target, source, dest, errors)
            after = self._anon(target, source, errors)
            if before is None or after is None:
                continue  # O20, preferred fix: an unreadable figure is not a decrease
            counted += 1
            before_total += before
            after_total += after
            decreased += before - min(after, before)
        success = counted > 0 and _pays(advice, after_total, decreased)
        return DestinationResult(
            dest, before_total, after_total, decreased, success, not_moved, tuple(errors)
        )

    def _try_destination_in_batches(
        self, advice: MemoryAdvice, targets: list[PlannedTarget], dest: int
    ) -> DestinationResult:
        """One destination with ``move_pages`` batches, the threshold re-checked between them."""
        source = advice.source_numa
        errors: list[str] = []
        befores = [self._anon(target, source, errors) for target in targets]

        def figures(problems: list[str]) -> tuple[int, int, int, int]:
            """(counted, before, after, decreased) over the cgroups readable now."""
            counted = before_total = after_total = decreased = 0
            for target, before in zip(targets, befores, strict=True):
                after = self._anon(target, source, problems)
                if before is None or after is None:
                    continue  # O20, preferred fix: an unreadable figure is not a decrease
                counted += 1
                before_total += before
                after_total += after
                decreased += before - min(after, before)
            return counted, before_total, after_total, decreased

        def keep_going() -> bool:
            counted, _, after_total, decreased = figures([])
            return not (counted > 0 and _pays(advice, after_total, decreased))

        failed = 0
        for target in targets:
            if dest not in target.dest_numas:
                continue
            done, failed_here = self._move_cgroup(target, source, dest, keep_going, errors)
            failed += failed_here
            if not done:
                break
        counted, before_total, after_total, decreased = figures(errors)
        success = counted > 0 and _pays(advice, after_total, decreased)
        return DestinationResult(
            dest, before_total, after_total, decreased, success, failed, tuple(errors)
        )

    def _move_cgroup(
        self,
        target: PlannedTarget,
        source: int,
        dest: int,
        keep_going: Callable[[], bool],
        errors: list[str],
    ) -> tuple[bool, int]:
        """Move every process of a cgroup in batches; (whether to go on, pages not moved)."""
        try:
            pids = cgroup_pids(Path(target.cgroup))
        except OSError as err:
            errors.append(f"{target.cgroup}: cannot list processes: {err}")
            return True, 0
        mover = BatchMover(self._move_pages_call(), monotonic=self._monotonic,
                           proc_root=self._proc_root)  # fmt: skip
        failed = 0
        for pid in pids:
            report = mover.move(pid, source, dest, keep_going)
            stats = self.stats
            stats.bytes_moved_total += report.bytes_moved
            stats.batches_total += report.batches
            stats.longest_batch_s = max(stats.longest_batch_s, report.longest_batch_s)
            failed += report.pages_failed
            if report.error and not report.gone:  # an exited process has nothing to move
                stats.migrate_errors_total += 1
                errors.append(report.error)
                _log.warning("numa balance: %s", report.error)
            if report.stopped_early:
                stats.stopped_early_total += 1
                _log.info(
                    "numa balance: moving %s from NUMA %d to %d stopped after %d batches "
                    "(%d bytes): the threshold is met",
                    target.cgroup, source, dest, report.batches, report.bytes_moved,
                )  # fmt: skip
                return False, failed
        return True, failed

    def _move_pages_call(self) -> MovePages:
        if self._move_pages is None:
            self._move_pages = syscall_move_pages()
        return self._move_pages

    def _migrate_cgroup(
        self, target: PlannedTarget, source: int, dest: int, errors: list[str]
    ) -> int:
        try:
            pids = cgroup_pids(Path(target.cgroup))
        except OSError as err:
            errors.append(f"{target.cgroup}: cannot list processes: {err}")
            return 0
        migrate = self._syscall()
        not_moved = 0
        for pid in pids:
            try:
                not_moved += migrate(pid, self._maxnode, frozenset({source}), frozenset({dest}))
            except MigratePagesError as err:
                if err.errno != errno.ESRCH:  # a process that exited has nothing to move
                    self.stats.migrate_errors_total += 1
                    errors.append(str(err))
                    _log.warning("numa balance: %s", err)
            except (OSError, ValueError) as err:
                self.stats.migrate_errors_total += 1
                errors.append(f"pid {pid}: {err}")
        return not_moved

    def _syscall(self) -> MigratePages:
        if self._migrate is None:
            self._migrate = syscall_migrate_pages()
        return self._migrate

    def _anon(self, target: PlannedTarget, numa: int, errors: list[str]) -> int | None:
        try:
            stat = read_numa_stat(Path(target.cgroup), self._page_size)
            # A pod's cgroup stands for all of its containers: its hierarchical figure.
            value = stat.anon(hierarchical=target.whole_pod).get(numa)
        except NumaStatError as err:
            errors.append(str(err))
            return None
        if value is None:
            errors.append(f"{target.cgroup}: no anon figure for NUMA {numa}")
        return value

    # -- planning ----------------------------------------------------------------------------

    def _targets(
        self, advice: MemoryAdvice, container_ids: Mapping[tuple[str, str], str]
    ) -> tuple[PlannedTarget, ...]:
        targets: list[PlannedTarget] = []
        by_pod: dict[str, int] = {}  # pod UID -> index of its pod-level target
        for mc in advice.migrate_containers:
            cid = container_ids.get((mc.pod_uid, mc.container_name))
            if cid is None and mc.pod_uid in by_pod:
                i = by_pod[mc.pod_uid]
                names = (*targets[i].container_names, mc.container_name)
                targets[i] = replace(targets[i], container_names=names)
                continue
            target = self._target(mc.pod_uid, mc.container_name, cid, mc.dest_numa_list)
            if cid is None:
                by_pod[mc.pod_uid] = len(targets)
            targets.append(target)
        return tuple(targets)

    def _target(
        self, pod_uid: str, name: str, cid: str | None, dest: tuple[int, ...]
    ) -> PlannedTarget:
        try:
            pod_dir, driver = self._reader.pod_cgroup(pod_uid)
            cgroup = pod_dir if cid is None else _container_dir(pod_dir, cid, driver)
            pids = cgroup_pids(cgroup)
        except (NumaStatError, OSError, ValueError) as err:
            return PlannedTarget(pod_uid, (name,), "", (), dest, str(err), cid is None)
        return PlannedTarget(pod_uid, (name,), str(cgroup), pids, dest, whole_pod=cid is None)


def _pays(advice: MemoryAdvice, after_total: int, decreased: int) -> bool:
    """§11's verdict: little left on the source, or the decrease reaches the threshold."""
    total = advice.total_rss
    return total > 0 and (
        after_total / total < 1 - advice.threshold or decreased / total >= advice.threshold
    )


def _container_dir(pod_dir: Path, container_id: str, driver: CgroupDriver) -> Path:
    names = container_cgroup_names(container_id, driver)
    for name in names:
        if (pod_dir / name).is_dir():
            return pod_dir / name
    raise OSError(
        errno.ENOENT,
        f"no cgroup for container {container_id} under {pod_dir} (looked for {', '.join(names)})",
    )


def _daemon_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, name="qrmd-numa-migrate", daemon=True).start()
