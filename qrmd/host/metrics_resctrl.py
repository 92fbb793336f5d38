"""NUMA memory bandwidth from resctrl's memory-bandwidth monitoring (MBM) counters (spec
memory-balancer §4.1).

On CPUs with MBM (Intel RDT, AMD PQoS) and a kernel with resctrl mounted
(``mount -t resctrl resctrl /sys/fs/resctrl``), each monitoring group has a byte counter per L3
cache domain: ``mon_data/mon_L3_<domain>/mbm_total_bytes``, the memory traffic (reads and
writes) of the group's tasks on that domain's CPUs. Bandwidth is a rate, so it takes two
samples: the first round after start has none (its bandwidth is missing, so that round fails,
as a round with an unreadable metric must), and every later round divides the counters' growth
by the time between samples (a monotonic clock, injected).

How counters become per-NUMA figures, and what is assumed:

* **All traffic**: every task counts in exactly one control group, and a control group's
  ``mon_data`` already sums its ``mon_groups`` children (kernel ``resctrl.rst``), so the
  counters of the default group (the root) and of each top-level control group are summed;
  ``mon_groups`` are not read again. A control group created or removed between two samples
  only counts while it exists in both.
* **Domain → NUMA node**: with Sub-NUMA Clustering the kernel splits each domain into
  ``mon_L3_<domain>/mon_sub_L3_<node>`` directories, one per NUMA node, which are used as they
  are. Otherwise a domain's CPUs are those whose level-3 cache
  (``/sys/devices/system/cpu/cpuN/cache/indexK`` with ``level`` 3) has the domain's ``id``, and
  the NUMA node is the one those CPUs are in; several domains in one node (AMD CCXs, NPS
  modes) add up. A domain whose CPUs span several nodes without sub-node directories cannot be
  split, so those nodes' bandwidth is missing with that reason; so is a node no domain maps to
  (a memory-only node).
* **Meaning**: MBM counts the traffic *caused by* a node's CPUs, to local and remote memory
  alike, where the reference's agent reports traffic per node. The balancer only compares
  bandwidths with each other (§4.1), and on a host that keeps memory local the two agree; the
  difference is documented rather than hidden.
* **Units**: GiB per second (the reference agent reports ``(read MB/s + write MB/s) / 1024``).
* A counter that reads ``Unavailable`` or ``Error`` (RMID busy or recycled), or that went
  backwards, makes that round's bandwidth of its node missing; the next round starts afresh
  from the new value.

Where the host has no resctrl or no MBM, building the source raises ``MetricSourceUnavailable``
saying what is missing. Latency comes from another source (``SplitNumaMetrics``).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from policy.balance import MissingSample, NumaMetrics
from policy.balance.inputs import Sample
from qrmd.host.metric_sources import MetricSourceUnavailable
from qrmd.host.source_settings import DEFAULT_RESCTRL_ROOT
from qrmd.host.sysfs_topology import DEFAULT_SYSFS_ROOT, SysfsTopologyError, read_sysfs_topology

__all__ = [
    "DEFAULT_RESCTRL_ROOT",
    "GIB",
    "MBM_TOTAL",
    "ResctrlBandwidth",
    "l3_domains_by_numa",
]

MBM_TOTAL = "mbm_total_bytes"
GIB = float(1 << 30)

_DOMAIN_DIR = re.compile(r"mon_L3_(\d+)")
_SUB_NODE_DIR = re.compile(r"mon_sub_L3_(\d+)")
_CACHE_INDEX = re.compile(r"index\d+")

# What a counter measures: ("L3", domain id), or ("node", NUMA id) for an SNC sub-node.
_Unit = tuple[str, int]
# A counter's key: (group directory relative to the resctrl root, its unit).
_Counter = tuple[str, _Unit]


def l3_domains_by_numa(sysfs_root: Path | str = DEFAULT_SYSFS_ROOT) -> dict[int, set[int]]:
    """Which NUMA nodes each L3 cache domain's CPUs are in.

    Args:
        sysfs_root: the sysfs mount point, or a tree laid out like it.

    Returns:
        L3 cache id → NUMA ids of its online CPUs.

    Raises:
        SysfsTopologyError: the CPU topology or a cache's ``level``/``id`` cannot be read.
    """
    topology = read_sysfs_topology(sysfs_root)
    cpu_dir = Path(sysfs_root) / "devices" / "system" / "cpu"
    domains: dict[int, set[int]] = {}
    for numa in topology.numa_nodes():
        for cpu in topology.cpus_in_numa(numa):
            domain = _l3_id(cpu_dir / f"cpu{cpu}" / "cache")
            if domain is not None:
                domains.setdefault(domain, set()).add(numa)
    return domains


def _l3_id(cache_dir: Path) -> int | None:
    if not cache_dir.is_dir():
        return None
    for index in sorted(p for p in cache_dir.iterdir() if _CACHE_INDEX.fullmatch(p.name)):
        if _read_int(index / "level") == 3:
            return _read_int(index / "id")
    return None


def _read_int(path: Path) -> int:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError as exc:
        raise SysfsTopologyError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not text.isdigit():
        raise SysfsTopologyError(f"{path}: expected a number, got {text!r}")
    return int(text)


class ResctrlBandwidth:
    """The ``NumaMetricSource`` port's bandwidth half, on resctrl MBM counters.

    Its ``read_latency`` is always missing: pair it with a latency source
    (``SplitNumaMetrics``).

    Args:
        resctrl_root: resctrl's mount point.
        sysfs_root: sysfs, for the L3 domain → NUMA node map (read once, here).
        monotonic: a monotonic clock in seconds, injected for tests.

    Raises:
        MetricSourceUnavailable: resctrl is not mounted there, or offers no
            ``mbm_total_bytes``, or sysfs maps no L3 domain to a NUMA node; the message says
            which file is missing.
    """

    def __init__(
        self,
        resctrl_root: Path | str = DEFAULT_RESCTRL_ROOT,
        sysfs_root: Path | str = DEFAULT_SYSFS_ROOT,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._root = Path(resctrl_root)
        features = self._root / "info" / "L3_MON" / "mon_features"
        try:
            offered = features.read_text(encoding="ascii").split()
        except OSError as exc:
            raise MetricSourceUnavailable(
                f"resctrl memory bandwidth monitoring is not available: cannot read {features} "
                f"({exc.strerror or exc}); is resctrl mounted (mount -t resctrl resctrl "
                f"{self._root}) on a CPU with MBM?"
            ) from None
        if MBM_TOTAL not in offered:
            raise MetricSourceUnavailable(
                f"resctrl memory bandwidth monitoring is not available: {features} does not "
                f"offer {MBM_TOTAL} (it offers: {', '.join(offered) or 'nothing'})"
            )
        try:
            self._domain_numas = l3_domains_by_numa(sysfs_root)
        except SysfsTopologyError as exc:
            raise MetricSourceUnavailable(f"resctrl: cannot map L3 domains: {exc}") from None
        if not self._domain_numas:
            raise MetricSourceUnavailable(
                f"resctrl: no CPU under {sysfs_root} reports a level-3 cache id, so no L3 "
                "domain can be mapped to a NUMA node"
            )
        self._monotonic = monotonic
        self._previous: tuple[float, dict[_Counter, int]] | None = None

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        """Read every counter now and return each node's bandwidth since the last call."""
        now = self._monotonic()
        counters, broken = self._read_counters()
        previous, self._previous = self._previous, (now, counters)
        latency = MissingSample("resctrl measures bandwidth only; latency needs another source")
        return {
            numa: NumaMetrics(latency, self._bandwidth(numa, now, counters, broken, previous))
            for numa in numa_ids
        }

    def _read_counters(self) -> tuple[dict[_Counter, int], dict[_Unit, str]]:
        """Every readable counter, and why each unreadable unit is unreadable."""
        counters: dict[_Counter, int] = {}
        broken: dict[_Unit, str] = {}
        for group in self._groups():
            name = str(group.relative_to(self._root))
            for unit, path in _counter_files(group / "mon_data"):
                try:
                    text = path.read_text(encoding="ascii").strip()
                except OSError as exc:
                    broken[unit] = f"cannot read {path}: {exc.strerror or exc}"
                    continue
                if not text.isdigit():
                    broken[unit] = f"{path} reads {text!r}"
                    continue
                counters[(name, unit)] = int(text)
        return counters, broken

    def _groups(self) -> list[Path]:
        """The default group (the root) and each control group; each includes its
        ``mon_groups`` already."""
        try:
            children = sorted(
                p
                for p in self._root.iterdir()
                if p.is_dir() and p.name not in ("info", "mon_groups", "mon_data")
            )
        except OSError:
            children = []  # unmounted since start: no counter is found, each node is missing
        return [self._root, *children]

    def _units_of(self, numa: int, sub_nodes: set[int]) -> list[_Unit] | MissingSample:
        """The counters that measure one NUMA node, or why none can."""
        if numa in sub_nodes:
            return [("node", numa)]
        domains = sorted(d for d, numas in self._domain_numas.items() if numa in numas)
        if not domains:
            return MissingSample(f"resctrl: no L3 domain has CPUs on NUMA node {numa}")
        for domain in domains:
            spanned = self._domain_numas[domain]
            if len(spanned) > 1:
                return MissingSample(
                    f"resctrl: L3 domain {domain} spans NUMA nodes "
                    f"{', '.join(map(str, sorted(spanned)))} and has no per-node counters; "
                    "its bandwidth cannot be split"
                )
        return [("L3", d) for d in domains]

    def _bandwidth(
        self,
        numa: int,
        now: float,
        counters: Mapping[_Counter, int],
        broken: Mapping[_Unit, str],
        previous: tuple[float, Mapping[_Counter, int]] | None,
    ) -> Sample:
        sub_nodes = {u[1] for (_, u) in counters if u[0] == "node"}
        sub_nodes |= {u[1] for u in broken if u[0] == "node"}
        units = self._units_of(numa, sub_nodes)
        if isinstance(units, MissingSample):
            return units
        for unit in units:
            if unit in broken:
                return MissingSample(f"resctrl: {broken[unit]}")
        if previous is None:
            return MissingSample("resctrl: a bandwidth needs two samples; this is the first")
        then, before = previous
        elapsed = now - then
        if not elapsed > 0 or not math.isfinite(elapsed):
            return MissingSample(f"resctrl: {elapsed!r} s between samples; need a positive time")
        current = {unit for _, unit in counters}
        both = {unit for key, unit in counters if (key, unit) in before}
        for kind, number in units:
            if (kind, number) not in current:
                return MissingSample(
                    f"resctrl: no {MBM_TOTAL} for {kind} {number} under {self._root}"
                )
            if (kind, number) not in both:
                return MissingSample(
                    f"resctrl: the {MBM_TOTAL} of {kind} {number} appeared since the last sample"
                )
        grown = 0
        for key, value in counters.items():
            if key[1] not in units or key not in before:
                continue
            delta = value - before[key]
            if delta < 0:
                group, (kind, number) = key
                return MissingSample(
                    f"resctrl: {MBM_TOTAL} of group {group!r}, {kind} {number}, went backwards "
                    f"({before[key]} → {value}); reset"
                )
            grown += delta
        return grown / elapsed / GIB


def _counter_files(mon_data: Path) -> list[tuple[_Unit, Path]]:
    """Each unit's ``mbm_total_bytes`` in one group's ``mon_data``: per SNC sub-node where the
    kernel splits the domain, else per L3 domain."""
    files: list[tuple[_Unit, Path]] = []
    for domain, domain_dir in _numbered(mon_data, _DOMAIN_DIR):
        subs = _numbered(domain_dir, _SUB_NODE_DIR)
        if not subs:
            files.append((("L3", domain), domain_dir / MBM_TOTAL))
        files.extend((("node", node), sub / MBM_TOTAL) for node, sub in subs)
    return files


def _numbered(directory: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    """The entries whose name matches ``pattern``, with the number it captures, in order."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []  # the group went away between listing and reading, or never had one
    found = [(int(m.group(1)), p) for p in entries if (m := pattern.fullmatch(p.name))]
    return sorted(found)
