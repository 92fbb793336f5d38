"""The reclaim pool's metrics on a real host: the ``ReclaimMetricsSource`` adapters and
``--reclaim-metrics-source`` (katalyst-core v0.5.47 ``GetReclaimMetrics``, whose figures the
reference reads from malachite; ``actors.ports.reclaim_metrics``).

==============  ===========================================================================
SPEC            the source
==============  ===========================================================================
``host``        ``/proc/stat`` and the cpu controller's cgroup tree (the default)
``simulated``   every CPU idle, every cgroup idle without a quota (the demo; trying it out)
==============  ===========================================================================

**Per-CPU usage** (``cpu.usage.ratio.cpu``): from the ``cpuN`` lines of ``/proc/stat``, the
busy share of each CPU's ticks over the window, ``1 − Δ(idle + iowait) / Δ(all)`` (steal and
the guest times, which ``user``/``nice`` already hold, are not counted twice). A CPU
``/proc/stat`` does not list (offline) adds nothing to a sum, as the reference's aggregation
skips a core without a metric.

**A cgroup's usage and quota** (``cpu.usage.cgroup``, ``cpu.quota.cgroup``,
``cpu.period.cgroup``), the cgroup given relative to the cpu controller's mount (as
``--reclaim-relative-root-cgroup-path``, ``qrmd.host.cpu_idle.default_cpu_cgroup_root``):

* cgroup v2: ``cpu.stat``'s ``usage_usec`` and ``cpu.max`` (``max 100000``: no quota, ``-1``);
* cgroup v1: ``cpuacct.usage`` (nanoseconds; in the same directory where ``cpu,cpuacct`` are
  mounted together, else under the sibling ``cpuacct`` mount) and ``cpu.cfs_quota_us`` /
  ``cpu.cfs_period_us``.

Usage is a rate: the counters' change over a window divided by its length (the injected
monotonic clock). The source reads a baseline of ``/proc/stat`` and of the cgroups it is told
about when built (``prime``), so the first ``GetEvictPods`` already has a window; a cgroup
seen for the first time has none yet and is missing for that call. Windows shorter than
``min_window_s`` are not measured: the previous figure is answered again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from actors.ports.reclaim_metrics import (
    CgroupCPU,
    MissingMetric,
    ReclaimMetricsSource,
    ReclaimReading,
)
from qrmd.host.cpu_idle import default_cpu_cgroup_root

__all__ = [
    "DEFAULT_RECLAIM_METRICS_SOURCE",
    "RECLAIM_METRICS_SOURCES",
    "FixedReclaimMetrics",
    "HostReclaimMetrics",
    "build_reclaim_metrics_source",
    "read_cgroup_counters",
    "read_proc_stat",
]

DEFAULT_RECLAIM_METRICS_SOURCE = "host"
RECLAIM_METRICS_SOURCES = ("host", "simulated")
#: Windows shorter than this give the previous figure again (a rate over a few ms is noise).
MIN_WINDOW_S = 1.0
#: The columns of a ``cpuN`` line summed as its ticks: user nice system idle iowait irq
#: softirq steal (guest and guest_nice are already in user and nice).
_TICK_COLUMNS = 8
_IDLE, _IOWAIT = 3, 4


def read_proc_stat(path: Path) -> dict[int, tuple[int, int]]:
    """Each CPU's ``(all ticks, idle + iowait ticks)`` from a ``/proc/stat``.

    Raises:
        OSError: the file cannot be read.
        ValueError: a ``cpuN`` line is malformed.
    """
    counters: dict[int, tuple[int, int]] = {}
    for line in path.read_text(encoding="ascii").splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        cpu = int(name[3:])
        ticks = [int(v) for v in rest.split()[:_TICK_COLUMNS]]
        if len(ticks) < _IOWAIT + 1:
            raise ValueError(f"{path}: line {name} has {len(ticks)} columns")
        counters[cpu] = (sum(ticks), ticks[_IDLE] + ticks[_IOWAIT])
    return counters


@dataclass(frozen=True, slots=True)
class CgroupCounters:
    """A cgroup's cumulative usage (seconds) and its quota and period (microseconds)."""

    usage_s: float
    cfs_quota: float
    cfs_period: float


def read_cgroup_counters(cgroup: Path, cpuacct: Path | None = None) -> CgroupCounters:
    """A cgroup's counters, v2 (``cpu.stat``, ``cpu.max``) or v1 (``cpuacct.usage``,
    ``cpu.cfs_quota_us``, ``cpu.cfs_period_us``); the module docstring.

    Args:
        cgroup: the cgroup's directory under the cpu controller's mount.
        cpuacct: on v1 with a separate ``cpuacct`` mount, the cgroup's directory there.

    Raises:
        OSError: a file cannot be read (a missing cgroup is ``FileNotFoundError``).
        ValueError: a file's content is malformed.
    """
    if (cgroup / "cpu.max").exists() or (cgroup / "cgroup.controllers").exists():
        usage_usec = None
        for line in (cgroup / "cpu.stat").read_text(encoding="ascii").splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                usage_usec = int(value)
        if usage_usec is None:
            raise ValueError(f"{cgroup / 'cpu.stat'} has no usage_usec")
        quota_text, _, period_text = (
            (cgroup / "cpu.max").read_text(encoding="ascii").strip().partition(" ")
        )
        quota = -1.0 if quota_text == "max" else float(int(quota_text))
        return CgroupCounters(usage_usec / 1e6, quota, float(int(period_text)))
    usage_file = cgroup / "cpuacct.usage"
    if not usage_file.exists() and cpuacct is not None:
        usage_file = cpuacct / "cpuacct.usage"
    usage_ns = int(usage_file.read_text(encoding="ascii").strip())
    quota = int((cgroup / "cpu.cfs_quota_us").read_text(encoding="ascii").strip())
    period = int((cgroup / "cpu.cfs_period_us").read_text(encoding="ascii").strip())
    return CgroupCounters(usage_ns / 1e9, float(quota), float(period))


@dataclass(slots=True)
class _Baseline:
    at: float
    counters: object
    figure: object = None


class HostReclaimMetrics(ReclaimMetricsSource):
    """Implements ``ReclaimMetricsSource`` on ``/proc/stat`` and a cgroup tree.

    Args:
        cgroup_root: the cpu controller's mount (default ``default_cpu_cgroup_root()``).
        proc_stat: the ``/proc/stat`` file.
        clock: monotonic seconds (the windows' lengths).
        prime: cgroups (relative) whose baseline is read now, besides ``/proc/stat``.
        min_window_s: see ``MIN_WINDOW_S``.
    """

    def __init__(
        self,
        cgroup_root: Path | str | None = None,
        *,
        proc_stat: Path | str = "/proc/stat",
        clock: Callable[[], float] = time.monotonic,
        prime: Iterable[str] = (),
        min_window_s: float = MIN_WINDOW_S,
    ) -> None:
        self.root = Path(cgroup_root) if cgroup_root is not None else default_cpu_cgroup_root()
        self._proc_stat = Path(proc_stat)
        self._clock = clock
        self._min_window = min_window_s
        self._baselines: dict[str, _Baseline] = {}
        self.read(tuple(prime))

    def _cgroup(self, relative_path: str) -> Path:
        relative = Path(relative_path.strip("/"))
        if ".." in relative.parts:
            raise ValueError(f"{relative_path!r} climbs out of the cgroup root {self.root}")
        return self.root / relative

    def cgroup_exists(self, relative_path: str) -> bool:
        try:
            return self._cgroup(relative_path).is_dir()
        except ValueError:
            return False

    def read(self, cgroups: Sequence[str]) -> ReclaimReading:
        now = self._clock()
        cores = self._windowed("/proc/stat", now, self._read_stat, _core_usage)
        figures: dict[str, CgroupCPU | MissingMetric] = {}
        for path in cgroups:
            figures[path] = self._windowed(  # type: ignore[assignment]
                f"cgroup:{path}", now, partial(self._read_cgroup, path), _cgroup_cpu
            )
        return ReclaimReading(cores, figures)  # type: ignore[arg-type]

    def _read_stat(self) -> object:
        return read_proc_stat(self._proc_stat)

    def _read_cgroup(self, relative_path: str) -> object:
        cgroup = self._cgroup(relative_path)
        v1_cpuacct = self.root.parent / "cpuacct" / relative_path.strip("/")
        return read_cgroup_counters(cgroup, v1_cpuacct)

    def _windowed(
        self,
        key: str,
        now: float,
        read: Callable[[], object],
        rate: Callable[[object, object, float], object],
    ) -> object:
        """The figure over the window since ``key``'s baseline; a new baseline when the
        window is long enough; the previous figure when it is not."""
        try:
            counters = read()
        except (OSError, ValueError) as err:
            self._baselines.pop(key, None)
            return MissingMetric(f"{key.removeprefix('cgroup:')}: {_why(err)}")
        base = self._baselines.get(key)
        if base is None:
            self._baselines[key] = _Baseline(now, counters)
            return MissingMetric(
                f"{key.removeprefix('cgroup:')}: first reading, usage is measured from the next"
            )
        elapsed = now - base.at
        if elapsed < self._min_window and base.figure is not None:
            return base.figure
        if elapsed <= 0:
            return MissingMetric(f"{key.removeprefix('cgroup:')}: no time since the last reading")
        figure = rate(base.counters, counters, elapsed)
        self._baselines[key] = _Baseline(now, counters, figure)
        return figure


def _why(err: Exception) -> str:
    if isinstance(err, OSError):
        return f"cannot read {err.filename or ''}: {err.strerror or err}".replace(" : ", ": ")
    return str(err)


def _core_usage(before: object, after: object, elapsed: float) -> Mapping[int, float]:
    del elapsed  # the ticks are their own clock
    assert isinstance(before, dict) and isinstance(after, dict)
    usage: dict[int, float] = {}
    for cpu, (total, idle) in after.items():
        if cpu not in before:
            continue
        d_total = total - before[cpu][0]
        d_idle = idle - before[cpu][1]
        usage[cpu] = 0.0 if d_total <= 0 else min(max(1.0 - d_idle / d_total, 0.0), 1.0)
    return usage


def _cgroup_cpu(before: object, after: object, elapsed: float) -> CgroupCPU:
    assert isinstance(before, CgroupCounters) and isinstance(after, CgroupCounters)
    # A counter that went back is a cgroup re-created under the same path: no usage measured.
    used = max(after.usage_s - before.usage_s, 0.0)
    return CgroupCPU(used / elapsed, after.cfs_quota, after.cfs_period)


class FixedReclaimMetrics(ReclaimMetricsSource):
    """Fixed figures: every CPU at ``core_usage``, every cgroup in ``cgroups`` as given and
    the others idle without a quota; ``existing`` names the cgroups that exist (the root
    always does)."""

    def __init__(
        self,
        *,
        core_usage: float = 0.0,
        cpus: int = 4096,
        cgroups: Mapping[str, CgroupCPU] | None = None,
        existing: Iterable[str] = (),
    ) -> None:
        self._cores = {cpu: core_usage for cpu in range(cpus)}
        self._cgroups = dict(cgroups or {})
        self._existing = set(existing) | set(self._cgroups)

    def cgroup_exists(self, relative_path: str) -> bool:
        return relative_path in self._existing

    def read(self, cgroups: Sequence[str]) -> ReclaimReading:
        idle = CgroupCPU(0.0, -1.0, 100000.0)
        return ReclaimReading(
            dict(self._cores), {path: self._cgroups.get(path, idle) for path in cgroups}
        )


def build_reclaim_metrics_source(spec: str, *, prime: Iterable[str] = ()) -> ReclaimMetricsSource:
    """The source ``--reclaim-metrics-source SPEC`` names (module docstring).

    Raises:
        ValueError: an unknown SPEC.
    """
    if spec == "host":
        return HostReclaimMetrics(prime=prime)
    if spec == "simulated":
        return FixedReclaimMetrics()
    raise ValueError(f"{spec!r} is not a reclaim metrics source: use host or simulated")
