"""The CPU plugin's settings of ``qrmd run`` as plain data: the machine (``--topology``), its
system reserve, the kubelet plugin sockets, the policy's options and the connection cap
(``CPU_PLUGIN_OPTIONS``, part of ``qrmd.config.OPTIONS``; spec cpu-policy §3, §9.6, §14;
wire.md §2).

Only the standard library, ``policy`` and qrmd's own settings modules: ``qrmd.config`` reads
these without loading gRPC. The plugin's socket name is wire.md §2's ``<agent name>_<policy>``;
``wire.plugin_server`` serves under the same name (a test checks that they agree).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from policy.cpu.context import (
    DEFAULT_MAX_FULL_HINT_NUMA_NODES,
    DEFAULT_MAX_HINTS,
    DEFAULT_TRANSITION_PERIOD_S,
)
from policy.cpu.reference import (
    DEDICATED_CORES_HINT_OPTIMIZERS_UNSUPPORTED,
    DEFAULT_REFERENCE_VERSION,
    NUMA_HINT_PREFER_POLICIES,
    REFERENCE_VERSIONS,
    SHARED_CORES_HINT_OPTIMIZERS,
    V0_5_47,
    ReferenceOptions,
)
from qrmd.config_values import (
    Option,
    Socket,
    choice,
    comma_list,
    count,
    duration,
    nonempty,
    real_number,
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
    "REFERENCE_GROUP",
    "SPEC_FORMS",
    "CpuPluginSettings",
    "reference_values",
    "require_reference_level",
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


#: The ``Option.group`` of the v0.5.47 options the CPU decisions read: collected by field into
#: ``policy.cpu.reference.ReferenceOptions`` (``reference_values``).
REFERENCE_GROUP: Final = "reference"


def _shared_cores_optimizers(raw: object) -> tuple[str, ...]:
    # The reference refuses a name its registry lacks at start-up; qrmd reproduces two of the
    # four registered (memory_bandwidth and resource_package need metrics and CRDs it lacks).
    names = comma_list(raw)
    for name in names:
        if name not in SHARED_CORES_HINT_OPTIMIZERS:
            raise ValueError(
                f"{name!r} is not a shared cores hint optimizer qrmd reproduces "
                f"(use {', '.join(SHARED_CORES_HINT_OPTIMIZERS)})"
            )
    return names


def _dedicated_cores_optimizers(raw: object) -> tuple[str, ...]:
    # The reference registers memory_bandwidth and resource_package for dedicated cores; both
    # need metrics and CRDs qrmd lacks, so only the reference's default, no optimizer, runs.
    names = comma_list(raw)
    for name in names:
        if name in DEDICATED_CORES_HINT_OPTIMIZERS_UNSUPPORTED:
            raise ValueError(
                f"{name!r} is a dedicated cores hint optimizer of the reference that qrmd does "
                "not reproduce (leave the list empty, the reference's default)"
            )
        raise ValueError(
            f"{name!r} is not a dedicated cores hint optimizer (the reference registers "
            f"{', '.join(DEDICATED_CORES_HINT_OPTIMIZERS_UNSUPPORTED)}; qrmd runs none)"
        )
    return names


_SINCE_47 = "v0.5.47 only"

#: The v0.5.47 options of the CPU decisions (spec cpu-policy-v0.5.47 (a) "Flags", (c) 4, 6).
REFERENCE_OPTIONS: tuple[Option, ...] = (
    Option("cpu-numa-hint-prefer-policy", "cpu_numa_hint_prefer_policy",
           choice(*NUMA_HINT_PREFER_POLICIES), "spreading",
           f"{_SINCE_47}: which NUMA hints of a shared_cores pod with NUMA binding are "
           "preferred: the most CPUs left (spreading), the fewest (packing), or packing above "
           "--cpu-numa-hint-prefer-low-threshold (dynamic_packing)",
           "--cpu-numa-hint-prefer-policy", "|".join(NUMA_HINT_PREFER_POLICIES),
           group=REFERENCE_GROUP, since=V0_5_47),
    Option("cpu-numa-hint-prefer-low-threshold", "cpu_numa_hint_prefer_low_threshold",
           real_number, "0",
           f"{_SINCE_47}: with dynamic_packing, NUMAs whose share left after the request is "
           "at least this are packed and listed first",
           "--cpu-numa-hint-prefer-low-threshold", "RATIO",
           group=REFERENCE_GROUP, since=V0_5_47),
    Option("shared-cores-hint-optimizer-policies", "shared_cores_hint_optimizer_policies",
           _shared_cores_optimizers, "metric_based,canonical",
           f"{_SINCE_47}: the hint optimizers of shared_cores pods with NUMA binding, in order "
           "(comma-separated; the first that does not skip itself decides)",
           "--shared-cores-hint-optimizer-policies", "LIST",
           group=REFERENCE_GROUP, since=V0_5_47),
    Option("enable-snb-high-numa-preference", "enable_snb_high_numa_preference", switch,
           "false",
           f"{_SINCE_47}: list the NUMA hints of shared_cores pods with NUMA binding from the "
           "highest NUMA down", "--enable-snb-high-numa-preference", switch=True,
           group=REFERENCE_GROUP, since=V0_5_47),
    Option("enable-reclaim-numa-binding", "enable_reclaim_numa_binding", switch,
           "false",
           f"{_SINCE_47}: reclaimed_cores pods with numa_binding are bound to one NUMA, "
           "chosen by sys-advisor's per-NUMA headroom (without --enable-cpu-advisor every "
           "such pod on a multi-NUMA node is refused, as the reference refuses it)",
           "--enable-reclaim-numa-binding", switch=True,
           group=REFERENCE_GROUP, since=V0_5_47),
    Option("pod-annotation-kept-keys", "pod_annotation_kept_keys", comma_list,
           ",".join(ReferenceOptions().pod_annotation_kept_keys),
           f"{_SINCE_47}: pod annotations kept and echoed besides the QoS ones "
           "(comma-separated)", "--pod-annotation-kept-keys", "LIST",
           group=REFERENCE_GROUP, since=V0_5_47),
    Option("numa-binding-result-annotation-key", "numa_binding_result_annotation_key",
           nonempty, ReferenceOptions().numa_binding_result_annotation_key,
           f"{_SINCE_47}: the annotation that names a pod's NUMA binding result (read with "
           "--prefer-use-exist-numa-hint-result)", "--numa-binding-result-annotation-key",
           "KEY", group=REFERENCE_GROUP, since=V0_5_47),
    Option("prefer-use-exist-numa-hint-result", "prefer_use_exist_numa_hint_result", switch,
           "false",
           f"{_SINCE_47}: only the NUMA hint the binding result annotation names is preferred "
           "(keep that key in --pod-annotation-kept-keys)",
           "--prefer-use-exist-numa-hint-result", switch=True,
           group=REFERENCE_GROUP, since=V0_5_47),
    Option("enable-metric-preferred-numa-allocation", "enable_metric_preferred_numa_allocation",
           switch, "false",
           f"{_SINCE_47}: let the metric_based optimizer decide; qrmd has no NUMA load "
           "metrics for it, so it skips itself as the reference does when they are missing",
           "--enable-metric-preferred-numa-allocation", switch=True,
           group=REFERENCE_GROUP, since=V0_5_47),
    Option("dedicated-cores-hint-optimizer-policies", "dedicated_cores_hint_optimizer_policies",
           _dedicated_cores_optimizers, "",
           f"{_SINCE_47}: the hint optimizers of dedicated_cores pods with NUMA binding, in "
           "order (comma-separated); empty, the reference's default, is the one qrmd runs",
           "--dedicated-cores-hint-optimizer-policies", "LIST",
           group=REFERENCE_GROUP, since=V0_5_47),
    Option("numa-number-annotation-key", "numa_number_annotation_key", nonempty,
           ReferenceOptions().numa_number_annotation_key,
           f"{_SINCE_47}: the cpu_enhancement key of a dedicated pod's NUMA count "
           "(docs/reference-levels-dedicated.md)", "--numa-number-annotation-key", "KEY",
           group=REFERENCE_GROUP, since=V0_5_47),
    Option("numa-ids-annotation-key", "numa_ids_annotation_key", nonempty,
           ReferenceOptions().numa_ids_annotation_key,
           f"{_SINCE_47}: the cpu_enhancement key of a dedicated pod's NUMA ids "
           "(docs/reference-levels-dedicated.md)", "--numa-ids-annotation-key", "KEY",
           group=REFERENCE_GROUP, since=V0_5_47),
)  # fmt: skip

CPU_PLUGIN_OPTIONS: tuple[Option, ...] = (
    Option("reference-version", "reference_version", choice(*REFERENCE_VERSIONS),
           DEFAULT_REFERENCE_VERSION,
           "the Katalyst release whose CPU plugin qrmd reproduces: v0.5.3, or v0.5.47 (shared "
           "cores with NUMA binding, the dedicated allocation options and its other changes; "
           "docs/reference-levels.md)", "none (the agent's own release)",
           "|".join(REFERENCE_VERSIONS)),
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
    *REFERENCE_OPTIONS,
)  # fmt: skip


def require_reference_level(version: str, given: Iterable[Option]) -> None:
    """Refuse an option that belongs to another reference level than ``version``.

    Args:
        version: the ``--reference-version`` in force.
        given: the options the operator set (flag, environment or config file).

    Raises:
        ValueError: the first such option, named, with the level that would accept it.
    """
    for opt in given:
        if opt.since and opt.since != version:
            raise ValueError(
                f"--{opt.flag} only means something at --reference-version {opt.since}, "
                f"not at {version}: add --reference-version {opt.since} or drop it"
            )


def reference_values(groups: Mapping[str, Mapping[str, object]]) -> dict[str, Any]:
    """The ``DaemonConfig`` field ``reference``, from the checked keys of its group.

    Args:
        groups: the checked keys given, by group (``REFERENCE_GROUP`` is read).
    """
    return {"reference": ReferenceOptions(**groups.get(REFERENCE_GROUP, {}))}  # type: ignore[arg-type]


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
        reference_version: the Katalyst release reproduced (``policy.cpu.reference``).
        reference: the v0.5.47 options of the CPU decisions (the rows of
            ``REFERENCE_OPTIONS``, collected by field).
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
    reference_version: str = DEFAULT_REFERENCE_VERSION
    reference: ReferenceOptions = field(default_factory=ReferenceOptions)

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
