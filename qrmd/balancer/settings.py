"""The memory balancer's settings of ``qrmd run``: its options (``BALANCER_OPTIONS``, part of
``qrmd.config.OPTIONS``), their value parsers and the objects built from them (spec
memory-balancer §3, §3.1, §3.2, §4.3).

Plain fields (``--enable-memory-balancer``, ``--qos-aware-sync-period``,
``--memory-balance-execute``, ``--plugin-registration-dir``, ``--numa-metrics-source``) go to
``DaemonConfig`` as they are; the two groups become the objects the daemon wires:

* the **balancer options** of §3 keep the reference's flag names (``--grace-balance-gap-ratio``,
  the vendor-aware ``--force-balance-read-latency-threshold default=80,AMD=600``, …) and become
  one ``policy.balance.BalancerConfig`` through its own decoder (``BalancerConfig.from_json``,
  keyed by the same names), so the command line, the config file and ``qrmd balance plan``
  read them with one set of rules;
* the **metric sources** keep the key names of ``qrmd.host.source_settings`` and become one
  ``BalancerSourceSettings`` (``from_mapping``). ``--numa-metrics-source SPEC`` is a shorthand
  for the common choices; a source key given on its own wins over it:

  ==============================  ==========================================================
  SPEC                            means
  ==============================  ==========================================================
  ``file`` / ``file:PATH``        latency and bandwidth from a collector's JSON file
  ``prometheus:URL``              latency and bandwidth scraped from a Prometheus endpoint
  ``resctrl``                     bandwidth from resctrl MBM counters, latency from the file
  ``simulated``                   a simulator, every node quiet (tests, demos)
  ``simulated:pressure=N``        the same with NUMA node ``N`` under latency pressure
  ==============================  ==========================================================

Every parser raises ``ValueError`` with a message that the caller prefixes with the flag.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from policy.balance import BalanceError, BalancerConfig
from policy.balance.constants import EVICTION_PLUGIN_NAME
from qrmd.config_values import (
    Option,
    Socket,
    choice,
    nonempty,
    period,
    positive_duration,
    single_value,
    socket_path,
    switch,
    whole_number,
)
from qrmd.host.source_settings import BalancerSourceSettings, SourceKind

__all__ = [
    "BALANCER_OPTIONS",
    "DEFAULT_METRICS_SOURCE",
    "DEFAULT_PLUGIN_REGISTRATION_DIR",
    "BalancerSettings",
    "MetricsSourceSpec",
    "balancer_value",
    "balancer_values",
    "build_balancer_config",
    "build_source_settings",
    "parse_metrics_source",
    "source_kind",
]

#: katalyst-agent's ``--plugin-registration-dir`` default (§3.2, wire.md §8.3).
#: katalyst-agent's plugin-registration directory (``wire.eviction_server.DEFAULT_SOCKET_DIR``,
#: the same; a test checks that they agree).
DEFAULT_PLUGIN_REGISTRATION_DIR = "/var/lib/katalyst/plugin-socks"
DEFAULT_METRICS_SOURCE = "file"
#: ``--max-connections``'s default (``qrmd.cpu_plugin.settings``; the balancer's eviction
#: socket is counted as one more plugin socket under it).
_DEFAULT_MAX_CONNECTIONS: Final = 1024
# The section name ``from_mapping`` puts in front of a key in its messages.
_SECTION = "memory-balancer"

# The source kinds by the names the flags accept (``simulated`` reads better on a command line).
_KIND_NAMES = {str(k): k for k in SourceKind} | {"simulated": SourceKind.SIMULATOR}


def _check(flag: str, value: object) -> None:
    """Validate one §3 option with the planner's own decoder."""
    try:
        BalancerConfig.from_json({flag: value}, where="")
    except BalanceError as err:
        message = str(err)
        # The caller names the flag: drop the decoder's own copy of the name.
        for prefix in (f".{flag}", flag):
            message = message.removeprefix(prefix).lstrip(": ")
        raise ValueError(message or str(err)) from None


def balancer_value(flag: str, kind: str) -> Callable[[object], object]:
    """The parser of one §3 option.

    Args:
        flag: the option's reference flag name (``grace-balance-gap-ratio``).
        kind: ``vendor`` (``default=70,AMD=500``, or a mapping in a file), ``int`` (bytes or a
            distance), ``ratio`` (a float), or ``pools`` (comma-separated, or a list).

    Returns:
        A parser giving the value in ``BalancerConfig.from_json``'s form.
    """

    def parse(raw: object) -> object:
        value: object
        if kind == "vendor":
            value = dict(raw) if isinstance(raw, Mapping) else single_value(raw)
        elif kind == "int":
            value = _whole(raw)
        elif kind == "ratio":
            value = _ratio(raw)
        elif isinstance(raw, list | tuple):
            value = [single_value(p) for p in raw]
        else:
            value = [p.strip() for p in single_value(raw).split(",")]
        _check(flag, value)
        return value

    return parse


def _whole(raw: object) -> int:
    value = whole_number(raw)
    if value < 0:
        raise ValueError(f"{value} is negative")
    return value


def _ratio(raw: object) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a number")
    try:
        return float(single_value(raw))
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None


def source_kind(raw: object) -> str:
    """A source kind name: ``file``, ``prometheus``, ``resctrl``, ``simulated``/``simulator``.

    Raises:
        ValueError: another name.
    """
    text = single_value(raw).lower()
    if text not in _KIND_NAMES:
        raise ValueError(f"{raw!r} is not one of file, prometheus, resctrl, simulated")
    return str(_KIND_NAMES[text])


@dataclass(frozen=True, slots=True)
class MetricsSourceSpec:
    """A parsed ``--numa-metrics-source`` (module docstring).

    Attributes:
        keys: the source keys it stands for (``numa-latency-source``, …).
        pressure: simulated NUMA nodes under pressure from the start.
    """

    keys: Mapping[str, object]
    pressure: tuple[int, ...] = ()


def parse_metrics_source(raw: object) -> MetricsSourceSpec:
    """Parse ``--numa-metrics-source`` (module docstring for the forms).

    Raises:
        ValueError: not one of the forms.
    """
    text = single_value(raw)
    kind, sep, rest = text.partition(":")
    kind = kind.lower()
    if kind == "file":
        keys: dict[str, object] = {"numa-latency-source": "file"}
        if sep:
            if not rest:
                raise ValueError(f"{text!r} names no file after 'file:'")
            keys["numa-metrics-file"] = rest
        return MetricsSourceSpec(keys)
    if kind == "prometheus":
        if not rest:
            raise ValueError(
                f"{text!r}: give the endpoint, e.g. prometheus:http://host:9100/metrics"
            )
        return MetricsSourceSpec(
            {"numa-latency-source": "prometheus", "numa-metrics-prometheus-url": rest}
        )
    if kind == "resctrl" and not sep:
        return MetricsSourceSpec(
            {"numa-latency-source": "file", "numa-bandwidth-source": "resctrl"}
        )
    if kind in ("simulated", "simulator"):
        return MetricsSourceSpec({"numa-latency-source": "simulator"}, _pressure(text, rest))
    raise ValueError(
        f"{text!r} is not file[:PATH], prometheus:URL, resctrl, simulated or simulated:pressure=N"
    )


def _pressure(text: str, rest: str) -> tuple[int, ...]:
    if not rest:
        return ()
    key, sep, ids = rest.partition("=")
    numas = ids.split("+")
    if key != "pressure" or not sep or not all(n.isdigit() for n in numas):
        raise ValueError(f"{text!r}: expected simulated:pressure=N (or N+M for several nodes)")
    return tuple(sorted({int(n) for n in numas}))


def build_balancer_config(values: Mapping[str, object]) -> BalancerConfig:
    """The ``BalancerConfig`` of the §3 options given (each already checked alone).

    Raises:
        ValueError: the options disagree; the message names the option.
    """
    try:
        return BalancerConfig.from_json(dict(values), where="")
    except BalanceError as err:
        raise ValueError(f"--{str(err).removeprefix('.')}") from None


def build_source_settings(
    spec: MetricsSourceSpec, values: Mapping[str, object]
) -> BalancerSourceSettings:
    """The ``BalancerSourceSettings`` of the shorthand, overridden by the keys given alone.

    Raises:
        ValueError: the settings are invalid together (e.g. ``prometheus`` without a URL); the
            message names the flag.
    """
    merged = {**spec.keys, **values}
    if "numa-latency-source" in values and "numa-bandwidth-source" not in values:
        # A latency source chosen alone takes bandwidth with it, as the key's default says.
        merged.pop("numa-bandwidth-source", None)
    try:
        return BalancerSourceSettings.from_mapping(merged, where=_SECTION)
    except ValueError as err:
        raise ValueError(f"--{str(err).removeprefix(_SECTION + '.')}") from None


def _summary_period(raw: object) -> float:
    value = period(raw)
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not a finite duration")
    return value


def _metrics_source(raw: object) -> str:
    text = single_value(raw)
    parse_metrics_source(text)
    return text


def _labels(raw: object) -> object:
    if isinstance(raw, Mapping):
        return {str(k): single_value(v) for k, v in raw.items()}
    return single_value(raw)


#: The balancer's options of ``qrmd run`` (spec memory-balancer §1.1, §3, §3.2, §4, §10, §11):
#: the ``balancer`` group becomes the ``BalancerConfig``, the ``sources`` group the
#: ``BalancerSourceSettings``; the others are fields of ``DaemonConfig``.
BALANCER_OPTIONS: tuple[Option, ...] = (
    Option("enable-memory-balancer", "enable_memory_balancer", switch, "false",
           "run the NUMA memory balancer: a round every --qos-aware-sync-period, its eviction "
           "plugin on --plugin-registration-dir",
           "--memory-advisor-plugins=numa_memory_balancer", switch=True),
    Option("qos-aware-sync-period", "qos_aware_sync_period_s", positive_duration, "5s",
           "time between two balance rounds (the advisor loop's period)",
           "--qos-aware-sync-period", "DURATION"),
    Option("balance-round-summary-every", "balance_round_summary_every_s", _summary_period,
           "1h",
           "a quiet round that repeats the journaled outcome is not journaled on its own; "
           "the journal gets a summary of such rounds at least this often (0s: every round)",
           "none (the reference journals nothing)", "DURATION"),
    Option("memory-balance-execute", "memory_balance_execute", switch, "false",
           "carry out the balancer's advices (pages moved with move_pages(2) in bounded batches); "
           "false: a dry run that logs "
           "and journals what it would migrate",
           "none (the memory plugin executes when --memory-resource-plugin-advisor)",
           switch=True),
    Option("plugin-registration-dir", "plugin_registration_dir", nonempty,
           DEFAULT_PLUGIN_REGISTRATION_DIR,
           f"katalyst-agent's plugin-watcher directory; the eviction plugin socket "
           f"{EVICTION_PLUGIN_NAME}.sock is created there", "--plugin-registration-dir", "DIR"),
    Option("read-latency-metric-name", "read-latency-metric-name",
           balancer_value("read-latency-metric-name", "vendor"),
           "default=mem.latency.read.numa,AMD=mem.latency.amd.l3.miss",
           "vendor-aware name of the per-NUMA read latency metric",
           "--read-latency-metric-name", "KEY=NAME,...", group="balancer"),
    Option("grace-balance-read-latency-threshold", "grace-balance-read-latency-threshold",
           balancer_value("grace-balance-read-latency-threshold", "vendor"), "default=70,AMD=500",
           "vendor-aware latency above which a node may be grace-balanced",
           "--grace-balance-read-latency-threshold", "KEY=N,...", group="balancer"),
    Option("force-balance-read-latency-threshold", "force-balance-read-latency-threshold",
           balancer_value("force-balance-read-latency-threshold", "vendor"), "default=80,AMD=600",
           "vendor-aware latency above which a node is force-balanced",
           "--force-balance-read-latency-threshold", "KEY=N,...", group="balancer"),
    Option("grace-balance-read-latency-gap-threshold", "grace-balance-read-latency-gap-threshold",
           balancer_value("grace-balance-read-latency-gap-threshold", "vendor"),
           "default=40,AMD=400",
           "vendor-aware latency gap to the nearest node that triggers a grace balance",
           "--grace-balance-read-latency-gap-threshold", "KEY=N,...", group="balancer"),
    Option("grace-balance-numa-distance-max", "grace-balance-numa-distance-max",
           balancer_value("grace-balance-numa-distance-max", "int"), "19",
           "farthest NUMA distance a grace balance moves memory to",
           "--grace-balance-numa-distance-max", "N", group="balancer"),
    Option("grace-balance-gap-ratio", "grace-balance-gap-ratio",
           balancer_value("grace-balance-gap-ratio", "ratio"), "0.15",
           "latency gap ratio a grace-balance destination must have",
           "--grace-balance-gap-ratio", "RATIO", group="balancer"),
    Option("force-balance-gap-ratio", "force-balance-gap-ratio",
           balancer_value("force-balance-gap-ratio", "ratio"), "0.2",
           "latency gap ratio a force-balance destination must have",
           "--force-balance-gap-ratio", "RATIO", group="balancer"),
    Option("balanced-pod-source-numa-rss-max", "balanced-pod-source-numa-rss-max",
           balancer_value("balanced-pod-source-numa-rss-max", "int"), "10737418240 (10 GiB)",
           "most anonymous bytes on the source node of a shared pod that is migrated",
           "--balanced-pod-source-numa-rss-max", "BYTES", group="balancer"),
    Option("balanced-pod-source-numa-rss-min", "balanced-pod-source-numa-rss-min",
           balancer_value("balanced-pod-source-numa-rss-min", "int"), "134217728 (128 MiB)",
           "fewest anonymous bytes on the source node of a shared pod that is migrated",
           "--balanced-pod-source-numa-rss-min", "BYTES", group="balancer"),
    Option("balanced-reclaimed-pod-source-numa-rss-max",
           "balanced-reclaimed-pod-source-numa-rss-max",
           balancer_value("balanced-reclaimed-pod-source-numa-rss-max", "int"),
           "16106127360 (15 GiB)",
           "most anonymous bytes on the source node of a reclaimed pod that is migrated",
           "--balanced-reclaimed-pod-source-numa-rss-max", "BYTES", group="balancer"),
    Option("balanced-reclaimed-pod-source-numa-rss-min",
           "balanced-reclaimed-pod-source-numa-rss-min",
           balancer_value("balanced-reclaimed-pod-source-numa-rss-min", "int"),
           "134217728 (128 MiB)",
           "fewest anonymous bytes on the source node of a reclaimed pod that is migrated",
           "--balanced-reclaimed-pod-source-numa-rss-min", "BYTES", group="balancer"),
    Option("balanced-pod-source-numa-total-rss-max", "balanced-pod-source-numa-total-rss-max",
           balancer_value("balanced-pod-source-numa-total-rss-max", "int"),
           "12884901888 (12 GiB)", "most anonymous bytes migrated in one round",
           "--balanced-pod-source-numa-total-rss-max", "BYTES", group="balancer"),
    Option("balanced-reclaimed-pod-source-numa-total-rss-max",
           "balanced-reclaimed-pod-source-numa-total-rss-max",
           balancer_value("balanced-reclaimed-pod-source-numa-total-rss-max", "int"),
           "16106127360 (15 GiB)", "most anonymous bytes of reclaimed pods migrated in one round",
           "--balanced-reclaimed-pod-source-numa-total-rss-max", "BYTES", group="balancer"),
    Option("balanced-reclaimed-pod-single-round-total-rss-threshold",
           "balanced-reclaimed-pod-single-round-total-rss-threshold",
           balancer_value("balanced-reclaimed-pod-single-round-total-rss-threshold", "int"),
           "3221225472 (3 GiB)",
           "reclaimed bytes after which a round migrates no shared pods",
           "--balanced-reclaimed-pod-single-round-total-rss-threshold", "BYTES",
           group="balancer"),
    Option("numa-balance-supported-pools", "numa-balance-supported-pools",
           balancer_value("numa-balance-supported-pools", "pools"), "share",
           "pools whose pods may be migrated besides reclaim, comma-separated",
           "--numa-balance-supported-pools", "POOL,...", group="balancer"),
    Option("numa-metrics-source", "numa_metrics_source", _metrics_source, DEFAULT_METRICS_SOURCE,
           "where NUMA latency and bandwidth come from: file[:PATH], prometheus:URL, resctrl "
           "(bandwidth; latency from the file), simulated[:pressure=N]",
           "none (malachite)", "SPEC"),
    Option("numa-latency-source", "numa-latency-source", source_kind, "from --numa-metrics-source",
           "latency source alone: file, prometheus or simulated", "", "KIND", group="sources"),
    Option("numa-bandwidth-source", "numa-bandwidth-source", source_kind, "as latency",
           "bandwidth source alone: file, prometheus, resctrl or simulated", "", "KIND",
           group="sources"),
    Option("numa-metrics-file", "numa-metrics-file", nonempty, "/run/qrmd/numa-metrics.json",
           "the collector's JSON file of per-NUMA metrics", "", "PATH", group="sources"),
    Option("numa-metrics-prometheus-url", "numa-metrics-prometheus-url", nonempty, "none",
           "Prometheus text endpoint scraped each round", "", "URL", group="sources"),
    Option("numa-metrics-prometheus-latency-metric", "numa-metrics-prometheus-latency-metric",
           nonempty, "read-latency-metric-name with . as _", "scraped latency metric", "",
           "NAME", group="sources"),
    Option("numa-metrics-prometheus-bandwidth-metric",
           "numa-metrics-prometheus-bandwidth-metric", nonempty, "mem_bandwidth_numa",
           "scraped bandwidth metric", "", "NAME", group="sources"),
    Option("numa-metrics-prometheus-numa-label", "numa-metrics-prometheus-numa-label",
           nonempty, "numa", "the label holding the NUMA id", "", "LABEL", group="sources"),
    Option("numa-metrics-prometheus-match-labels", "numa-metrics-prometheus-match-labels",
           _labels, "none", "labels a scraped sample must carry", "", "LABEL=VALUE,...",
           group="sources"),
    Option("numa-metrics-prometheus-timeout", "numa-metrics-prometheus-timeout", period, "2s",
           "scrape timeout", "", "DURATION", group="sources"),
    Option("resctrl-root", "resctrl-root", nonempty, "/sys/fs/resctrl",
           "resctrl's mount, for resctrl bandwidth", "", "DIR", group="sources"),
    Option("metric-insurance-period", "metric-insurance-period", period, "0s",
           "a metric sample older than this (raised to at least 60s) is missing; 0s: never "
           "(memory-balancer §4.3)", "--metric-insurance-period", "DURATION", group="sources"),
    Option("memory-cgroup-root", "memory-cgroup-root", nonempty,
           "/sys/fs/cgroup/memory on cgroup v1, else /sys/fs/cgroup",
           "the memory controller's mount, where memory.numa_stat is read", "", "DIR",
           group="sources"),
    Option("cgroup-driver", "cgroup-driver", choice("auto", "cgroupfs", "systemd"), "auto",
           "kubelet's cgroup driver, to find pod cgroups; auto tries both", "--cgroup-driver",
           "auto|cgroupfs|systemd", group="sources"),
    Option("kubelet-cgroup-root", "kubelet-cgroup-root", nonempty, "/",
           "kubelet's --cgroup-root", "--cgroup-root (kubelet)", "PATH", group="sources"),
)  # fmt: skip


def balancer_values(
    values: Mapping[str, Any], groups: Mapping[str, Mapping[str, object]]
) -> dict[str, Any]:
    """The ``DaemonConfig`` fields of the balancer, from the options' checked values.

    Args:
        values: the checked plain fields by field name (``numa_metrics_source`` is read).
        groups: the checked ``balancer`` and ``sources`` keys given, by group.

    Returns:
        ``memory_balancer``, ``numa_metric_sources`` and ``simulated_pressure``.

    Raises:
        ValueError: the values are invalid together; the message names the flag.
    """
    spec = parse_metrics_source(values.get("numa_metrics_source", DEFAULT_METRICS_SOURCE))
    return {
        "memory_balancer": build_balancer_config(groups.get("balancer", {})),
        "numa_metric_sources": build_source_settings(spec, groups.get("sources", {})),
        "simulated_pressure": spec.pressure,
    }


@dataclass(frozen=True, slots=True)
class BalancerSettings:
    """The memory balancer's settings: its option rows (``BALANCER_OPTIONS``) and the objects
    built from them, each the ``DaemonConfig`` field of the same name
    (``qrmd.config_values.settings_of``).

    Attributes:
        enable_memory_balancer: run the NUMA memory balancer (memory-balancer §1.1).
        qos_aware_sync_period_s: seconds between balance rounds (§1.1).
        balance_round_summary_every_s: quiet rounds repeating the journaled outcome are
            journaled at least this often; 0: every round.
        memory_balance_execute: migrate pages for the advices; False: dry run (§11).
        plugin_registration_dir: where the eviction plugin's socket is created (§10).
        numa_metrics_source: the ``--numa-metrics-source`` SPEC as given.
        simulated_pressure: simulated NUMA nodes under pressure from the start.
        memory_balancer: the balancer's options (§3), vendor-aware values unresolved.
        numa_metric_sources: where metrics and anonymous memory are read (§4).
        max_connections: ``--max-connections`` (the CPU plugin's option): the eviction socket
            counts as one more capped plugin socket against the open-file limit.
    """

    enable_memory_balancer: bool = False
    qos_aware_sync_period_s: float = 5.0
    balance_round_summary_every_s: float = 3600.0
    memory_balance_execute: bool = False
    plugin_registration_dir: str = DEFAULT_PLUGIN_REGISTRATION_DIR
    numa_metrics_source: str = DEFAULT_METRICS_SOURCE
    simulated_pressure: tuple[int, ...] = ()
    memory_balancer: BalancerConfig = field(default_factory=BalancerConfig)
    numa_metric_sources: BalancerSourceSettings = field(default_factory=BalancerSourceSettings)
    max_connections: int = _DEFAULT_MAX_CONNECTIONS

    @property
    def enabled(self) -> bool:
        """``--enable-memory-balancer``."""
        return self.enable_memory_balancer

    def sockets(self) -> tuple[Socket, ...]:
        """The eviction plugin's socket (memory-balancer §10), when the balancer runs."""
        if not self.enabled:
            return ()
        return (
            Socket.in_directory(
                "plugin-registration-dir",
                self.plugin_registration_dir,
                EVICTION_PLUGIN_NAME,
                self.max_connections,
            ),
        )

    def eviction_socket_path(self) -> str:
        """The eviction plugin's socket (memory-balancer §10), absolute.

        Raises:
            ValueError: the path is longer than a unix socket allows.
        """
        return socket_path(self.plugin_registration_dir, EVICTION_PLUGIN_NAME)
