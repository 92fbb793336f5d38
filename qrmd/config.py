"""The daemon's configuration: one frozen ``DaemonConfig`` from a config file overlaid by flags.

Rules (DESIGN.md "Time, config, errors"):

* Every setting is an ``Option`` of ``OPTIONS`` (the memory balancer's come from
  ``qrmd.balancer_settings``; the parsers from ``qrmd.config_values``): its flag name, its
  default, what it does and the reference (katalyst-agent) flag it maps to. The argparse
  flags, the config-file keys and the README's table all come from that one list.
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
import socket
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from journal import (
    DEFAULT_CHECKPOINT_EVERY_RECORDS,
    DEFAULT_CHECKPOINT_EVERY_S,
    DEFAULT_DURABILITY,
    DEFAULT_RETENTION_MAX_AGE_S,
    DEFAULT_RETENTION_MAX_BYTES,
    DURABILITIES,
    Durability,
)
from policy.balance import BalancerConfig
from policy.balance.constants import EVICTION_PLUGIN_NAME
from policy.cpu.context import (
    DEFAULT_MAX_FULL_HINT_NUMA_NODES,
    DEFAULT_MAX_HINTS,
    DEFAULT_TRANSITION_PERIOD_S,
)
from policy.cpu.pressure import PressureSettings
from qrmd.advisor_settings import ADVISOR_OPTIONS, AdvisorLinkConfig, advisor_values
from qrmd.balancer_settings import (
    BALANCER_OPTIONS,
    DEFAULT_METRICS_SOURCE,
    DEFAULT_PLUGIN_REGISTRATION_DIR,
    balancer_values,
)
from qrmd.config_values import Option, parse_duration
from qrmd.config_values import choice as _choice
from qrmd.config_values import count as _count
from qrmd.config_values import duration as _duration
from qrmd.config_values import nonempty as _nonempty
from qrmd.config_values import single_value as _text
from qrmd.config_values import switch as _switch
from qrmd.cpu_eviction_settings import (
    CPU_EVICTION_OPTIONS,
    DEFAULT_CPU_LOAD_SOURCE,
    cpu_eviction_values,
)
from qrmd.hardening_settings import DEFAULT_MAX_CONNECTIONS, HARDENING_OPTIONS
from qrmd.host.balancer_sources import BalancerSourceSettings
from qrmd.journal_settings import JOURNAL_OPTIONS
from qrmd.pod_source_settings import POD_SOURCE_OPTIONS, PodSourceSettings, pod_source_values
from qrmd.takeover_settings import TAKEOVER_OPTIONS, TakeoverSettings, takeover_values
from qrmd.topology_source import DEFAULT_TOPOLOGY_SPEC, SPEC_FORMS
from wire.plugin_server import MAX_SOCKET_PATH_BYTES, PLUGIN_NAME, plugin_socket_path

__all__ = [
    "DEFAULT_METRICS_ADDRESS",
    "DEFAULT_SOCKET_DIR",
    "DEFAULT_STATE_DIR",
    "MAX_SOCKET_PATH_BYTES",
    "MIN_CHECKPOINT_EVERY_S",
    "OPTIONS",
    "PLUGIN_SOCKET_NAME",
    "ConfigError",
    "DaemonConfig",
    "Option",
    "add_arguments",
    "config_from_args",
    "env_name",
    "environment_values",
    "help_group",
    "load_config",
    "parse_duration",
]

DEFAULT_STATE_DIR = "/var/lib/qrmd"
DEFAULT_SOCKET_DIR = "/var/lib/kubelet/plugins_registry"
DEFAULT_METRICS_ADDRESS = "127.0.0.1:9316"
#: A checkpoint rewrites the whole state: more often than this is a mistake, not a setting.
MIN_CHECKPOINT_EVERY_S = 1.0
#: wire.md §2: ``<agent name>_<policy>.sock``.
PLUGIN_SOCKET_NAME = f"{PLUGIN_NAME}.sock"

LOG_LEVELS = ("debug", "info", "warning", "error")
LogFormat = Literal["text", "json"]


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
        checkpoint_every_records: a checkpoint after this many journal records...
        checkpoint_every_s: ...or this many seconds, whichever first (ticked on an idle node).
        journal_retention_max_bytes: forensic history kept, in bytes; None: no limit.
        journal_retention_max_age_s: forensic history older than this is deleted; None: never.
        metrics_address: (host, port) of the metrics/health endpoint, or None (``off``).
        log_level: ``debug``, ``info``, ``warning`` or ``error``.
        log_format: ``text`` or ``json`` (one JSON object per line).
        node_name: the journal's node name.
        max_full_hint_numa_nodes: NUMA nodes up to which hints are fully enumerated.
        max_hints: the most hints of the reduced answer.
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
        max_connections: the most connections each plugin socket accepts at once
            (``qrmd.hardening_settings``).
        enable_cpu_pressure_eviction: serve the CPU pressure eviction plugins (cpu-policy
            §12.7; ``qrmd.cpu_eviction_settings``).
        cpu_load_metrics_source: the ``--cpu-load-metrics-source`` SPEC as given.
        cpu_pressure: the CPU pressure eviction plugins' settings.
        cpu_advisor: the sys-advisor link's settings (``qrmd.advisor_settings``).
        pod_source: the node's pods and the periodic checkers (cpu-policy §12).
        takeover: what to do with katalyst-agent's checkpoint (``qrmd.takeover_settings``).
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
    durability: Durability = DEFAULT_DURABILITY
    checkpoint_every_records: int = DEFAULT_CHECKPOINT_EVERY_RECORDS
    checkpoint_every_s: float = DEFAULT_CHECKPOINT_EVERY_S
    journal_retention_max_bytes: int | None = DEFAULT_RETENTION_MAX_BYTES
    journal_retention_max_age_s: float | None = DEFAULT_RETENTION_MAX_AGE_S
    metrics_address: tuple[str, int] | None = ("127.0.0.1", 9316)
    log_level: str = "info"
    log_format: LogFormat = "text"
    node_name: str = ""
    max_full_hint_numa_nodes: int = DEFAULT_MAX_FULL_HINT_NUMA_NODES
    max_hints: int = DEFAULT_MAX_HINTS
    enable_memory_balancer: bool = False
    qos_aware_sync_period_s: float = 5.0
    balance_round_summary_every_s: float = 3600.0
    memory_balance_execute: bool = False
    plugin_registration_dir: str = DEFAULT_PLUGIN_REGISTRATION_DIR
    numa_metrics_source: str = DEFAULT_METRICS_SOURCE
    simulated_pressure: tuple[int, ...] = ()
    memory_balancer: BalancerConfig = field(default_factory=BalancerConfig)
    numa_metric_sources: BalancerSourceSettings = field(default_factory=BalancerSourceSettings)
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    enable_cpu_pressure_eviction: bool = False
    cpu_load_metrics_source: str = DEFAULT_CPU_LOAD_SOURCE
    cpu_pressure: PressureSettings = field(default_factory=PressureSettings)
    cpu_advisor: AdvisorLinkConfig = field(default_factory=AdvisorLinkConfig)
    pod_source: PodSourceSettings = field(default_factory=PodSourceSettings)
    takeover: TakeoverSettings = field(default_factory=TakeoverSettings)
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


def _checkpoint_interval(raw: object) -> float:
    value = _duration(raw)
    if value < MIN_CHECKPOINT_EVERY_S:
        raise ValueError(f"{raw!r} is shorter than the minimum {MIN_CHECKPOINT_EVERY_S:g}s")
    return value


def _key_value(raw: object) -> tuple[str, str]:
    key, sep, value = _text(raw).partition("=")
    if not sep or not key:
        raise ValueError(f"{raw!r} is not KEY=VALUE")
    return key, value


# -- the options ---------------------------------------------------------------------------------


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
    Option("durability", "durability", _choice(*DURABILITIES), DEFAULT_DURABILITY,
           "'always' fsyncs each record before answering kubelet; 'none' does not "
           "(a killed process loses nothing, a power loss may)",
           "none (the reference rewrites a state file)", "|".join(DURABILITIES)),
    Option("checkpoint-every-records", "checkpoint_every_records", _count(1),
           str(DEFAULT_CHECKPOINT_EVERY_RECORDS),
           "write a checkpoint (the whole state) after this many journal records, or after "
           "--checkpoint-every, whichever comes first",
           "none (the reference rewrites its state file on every change)", "N"),
    Option("checkpoint-every", "checkpoint_every_s", _checkpoint_interval, "5m",
           "write a checkpoint this long after the last one once a record is not in one, "
           "even on an idle node (at least 1s)",
           "none (the reference rewrites its state file on every change)", "DURATION"),
    *JOURNAL_OPTIONS,
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
    *BALANCER_OPTIONS,
    *HARDENING_OPTIONS,
    *CPU_EVICTION_OPTIONS,
    *ADVISOR_OPTIONS,
    *POD_SOURCE_OPTIONS,
    *TAKEOVER_OPTIONS,
)  # fmt: skip

_BY_FLAG = {o.flag: o for o in OPTIONS}


#: ``--help`` groups by concern: the options of each settings module, and the
#: daemon's own by flag. An option no group names (a settings module added later) is listed
#: under "general" until it is given one here.
_CORE_GROUPS: dict[str, str] = {
    "topology": "kubelet and the machine",
    "reserved-cpu-cores": "kubelet and the machine",
    "socket-dir": "kubelet and the machine",
    "transition-period": "kubelet and the machine",
    "enable-reclaim": "kubelet and the machine",
    "qos-enhancement-default": "kubelet and the machine",
    "pod-debug-anno-key": "kubelet and the machine",
    "max-full-hint-numa-nodes": "kubelet and the machine",
    "max-hints": "kubelet and the machine",
    "max-connections": "kubelet and the machine",
    "state-dir": "journal",
    "durability": "journal",
    "checkpoint-every-records": "journal",
    "checkpoint-every": "journal",
    "node-name": "journal",
    "metrics-address": "metrics, health and logs",
    "log-level": "metrics, health and logs",
    "log-format": "metrics, health and logs",
}
_MODULE_GROUPS: tuple[tuple[str, tuple[Option, ...]], ...] = (
    ("journal", JOURNAL_OPTIONS),
    ("advisor (sys-advisor link)", ADVISOR_OPTIONS),
    ("memory balancer", BALANCER_OPTIONS),
    ("pod source and periodic checkers", POD_SOURCE_OPTIONS),
    ("CPU pressure eviction", CPU_EVICTION_OPTIONS),
    ("Katalyst takeover", TAKEOVER_OPTIONS),
)
_GROUP_ORDER = (
    "kubelet and the machine",
    "journal",
    "advisor (sys-advisor link)",
    "memory balancer",
    "pod source and periodic checkers",
    "CPU pressure eviction",
    "Katalyst takeover",
    "metrics, health and logs",
    "general",
)

#: Environment variables are ``QRMD_`` and the flag in capitals with ``_`` (``QRMD_STATE_DIR``).
ENV_PREFIX = "QRMD_"


def env_name(flag: str) -> str:
    """The environment variable of a flag: ``state-dir`` → ``QRMD_STATE_DIR``."""
    return ENV_PREFIX + flag.upper().replace("-", "_")


def help_group(opt: Option) -> str:
    """The ``--help`` group of an option (``_GROUP_ORDER``)."""
    for name, options in _MODULE_GROUPS:
        if opt in options:
            return name
    return _CORE_GROUPS.get(opt.flag, "general")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and every option's flag to ``parser``, grouped by concern.

    Values stay strings here and are checked by ``load_config``, so a bad value is one error
    line naming its key rather than argparse's usage text.
    """
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="YAML (.yaml, .yml) or TOML (.toml) file whose keys are these flag names "
        "(with - or _); environment variables QRMD_<FLAG> win over it, flags over both",
    )
    groups = {name: parser.add_argument_group(f"{name} options") for name in _GROUP_ORDER}
    for opt in OPTIONS:
        group = groups[help_group(opt)]
        env = f"; env {env_name(opt.flag)}"
        if opt.switch:
            # ``--flag`` alone is true; ``--flag=false`` as the reference's Go flags accept.
            group.add_argument(
                f"--{opt.flag}", nargs="?", const=True, default=argparse.SUPPRESS,
                metavar="true|false", help=opt.help_text() + env,
            )  # fmt: skip
        else:
            group.add_argument(
                f"--{opt.flag}", metavar=opt.metavar, default=argparse.SUPPRESS,
                action="append" if opt.repeatable else "store", help=opt.help_text() + env,
            )  # fmt: skip


def environment_values(environ: Mapping[str, str]) -> dict[str, object]:
    """Settings given as ``QRMD_<FLAG>`` environment variables, keyed by flag name.

    A repeatable or ``KEY=VALUE`` flag takes a comma-separated list (``QRMD_SOCKET_DIR=/a,/b``);
    an empty variable is no setting.
    """
    found: dict[str, object] = {}
    for opt in OPTIONS:
        text = environ.get(env_name(opt.flag))
        if text is None or text == "":
            continue
        found[opt.flag] = [p for p in text.split(",") if p] if opt.repeatable else text
    return found


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
    return load_config(given, getattr(args, "config", None), environment_values(os.environ))


def load_config(
    flags: Mapping[str, object],
    config_file: str | None = None,
    environment: Mapping[str, object] | None = None,
) -> DaemonConfig:
    """Validate settings: the file's values, overlaid by the environment's, then by ``flags``.

    Args:
        flags: flag name (``state-dir``) → raw value; a repeatable flag's value is a list.
        config_file: a YAML or TOML file of the same keys, or None.
        environment: flag name → raw value from ``QRMD_<FLAG>`` (``environment_values``).

    Returns:
        The validated configuration.

    Raises:
        ConfigError: the first bad value, naming its key (and the file or the environment
            variable for their values); a file naming one key twice (``reserved_cpu_cores``
            and ``reserved-cpu-cores``).
    """
    raw: dict[str, tuple[object, str]] = {}
    if config_file is not None:
        spelled: dict[str, object] = {}
        for key, value in _read_file(config_file).items():
            flag = _file_key(key, config_file)
            if flag in spelled:
                raise ConfigError(
                    f"{config_file}: keys {spelled[flag]!r} and {key!r} both set --{flag}; keep one"
                )
            spelled[flag] = key
            raw[flag] = (value, f" (in {config_file})")
    for flag, value in (environment or {}).items():
        raw[flag] = (value, f" (from ${env_name(flag)})")
    for flag, value in flags.items():
        raw[flag] = (value, "")
    values: dict[str, Any] = {"config_file": config_file}
    groups: dict[str, dict[str, object]] = {
        "balancer": {},
        "sources": {},
        "advisor": {},
        "cpu_eviction": {},
        "pod_source": {},
        "takeover": {},
    }
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
    try:
        values.update(balancer_values(values, groups))
        values.update(cpu_eviction_values(values, groups))
        values.update(advisor_values(groups))
        values.update(pod_source_values(groups))
        values.update(takeover_values(groups))
    except ValueError as err:
        raise ConfigError(str(err)) from None
    # A DaemonSet passes the node's name in NODE_NAME (the downward API), as katalyst-agent
    # reads it; the host name is the fallback (a pod without host networking has its own).
    values.setdefault("node_name", os.environ.get("NODE_NAME") or socket.gethostname())
    config = DaemonConfig(**values)
    _check_socket_paths(config)
    return config


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
    # Imported here: a node configured by flags alone never loads the YAML parser.
    import yaml  # noqa: PLC0415 (lazy: only for a YAML --config)

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
