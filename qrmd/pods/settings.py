"""The pod source's and the periodic checkers' settings of ``qrmd run``: their options
(``POD_SOURCE_OPTIONS``, part of ``qrmd.config.OPTIONS``) and the ``PodSourceSettings`` built
from them (spec cpu-policy §12, §14; katalyst-agent's flag names where it has one).

``--pod-source none`` (the default) runs no checker that needs pods: as the reference without
pod metadata (§12.4 step 1) the residual state of a pod kubelet forgot to remove is then never
cleaned, and the daemon says so at start-up. ``--pod-source kubelet`` reads kubelet's
``/pods`` (``qrmd.host.kubelet_pods``) on the read-only port, or with
``--enable-kubelet-secure-port`` on the secure port at ``--node-address`` with the token of
``--api-auth-token-file`` (most kubelets disable the read-only port, so deployments turn the
secure port on).

Every parser raises ``ValueError`` with a message that the caller prefixes with the flag.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qrmd.config_values import Option, Socket, choice, count, nonempty, positive_duration, switch
from qrmd.host.kubelet_endpoint import DEFAULT_FETCH_TIMEOUT_S, KubeletEndpoint
from qrmd.host.source_settings import BalancerSourceSettings

__all__ = [
    "DEFAULT_API_AUTH_TOKEN_FILE",
    "POD_SOURCE_OPTIONS",
    "PodSourceSettings",
    "PodsSettings",
    "pod_source_values",
]

DEFAULT_API_AUTH_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
_GROUP = "pod_source"


@dataclass(frozen=True, slots=True)
class PodSourceSettings:
    """Where the node's pods come from, and how often the checkers run.

    Attributes:
        kind: ``none`` or ``kubelet``.
        kubelet_read_only_port: kubelet's read-only port (``--kubelet-read-only-port``).
        kubelet_secure_port: kubelet's HTTPS port.
        enable_kubelet_secure_port: read the secure port instead of the read-only one.
        node_address: the node's address, the secure port's host.
        kubelet_pods_endpoint: the path of the pod list.
        api_auth_token_file: the bearer token's file for the secure port.
        kubelet_ca_file: the CA kubelet's certificate is verified against; ``None``: not
            verified, as the reference.
        fetch_timeout_s: one fetch's whole timeout.
        residual_check_period_s: clearResidualState's period (§12.4).
        residual_max_age_s: how long a pod is missing before its state goes (§12.4).
        cpuset_check_period_s: checkCPUSet's period (§12.5).
        cpuset_cgroup_root: the cpuset controller's mount; ``None``: found at start.
        enable_syncing_cpu_idle: run syncCPUIdle (§12.6).
        enable_cpu_idle: the value it writes (true → 1).
        reclaim_relative_root_cgroup_path: the cgroup it writes ``cpu.idle`` into.
    """

    kind: str = "none"
    kubelet_read_only_port: int = 10255
    kubelet_secure_port: int = 10250
    enable_kubelet_secure_port: bool = False
    node_address: str = ""
    kubelet_pods_endpoint: str = "/pods"
    api_auth_token_file: str = DEFAULT_API_AUTH_TOKEN_FILE
    kubelet_ca_file: str | None = None
    fetch_timeout_s: float = DEFAULT_FETCH_TIMEOUT_S
    residual_check_period_s: float = 30.0
    residual_max_age_s: float = 300.0
    cpuset_check_period_s: float = 10.0
    cpuset_cgroup_root: Path | None = None
    enable_syncing_cpu_idle: bool = False
    enable_cpu_idle: bool = False
    reclaim_relative_root_cgroup_path: str = "/kubepods/besteffort"

    @property
    def enabled(self) -> bool:
        """Whether a pod source runs (``--pod-source kubelet``)."""
        return self.kind == "kubelet"

    @property
    def residual_sightings(self) -> int:
        """Consecutive sightings after which a missing pod is removed (§12.4 step 3): the
        first N with N × period ≥ max age, 10 with the reference's 30 s and 5 min."""
        return max(1, math.ceil(self.residual_max_age_s / self.residual_check_period_s - 1e-9))

    @property
    def fetch_period_s(self) -> float:
        """One fetch serves every checker: as often as the most frequent one needs."""
        return min(self.residual_check_period_s, self.cpuset_check_period_s)

    def endpoint(self) -> KubeletEndpoint:
        """Where the kubelet adapter reads.

        Raises:
            ValueError: the secure port without ``--node-address``.
        """
        if self.enable_kubelet_secure_port:
            return KubeletEndpoint.secure(
                self.node_address,
                self.kubelet_secure_port,
                self.kubelet_pods_endpoint,
                self.api_auth_token_file,
                self.kubelet_ca_file,
                timeout_s=self.fetch_timeout_s,
            )
        return KubeletEndpoint.read_only(
            self.kubelet_read_only_port, self.kubelet_pods_endpoint, self.fetch_timeout_s
        )


def _port(raw: object) -> int:
    value = count(1)(raw)
    if value > 65535:
        raise ValueError(f"{value} is not a TCP port (1-65535)")
    return value


def _endpoint_path(raw: object) -> str:
    text = nonempty(raw)
    if not text.startswith("/"):
        raise ValueError(f"{text!r} must start with /")
    return text


#: The pod source's options of ``qrmd run``; all in the ``pod_source`` group, which becomes
#: the ``PodSourceSettings`` of ``DaemonConfig.pod_source``.
POD_SOURCE_OPTIONS: tuple[Option, ...] = (
    Option("pod-source", "kind", choice("kubelet", "none"), "none",
           "where the node's pods come from: kubelet's /pods, or none (residual state of a pod "
           "kubelet forgot to remove is then never cleaned, and cpusets are not checked)",
           "none (the metaserver always reads kubelet)", "kubelet|none", group=_GROUP),
    Option("kubelet-read-only-port", "kubelet_read_only_port", _port, "10255",
           "kubelet's read-only port, read at http://localhost:PORT",
           "--kubelet-read-only-port", "PORT", group=_GROUP),
    Option("kubelet-secure-port", "kubelet_secure_port", _port, "10250",
           "kubelet's HTTPS port, read with --enable-kubelet-secure-port",
           "--kubelet-secure-port", "PORT", group=_GROUP),
    Option("enable-kubelet-secure-port", "enable_kubelet_secure_port", switch, "false",
           "read https://NODE-ADDRESS:SECURE-PORT with the token of --api-auth-token-file",
           "--enable-kubelet-secure-port", switch=True, group=_GROUP),
    Option("node-address", "node_address", nonempty, "none",
           "this node's address, the secure port's host (e.g. the downward-API status.hostIP)",
           "--node-address", "ADDRESS", group=_GROUP),
    Option("kubelet-pods-endpoint", "kubelet_pods_endpoint", _endpoint_path, "/pods",
           "the path of kubelet's pod list", "--kubelet-pods-endpoint", "PATH", group=_GROUP),
    Option("api-auth-token-file", "api_auth_token_file", nonempty, DEFAULT_API_AUTH_TOKEN_FILE,
           "bearer token sent to the secure port, re-read at every fetch",
           "--api-auth-token-file", "PATH", group=_GROUP),
    Option("kubelet-ca-file", "kubelet_ca_file", nonempty, "none",
           "CA bundle kubelet's certificate is verified against; without one the secure port "
           "is read unverified, as the reference does, with a warning",
           "none (the reference never verifies)", "PATH", group=_GROUP),
    Option("residual-check-period", "residual_check_period_s", positive_duration, "30s",
           "how often the state is compared with the pod list (cpu-policy §12.4)",
           "none (a constant of 30s)", "DURATION", group=_GROUP),
    Option("residual-max-age", "residual_max_age_s", positive_duration, "5m",
           "a pod missing from the pod list this long, at every check, loses its state",
           "none (a constant of 5m)", "DURATION", group=_GROUP),
    Option("cpuset-check-period", "cpuset_check_period_s", positive_duration, "10s",
           "how often each container's real cpuset is compared with its allocation (§12.5)",
           "none (a constant of 10s)", "DURATION", group=_GROUP),
    Option("cpuset-cgroup-root", "cpuset_cgroup_root", nonempty,
           "/sys/fs/cgroup/cpuset on cgroup v1, else /sys/fs/cgroup",
           "the cpuset controller's mount, where cpuset.cpus is read", "", "DIR", group=_GROUP),
    Option("enable-syncing-cpu-idle", "enable_syncing_cpu_idle", switch, "false",
           "every 30 s write cpu.idle into --reclaim-relative-root-cgroup-path (§12.6)",
           "--enable-syncing-cpu-idle", switch=True, group=_GROUP),
    Option("enable-cpu-idle", "enable_cpu_idle", switch, "false",
           "the cpu.idle value syncing writes: true 1, false 0",
           "--enable-cpu-idle", switch=True, group=_GROUP),
    Option("reclaim-relative-root-cgroup-path", "reclaim_relative_root_cgroup_path", nonempty,
           "/kubepods/besteffort",
           "the reclaimed pods' cgroup, relative to the cpu controller's mount",
           "--reclaim-relative-root-cgroup-path", "PATH", group=_GROUP),
)  # fmt: skip


def pod_source_values(groups: Mapping[str, Mapping[str, object]]) -> dict[str, Any]:
    """The ``DaemonConfig`` field of the pod source, from the options' checked values.

    Args:
        groups: the checked keys given, by group (``pod_source`` is read).

    Returns:
        ``{"pod_source": PodSourceSettings}``.

    Raises:
        ValueError: the values are invalid together; the message names the flags.
    """
    given: dict[str, Any] = dict(groups.get(_GROUP, {}))
    if "cpuset_cgroup_root" in given:
        given["cpuset_cgroup_root"] = Path(str(given["cpuset_cgroup_root"]))
    settings = PodSourceSettings(**given)
    if settings.enabled and settings.enable_kubelet_secure_port and not settings.node_address:
        raise ValueError(
            "--enable-kubelet-secure-port needs --node-address (the kubelet's host, e.g. the "
            "downward-API status.hostIP)"
        )
    if settings.residual_max_age_s < settings.residual_check_period_s:
        raise ValueError(
            f"--residual-max-age ({settings.residual_max_age_s:g} s) is shorter than "
            f"--residual-check-period ({settings.residual_check_period_s:g} s): a pod would "
            "be removed at its first absence"
        )
    if settings.enable_syncing_cpu_idle and not settings.enabled:
        # The periodic handlers run in the Checkers, which start with a pod source.
        raise ValueError(
            "--enable-syncing-cpu-idle needs --pod-source kubelet (the periodic checkers run "
            "with a pod source)"
        )
    reclaim_path = settings.reclaim_relative_root_cgroup_path
    if settings.enable_syncing_cpu_idle and not reclaim_path.strip("/"):
        # §12.1 step 2: the reference's Start fails with this condition.
        raise ValueError(
            "--enable-syncing-cpu-idle needs --reclaim-relative-root-cgroup-path "
            "(the reclaimed pods' cgroup)"
        )
    return {"pod_source": settings}


@dataclass(frozen=True, slots=True)
class PodsSettings:
    """The pod source's and the checkers' settings, each the ``DaemonConfig`` field of the same
    name (``qrmd.config_values.settings_of``).

    Attributes:
        pod_source: their own (``POD_SOURCE_OPTIONS``).
        numa_metric_sources: the memory balancer's source settings, for the cgroup layout
            they name (``cgroup_driver``, ``kubelet_cgroup_root``).
    """

    pod_source: PodSourceSettings = field(default_factory=PodSourceSettings)
    numa_metric_sources: BalancerSourceSettings = field(default_factory=BalancerSourceSettings)

    @property
    def enabled(self) -> bool:
        """``--pod-source kubelet``."""
        return self.pod_source.enabled

    def sockets(self) -> tuple[Socket, ...]:
        """None: kubelet's pod list is read over HTTP."""
        return ()
