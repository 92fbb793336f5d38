"""The limits ``qrmd run`` keeps against a flood of connections (the connection cap): the
``--max-connections`` option (in ``qrmd.cpu_plugin.settings``) and the
open-file limit raised at start.

With the soft ``nofile`` limit at its usual 1024 and thousands of connections held open on a
plugin socket, gRPC's accept loop met EMFILE, logged ``File descriptor limit reached.
Retrying.`` every second and burned a core, ``/healthz`` timed out and checkpoints failed.
Two measures, both needed:

* at start the soft limit is raised to the hard limit, so the journal, the health endpoint
  and the kernel's other needs have room; only root may raise the hard limit, and qrmd does
  not try. It is logged once the daemon has started, so a refused setting is one error line;
* each plugin socket accepts at most ``--max-connections`` connections at once. grpcio's
  ``maximum_concurrent_rpcs`` caps RPCs, not connections, so it cannot help against idle
  connections; the cap is gRPC core's ``grpc.max_allowed_incoming_connections`` server
  argument (``wire.plugin_socket.MAX_CONNECTIONS_ARG``): a connection past it is closed right
  after ``accept`` and the peer sees UNAVAILABLE. kubelet and katalyst-agent each keep one
  connection, so the default (1024) only ever bites a runaway or hostile local client.

A cap that would not fit under the open-file limit (with room for the rest of the daemon) is
refused at start naming the flag and both numbers.
"""

from __future__ import annotations

import logging
import resource
from collections.abc import Sequence
from dataclasses import dataclass

from qrmd.cpu_plugin.settings import DEFAULT_MAX_CONNECTIONS

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "FD_HEADROOM",
    "OpenFileLimit",
    "check_connection_cap",
    "log_open_file_limit",
    "raise_open_file_limit",
]

_log = logging.getLogger("qrmd.limits")

#: Descriptors kept free beside the connections of every socket: the journal's segment and
#: lock, checkpoints being written, the health endpoint's clients, grpc's own pipes, logs.
FD_HEADROOM = 256


@dataclass(frozen=True, slots=True)
class OpenFileLimit:
    """The process's ``RLIMIT_NOFILE`` before and after start.

    Attributes:
        soft_before: the soft limit qrmd was started with.
        soft: the soft limit now.
        hard: the hard limit (``RLIM_INFINITY`` as -1).
        error: why the soft limit could not be raised ("" when it was, or needed not be).
    """

    soft_before: int
    soft: int
    hard: int
    error: str = ""


def raise_open_file_limit() -> OpenFileLimit:
    """Raise the soft open-file limit to the hard limit; :func:`log_open_file_limit` says so.

    Returns:
        The limits before and after. An unlimited hard limit is raised to the kernel's
        ``nr_open`` ceiling as ``setrlimit`` accepts it (tried, then left as it was).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return OpenFileLimit(soft, soft, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as err:  # an infinite hard limit past nr_open
        return OpenFileLimit(soft, soft, hard, error=str(err))
    return OpenFileLimit(soft, hard, hard)


def log_open_file_limit(limit: OpenFileLimit) -> None:
    """Log what :func:`raise_open_file_limit` did (a warning when it could not)."""
    if limit.error:
        _log.warning(
            "could not raise the open-file limit from %d to the hard limit %d: %s",
            limit.soft_before,
            limit.hard,
            limit.error,
        )
    elif limit.soft == limit.soft_before:
        _log.info("open-file limit %d (soft = hard), nothing to raise", limit.soft)
    else:
        _log.info(
            "raised the open-file limit (soft nofile) from %d to the hard limit %d",
            limit.soft_before,
            limit.soft,
        )


def check_connection_cap(caps: Sequence[int], limit: OpenFileLimit) -> None:
    """Refuse connection caps the open-file limit cannot hold.

    Args:
        caps: the connection cap of each capped socket the daemon serves (the sockets its
            subsystems declare: ``qrmd.config.declared_sockets``).
        limit: the open-file limit after :func:`raise_open_file_limit`.

    Raises:
        ValueError: the caps' sum ``+ FD_HEADROOM`` exceeds the soft limit; the message names
            the flag and the numbers.
    """
    if limit.soft == resource.RLIM_INFINITY:
        return
    needed = sum(caps) + FD_HEADROOM
    if needed > limit.soft:
        raise ValueError(
            f"--max-connections {_connections(caps)} + {FD_HEADROOM} "
            f"descriptors for the rest of the daemon = {needed}, more than the open-file limit "
            f"{limit.soft} (hard limit {limit.hard}); lower --max-connections or raise "
            f"`ulimit -Hn` for qrmd"
        )


def _connections(caps: Sequence[int]) -> str:
    # Every capped socket takes --max-connections; were they to differ, each is named.
    if len(set(caps)) == 1:
        return f"{caps[0]} × {len(caps)} sockets"
    return f"({' + '.join(str(cap) for cap in caps)}) on {len(caps)} sockets"
