"""Unix-socket files for qrmd's gRPC servers (wire.md §1.2, §2; DESIGN.md "sockets owner-only").

The rules every served socket keeps:

* The path is checked before anything else: the kernel's ``sun_path`` holds 107 bytes plus the
  terminating NUL, and grpc only logs a longer one as "failed to bind".
* A missing directory is created (mode 0755, as the reference plugins do); a stale file at the
  path (left by a killed process) is removed before binding, since binding over it fails with
  "address already in use". A directory at the path is refused, never removed.
* The socket file is made owner-only (0600) right after it is bound and before the server
  starts listening, so no other user can connect in between.
* At stop the file is removed only if it is still the one this process bound (same device and
  inode): a newer qrmd that re-created the socket keeps its own.

These are plain functions over paths; ``wire.plugin_socket`` uses them to serve one plugin
socket through its registration life cycle.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import grpc

__all__ = [
    "MAX_SOCKET_PATH_BYTES",
    "BoundSocket",
    "bind_owner_only",
    "check_socket_path",
    "remove_socket",
]

#: Longest unix socket path: ``sizeof(sun_path)`` is 108 bytes including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107
#: Mode of a created registration directory (the reference creates it 0755).
DIRECTORY_MODE = 0o755
#: Mode of a bound socket: only the owner (root on a node) may connect.
SOCKET_MODE = 0o600


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
        The absolute path.

    Raises:
        ValueError: the absolute path is longer than 107 bytes; the message names it.
    """
    absolute = path if path.is_absolute() else Path.cwd() / path
    size = len(os.fsencode(absolute))
    if size > MAX_SOCKET_PATH_BYTES:
        raise ValueError(
            f"socket path {str(absolute)!r} is {size} bytes long; "
            f"unix socket paths are limited to {MAX_SOCKET_PATH_BYTES} bytes"
        )
    return absolute


def _clear_stale(path: Path) -> None:
    """Create the directory if needed and remove whatever non-directory sits at ``path``."""
    path.parent.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise OSError(f"cannot serve on {str(path)!r}: a directory is in the way")
    path.unlink(missing_ok=True)


def bind_owner_only(server: grpc.Server, path: Path) -> BoundSocket:
    """Bind a not yet started gRPC server to ``unix:<path>``, owner-only.

    Removes a stale file first and creates the directory if missing.

    Args:
        server: a grpc server that has not been started.
        path: the socket path.

    Returns:
        The bound socket, for ``remove_socket`` at stop.

    Raises:
        ValueError: the path is longer than 107 bytes.
        OSError: the directory cannot be created, the stale file removed, the socket bound
            or made owner-only; the message names the path.
    """
    path = check_socket_path(path)
    _clear_stale(path)
    try:
        # "unix:<path>", not "unix://<path>": grpc counts the latter's slashes against the
        # 107 bytes and refuses the longest paths the kernel takes.
        port = server.add_insecure_port(f"unix:{path}")
    except RuntimeError as exc:  # grpc reports every bind failure this way
        raise OSError(f"cannot bind the gRPC server to {str(path)!r}: {exc}") from exc
    if port == 0:
        raise OSError(f"cannot bind the gRPC server to {str(path)!r}")
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
