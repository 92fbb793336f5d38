"""The kubelet's plugin watcher: find plugin sockets in a directory and register them.

Reproduces wire.md §8.1 step by step. Each poll (the kubelet reconciles every 1 s, and sees new
files through inotify; polling finds the same files) lists the directory, skips names that
start with ``.`` and anything that is not a unix socket, and for a socket it has not
registered, or that was re-created (a new inode or change time), runs the handshake:

1. dial the socket (10 s, blocking) and call ``GetInfo`` (1 s deadline);
2. look up the handler for ``PluginInfo.type`` (only ``ResourcePlugin`` here) and let it validate
   the name, the endpoint (``endpoint``, or the socket itself when empty) and the versions;
3. record the socket as registered, then let the handler register the endpoint: it dials the
   endpoint and calls ``GetResourcePluginOptions`` with no deadline;
4. ``NotifyRegistrationStatus`` (5 s): true on success, else false with the error.

A failure before step 3 is retried on later polls with back-off (0.5 s doubling, capped at
2 minutes). A failure in step 3 is not retried until the socket file is re-created, since the
socket is already recorded as registered (the kubelet's behaviour). A socket that disappears or
is re-created deregisters its plugin first. Only the top level of the directory is watched.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from wire.kubelet_client import PluginCallError, PluginConnection

__all__ = [
    "RESOURCE_PLUGIN_TYPE",
    "PluginHandler",
    "PluginWatcher",
    "RegistrationError",
    "RegistrationOutcome",
]

log = logging.getLogger(__name__)

RESOURCE_PLUGIN_TYPE = "ResourcePlugin"
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 120.0


class RegistrationError(Exception):
    """A plugin failed validation or registration; the message says which step and why."""


class PluginHandler(Protocol):
    """What the plugin watcher calls for plugins of one type (kubelet ``PluginHandler``)."""

    def validate_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        """Raise RegistrationError if the plugin cannot be registered."""

    def register_plugin(self, name: str, endpoint: str, versions: Sequence[str]) -> None:
        """Dial the endpoint and start using it; raise RegistrationError on failure."""

    def deregister_plugin(self, name: str) -> None:
        """Mark the plugin's endpoint stopped."""


@dataclass(frozen=True, slots=True)
class RegistrationOutcome:
    """What one handshake with one socket came to."""

    socket_path: str
    registered: bool
    name: str = ""
    error: str = ""


@dataclass(slots=True)
class _Retry:
    identity: tuple[int, int]
    not_before: float
    backoff_s: float


class PluginWatcher:
    """Registers the plugin sockets of one directory with their handlers.

    Args:
        socket_dir: the plugin-watcher directory.
        handlers: plugin type → handler.
        clock: monotonic seconds, for the retry back-off.
        dial: opens a connection to a socket path (a test may count dials).
    """

    def __init__(
        self,
        socket_dir: str | Path,
        handlers: dict[str, PluginHandler],
        *,
        clock: Callable[[], float] = time.monotonic,
        dial: Callable[[str], PluginConnection] = PluginConnection,
    ) -> None:
        self.socket_dir = Path(socket_dir)
        self._handlers = handlers
        self._clock = clock
        self._dial = dial
        # socket path → (its identity when registered, plugin type, plugin name)
        self._registered: dict[str, tuple[tuple[int, int], str, str]] = {}
        self._retries: dict[str, _Retry] = {}

    def _sockets(self) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        try:
            entries = list(os.scandir(self.socket_dir))
        except FileNotFoundError:
            return found
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISSOCK(st.st_mode):
                found[entry.path] = (st.st_ino, st.st_ctime_ns)
        return found

    def poll_once(self) -> list[RegistrationOutcome]:
        """One reconcile pass: deregister vanished or re-created sockets, register new ones.

        Returns:
            The outcome of every handshake attempted in this pass.
        """
        present = self._sockets()
        for path, (identity, plugin_type, name) in list(self._registered.items()):
            if present.get(path) != identity:
                del self._registered[path]
                log.info("plugin socket %s gone or re-created: deregistering %r", path, name)
                self._handlers[plugin_type].deregister_plugin(name)
        outcomes = []
        now = self._clock()
        for path, identity in sorted(present.items()):
            if path in self._registered:
                continue
            retry = self._retries.get(path)
            if retry is not None and retry.identity == identity and now < retry.not_before:
                continue
            outcome = self._register(path, identity)
            outcomes.append(outcome)
            if outcome.registered or path in self._registered:
                self._retries.pop(path, None)
            else:
                backoff = FIRST_BACKOFF_S
                if retry is not None and retry.identity == identity:
                    backoff = min(retry.backoff_s * 2, MAX_BACKOFF_S)
                self._retries[path] = _Retry(identity, now + backoff, backoff)
        return outcomes

    def _register(self, path: str, identity: tuple[int, int]) -> RegistrationOutcome:
        try:
            connection = self._dial(path)
        except PluginCallError as exc:
            return RegistrationOutcome(path, False, error=str(exc))
        try:
            return self._handshake(connection, path, identity)
        finally:
            connection.close()

    def _handshake(
        self, connection: PluginConnection, path: str, identity: tuple[int, int]
    ) -> RegistrationOutcome:
        try:
            info = connection.get_info()
        except PluginCallError as exc:
            return RegistrationOutcome(path, False, error=str(exc))
        handler = self._handlers.get(info.type)
        endpoint = info.endpoint or path
        try:
            if handler is None:
                raise RegistrationError(f"no handler registered for plugin type: {info.type!r}")
            handler.validate_plugin(info.name, endpoint, info.supported_versions)
        except RegistrationError as exc:
            self._notify(connection, False, str(exc))
            return RegistrationOutcome(path, False, info.name, str(exc))
        # Recorded before registering: a failure below waits for the socket to be re-created.
        self._registered[path] = (identity, info.type, info.name)
        try:
            handler.register_plugin(info.name, endpoint, info.supported_versions)
        except RegistrationError as exc:
            self._notify(connection, False, str(exc))
            return RegistrationOutcome(path, False, info.name, str(exc))
        self._notify(connection, True, "")
        log.info("registered plugin %r from %s", info.name, path)
        return RegistrationOutcome(path, True, info.name)

    @staticmethod
    def _notify(connection: PluginConnection, registered: bool, error: str) -> None:
        try:
            connection.notify_registration_status(registered, error)
        except PluginCallError as exc:
            # The kubelet only logs a failed notification.
            log.warning("NotifyRegistrationStatus(%s) failed: %s", registered, exc)
