"""The daemon's configuration: one frozen ``DaemonConfig`` from a config file overlaid by flags.

Rules (DESIGN.md "Time, config, errors"):

* Every setting is an ``Option`` row (``qrmd.config_values``): its flag name, its config key,
  its parser, its default, what it does and the reference (katalyst-agent) flag it maps to.
  Each subsystem's ``settings.py`` holds its rows; ``SECTIONS`` lists them in the daemon's
  order, then the daemon's own (metrics address, logging), and ``OPTIONS`` is all of them.
  The argparse flags (grouped by section), the config-file keys, the environment variables
  and ``docs/flags.md`` come from those rows.
* Reading the settings is plain data: this module and every ``settings.py`` import the
  standard library, ``policy``, ``journal`` and qrmd's own settings modules, never gRPC,
  pykka, prometheus_client, ``wire`` or ``actors`` (a test and an import contract say so).
* The machine every subsystem shares (topology, reserve, policy context) is built here too
  (``build_context``), so an offline command has it without loading the daemon.
* A config file (``--config PATH``) is YAML (``.yaml``/``.yml``) or TOML (``.toml``); its keys
  are the flag names without ``--``, written with ``-`` or ``_``. A flag given on the command
  line wins over the file; a repeatable flag given on the command line replaces the file's list.
* Everything is validated before anything starts. A bad value is one ``ConfigError`` naming
  its key: ``--transition-period: '3x' is not a duration (use 0s, 10ms, 1m30s)``.
* A socket path longer than a unix socket can hold (``MAX_SOCKET_PATH_BYTES``, 107) is a
  configuration error, so the daemon refuses to start rather than fail after recovery. The
  sockets are the ones each enabled subsystem's settings declare (``declared_sockets``).
* ``DaemonConfig`` is the flat aggregate the flags and the file fill; each subsystem reads its
  own settings object of it (``settings_of(SettingsType, config)``, ``SUBSYSTEM_SETTINGS``).
"""

from __future__ import annotations

import argparse
import os
import socket
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
    Durability,
)
from policy.balance import BalancerConfig
from policy.cpu.context import (
    DEFAULT_MAX_FULL_HINT_NUMA_NODES,
    DEFAULT_MAX_HINTS,
    DEFAULT_TRANSITION_PERIOD_S,
    PolicyContext,
)
from policy.cpu.pressure import PressureSettings
from policy.cpu.qos import QoSConfig
from policy.cpu.reference import DEFAULT_REFERENCE_VERSION, ReferenceOptions
from policy.cpu.reserve import (
    ReserveError,
    most_reservable_cpus,
    require_cpus_outside_reserve,
    reserved_cpus,
)
from policy.state.checkpoint_form import DEFAULT_CHECKPOINT_FORM, CheckpointForm
from policy.topology.model import CPUTopology
from qrmd.advisor.settings import (
    ADVISOR_OPTIONS,
    AdvisorLinkConfig,
    AdvisorSettings,
    advisor_values,
)
from qrmd.balancer.settings import (
    BALANCER_OPTIONS,
    DEFAULT_METRICS_SOURCE,
    DEFAULT_PLUGIN_REGISTRATION_DIR,
    BalancerSettings,
    balancer_values,
)
from qrmd.config_values import (
    MAX_SOCKET_PATH_BYTES,
    ConfigError,
    Option,
    Socket,
    SubsystemSettings,
    parse_duration,
    settings_of,
)
from qrmd.config_values import choice as _choice
from qrmd.config_values import single_value as _text
from qrmd.cpu_plugin.settings import (
    CPU_PLUGIN_OPTIONS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_SOCKET_DIR,
    DEFAULT_TOPOLOGY_SPEC,
    PLUGIN_SOCKET_NAME,
    REFERENCE_GROUP,
    CpuPluginSettings,
    reference_values,
    require_reference_level,
    reserve_error,
)
from qrmd.cpu_pressure.settings import (
    CPU_EVICTION_OPTIONS,
    DEFAULT_CPU_LOAD_SOURCE,
    DEFAULT_RECLAIM_METRICS_SOURCE,
    CPUPressureSettings,
    cpu_eviction_values,
)
from qrmd.host.source_settings import BalancerSourceSettings
from qrmd.host.topology_source import load_topology
from qrmd.pods.settings import (
    POD_SOURCE_OPTIONS,
    PodSourceSettings,
    PodsSettings,
    pod_source_values,
)
from qrmd.store.settings import (
    DEFAULT_STATE_DIR,
    MIN_CHECKPOINT_EVERY_S,
    STORE_OPTIONS,
    StoreSettings,
)
from qrmd.store.takeover_settings import TAKEOVER_OPTIONS, TakeoverSettings, takeover_values

__all__ = [
    "DEFAULT_METRICS_ADDRESS",
    "DEFAULT_SOCKET_DIR",
    "DEFAULT_STATE_DIR",
    "MAX_SOCKET_PATH_BYTES",
    "MIN_CHECKPOINT_EVERY_S",
    "OPTIONS",
    "PLUGIN_SOCKET_NAME",
    "RUN_USAGE",
    "SECTIONS",
    "SUBSYSTEM_SETTINGS",
    "ConfigError",
    "DaemonConfig",
    "Option",
    "add_arguments",
    "build_context",
    "config_from_args",
    "declared_sockets",
    "env_name",
    "environment_values",
    "help_group",
    "load_config",
    "parse_duration",
    "summary",
]

DEFAULT_METRICS_ADDRESS = "127.0.0.1:9316"

LOG_LEVELS = ("debug", "info", "warning", "error")
LogFormat = Literal["text", "json"]


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
        checkpoint_form: how checkpoints hold the containers (``columns``, or ``entries`` for
            a rollback; ``policy.state.checkpoint_form``).
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
            (``qrmd.cpu_plugin.connection_cap``).
        enable_cpu_pressure_eviction: serve the CPU pressure eviction plugins (cpu-policy
            §12.7; ``qrmd.cpu_pressure.settings``).
        cpu_load_metrics_source: the ``--cpu-load-metrics-source`` SPEC as given.
        reclaim_metrics_source: ``--reclaim-metrics-source`` (v0.5.47 only).
        cpu_pressure: the CPU pressure eviction plugins' settings.
        cpu_advisor: the sys-advisor link's settings (``qrmd.advisor.settings``).
        pod_source: the node's pods and the periodic checkers (cpu-policy §12).
        takeover: what to do with katalyst-agent's checkpoint (``qrmd.store.takeover_settings``).
        reference_version: the Katalyst release reproduced (``policy.cpu.reference``).
        reference: the v0.5.47 options of the CPU decisions.
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
    checkpoint_form: CheckpointForm = DEFAULT_CHECKPOINT_FORM
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
    reclaim_metrics_source: str = DEFAULT_RECLAIM_METRICS_SOURCE
    cpu_pressure: PressureSettings = field(default_factory=PressureSettings)
    cpu_advisor: AdvisorLinkConfig = field(default_factory=AdvisorLinkConfig)
    pod_source: PodSourceSettings = field(default_factory=PodSourceSettings)
    takeover: TakeoverSettings = field(default_factory=TakeoverSettings)
    reference_version: str = DEFAULT_REFERENCE_VERSION
    reference: ReferenceOptions = field(default_factory=ReferenceOptions)
    config_file: str | None = None


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


# -- the options ---------------------------------------------------------------------------------


#: The daemon's own options: where its status is served and how it logs.
DAEMON_OPTIONS: tuple[Option, ...] = (
    Option("metrics-address", "metrics_address", _metrics_address, DEFAULT_METRICS_ADDRESS,
           "where /metrics and /healthz are served, or 'off'", "", "HOST:PORT|off"),
    Option("log-level", "log_level", _choice(*LOG_LEVELS), "info",
           f"least severe log level shown: {', '.join(LOG_LEVELS)}", "-v (klog verbosity)",
           "LEVEL"),
    Option("log-format", "log_format", _choice("text", "json"), "text",
           "log lines as text or one JSON object per line", "", "text|json"),
)  # fmt: skip

#: The options of each subsystem's settings module, in the daemon's order, then the daemon's
#: own: ``--help`` groups by them, and the config file's keys and ``docs/flags.md``
#: (``qrmd.commands.run_flags``) are made from the same rows.
SECTIONS: tuple[tuple[str, tuple[Option, ...]], ...] = (
    ("CPU plugin", CPU_PLUGIN_OPTIONS),
    ("state store", STORE_OPTIONS),
    ("Katalyst takeover", TAKEOVER_OPTIONS),
    ("sys-advisor link", ADVISOR_OPTIONS),
    ("memory balancer", BALANCER_OPTIONS),
    ("pod source and checkers", POD_SOURCE_OPTIONS),
    ("CPU pressure eviction", CPU_EVICTION_OPTIONS),
    ("metrics, health and logs", DAEMON_OPTIONS),
)
OPTIONS: tuple[Option, ...] = tuple(opt for _, options in SECTIONS for opt in options)

#: Each subsystem's settings type, in the daemon's order (``qrmd.daemon.SUBSYSTEMS`` names the
#: same, a test says so): ``declared_sockets`` asks each for the sockets it serves.
SUBSYSTEM_SETTINGS: tuple[type[SubsystemSettings], ...] = (
    StoreSettings,
    CpuPluginSettings,
    BalancerSettings,
    CPUPressureSettings,
    PodsSettings,
    AdvisorSettings,
)

_BY_FLAG = {o.flag: o for o in OPTIONS}


#: Environment variables are ``QRMD_`` and the flag in capitals with ``_`` (``QRMD_STATE_DIR``).
ENV_PREFIX = "QRMD_"


def env_name(flag: str) -> str:
    """The environment variable of a flag: ``state-dir`` → ``QRMD_STATE_DIR``."""
    return ENV_PREFIX + flag.upper().replace("-", "_")


#: Each flag's section (an option row is in one section; its flag names it).
_SECTION_OF = {opt.flag: name for name, options in SECTIONS for opt in options}


def help_group(opt: Option) -> str:
    """The ``--help`` group of an option: its subsystem's (``SECTIONS``)."""
    return _SECTION_OF[opt.flag]


#: ``qrmd run --help`` names each flag and what it is for on one line; the whole text is
#: ``docs/flags.md`` (``qrmd.commands.run_flags``).
SUMMARY_WIDTH = 50
RUN_USAGE = "%(prog)s [--config PATH] [--FLAG VALUE ...]"


def summary(opt: Option) -> str:
    """An option's one-line ``--help`` text: the first clause of its help, cut to
    ``SUMMARY_WIDTH`` at a word."""
    text = " ".join(opt.help.split(";")[0].split())
    if len(text) <= SUMMARY_WIDTH:
        return text
    return text[: SUMMARY_WIDTH - 1].rsplit(" ", 1)[0] + "…"


def add_arguments(parser: argparse.ArgumentParser, *, one_line: bool = False) -> None:
    """Add ``--config`` and every option's flag to ``parser``, grouped by subsystem.

    Values stay strings here and are checked by ``load_config``, so a bad value is one error
    line naming its key rather than argparse's usage text.

    Args:
        parser: the parser to add to.
        one_line: each flag's help is its ``summary`` (``qrmd run --help``); otherwise its
            whole text, default, reference flag and environment variable.
    """
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help="YAML or TOML file of these flags"
        if one_line
        else "YAML (.yaml, .yml) or TOML (.toml) file whose keys are these flag names "
        "(with - or _); environment variables QRMD_<FLAG> win over it, flags over both",
    )
    groups = {name: parser.add_argument_group(f"{name} options") for name, _ in SECTIONS}
    for opt in OPTIONS:
        group = groups[help_group(opt)]
        text = summary(opt) if one_line else f"{opt.help_text()}; env {env_name(opt.flag)}"
        if opt.switch:
            # ``--flag`` alone is true; ``--flag=false`` as the reference's Go flags accept.
            group.add_argument(
                f"--{opt.flag}", nargs="?", const=True, default=argparse.SUPPRESS,
                metavar="true|false", help=text,
            )  # fmt: skip
        else:
            group.add_argument(
                f"--{opt.flag}", metavar=opt.metavar, default=argparse.SUPPRESS,
                action="append" if opt.repeatable else "store", help=text,
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
        REFERENCE_GROUP: {},
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
        require_reference_level(
            values.get("reference_version", DEFAULT_REFERENCE_VERSION),
            (opt for opt in OPTIONS if opt.flag in raw),
        )
        values.update(reference_values(groups))
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


def declared_sockets(config: DaemonConfig) -> tuple[Socket, ...]:
    """Every unix socket the enabled subsystems serve, in the daemon's order, as their
    settings declare them (``qrmd.subsystem.SubsystemSettings.sockets``)."""
    return tuple(
        declared for kind in SUBSYSTEM_SETTINGS for declared in settings_of(kind, config).sockets()
    )


def _check_socket_paths(config: DaemonConfig) -> None:
    """Refuse a socket path a unix socket cannot hold (at most ``MAX_SOCKET_PATH_BYTES``),
    naming the flag that placed it."""
    for declared in declared_sockets(config):
        try:
            declared.check()
        except ValueError as err:
            raise ConfigError(f"--{declared.flag}: {err}") from None


def _file_key(key: object, config_file: str) -> str:
    flag = str(key).replace("_", "-")
    if flag not in _BY_FLAG:
        raise ConfigError(f"{config_file}: unknown key {key!r}; keys are the flag names of --help")
    return flag


def _read_file(path: str) -> dict[str, object]:
    suffix = Path(path).suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml"):
        raise ConfigError(f"--config: {path!r} is neither YAML (.yaml, .yml) nor TOML (.toml)")
    # Imported here: a node configured by flags alone loads neither parser (tomllib alone was
    # about 4 ms of every start).
    import tomllib  # noqa: PLC0415 (lazy: only for a --config file)

    import yaml  # noqa: PLC0415 (lazy: only for a --config file)

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


def build_context(config: DaemonConfig) -> PolicyContext:
    """The machine every subsystem shares: the topology, its system reserve and the policy's
    fixed inputs (QoS configuration, options), from the configuration.

    Raises:
        TopologyError, QoSConfigError: the machine or an option is invalid.
        ConfigError: ``--reserved-cpu-cores`` asks for more CPUs than the node has, or all.
    """
    topology = load_topology(config.topology)
    _require_reserve_fits(config, topology)
    try:
        reserved = reserved_cpus(
            topology,
            use_kubelet_reserved_config=False,
            reserved_cpu_cores=config.reserved_cpu_cores,
        )
        require_cpus_outside_reserve(topology, reserved)
    except ReserveError as err:
        raise ConfigError(reserve_error(settings_of(CpuPluginSettings, config), err)) from err
    qos = QoSConfig.build(
        enhancement_defaults=dict(config.qos_enhancement_defaults),
        debug_annotation_keys=config.pod_debug_anno_keys,
    )
    return PolicyContext(
        topology=topology,
        reserved=reserved,
        qos=qos,
        enable_reclaim=config.enable_reclaim,
        advisor_enabled=config.cpu_advisor.enabled,
        transition_period_s=config.transition_period_s,
        max_full_hint_numa_nodes=config.max_full_hint_numa_nodes,
        max_hints=config.max_hints,
        residual_sightings=config.pod_source.residual_sightings,
        reclaim_relative_root_cgroup_path=config.pod_source.reclaim_relative_root_cgroup_path,
        reference_version=config.reference_version,
        reference=config.reference,
    )


def _require_reserve_fits(config: DaemonConfig, topology: CPUTopology) -> None:
    # The operator's terms (the flag, the node's CPUs, the most it takes) rather than the
    # reference's construction error, which names neither the flag nor the limit.
    most = most_reservable_cpus(topology)
    if config.reserved_cpu_cores <= most:
        return
    node = (
        "this node" if config.topology == DEFAULT_TOPOLOGY_SPEC else f"--topology {config.topology}"
    )
    raise ConfigError(
        f"--reserved-cpu-cores {config.reserved_cpu_cores}: {node} has {topology.cpus().size()} "
        f"CPUs; reserve at most {most} (the reclaim pool needs one)"
    )
