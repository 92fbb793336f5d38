"""The CPU plugin's settings of ``qrmd run`` as plain data: the machine (``--topology``), its
system reserve, the kubelet plugin sockets, the policy's options and the connection cap
(``CPU_PLUGIN_OPTIONS``, part of ``qrmd.config.OPTIONS``; spec cpu-policy §3, §9.6, §14;
wire.md §2).

Only the standard library, ``policy`` and qrmd's own settings modules: ``qrmd.config`` reads
these without loading gRPC. The plugin's socket name is wire.md §2's ``<agent name>_<policy>``;
``wire.plugin_server`` serves under the same name (a test checks that they agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from policy.cpu.context import (
    DEFAULT_MAX_FULL_HINT_NUMA_NODES,
    DEFAULT_MAX_HINTS,
    DEFAULT_TRANSITION_PERIOD_S,
)
from qrmd.config_values import (
    Option,
    Socket,
    count,
    duration,
    nonempty,
    single_value,
    socket_path,
    switch,
)
from qrmd.host.topology_source import DEFAULT_TOPOLOGY_SPEC, SPEC_FORMS

__all__ = [
    "CPU_PLUGIN_OPTIONS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_SOCKET_DIR",
    "DEFAULT_TOPOLOGY_SPEC",
    "PLUGIN_NAME",
    "PLUGIN_SOCKET_NAME",
    "SPEC_FORMS",
    "CpuPluginSettings",
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


@dataclass(frozen=True, slots=True)
class CpuPluginSettings:
    """The CPU plugin's settings, one field per option row of ``CPU_PLUGIN_OPTIONS`` (the
    ``DaemonConfig`` field of the same name; ``qrmd.config_values.settings_of``). The policy's
    own inputs reach the wiring as the daemon's machine (``qrmd.config.build_context``).

    Attributes:
        topology: the ``--topology`` SPEC.
        reserved_cpu_cores: CPUs kept for the system (cpu-policy §3).
        socket_dirs: one plugin socket per directory, duplicates removed.
        transition_period_s: ramp-up length (§9.6).
        enable_reclaim: the dynamic ``enable-reclaim`` option.
        qos_enhancement_defaults: ``qos-enhancement-default-values`` as (key, value) pairs.
        pod_debug_anno_keys: ``qrm-pod-debug-anno-keys``.
        max_full_hint_numa_nodes: NUMA nodes up to which hints are fully enumerated.
        max_hints: the most hints of the reduced answer.
        max_connections: the most connections each plugin socket accepts at once.
    """

    topology: str = DEFAULT_TOPOLOGY_SPEC
    reserved_cpu_cores: int = 0
    socket_dirs: tuple[str, ...] = (DEFAULT_SOCKET_DIR,)
    transition_period_s: float = DEFAULT_TRANSITION_PERIOD_S
    enable_reclaim: bool = False
    qos_enhancement_defaults: tuple[tuple[str, str], ...] = ()
    pod_debug_anno_keys: tuple[str, ...] = ()
    max_full_hint_numa_nodes: int = DEFAULT_MAX_FULL_HINT_NUMA_NODES
    max_hints: int = DEFAULT_MAX_HINTS
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    @property
    def enabled(self) -> bool:
        """The CPU plugin always runs: it is what kubelet calls."""
        return True

    def sockets(self) -> tuple[Socket, ...]:
        """One plugin socket per socket directory (wire.md §2), each capped at
        ``--max-connections``."""
        return tuple(
            Socket.in_directory("socket-dir", d, PLUGIN_NAME, self.max_connections)
            for d in self.socket_dirs
        )

    def socket_paths(self) -> tuple[str, ...]:
        """The plugin socket of each socket directory, absolute (wire.md §2).

        Raises:
            ValueError: a path is longer than a unix socket allows.
        """
        return tuple(socket_path(d, PLUGIN_NAME) for d in self.socket_dirs)


def reserve_error(settings: CpuPluginSettings, err: Exception) -> str:
    """A reserve the machine cannot hold, as the flags that asked for it: the policy names
    CPUs, the operator needs the flag to change."""
    return (
        f"--reserved-cpu-cores={settings.reserved_cpu_cores} on --topology {settings.topology}: "
        f"{err}"
    )
