"""The CPU pressure eviction settings of ``qrmd run``: their options (``CPU_EVICTION_OPTIONS``,
part of ``qrmd.config.OPTIONS``), parsers, and the ``PressureSettings`` built from them
(spec cpu-policy §12.7; katalyst-core v0.5.3 ``cmd/katalyst-agent/app/options``).

Every flag keeps the reference's name and default:

* ``--enable-cpu-pressure-eviction`` (``options/qrm/cpu_plugin.go``): serve the two eviction
  plugins at all; a plain ``DaemonConfig`` field;
* ``--load-pressure-eviction-skip-pools`` (same file) and the ``eviction-cpu-pressure`` flag
  set of ``options/dynamic/adminqos/eviction/cpu_pressure_eviction.go``
  (``--eviction-load-*``, ``--eviction-suppression-*``, ``--eviction-cpu-grace-period``),
  ``--eviction-load-sync-period`` (``options/eviction/cpu_pressure_eviction.go``) and the CPU
  of ``--reserved-resource-for-allocate`` / ``--reserved-resource-for-reclaimed-cores``
  (``options/dynamic/adminqos/reclaimedresource``, which the load plugin reads to choose its
  bounds): the ``cpu_eviction`` group, one ``PressureSettings``;
  ``CPUPressureSettings.plugins`` adds ``--enable-reclaim`` to it;
* ``--cpu-load-metrics-source`` (qrmd's own): where containers' 1-minute load is read
  (``qrmd.host.cpu_load_sources``);
* ``--reclaim-metrics-source`` (qrmd's own, v0.5.47 only): where the v0.5.47 suppression
  eviction reads the per-CPU usage and the reclaim cgroups' usage and quota
  (``qrmd.host.reclaim_metrics``); the reclaim root cgroup is the pod source's
  ``--reclaim-relative-root-cgroup-path``, which the reference's global option also is.

Every parser raises ``ValueError`` with a message that the caller prefixes with the flag.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from policy.cpu import pressure
from policy.cpu.pressure import PressureSettings, PressureSettingsError
from policy.cpu.pressure.settings import (
    DEFAULT_SKIP_POOLS,
    EVICTION_NAME_LOAD,
    EVICTION_NAME_SUPPRESSION,
)
from policy.cpu.reference import V0_5_47
from qrmd.config_values import (
    Option,
    Socket,
    choice,
    count,
    duration,
    nonempty,
    positive_duration,
    single_value,
    switch,
    whole_number,
)

__all__ = [
    "CPU_EVICTION_OPTIONS",
    "DEFAULT_CPU_LOAD_SOURCE",
    "DEFAULT_RECLAIM_METRICS_SOURCE",
    "PLUGIN_NAMES",
    "CPUPressureSettings",
    "cpu_eviction_values",
]

#: ``--cpu-load-metrics-source`` default: the collector's JSON file.
DEFAULT_CPU_LOAD_SOURCE = "file"
#: ``--reclaim-metrics-source`` default: /proc/stat and the cgroup tree.
DEFAULT_RECLAIM_METRICS_SOURCE = "host"
#: Its values (``qrmd.host.reclaim_metrics.build_reclaim_metrics_source``).
RECLAIM_METRICS_SOURCES = ("host", "simulated")
_GROUP = "cpu_eviction"
#: The two eviction plugins, each on ``<--plugin-registration-dir>/<name>.sock``.
PLUGIN_NAMES = (EVICTION_NAME_LOAD, EVICTION_NAME_SUPPRESSION)
#: ``--plugin-registration-dir``'s default (``qrmd.balancer.settings``, whose option it is).
_DEFAULT_PLUGIN_REGISTRATION_DIR = "/var/lib/katalyst/plugin-socks"


def _ratio(raw: object) -> float:
    try:
        value = float(single_value(raw))
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not a finite number")
    return value


def _pools(raw: object) -> frozenset[str]:
    # A Go StringSlice: comma-separated on the command line; a list in a file.
    parts = (
        [single_value(p) for p in raw]
        if isinstance(raw, list | tuple)
        else single_value(raw).split(",")
    )
    return frozenset(p.strip() for p in parts if p.strip())


def _resource_cpu(raw: object) -> float:
    """The CPU of a resource list (``cpu=4,memory=5Gi``, or a file's mapping)."""
    if isinstance(raw, Mapping):
        pairs = {str(k): single_value(v) for k, v in raw.items()}
    else:
        pairs = {}
        for item in single_value(raw).split(","):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"{item!r} is not RESOURCE=QUANTITY (e.g. cpu=4,memory=5Gi)")
            pairs[key.strip()] = value.strip()
    if "cpu" not in pairs:
        return 0.0
    # Through the package, which loads the pods' quantities (regexes, a table of fractions) on
    # first use: only for a flag that has one.
    try:
        cpu = pressure.parse_quantity(pairs["cpu"], "cpu")
    except pressure.PodError as err:
        raise ValueError(str(err)) from None
    if cpu < 0:
        raise ValueError(f"cpu={pairs['cpu']} is negative")
    return float(cpu)


def _load_source(raw: object) -> str:
    """A ``--cpu-load-metrics-source`` SPEC, checked as ``build_container_load_source`` reads it."""
    spec = nonempty(raw)
    kind, _, arg = spec.partition(":")
    if (kind == "file") or (kind == "simulated" and not arg):
        return spec
    if kind == "prometheus" and arg.startswith(("http://", "https://")):
        return spec
    raise ValueError(
        f"{spec!r} is not a CPU load source: use file[:PATH], prometheus:URL or simulated"
    )


def _grace(raw: object) -> int:
    return whole_number(raw)


#: The options, in the order ``--help`` and docs/flags.md list them.
CPU_EVICTION_OPTIONS: tuple[Option, ...] = (
    Option("enable-cpu-pressure-eviction", "enable_cpu_pressure_eviction", switch, "false",
           "serve the CPU pressure eviction plugins cpu-pressure-load-plugin and "
           "cpu-pressure-suppression-plugin on --plugin-registration-dir",
           "--enable-cpu-pressure-eviction", switch=True),
    Option("load-pressure-eviction-skip-pools", "skip_pools", _pools,
           ",".join(DEFAULT_SKIP_POOLS),
           "pools the load plugin neither samples nor judges",
           "--load-pressure-eviction-skip-pools", "POOL,...", group=_GROUP),
    Option("eviction-load-enable", "enable_load_eviction", switch, "false",
           "judge pools' CPU load: the CPUPressure condition and eviction candidates",
           "--eviction-load-enable", switch=True, group=_GROUP),
    Option("eviction-load-upper-bound-ratio", "load_upper_bound_ratio", _ratio, "1.8",
           "a pool's hard load bound is its size times this",
           "--eviction-load-upper-bound-ratio", "RATIO", group=_GROUP),
    Option("eviction-load-threshold-met-percentage", "load_threshold_met_percentage", _ratio,
           "0.8", "share of the load ring's size that must be over a bound to meet it",
           "--eviction-load-threshold-met-percentage", "RATIO", group=_GROUP),
    Option("eviction-load-metric-ring-size", "load_metric_ring_size", count(1), "10",
           "load samples kept per pool and container",
           "--eviction-load-metric-ring-size", "N", group=_GROUP),
    Option("eviction-load-cool-down-time", "load_eviction_cool_down_s", duration, "5m0s",
           "after offering eviction candidates, none again for this long",
           "--eviction-load-cool-down-time", "DURATION", group=_GROUP),
    Option("eviction-load-sync-period", "load_eviction_sync_period_s", positive_duration, "30s",
           "time between two load collections", "--eviction-load-sync-period", "DURATION",
           group=_GROUP),
    Option("eviction-suppression-enable", "enable_suppression_eviction", switch, "false",
           "offer reclaimed_cores pods over their suppression tolerance for eviction",
           "--eviction-suppression-enable", switch=True, group=_GROUP),
    Option("eviction-suppression-max-tolerance-rate", "max_suppression_tolerance_rate", _ratio,
           "5", "cap of a pod's suppression_tolerance_rate",
           "--eviction-suppression-max-tolerance-rate", "RATIO", group=_GROUP),
    Option("eviction-suppression-min-tolerance-duration", "min_suppression_tolerance_duration_s",
           duration, "5m0s", "a pod is offered only once over its tolerance for longer than this",
           "--eviction-suppression-min-tolerance-duration", "DURATION", group=_GROUP),
    Option("eviction-cpu-grace-period", "grace_period_s", _grace, "-1",
           "deletion grace period (seconds) sent with load eviction candidates; negative: none",
           "--eviction-cpu-grace-period", "SECONDS", group=_GROUP),
    Option("reserved-resource-for-allocate", "reserved_cpu_for_allocate", _resource_cpu,
           "cpu=4,memory=5Gi",
           "resources kept from reclaimed pods; its CPU 0 (with --enable-reclaim) makes the load "
           "bounds follow the load", "--reserved-resource-for-allocate", "RESOURCE=QTY,...",
           group=_GROUP),
    Option("reserved-resource-for-reclaimed-cores", "reserved_cpu_for_reclaimed_cores",
           _resource_cpu, "cpu=4,memory=0",
           "resources kept for reclaimed pods; its CPU is taken off the shared pools' limit",
           "--reserved-resource-for-reclaimed-cores", "RESOURCE=QTY,...", group=_GROUP),
    Option("cpu-load-metrics-source", "cpu_load_metrics_source", _load_source,
           DEFAULT_CPU_LOAD_SOURCE,
           "where containers' 1-minute CPU load is read: file[:PATH], prometheus:URL, "
           "simulated", "none (the agent's metrics server, malachite)", "SPEC"),
    Option("reclaim-metrics-source", "reclaim_metrics_source", choice(*RECLAIM_METRICS_SOURCES),
           DEFAULT_RECLAIM_METRICS_SOURCE,
           "v0.5.47 only: where the suppression plugin reads per-CPU usage and the reclaim "
           "cgroups' usage and CFS quota: host (/proc/stat and the cpu cgroup tree under "
           "--reclaim-relative-root-cgroup-path) or simulated (all idle)",
           "none (the agent's metrics server, malachite)", "|".join(RECLAIM_METRICS_SOURCES),
           since=V0_5_47),
)  # fmt: skip


def cpu_eviction_values(
    values: Mapping[str, Any], groups: Mapping[str, Mapping[str, object]]
) -> dict[str, Any]:
    """The ``DaemonConfig`` fields of CPU pressure eviction, from the checked values.

    Args:
        values: the checked plain fields by field name (none is read).
        groups: the checked keys given, by group (``cpu_eviction`` is read).

    Returns:
        ``cpu_pressure``: the ``PressureSettings``, ``enable_reclaim`` left false.

    Raises:
        ValueError: the values are invalid together; the message names the flag.
    """
    # --enable-reclaim stays DaemonConfig.enable_reclaim: see ``CPUPressureSettings.plugins``.
    del values
    given: dict[str, Any] = dict(groups.get(_GROUP, {}))
    try:
        return {"cpu_pressure": PressureSettings(**given)}
    except PressureSettingsError as err:
        flag = next(
            (f"--{o.flag}" for o in CPU_EVICTION_OPTIONS if str(err).startswith(o.field)), ""
        )
        raise ValueError(f"{flag}: {err}" if flag else str(err)) from None


@dataclass(frozen=True, slots=True)
class CPUPressureSettings:
    """CPU pressure eviction's settings, each the ``DaemonConfig`` field of the same name
    (``qrmd.config_values.settings_of``): its own option rows and the two of other sections
    it reads (``--enable-reclaim``, ``--plugin-registration-dir``).

    Attributes:
        enable_cpu_pressure_eviction: serve the CPU pressure eviction plugins (cpu-policy
            §12.7).
        cpu_pressure: the plugins' settings, ``enable_reclaim`` left false (``plugins``).
        enable_reclaim: ``--enable-reclaim`` (the CPU plugin's option).
        cpu_load_metrics_source: the ``--cpu-load-metrics-source`` SPEC as given.
        reclaim_metrics_source: ``--reclaim-metrics-source`` (read at v0.5.47 only).
        plugin_registration_dir: where the plugins' sockets are created (the memory
            balancer's option).
    """

    enable_cpu_pressure_eviction: bool = False
    cpu_pressure: PressureSettings = field(default_factory=PressureSettings)
    enable_reclaim: bool = False
    cpu_load_metrics_source: str = DEFAULT_CPU_LOAD_SOURCE
    reclaim_metrics_source: str = DEFAULT_RECLAIM_METRICS_SOURCE
    plugin_registration_dir: str = _DEFAULT_PLUGIN_REGISTRATION_DIR

    @property
    def enabled(self) -> bool:
        """``--enable-cpu-pressure-eviction``."""
        return self.enable_cpu_pressure_eviction

    @property
    def plugins(self) -> PressureSettings:
        """The plugins' settings: ``cpu_pressure`` with ``--enable-reclaim`` (one flag for the
        CPU policy and the load plugin's bounds, as in the reference)."""
        return replace(self.cpu_pressure, enable_reclaim=self.enable_reclaim)

    def sockets(self) -> tuple[Socket, ...]:
        """The two eviction plugins' sockets, when they are served. They are not counted
        against the open-file limit under ``--max-connections`` (the daemon never has)."""
        if not self.enabled:
            return ()
        return tuple(
            Socket.in_directory("plugin-registration-dir", self.plugin_registration_dir, name)
            for name in PLUGIN_NAMES
        )
