"""The metrics/health endpoint's listening socket, bound before the daemon recovers and
handed to the HTTP server built once kubelet is served (``qrmd.daemon``, start steps 4 and 7).

Binding early keeps ``--metrics-address``'s promise that a taken or invalid address fails the
start at once, before recovery; building the server late keeps ``http.server`` and
``prometheus_client`` (about sixty modules) off the path to kubelet's socket. A probe that
connects in between waits in the listen backlog and is answered once the server runs.

Only ``socket`` is imported: this module is on every restart's path with metrics on.
"""

from __future__ import annotations

import socket

__all__ = ["BACKLOG", "listen"]

#: The listen backlog: ``socketserver.TCPServer.request_queue_size``, what the endpoint's
#: ``ThreadingHTTPServer`` listened with when it bound the port itself.
BACKLOG = 5


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening, as ``http.server.HTTPServer`` binds
    one (``SO_REUSEADDR``, so a restart rebinds at once past the old connections' TIME_WAIT).

    Args:
        host: the address to listen on (an IPv6 literal when it has a colon).
        port: the port (0: any free one; ``getsockname`` says which).

    Raises:
        OSError: the address is taken or invalid; the message names ``--metrics-address``.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        listener = socket.socket(family, socket.SOCK_STREAM)
    except OSError as err:
        raise _cannot_listen(host, port, err) from err
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(BACKLOG)
    except OSError as err:
        listener.close()
        raise _cannot_listen(host, port, err) from err
    return listener


def _cannot_listen(host: str, port: int, err: OSError) -> OSError:
    return OSError(err.errno, f"cannot listen on --metrics-address {host}:{port}: {err.strerror}")
