"""The CPU plugin's settings of ``qrmd run`` as plain data: the machine (``--topology``), its
system reserve, the kubelet plugin sockets, the policy's options and the connection cap
(``CPU_PLUGIN_OPTIONS``, part of ``qrmd.config.OPTIONS``; spec cpu-policy §3, §9.6, §14;
wire.md §2).

Only the standard library, ``policy`` and qrmd's own settings modules: ``qrmd.config`` reads
these without loading gRPC. The plugin's socket name is wire.md §2's ``<agent name>_<policy>``;
``wire.plugin_server`` serves under the same name (a test checks that they agree).
"""

from __future__ import annotations

from typing import Final, Protocol

from policy.cpu.context import (
    DEFAULT_MAX_FULL_HINT_NUMA_NODES,
    DEFAULT_MAX_HINTS,
)
from qrmd.config_values import Option, count, duration, nonempty, single_value, switch
from qrmd.host.topology_source import DEFAULT_TOPOLOGY_SPEC, SPEC_FORMS

__all__ = [
    "CPU_PLUGIN_OPTIONS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_SOCKET_DIR",
    "DEFAULT_TOPOLOGY_SPEC",
    "PLUGIN_NAME",
    "PLUGIN_SOCKET_NAME",
    "SPEC_FORMS",
    "CpuPluginFields",
    "reserve_error",
]

#: The CPU plugin instance name: agent ``qrm_cpu_plugin``, policy ``dynamic`` (wire.md §12.5).
PLUGIN_NAME: Final = "qrm_cpu_plugin_dynamic"
#: wire.md §2: ``<agent name>_<policy>.sock``.
PLUGIN_SOCKET_NAME: Final = f"{PLUGIN_NAME}.sock"
DEFAULT_SOCKET_DIR: Final = "/var/lib/kubelet/plugins_registry"
#: kubelet and katalyst-agent each keep one connection; the cap only bites a runaway client
#: (``qrmd.cpu_plugin.connection_cap``).
DEFAULT_MAX_CONNECTIONS: Final = 1024


def _key_value(raw: object) -> tuple[str, str]:
    key, sep, value = single_value(raw).partition("=")
    if not sep or not key:
        raise ValueError(f"{raw!r} is not KEY=VALUE")
    return key, value


CPU_PLUGIN_OPTIONS: tuple[Option, ...] = (
    Option("topology", "topology", nonempty, DEFAULT_TOPOLOGY_SPEC,
           f"the machine: {SPEC_FORMS}", "", "SPEC"),
    Option("reserved-cpu-cores", "reserved_cpu_cores", count(0), "0",
           "CPUs reserved for the system, one per NUMA node per round (cpu-policy §3)",
           "--cpu-resource-plugin-reserved", "N"),
    Option("socket-dir", "socket_dirs", nonempty, DEFAULT_SOCKET_DIR,
           f"kubelet plugin-watcher directory; the plugin socket {PLUGIN_SOCKET_NAME} is "
           "created there (repeat for several)", "--qrm-socket-dirs", "DIR", repeatable=True),
    Option("transition-period", "transition_period_s", duration, "30s",
           "ramp-up period of shared containers, e.g. 0s, 10ms, 1m30s (cpu-policy §9.6)",
           "none (a constant of 30s)", "DURATION"),
    Option("enable-reclaim", "enable_reclaim", switch, "false",
           "give idle shared CPUs to reclaimed_cores pods", "--enable-reclaim", switch=True),
    Option("qos-enhancement-default", "qos_enhancement_defaults", _key_value, "none",
           "default value of a QoS enhancement key (repeat for several)",
           "--qos-enhancement-default-values", "KEY=VALUE", repeatable=True),
    Option("pod-debug-anno-key", "pod_debug_anno_keys", nonempty, "none",
           "annotation key that marks a debug pod: its containers are left where the runtime "
           "puts them, nothing is stored (repeat for several)",
           "--qrm-pod-debug-anno-keys", "KEY", repeatable=True),
    Option("max-full-hint-numa-nodes", "max_full_hint_numa_nodes", count(1),
           str(DEFAULT_MAX_FULL_HINT_NUMA_NODES),
           "up to this many NUMA nodes, dedicated hints enumerate every NUMA combination",
           "", "N"),
    Option("max-hints", "max_hints", count(1), str(DEFAULT_MAX_HINTS),
           "the most hints answered beyond --max-full-hint-numa-nodes", "", "N"),
    Option("max-connections", "max_connections", count(1), str(DEFAULT_MAX_CONNECTIONS),
           "the most connections each plugin socket accepts at once; one past it is closed "
           "at once (UNAVAILABLE), enforced by gRPC's grpc.max_allowed_incoming_connections "
           "server argument. Each socket's connections must fit under the open-file limit, "
           "which qrmd raises to its hard limit at start", "none", "N"),
)  # fmt: skip


class CpuPluginFields(Protocol):
    """The ``DaemonConfig`` fields the CPU plugin's wiring reads (``qrmd.cpu_plugin.subsystem``);
    the policy's own inputs reach it as the daemon's machine (``qrmd.config.build_context``)."""

    @property
    def topology(self) -> str: ...

    @property
    def reserved_cpu_cores(self) -> int: ...

    @property
    def socket_dirs(self) -> tuple[str, ...]: ...

    @property
    def max_connections(self) -> int: ...


def reserve_error(settings: CpuPluginFields, err: Exception) -> str:
    """A reserve the machine cannot hold, as the flags that asked for it: the policy names
    CPUs, the operator needs the flag to change."""
    return (
        f"--reserved-cpu-cores={settings.reserved_cpu_cores} on --topology {settings.topology}: "
        f"{err}"
    )
