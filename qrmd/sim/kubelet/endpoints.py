"""The kubelet's table of registered QRM plugin endpoints: the ``ResourcePlugin`` handler.

The plugin watcher hands it each plugin that passed ``GetInfo`` (wire.md §8.1 steps 3-4): it
checks the version (``v1alpha1``), dials the endpoint (10 s), asks
``GetResourcePluginOptions`` with no deadline, and keeps the endpoint under the plugin's name,
stopping and replacing an older one. A plugin whose socket disappears is marked stopped: calls
to it are skipped until it registers again. Each registration under a name gets the next
generation number, so a caller can wait for a *re*-registration after a plugin restart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from policy.cpu.replies import PluginOptions
from qrmd.sim.kubelet.registration import RegistrationError
from wire.kubelet_client import PluginCallError, PluginConnection

__all__ = ["SUPPORTED_VERSION", "Endpoint", "EndpointTable"]

SUPPORTED_VERSION = "v1alpha1"


@dataclass(slots=True)
class Endpoint:
    """A registered plugin endpoint (kubelet ``endpointInfo``)."""

    name: str
    socket_path: str
    options: PluginOptions
    connection: PluginConnection
    generation: int  # counts registrations under this name, so a re-registration is visible
    stopped: bool = False


class EndpointTable:
    """Registered endpoints by plugin name; thread-safe.

    Args:
        dial: opens a connection to an endpoint socket.
    """

    def __init__(self, dial: Callable[[str], PluginConnection] = PluginConnection) -> None:
        self._dial = dial
        self._changed = threading.Condition()
        self._endpoints: dict[str, Endpoint] = {}
        self._generations: dict[str, int] = {}

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        """Accept a plugin that speaks ``v1alpha1``.

        Raises:
            RegistrationError: no supported version, or no name.
        """
        if SUPPORTED_VERSION not in versions:
            raise RegistrationError(
                f"plugin {name!r} at {endpoint}: versions {list(versions)} do not include "
                f"{SUPPORTED_VERSION}"
            )
        if not name:
            raise RegistrationError(f"plugin at {endpoint} has an empty name")

    def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        """Dial the endpoint, read its options and keep it under ``name``.

        Raises:
            RegistrationError: the endpoint cannot be dialed or will not give its options.
        """
        try:
            connection = self._dial(endpoint)
        except PluginCallError as exc:
            raise RegistrationError(f"dial endpoint {endpoint}: {exc}") from None
        try:
            options = connection.get_resource_plugin_options()
        except PluginCallError as exc:
            connection.close()
            raise RegistrationError(f"plugin {name!r} at {endpoint}: {exc}") from None
        with self._changed:
            old = self._endpoints.get(name)
            if old is not None:
                old.stopped = True
                old.connection.close()
            generation = self._generations.get(name, 0) + 1
            self._generations[name] = generation
            self._endpoints[name] = Endpoint(name, endpoint, options, connection, generation)
            self._changed.notify_all()

    def deregister_plugin(self, name: str) -> None:
        """Mark the endpoint stopped: calls to it are skipped or fail until it registers again."""
        with self._changed:
            endpoint = self._endpoints.get(name)
            if endpoint is not None:
                endpoint.stopped = True

    def get(self, name: str) -> Endpoint | None:
        """The endpoint registered under ``name`` (possibly stopped), or None."""
        with self._changed:
            return self._endpoints.get(name)

    def running(self, name: str) -> Endpoint | None:
        """The endpoint registered under ``name`` unless it is stopped, or None."""
        with self._changed:
            endpoint = self._endpoints.get(name)
            return endpoint if endpoint is not None and not endpoint.stopped else None

    def all_running(self) -> list[Endpoint]:
        """Every endpoint that is not stopped, in registration order."""
        with self._changed:
            return [e for e in self._endpoints.values() if not e.stopped]

    def wait_registered(self, name: str, *, newer_than: int = 0, timeout_s: float) -> Endpoint:
        """Block until a running endpoint ``name`` with generation > ``newer_than`` exists.

        Raises:
            TimeoutError: none registered within ``timeout_s``.
        """

        def ready() -> bool:
            e = self._endpoints.get(name)
            return e is not None and not e.stopped and e.generation > newer_than

        with self._changed:
            if not self._changed.wait_for(ready, timeout=timeout_s):
                raise TimeoutError(
                    f"plugin {name!r} did not register with the kubelet within {timeout_s:g} s"
                )
            return self._endpoints[name]
