"""The daemon's configuration: one frozen ``DaemonConfig`` from a config file overlaid by flags.

Rules (DESIGN.md "Time, config, errors"; issue 5 item 3):

* Every setting is an ``Option`` of ``OPTIONS``: its flag name, its default, what it does and
  the reference (katalyst-agent) flag it maps to. The argparse flags, the config-file keys and
  the README's table all come from that one list.
* A config file (``--config PATH``) is YAML (``.yaml``/``.yml``) or TOML (``.toml``); its keys
  are the flag names without ``--``, written with ``-`` or ``_``. A flag given on the command
  line wins over the file; a repeatable flag given on the command line replaces the file's list.
* Everything is validated before anything starts. A bad value is one ``ConfigError`` naming
  its key: ``--transition-period: '3x' is not a duration (use 0s, 10ms, 1m30s)``.
* A socket path longer than a unix socket can hold (``MAX_SOCKET_PATH_BYTES``, 107) is a
  configuration error, so the daemon refuses to start rather than fail after recovery.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from policy.balance import BalancerConfig
from policy.balance.constants import EVICTION_PLUGIN_NAME
from policy.context import (
    DEFAULT_MAX_FULL_HINT_NUMA_NODES,
    DEFAULT_MAX_HINTS,
    DEFAULT_TRANSITION_PERIOD_S,
)
from qrmd.balancer_settings import (
    DEFAULT_METRICS_SOURCE,
    DEFAULT_PLUGIN_REGISTRATION_DIR,
    MetricsSourceSpec,
    balancer_value,
    build_balancer_config,
    build_source_settings,
    parse_metrics_source,
    source_kind,
)
from qrmd.host.balancer_sources import BalancerSourceSettings
from qrmd.topology_source import DEFAULT_TOPOLOGY_SPEC, SPEC_FORMS
from wire.plugin_server import MAX_SOCKET_PATH_BYTES, PLUGIN_NAME, plugin_socket_path

__all__ = [
    "DEFAULT_METRICS_ADDRESS",
    "DEFAULT_SOCKET_DIR",
    "DEFAULT_STATE_DIR",
    "MAX_SOCKET_PATH_BYTES",
    "OPTIONS",
    "PLUGIN_SOCKET_NAME",
    "ConfigError",
    "DaemonConfig",
    "Option",
    "add_arguments",
    "config_from_args",
    "load_config",
    "parse_duration",
]

DEFAULT_STATE_DIR = "/var/lib/qrmd"
DEFAULT_SOCKET_DIR = "/var/lib/kubelet/plugins_registry"
DEFAULT_METRICS_ADDRESS = "127.0.0.1:9316"
#: wire.md §2: ``<agent name>_<policy>.sock``.
PLUGIN_SOCKET_NAME = f"{PLUGIN_NAME}.sock"

LOG_LEVELS = ("debug", "info", "warning", "error")
LogFormat = Literal["text", "json"]
Durability = Literal["always", "none"]


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key and the value."""


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    """Every setting of ``qrmd run``, validated (see ``OPTIONS`` for each one's meaning).

    Attributes:
        state_dir: journal and checkpoints.
        topology: the ``--topology`` SPEC.
        reserved_cpu_cores: CPUs kept for the system (spec cpu-policy §3).
        socket_dirs: one plugin socket per directory, duplicates removed.
        transition_period_s: ramp-up length (§9.6).
        enable_reclaim: the dynamic ``enable-reclaim`` option.
        qos_enhancement_defaults: ``qos-enhancement-default-values`` as (key, value) pairs.
        pod_debug_anno_keys: ``qrm-pod-debug-anno-keys``.
        durability: ``always`` (fsync before acknowledging) or ``none``.
        metrics_address: (host, port) of the metrics/health endpoint, or None (``off``).
        log_level: ``debug``, ``info``, ``warning`` or ``error``.
        log_format: ``text`` or ``json`` (one JSON object per line).
        node_name: the journal's node name.
        max_full_hint_numa_nodes: NUMA nodes up to which hints are fully enumerated.
        max_hints: the most hints of the reduced answer.
        enable_memory_balancer: run the NUMA memory balancer (memory-balancer §1.1).
        qos_aware_sync_period_s: seconds between balance rounds (§1.1).
        memory_balance_execute: migrate pages for the advices; False: dry run (§11).
        plugin_registration_dir: where the eviction plugin's socket is created (§10).
        numa_metrics_source: the ``--numa-metrics-source`` SPEC as given.
        simulated_pressure: simulated NUMA nodes under pressure from the start.
        memory_balancer: the balancer's options (§3), vendor-aware values unresolved.
        numa_metric_sources: where metrics and anonymous memory are read (§4).
        config_file: the file the settings were read from, if any.
    """

    state_dir: str = DEFAULT_STATE_DIR
    topology: str = DEFAULT_TOPOLOGY_SPEC
    reserved_cpu_cores: int = 0
    socket_dirs: tuple[str, ...] = (DEFAULT_SOCKET_DIR,)
    transition_period_s: float = DEFAULT_TRANSITION_PERIOD_S
    enable_reclaim: bool = False
    qos_enhancement_defaults: tuple[tuple[str, str], ...] = ()
    pod_debug_anno_keys: tuple[str, ...] = ()
    durability: Durability = "always"
    metrics_address: tuple[str, int] | None = ("127.0.0.1", 9316)
    log_level: str = "info"
    log_format: LogFormat = "text"
    node_name: str = ""
    max_full_hint_numa_nodes: int = DEFAULT_MAX_FULL_HINT_NUMA_NODES
    max_hints: int = DEFAULT_MAX_HINTS
    enable_memory_balancer: bool = False
    qos_aware_sync_period_s: float = 5.0
    memory_balance_execute: bool = False
    plugin_registration_dir: str = DEFAULT_PLUGIN_REGISTRATION_DIR
    numa_metrics_source: str = DEFAULT_METRICS_SOURCE
    simulated_pressure: tuple[int, ...] = ()
    memory_balancer: BalancerConfig = field(default_factory=BalancerConfig)
    numa_metric_sources: BalancerSourceSettings = field(default_factory=BalancerSourceSettings)
    config_file: str | None = None

    def socket_paths(self) -> tuple[str, ...]:
        """The plugin socket of each socket directory, absolute (wire.md §2).

        Raises:
            SocketPathError: a path is longer than a unix socket allows.
        """
        return tuple(plugin_socket_path(d) for d in self.socket_dirs)

    def eviction_socket_path(self) -> str:
        """The eviction plugin's socket (memory-balancer §10), absolute.

        Raises:
            SocketPathError: the path is longer than a unix socket allows.
        """
        return plugin_socket_path(self.plugin_registration_dir, EVICTION_PLUGIN_NAME)


# -- value parsers: each takes the raw value (a flag's string, or a file's value) ---------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|µs|ns|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str) -> float:
    """A Go-style duration (``30s``, ``10ms``, ``1m30s``, ``0``) in seconds.

    Raises:
        ValueError: not a non-negative duration with units.
    """
    bad = ValueError(f"{text!r} is not a duration (use 0s, 10ms, 1m30s)")
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            raise bad
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(text):
        raise bad
    return total


def _text(raw: object) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ValueError(f"{raw!r} is not a single value")
    return str(raw)


def _nonempty(raw: object) -> str:
    text = _text(raw)
    if not text:
        raise ValueError("must not be empty")
    return text


def _duration(raw: object) -> float:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a duration (use 0s, 10ms, 1m30s)")
    return parse_duration(_text(raw))


def _count(minimum: int) -> Callable[[object], int]:
    def parse(raw: object) -> int:
        if isinstance(raw, bool):
            raise ValueError(f"{raw!r} is not a whole number")
        try:
            value = int(_text(raw))
        except ValueError:
            raise ValueError(f"{raw!r} is not a whole number") from None
        if value < minimum:
            raise ValueError(f"{value} is below the minimum {minimum}")
        return value

    return parse


def _choice(*choices: str) -> Callable[[object], str]:
    def parse(raw: object) -> str:
        text = _text(raw).lower()
        if text not in choices:
            raise ValueError(f"{raw!r} is not one of {', '.join(choices)}")
        return text

    return parse


def _switch(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = _text(raw).lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise ValueError(f"{raw!r} is not true or false")


def _metrics_address(raw: object) -> tuple[str, int] | None:
    if raw is False:  # YAML 1.1 reads an unquoted ``off`` as false
        return None
    text = _text(raw)
    if text.lower() == "off":
        return None
    host, sep, port_text = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"{text!r} is not HOST:PORT or off")
    return host, int(port_text)


def _period(raw: object) -> float:
    """A duration (``90s``) or a number of seconds (a config file's ``90``), not negative."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        if not raw >= 0:
            raise ValueError(f"{raw!r} s must be 0 or more")
        return float(raw)
    text = _text(raw)
    try:
        value = float(text)
    except ValueError:
        return parse_duration(text)
    if not value >= 0:
        raise ValueError(f"{raw!r} s must be 0 or more")
    return value


def _positive_duration(raw: object) -> float:
    value = _duration(raw)
    if value <= 0:
        raise ValueError(f"{raw!r} must be longer than 0s")
    return value


def _metrics_source(raw: object) -> str:
    text = _text(raw)
    parse_metrics_source(text)
    return text


def _labels(raw: object) -> object:
    if isinstance(raw, Mapping):
        return {str(k): _text(v) for k, v in raw.items()}
    return _text(raw)


def _key_value(raw: object) -> tuple[str, str]:
    key, sep, value = _text(raw).partition("=")
    if not sep or not key:
        raise ValueError(f"{raw!r} is not KEY=VALUE")
    return key, value


# -- the options ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its flag, config key, parser, default, help and reference flag."""

    flag: str
    field: str
    parse: Callable[[object], Any]
    default: str
    help: str
    reference: str = ""
    metavar: str | None = None
    repeatable: bool = False
    switch: bool = False
    #: Options collected into one object by key (``_BALANCER``, ``_SOURCES``), not a field.
    group: str = ""

    def help_text(self) -> str:
        """The ``--help`` line: what it does, its default and the reference flag."""
        ref = f"; reference: {self.reference}" if self.reference else ""
        return f"{self.help} (default: {self.default}{ref})"


OPTIONS: tuple[Option, ...] = (
    Option("state-dir", "state_dir", _nonempty, DEFAULT_STATE_DIR,
           "directory of the journal and its checkpoints", "--qrm-state-dir", "DIR"),
    Option("topology", "topology", _nonempty, DEFAULT_TOPOLOGY_SPEC,
           f"the machine: {SPEC_FORMS}", "", "SPEC"),
    Option("reserved-cpu-cores", "reserved_cpu_cores", _count(0), "0",
           "CPUs reserved for the system, one per NUMA node per round (cpu-policy §3)",
           "--cpu-resource-plugin-reserved", "N"),
    Option("socket-dir", "socket_dirs", _nonempty, DEFAULT_SOCKET_DIR,
           f"kubelet plugin-watcher directory; the plugin socket {PLUGIN_SOCKET_NAME} is "
           "created there (repeat for several)", "--qrm-socket-dirs", "DIR", repeatable=True),
    Option("transition-period", "transition_period_s", _duration, "30s",
           "ramp-up period of shared containers, e.g. 0s, 10ms, 1m30s (cpu-policy §9.6)",
           "none (a constant of 30s)", "DURATION"),
    Option("enable-reclaim", "enable_reclaim", _switch, "false",
           "give idle shared CPUs to reclaimed_cores pods", "--enable-reclaim", switch=True),
    Option("qos-enhancement-default", "qos_enhancement_defaults", _key_value, "none",
           "default value of a QoS enhancement key (repeat for several)",
           "--qos-enhancement-default-values", "KEY=VALUE", repeatable=True),
    Option("pod-debug-anno-key", "pod_debug_anno_keys", _nonempty, "none",
           "annotation key that marks a debug pod: its containers are left where the runtime "
           "puts them, nothing is stored (repeat for several)",
           "--qrm-pod-debug-anno-keys", "KEY", repeatable=True),
    Option("durability", "durability", _choice("always", "none"), "always",
           "'always' fsyncs each record before answering kubelet; 'none' does not "
           "(a killed process loses nothing, a power loss may)",
           "none (the reference rewrites a state file)", "always|none"),
    Option("metrics-address", "metrics_address", _metrics_address, DEFAULT_METRICS_ADDRESS,
           "where /metrics and /healthz are served, or 'off'", "", "HOST:PORT|off"),
    Option("log-level", "log_level", _choice(*LOG_LEVELS), "info",
           f"least severe log level shown: {', '.join(LOG_LEVELS)}", "-v (klog verbosity)",
           "LEVEL"),
    Option("log-format", "log_format", _choice("text", "json"), "text",
           "log lines as text or one JSON object per line", "", "text|json"),
    Option("node-name", "node_name", _nonempty, "$NODE_NAME, else this host's name",
           "node name written into the journal, checked when it is reopened", "", "NAME"),
    Option("max-full-hint-numa-nodes", "max_full_hint_numa_nodes", _count(1),
           str(DEFAULT_MAX_FULL_HINT_NUMA_NODES),
           "up to this many NUMA nodes, dedicated hints enumerate every NUMA combination",
           "", "N"),
    Option("max-hints", "max_hints", _count(1), str(DEFAULT_MAX_HINTS),
           "the most hints answered beyond --max-full-hint-numa-nodes", "", "N"),
    # -- the NUMA memory balancer (spec memory-balancer §1.1, §3, §3.2, §4, §10, §11) --
    Option("enable-memory-balancer", "enable_memory_balancer", _switch, "false",
           "run the NUMA memory balancer: a round every --qos-aware-sync-period, its eviction "
           "plugin on --plugin-registration-dir",
           "--memory-advisor-plugins=numa_memory_balancer", switch=True),
    Option("qos-aware-sync-period", "qos_aware_sync_period_s", _positive_duration, "5s",
           "time between two balance rounds (the advisor loop's period)",
           "--qos-aware-sync-period", "DURATION"),
    Option("memory-balance-execute", "memory_balance_execute", _switch, "false",
           "carry out the balancer's advices with migrate_pages(2); false: a dry run that logs "
           "and journals what it would migrate",
           "none (the memory plugin executes when --memory-resource-plugin-advisor)",
           switch=True),
    Option("plugin-registration-dir", "plugin_registration_dir", _nonempty,
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
    Option("numa-metrics-file", "numa-metrics-file", _nonempty, "/run/qrmd/numa-metrics.json",
           "the collector's JSON file of per-NUMA metrics", "", "PATH", group="sources"),
    Option("numa-metrics-prometheus-url", "numa-metrics-prometheus-url", _nonempty, "none",
           "Prometheus text endpoint scraped each round", "", "URL", group="sources"),
    Option("numa-metrics-prometheus-latency-metric", "numa-metrics-prometheus-latency-metric",
           _nonempty, "read-latency-metric-name with . as _", "scraped latency metric", "",
           "NAME", group="sources"),
    Option("numa-metrics-prometheus-bandwidth-metric",
           "numa-metrics-prometheus-bandwidth-metric", _nonempty, "mem_bandwidth_numa",
           "scraped bandwidth metric", "", "NAME", group="sources"),
    Option("numa-metrics-prometheus-numa-label", "numa-metrics-prometheus-numa-label",
           _nonempty, "numa", "the label holding the NUMA id", "", "LABEL", group="sources"),
    Option("numa-metrics-prometheus-match-labels", "numa-metrics-prometheus-match-labels",
           _labels, "none", "labels a scraped sample must carry", "", "LABEL=VALUE,...",
           group="sources"),
    Option("numa-metrics-prometheus-timeout", "numa-metrics-prometheus-timeout", _period, "2s",
           "scrape timeout", "", "DURATION", group="sources"),
    Option("resctrl-root", "resctrl-root", _nonempty, "/sys/fs/resctrl",
           "resctrl's mount, for resctrl bandwidth", "", "DIR", group="sources"),
    Option("metric-insurance-period", "metric-insurance-period", _period, "0s",
           "a metric sample older than this (raised to at least 60s) is missing; 0s: never "
           "(memory-balancer §4.3)", "--metric-insurance-period", "DURATION", group="sources"),
    Option("memory-cgroup-root", "memory-cgroup-root", _nonempty,
           "/sys/fs/cgroup/memory on cgroup v1, else /sys/fs/cgroup",
           "the memory controller's mount, where memory.numa_stat is read", "", "DIR",
           group="sources"),
    Option("cgroup-driver", "cgroup-driver", _choice("auto", "cgroupfs", "systemd"), "auto",
           "kubelet's cgroup driver, to find pod cgroups; auto tries both", "--cgroup-driver",
           "auto|cgroupfs|systemd", group="sources"),
    Option("kubelet-cgroup-root", "kubelet-cgroup-root", _nonempty, "/",
           "kubelet's --cgroup-root", "--cgroup-root (kubelet)", "PATH", group="sources"),
)  # fmt: skip

_BY_FLAG = {o.flag: o for o in OPTIONS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and every option's flag to ``parser``.

    Values stay strings here and are checked by ``load_config``, so a bad value is one error
    line naming its key rather than argparse's usage text.
    """
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="YAML (.yaml, .yml) or TOML (.toml) file whose keys are these flag names "
        "(with - or _); flags given here win over it",
    )
    for opt in OPTIONS:
        if opt.switch:
            # ``--flag`` alone is true; ``--flag=false`` as the reference's Go flags accept.
            parser.add_argument(
                f"--{opt.flag}", nargs="?", const=True, default=argparse.SUPPRESS,
                metavar="true|false", help=opt.help_text(),
            )  # fmt: skip
        else:
            parser.add_argument(
                f"--{opt.flag}", metavar=opt.metavar, default=argparse.SUPPRESS,
                action="append" if opt.repeatable else "store", help=opt.help_text(),
            )  # fmt: skip


def config_from_args(args: argparse.Namespace) -> DaemonConfig:
    """The configuration from parsed flags (and the ``--config`` file they name).

    Raises:
        ConfigError: a bad value, an unknown file key, or an unreadable file.
    """
    given: dict[str, object] = {}
    for opt in OPTIONS:
        dest = opt.flag.replace("-", "_")  # argparse's name for ``--state-dir``
        if hasattr(args, dest):
            given[opt.flag] = getattr(args, dest)
    return load_config(given, getattr(args, "config", None))


def load_config(flags: Mapping[str, object], config_file: str | None = None) -> DaemonConfig:
    """Validate settings: the file's values, overlaid by ``flags`` (keyed by flag name).

    Args:
        flags: flag name (``state-dir``) → raw value; a repeatable flag's value is a list.
        config_file: a YAML or TOML file of the same keys, or None.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: the first bad value, naming its key (and the file for a file's value).
    """
    raw: dict[str, tuple[object, str]] = {}
    if config_file is not None:
        for key, value in _read_file(config_file).items():
            raw[_file_key(key, config_file)] = (value, f" (in {config_file})")
    for flag, value in flags.items():
        raw[flag] = (value, "")
    values: dict[str, Any] = {"config_file": config_file}
    groups: dict[str, dict[str, object]] = {"balancer": {}, "sources": {}}
    for opt in OPTIONS:
        if opt.flag not in raw:
            continue
        value, where = raw[opt.flag]
        try:
            parsed = _parse(opt, value)
        except ValueError as err:
            raise ConfigError(f"--{opt.flag}{where}: {err}") from None
        if opt.group:
            groups[opt.group][opt.field] = parsed
        else:
            values[opt.field] = parsed
    values.update(_balancer_values(values, groups))
    # A DaemonSet passes the node's name in NODE_NAME (the downward API), as katalyst-agent
    # reads it; the host name is the fallback (a pod without host networking has its own).
    values.setdefault("node_name", os.environ.get("NODE_NAME") or socket.gethostname())
    config = DaemonConfig(**values)
    _check_socket_paths(config)
    return config


def _balancer_values(
    values: Mapping[str, Any], groups: Mapping[str, dict[str, object]]
) -> dict[str, Any]:
    """The balancer's options and metric sources, built from their checked keys."""
    spec: MetricsSourceSpec = parse_metrics_source(
        values.get("numa_metrics_source", DEFAULT_METRICS_SOURCE)
    )
    try:
        balancer = build_balancer_config(groups["balancer"])
        sources = build_source_settings(spec, groups["sources"])
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return {
        "memory_balancer": balancer,
        "numa_metric_sources": sources,
        "simulated_pressure": spec.pressure,
    }


def _parse(opt: Option, value: object) -> Any:
    if not opt.repeatable:
        return opt.parse(value)
    if opt.field == "qos_enhancement_defaults" and isinstance(value, Mapping):
        items: Sequence[object] = [f"{k}={v}" for k, v in value.items()]
    elif isinstance(value, list | tuple):
        items = value
    else:
        items = [value]
    parsed = [opt.parse(item) for item in items]
    if opt.field == "socket_dirs":
        if not parsed:
            raise ValueError("at least one directory is needed")
        return tuple(dict.fromkeys(parsed))
    return tuple(parsed)


def _check_socket_paths(config: DaemonConfig) -> None:
    """Refuse a socket path a unix socket cannot hold (at most ``MAX_SOCKET_PATH_BYTES``)."""
    try:
        config.socket_paths()
    except ValueError as err:
        raise ConfigError(f"--socket-dir: {err}") from None
    if config.enable_memory_balancer:
        try:
            config.eviction_socket_path()
        except ValueError as err:
            raise ConfigError(f"--plugin-registration-dir: {err}") from None


def _file_key(key: object, config_file: str) -> str:
    flag = str(key).replace("_", "-")
    if flag not in _BY_FLAG:
        raise ConfigError(f"{config_file}: unknown key {key!r}; keys are the flag names of --help")
    return flag


def _read_file(path: str) -> dict[str, object]:
    suffix = Path(path).suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml"):
        raise ConfigError(f"--config: {path!r} is neither YAML (.yaml, .yml) nor TOML (.toml)")
    try:
        with open(path, "rb") as file:
            data: object = tomllib.load(file) if suffix == ".toml" else yaml.safe_load(file)
    except OSError as err:
        raise ConfigError(f"--config: cannot read {path!r}: {err.strerror}") from None
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as err:
        reason = " ".join(str(err).split())
        raise ConfigError(
            f"--config: {path!r} is not valid {suffix[1:].upper()}: {reason}"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config: {path!r} must hold a mapping of flag names to values")
    return data
