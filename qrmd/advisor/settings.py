"""The sys-advisor link's settings of ``qrmd run``: its options (``ADVISOR_OPTIONS``, part of
``qrmd.config.OPTIONS``) and the ``AdvisorLinkConfig`` built from them (cpu-policy §11, §14;
wire.md §10).

=====================================  ==================================================  =========
flag                                   meaning                                             default
=====================================  ==================================================  =========
``--enable-cpu-advisor``               talk to sys-advisor (reference                     off
                                       ``--cpu-resource-plugin-advisor``)
``--cpu-advisor-socket PATH``          sys-advisor's ``CPUAdvisor`` socket (qrmd dials)   see below
``--cpu-plugin-socket PATH``           qrmd's ``CPUPlugin`` socket (GetCheckpoint)        see below
``--cpu-advisor-unhealthy-after D``    without an applied result this long, pools are     ``5m``
                                       sized by requests until the advisor is back
``--cpu-advisor-call-timeout D``       bound on AddContainer/RemovePod/GetAdvice calls    ``2s``
``--cpu-resource-plugin-advisor-      v0.5.47 only: between two GetAdvice calls           ``5s``
interval D``
=====================================  ==================================================  =========

``qrmd.advisor.subsystem`` builds the link from these. Every parser raises ``ValueError`` with a
message the caller prefixes with the flag.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from policy.cpu.reference import V0_5_47
from qrmd.config_values import Option, Socket, positive_duration, socket_file, switch

__all__ = [
    "ADVISOR_LINK_WIRED",
    "ADVISOR_OPTIONS",
    "DEFAULT_ADVICE_INTERVAL_S",
    "DEFAULT_CALL_TIMEOUT_S",
    "DEFAULT_CPU_ADVISOR_SOCKET",
    "DEFAULT_CPU_PLUGIN_SOCKET",
    "DEFAULT_UNHEALTHY_AFTER_S",
    "AdvisorLinkConfig",
    "AdvisorSettings",
    "advisor_values",
]

#: cpu-policy §14: ``cpu-advisor-sock-abs-path`` / ``cpu-plugin-sock-abs-path``.
DEFAULT_CPU_ADVISOR_SOCKET: Final = "/var/lib/katalyst/qrm_advisor/cpu_advisor.sock"
DEFAULT_CPU_PLUGIN_SOCKET: Final = "/var/lib/katalyst/qrm_advisor/cpu_plugin.sock"
#: ``--cpu-advisor-unhealthy-after`` default: 5 minutes, as Katalyst v0.5.4's fallback; the
#: same value as ``policy.cpu.advisor.decision.DEFAULT_UNHEALTHY_AFTER_S`` (a test holds them
#: equal), written here so the settings do not load the advisor's decision code.
DEFAULT_UNHEALTHY_AFTER_S: Final = 300.0
#: How long an AddContainer or RemovePod may hold kubelet's call (issue: never longer).
DEFAULT_CALL_TIMEOUT_S: Final = 2.0
#: Katalyst v0.5.47's ``--cpu-resource-plugin-advisor-interval`` default
#: (``cmd/katalyst-agent/app/options/qrm/cpu_plugin.go``:74 at tag v0.5.47).
DEFAULT_ADVICE_INTERVAL_S: Final = 5.0

#: The daemon starts the AdvisorLink and the Allocator calls the advisor
#: (``qrmd.advisor.subsystem``); were it False, ``--enable-cpu-advisor`` would be refused.
ADVISOR_LINK_WIRED: Final = True

_GROUP: Final = "advisor"


@dataclass(frozen=True, slots=True)
class AdvisorLinkConfig:
    """The advisor link's settings, validated.

    Attributes:
        enabled: talk to sys-advisor at all.
        advisor_socket: sys-advisor's ``CPUAdvisor`` socket.
        plugin_socket: qrmd's ``CPUPlugin`` socket, served for ``GetCheckpoint``.
        unhealthy_after_s: silence after which pools are sized by requests.
        call_timeout_s: bound on every unary call to sys-advisor.
        advice_interval_s: between two GetAdvice calls (Katalyst v0.5.47).
    """

    enabled: bool = False
    advisor_socket: str = DEFAULT_CPU_ADVISOR_SOCKET
    plugin_socket: str = DEFAULT_CPU_PLUGIN_SOCKET
    unhealthy_after_s: float = DEFAULT_UNHEALTHY_AFTER_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    advice_interval_s: float = DEFAULT_ADVICE_INTERVAL_S


ADVISOR_OPTIONS: tuple[Option, ...] = (
    Option("enable-cpu-advisor", "enabled", switch, "false",
           "talk to Katalyst's sys-advisor: it sizes the shared, reclaimed and isolation pools; "
           "kubelet is served whatever the advisor does",
           "--cpu-resource-plugin-advisor", switch=True, group=_GROUP),
    Option("cpu-advisor-socket", "advisor_socket", socket_file, DEFAULT_CPU_ADVISOR_SOCKET,
           "sys-advisor's CPUAdvisor socket, which qrmd dials", "--cpu-advisor-sock-abs-path",
           "PATH", group=_GROUP),
    Option("cpu-plugin-socket", "plugin_socket", socket_file, DEFAULT_CPU_PLUGIN_SOCKET,
           "qrmd's CPUPlugin socket, where sys-advisor reads GetCheckpoint (owner-only)",
           "--cpu-plugin-sock-abs-path", "PATH", group=_GROUP),
    Option("cpu-advisor-unhealthy-after", "unhealthy_after_s", positive_duration, "5m",
           "without an applied sys-advisor result this long (since start when none was), "
           "pools are sized by requests until the advisor answers again",
           "none (Katalyst v0.5.4 added a 5-minute fallback)", "DURATION", group=_GROUP),
    Option("cpu-advisor-call-timeout", "call_timeout_s", positive_duration, "2s",
           "longest wait for sys-advisor's AddContainer or RemovePod; a sick advisor never "
           "holds a kubelet call longer", "none (no timeout)", "DURATION", group=_GROUP),
    Option("cpu-resource-plugin-advisor-interval", "advice_interval_s", positive_duration, "5s",
           "v0.5.47 only: how often qrmd asks sys-advisor's GetAdvice (falling back to "
           "ListAndWatch when the advisor does not implement it)",
           "--cpu-resource-plugin-advisor-interval", "DURATION", group=_GROUP, since=V0_5_47),
)  # fmt: skip


def advisor_values(groups: Mapping[str, Mapping[str, object]]) -> dict[str, Any]:
    """The ``DaemonConfig`` field of the advisor link from its options' checked values.

    Args:
        groups: the checked keys given, by group (``advisor`` is read).

    Returns:
        ``{"cpu_advisor": AdvisorLinkConfig}``.

    Raises:
        ValueError: both sockets are one path (or the link is enabled while
            ``ADVISOR_LINK_WIRED`` is off); the message names the flag.
    """
    config = AdvisorLinkConfig(**groups.get(_GROUP, {}))  # type: ignore[arg-type]
    if config.advisor_socket == config.plugin_socket:
        raise ValueError(
            f"--cpu-plugin-socket: {config.plugin_socket!r} is also --cpu-advisor-socket; "
            "qrmd serves one and dials the other"
        )
    if config.enabled and not ADVISOR_LINK_WIRED:
        raise ValueError(
            "--enable-cpu-advisor: the sys-advisor link is not wired into qrmd run yet; "
            "run without it (pools are sized by requests)"
        )
    return {"cpu_advisor": config}


@dataclass(frozen=True, slots=True)
class AdvisorSettings:
    """The sys-advisor link's settings, the ``DaemonConfig`` field of the same name
    (``qrmd.config_values.settings_of``).

    Attributes:
        cpu_advisor: the link's options (``ADVISOR_OPTIONS``).
    """

    cpu_advisor: AdvisorLinkConfig = field(default_factory=AdvisorLinkConfig)

    @property
    def enabled(self) -> bool:
        """``--enable-cpu-advisor``."""
        return self.cpu_advisor.enabled

    def sockets(self) -> tuple[Socket, ...]:
        """qrmd's ``CPUPlugin`` socket (GetCheckpoint), when the link runs; sys-advisor's own
        socket is dialled, not served. Served without a connection cap, so not counted."""
        if not self.enabled:
            return ()
        return (Socket("cpu-plugin-socket", self.cpu_advisor.plugin_socket),)
