"""The memory balancer's metric-source settings as plain data (spec memory-balancer §3.2, §4):
which source each NUMA metric comes from and where, read from the keys below; building the
sources from them is ``qrmd.host.balancer_sources``. Only the standard library and the plain
``kube_cgroups`` names: ``qrmd.config`` reads these settings without loading a source.
memory-balancer §3.2, §4).

The keys, in a ``memory-balancer`` section of the configuration file (each will also be a flag
of the same name); every key is optional, its default in brackets:

* ``numa-latency-source`` [``file``]: where read latency comes from: ``file``, ``prometheus``
  or ``simulator``.
* ``numa-bandwidth-source`` [as latency]: where bandwidth comes from: ``file``, ``prometheus``,
  ``resctrl`` or ``simulator``.
* ``numa-metrics-file`` [``/run/qrmd/numa-metrics.json``]: the collector's JSON file
  (format in ``qrmd.host.metrics_file``).
* ``numa-metrics-prometheus-url`` [none; required for ``prometheus``]: the text endpoint.
* ``numa-metrics-prometheus-latency-metric`` [the balancer's ``read-latency-metric-name`` with
  ``.`` → ``_``, e.g. ``mem_latency_read_numa``], ``numa-metrics-prometheus-bandwidth-metric``
  [``mem_bandwidth_numa``]: the metric names scraped.
* ``numa-metrics-prometheus-numa-label`` [``numa``]: the label holding the NUMA id.
* ``numa-metrics-prometheus-match-labels`` [none]: ``label=value,...`` (or a mapping) a sample
  must carry.
* ``numa-metrics-prometheus-timeout`` [``2``]: scrape timeout, seconds.
* ``resctrl-root`` [``/sys/fs/resctrl``]: resctrl's mount, for ``resctrl`` bandwidth.
* ``metric-insurance-period`` [``0``]: seconds; 0 means samples never expire (§4.3).
* ``memory-cgroup-root`` [detected: ``/sys/fs/cgroup/memory`` on cgroup v1, else
  ``/sys/fs/cgroup``]: the memory controller's mount.
* ``cgroup-driver`` [``auto``]: kubelet's, ``cgroupfs`` or ``systemd``; ``auto`` tries both.
* ``kubelet-cgroup-root`` [``/``]: kubelet's ``--cgroup-root``.

A bad value raises ``ValueError`` naming the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType

from qrmd.host.kube_cgroups import CgroupDriver

__all__ = [
    "DEFAULT_METRICS_FILE",
    "DEFAULT_RESCTRL_ROOT",
    "BalancerSourceSettings",
    "SourceKind",
    "prometheus_name",
]

#: resctrl's usual mount (``qrmd.host.metrics_resctrl``).
DEFAULT_RESCTRL_ROOT = Path("/sys/fs/resctrl")


def prometheus_name(metric: str) -> str:
    """The Prometheus spelling of a reference metric name: ``mem.bandwidth.numa`` →
    ``mem_bandwidth_numa``."""
    return metric.replace(".", "_")


DEFAULT_METRICS_FILE = Path("/run/qrmd/numa-metrics.json")


class SourceKind(StrEnum):
    """Where a NUMA metric comes from."""

    FILE = "file"
    PROMETHEUS = "prometheus"
    RESCTRL = "resctrl"
    SIMULATOR = "simulator"


_LATENCY_KINDS = (SourceKind.FILE, SourceKind.PROMETHEUS, SourceKind.SIMULATOR)
_KEYS = (
    "numa-latency-source",
    "numa-bandwidth-source",
    "numa-metrics-file",
    "numa-metrics-prometheus-url",
    "numa-metrics-prometheus-latency-metric",
    "numa-metrics-prometheus-bandwidth-metric",
    "numa-metrics-prometheus-numa-label",
    "numa-metrics-prometheus-match-labels",
    "numa-metrics-prometheus-timeout",
    "resctrl-root",
    "metric-insurance-period",
    "memory-cgroup-root",
    "cgroup-driver",
    "kubelet-cgroup-root",
)


@dataclass(frozen=True, slots=True)
class BalancerSourceSettings:
    """The validated source settings (module docstring for the keys)."""

    latency_source: SourceKind = SourceKind.FILE
    bandwidth_source: SourceKind = SourceKind.FILE
    metrics_file: Path = DEFAULT_METRICS_FILE
    prometheus_url: str = ""
    prometheus_latency_metric: str = ""
    prometheus_bandwidth_metric: str = prometheus_name("mem.bandwidth.numa")
    prometheus_numa_label: str = "numa"
    prometheus_match_labels: Mapping[str, str] = field(default_factory=dict)
    prometheus_timeout_s: float = 2.0
    resctrl_root: Path = DEFAULT_RESCTRL_ROOT
    metric_insurance_period_s: float = 0.0
    memory_cgroup_root: Path | None = None
    cgroup_driver: CgroupDriver | None = None
    kubelet_cgroup_root: str = "/"

    @classmethod
    def from_mapping(
        cls, value: Mapping[str, object], where: str = "memory-balancer"
    ) -> BalancerSourceSettings:
        """Read the keys of the module docstring.

        Raises:
            ValueError: an unknown key or a bad value; the message names ``where.key``.
        """
        unknown = sorted(set(value) - set(_KEYS))
        if unknown:
            raise ValueError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(_KEYS)})")
        get = _Reader(value, where)
        latency = get.kind("numa-latency-source", SourceKind.FILE, _LATENCY_KINDS)
        settings = cls(
            latency_source=latency,
            bandwidth_source=get.kind("numa-bandwidth-source", latency, tuple(SourceKind)),
            metrics_file=Path(get.text("numa-metrics-file", str(DEFAULT_METRICS_FILE))),
            prometheus_url=get.text("numa-metrics-prometheus-url", ""),
            prometheus_latency_metric=get.text("numa-metrics-prometheus-latency-metric", ""),
            prometheus_bandwidth_metric=get.text(
                "numa-metrics-prometheus-bandwidth-metric", prometheus_name("mem.bandwidth.numa")
            ),
            prometheus_numa_label=get.text("numa-metrics-prometheus-numa-label", "numa"),
            prometheus_match_labels=get.labels("numa-metrics-prometheus-match-labels"),
            prometheus_timeout_s=get.seconds("numa-metrics-prometheus-timeout", 2.0, positive=True),
            resctrl_root=Path(get.text("resctrl-root", str(DEFAULT_RESCTRL_ROOT))),
            metric_insurance_period_s=get.seconds("metric-insurance-period", 0.0),
            memory_cgroup_root=(
                Path(get.text("memory-cgroup-root", "")) if "memory-cgroup-root" in value else None
            ),
            cgroup_driver=get.driver("cgroup-driver"),
            kubelet_cgroup_root=get.text("kubelet-cgroup-root", "/"),
        )
        uses_prometheus = SourceKind.PROMETHEUS in (latency, settings.bandwidth_source)
        if uses_prometheus and not settings.prometheus_url:
            raise ValueError(
                f"{where}.numa-metrics-prometheus-url: required when a NUMA metric source is "
                "'prometheus'"
            )
        return settings


class _Reader:
    """Typed reads of one configuration section, errors naming the key."""

    def __init__(self, value: Mapping[str, object], where: str) -> None:
        self._value = value
        self._where = where

    def _raw(self, key: str, default: object) -> object:
        return self._value.get(key, default)

    def text(self, key: str, default: str) -> str:
        raw = self._raw(key, default)
        if not isinstance(raw, str) or (key in self._value and not raw):
            raise ValueError(f"{self._where}.{key}: expected a non-empty string, got {raw!r}")
        return raw

    def kind(self, key: str, default: SourceKind, allowed: Sequence[SourceKind]) -> SourceKind:
        raw = self._raw(key, str(default))
        if raw not in [str(k) for k in allowed]:
            names = ", ".join(str(k) for k in allowed)
            raise ValueError(f"{self._where}.{key}: {raw!r} is not one of {names}")
        return SourceKind(raw)

    def seconds(self, key: str, default: float, *, positive: bool = False) -> float:
        raw = self._raw(key, default)
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
            raise ValueError(f"{self._where}.{key}: expected seconds as a number, got {raw!r}")
        if raw < 0 or (positive and raw == 0):
            bound = "positive" if positive else "0 or more"
            raise ValueError(f"{self._where}.{key}: {raw!r} s must be {bound}")
        return float(raw)

    def labels(self, key: str) -> Mapping[str, str]:
        raw = self._raw(key, {})
        where = f"{self._where}.{key}"
        if isinstance(raw, str):
            pairs: dict[str, str] = {}
            for item in filter(None, (p.strip() for p in raw.split(","))):
                name, sep, label_value = item.partition("=")
                if not sep or not name:
                    raise ValueError(f"{where}: expected label=value pairs, got {item!r}")
                pairs[name.strip()] = label_value.strip()
            return MappingProxyType(pairs)
        if isinstance(raw, Mapping) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
        ):
            return MappingProxyType(dict(raw))
        raise ValueError(f"{where}: expected 'label=value,...' or a mapping, got {raw!r}")

    def driver(self, key: str) -> CgroupDriver | None:
        raw = self._raw(key, "auto")
        if raw == "auto":
            return None
        if raw not in [str(d) for d in CgroupDriver]:
            raise ValueError(f"{self._where}.{key}: {raw!r} is not one of cgroupfs, systemd, auto")
        return CgroupDriver(raw)
