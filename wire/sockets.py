"""Unix-socket files for qrmd's gRPC servers (wire.md §1.2, §2; DESIGN.md "sockets owner-only").

The rules every served socket keeps:

* The path is checked before anything else: the kernel's ``sun_path`` holds 107 bytes plus the
  terminating NUL, and grpc only logs a longer one as "failed to bind".
* A missing directory is created (mode 0755 whatever the umask, as wire.md §2 and the
  reference plugins do; an existing directory such as kubelet's ``plugins_registry`` keeps
  its mode). A file at the path is stale only if nothing answers on it: the path is dialled
  first, and a socket that accepts the connection belongs to a live server (a second qrmd, or
  katalyst-agent's plugin during a rollout), so binding is refused with ``SocketInUseError``
  naming the path and the file is left alone. A file nobody answers on (left by a killed
  process) is removed before binding, since binding over it fails with "address already in
  use". A directory at the path is refused, never removed.
* The server binds ``unix:<path>``, not ``unix://<path>``: grpcio counts the latter's slashes
  against the limit and refuses paths from 106 bytes on, which the kernel takes.
* The socket file is made owner-only (0600) right after it is bound and before the server
  starts listening, so no other user can connect in between.
* At stop the file is removed only if it is still the one this process bound (same device and
  inode): a newer qrmd that re-created the socket keeps its own.
* Plugin-watcher directories that are the same inode (listed twice, or through a symlink) get
  one socket (wire.md §2).

These are plain functions over paths; ``wire.plugin_socket`` uses them to serve one plugin
socket through its registration life cycle.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import grpc

__all__ = [
    "MAX_SOCKET_PATH_BYTES",
    "BoundSocket",
    "ServingError",
    "SocketInUseError",
    "SocketPathError",
    "answers",
    "bind_owner_only",
    "check_socket_path",
    "dial",
    "distinct_socket_dirs",
    "remove_socket",
]

logger = logging.getLogger(__name__)

#: Longest unix socket path: ``sizeof(sun_path)`` is 108 bytes including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107
#: Mode of a created registration directory (the reference creates it 0755).
DIRECTORY_MODE = 0o755
#: Mode of a bound socket: only the owner (root on a node) may connect.
SOCKET_MODE = 0o600
#: How long dialling a socket file to see whether it is live may take.
DIAL_TIMEOUT_S = 1.0
#: ``dial``'s pause between attempts: first, and at most (doubling in between).
DIAL_RETRY_FIRST_S = 0.02
DIAL_RETRY_MAX_S = 0.2


class SocketPathError(OSError, ValueError):
    """The socket cannot live at this path: too long for a unix socket, or a directory is there.

    Both an ``OSError`` and a ``ValueError``: the two plugin servers this module serves were
    written apart and documented one each (the ``io.UnsupportedOperation`` idiom).

    Attributes:
        path: the absolute socket path.
        size: its length in bytes when that is the fault, else ``None``.
    """

    def __init__(self, message: str, *, path: Path, size: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.size = size


class ServingError(OSError, RuntimeError):
    """A socket could not be bound, or its server does not answer as the plugin.

    Both an ``OSError`` and a ``RuntimeError``, for the same reason as :class:`SocketPathError`:
    the CPU plugin's server documented ``RuntimeError`` for these failures, the eviction
    plugin's ``OSError``.
    """


class SocketInUseError(ServingError):
    """Another live server answers on the socket path; it is left alone.

    Attributes:
        path: the socket path.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"socket {str(path)!r} is served by another process (it answers when dialled); "
            f"refusing to replace it. Stop the other qrmd (or katalyst-agent plugin) serving "
            f"it, or give this one another --socket-dir"
        )
        self.path = path


@dataclass(frozen=True, slots=True)
class BoundSocket:
    """A socket file this process bound: its path and the file's identity."""

    path: Path
    device: int
    inode: int


def check_socket_path(path: Path) -> Path:
    """The absolute form of a socket path, refused if the kernel cannot bind it.

    Args:
        path: where the socket is to be.

    Returns:
        The absolute path (``..`` and ``.`` resolved lexically, links kept).

    Raises:
        SocketPathError: the absolute path is longer than 107 bytes; the message names it
            and its length.
    """
    absolute = Path(os.path.abspath(path))
    size = len(os.fsencode(absolute))
    if size > MAX_SOCKET_PATH_BYTES:
        raise SocketPathError(
            f"socket path {str(absolute)!r} is {size} bytes long; unix socket paths are "
            f"limited to {MAX_SOCKET_PATH_BYTES} bytes; choose a shorter socket directory",
            path=absolute,
            size=size,
        )
    return absolute


def distinct_socket_dirs(socket_dirs: Iterable[str]) -> list[str]:
    """Create missing socket directories (0755) and drop those that are the same directory.

    The reference de-duplicates directories by inode (wire.md §2), so a directory listed twice,
    or through a symlink, gets one socket.

    Args:
        socket_dirs: the configured directories, in order.

    Returns:
        The absolute directories, first occurrence of each inode kept.

    Raises:
        OSError: a directory cannot be created or read.
    """
    seen: set[tuple[int, int]] = set()
    distinct = []
    for directory in socket_dirs:
        absolute = os.path.abspath(directory)
        _make_socket_dirs(Path(absolute))
        info = os.stat(absolute)
        if (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            distinct.append(absolute)
    return distinct


def _make_socket_dirs(directory: Path) -> None:
    """Create ``directory`` and its missing parents, each 0755 whatever the umask.

    Only what is created here is ``chmod``-ed: an existing directory (kubelet's
    ``plugins_registry``) is not ours and keeps its mode.
    """
    missing = []
    path = directory
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for component in reversed(missing):
        try:
            component.mkdir(mode=DIRECTORY_MODE)
        except FileExistsError:
            if not component.is_dir():
                raise
            continue  # made concurrently by someone else: theirs
        os.chmod(component, DIRECTORY_MODE)


def answers(path: Path) -> bool:
    """Whether a server accepts connections on the unix socket file at ``path``.

    Only a refused connection (or no file) means nobody serves it. Any other failure to dial
    (a full backlog, no permission) counts as live: removing a live server's socket is the
    mistake this guards against, and being wrong the other way only costs a refusal.

    Args:
        path: the socket file.

    Returns:
        False if the file is gone, is not a socket, or refuses connections; else True.
    """
    try:
        if not stat.S_ISSOCK(path.lstat().st_mode):
            return False
    except FileNotFoundError:
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(DIAL_TIMEOUT_S)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError as exc:
        logger.warning("%s: cannot tell whether it is served (%s); taking it as live", path, exc)
        return True
    finally:
        probe.close()
    return True


def dial(
    path: str,
    timeout_s: float,
    *,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Wait until a server accepts a connection on the unix socket at ``path`` (a blocking dial).

    The clients dial this way rather than with ``grpc.channel_ready_future``: that future
    subscribes to the channel's connectivity, which grpcio polls on a thread of its own for
    up to 0.2 s after the future is done, and a channel closed in that window makes the
    thread die with "ValueError: Cannot invoke RPC: Channel closed!" and a traceback on
    stderr (grpc/grpc#29848 is the same race). A plain connect has no thread; the gRPC
    channel then connects on its first call, and fails that call if the server went away
    in between, which every caller already handles. Attempts start 20 ms apart and back off
    to 200 ms, where gRPC's own reconnect back-off starts at 1 s.

    Args:
        path: the socket file.
        timeout_s: how long to keep trying; one attempt is made even at 0.
        monotonic, sleep: the clock and the pause (injected by tests).

    Returns:
        Whether a connection was accepted within ``timeout_s``.
    """
    deadline = monotonic() + timeout_s
    pause = DIAL_RETRY_FIRST_S
    while True:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(max(min(deadline - monotonic(), DIAL_TIMEOUT_S), 0.001))
            probe.connect(path)
            return True
        except OSError:  # no file yet, nobody listening, full backlog, not allowed: retry
            pass
        finally:
            probe.close()
        left = deadline - monotonic()
        if left <= 0:
            return False
        sleep(min(pause, left))
        pause = min(pause * 2, DIAL_RETRY_MAX_S)


def _clear_stale(path: Path) -> None:
    """Create the directory if needed and remove a stale non-directory at ``path``.

    Raises:
        SocketInUseError: a live server answers on the file; it is left alone.
        SocketPathError: a directory is in the way.
    """
    _make_socket_dirs(path.parent)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise SocketPathError(
            f"cannot serve on {str(path)!r}: a directory is in the way", path=path
        )
    if answers(path):
        raise SocketInUseError(path)
    logger.info("removing the stale file %s (nothing answers on it)", path)
    path.unlink(missing_ok=True)


def bind_owner_only(server: grpc.Server, path: Path) -> BoundSocket:
    """Bind a not yet started gRPC server to ``unix:<path>``, owner-only.

    Removes a stale file first (one nobody answers on) and creates the directory if missing.

    Args:
        server: a grpc server that has not been started.
        path: the socket path.

    Returns:
        The bound socket, for ``remove_socket`` at stop.

    Raises:
        SocketPathError: the path is longer than 107 bytes, or a directory is in the way.
        SocketInUseError: another live server answers on the path (a ``ServingError``).
        ServingError: the socket cannot be bound.
        OSError: the directory cannot be created, the stale file removed or the socket made
            owner-only; the message names the path.
    """
    path = check_socket_path(path)
    _clear_stale(path)
    try:
        # "unix:<path>", not "unix://<path>": grpc counts the latter's slashes against the
        # 107 bytes and refuses the longest paths the kernel takes.
        port = server.add_insecure_port(f"unix:{path}")
    except RuntimeError as exc:  # grpc reports every bind failure this way
        raise ServingError(f"cannot bind the gRPC server to {str(path)!r}: {exc}") from exc
    if port == 0:
        raise ServingError(f"cannot bind the gRPC server to {str(path)!r}")
    # Bound but not listening yet: nobody can have connected before the mode is tightened.
    os.chmod(path, SOCKET_MODE)
    info = path.lstat()
    return BoundSocket(path=path, device=info.st_dev, inode=info.st_ino)


def remove_socket(bound: BoundSocket) -> bool:
    """Remove a socket file if it is still the one that was bound.

    Args:
        bound: what ``bind_owner_only`` returned.

    Returns:
        True if the file was removed; False if it was already gone or replaced by another.
    """
    try:
        info = bound.path.lstat()
    except FileNotFoundError:
        return False
    if (info.st_dev, info.st_ino) != (bound.device, bound.inode):
        return False
    bound.path.unlink(missing_ok=True)
    return True
