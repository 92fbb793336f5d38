"""The ``pluginregistration.Registration`` service every plugin socket serves (wire.md §3, §8).

``GetInfo`` answers the plugin's identity: the kubelet's plugin watcher checks ``type``
(``ResourcePlugin``) and ``supported_versions`` (``v1alpha1``) and stores the plugin under
``name`` (the resource, ``cpu``); katalyst-agent expects ``EvictionPlugin`` and the plugin's own
name (§8.3). ``endpoint`` is empty: the plugin's service is on the same socket, as the
reference plugins answer. It must answer within 1 s (§1.2); it reads nothing.

``NotifyRegistrationStatus`` is always answered successfully (the peer only logs an error
here, §3); the verdict is handed to the socket (``wire.plugin_socket``), which takes the
registration machine's step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import grpc

from wire.gen import pluginregistration_pb2 as reg
from wire.rpc import RpcObserver, unary_handler

__all__ = ["REGISTRATION_SERVICE", "PluginIdentity", "registration_handler"]


@dataclass(frozen=True, slots=True)
class PluginIdentity:
    """What ``GetInfo`` answers (wire.md §3).

    Attributes:
        type: ``ResourcePlugin`` for a QRM plugin, ``EvictionPlugin`` for an eviction plugin.
        name: the resource name (``cpu``) or the eviction plugin's name.
        supported_versions: API versions the peer validates (``v1alpha1``).
        endpoint: empty: the main service is on the same socket.
    """

    type: str
    name: str
    supported_versions: tuple[str, ...] = ("v1alpha1",)
    endpoint: str = ""


#: The full service name (wire.md §1.3).
REGISTRATION_SERVICE = "pluginregistration.Registration"


def registration_handler(
    identity: PluginIdentity,
    notify: Callable[[bool, str], None],
    observer: RpcObserver | None = None,
) -> grpc.GenericRpcHandler:
    """``pluginregistration.Registration`` for one socket.

    Args:
        identity: the ``GetInfo`` answer.
        notify: told ``(plugin_registered, error)`` of each ``NotifyRegistrationStatus``.
        observer: told about every call, or ``None``.

    Returns:
        The generic handler to add to a ``grpc.Server``.
    """
    info = reg.PluginInfo(
        type=identity.type,
        name=identity.name,
        endpoint=identity.endpoint,
        supported_versions=list(identity.supported_versions),
    )

    def get_info(request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
        return info

    def notify_status(
        request: reg.RegistrationStatus, context: grpc.ServicerContext
    ) -> reg.RegistrationStatusResponse:
        # Always answered successfully: the peer only logs an error here (wire.md §3).
        notify(request.plugin_registered, request.error)
        return reg.RegistrationStatusResponse()

    methods = {
        "GetInfo": unary_handler("GetInfo", reg.InfoRequest, get_info, observer),
        "NotifyRegistrationStatus": unary_handler(
            "NotifyRegistrationStatus", reg.RegistrationStatus, notify_status, observer
        ),
    }
    return grpc.method_handlers_generic_handler(REGISTRATION_SERVICE, methods)
