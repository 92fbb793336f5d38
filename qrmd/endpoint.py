"""The metrics and health endpoint: one small HTTP server thread (DESIGN.md "Who uses it",
"Time, config, errors": nothing listens on TCP but this endpoint, on loopback).

``GET /metrics`` answers the Prometheus text exposition; ``GET /healthz`` answers 200 ``ok``
or 503 with one reason per line (spec cpu-policy §12.3 through ``HealthRegistry``). It listens
on ``--metrics-address``, loopback by default: it is the only TCP port qrmd opens (DESIGN.md).
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from qrmd.health import HealthRegistry
from qrmd.metrics import DaemonMetrics

__all__ = ["StatusEndpoint"]

_log = logging.getLogger("qrmd.endpoint")


class StatusEndpoint:
    """Serves ``/metrics`` and ``/healthz`` on a background thread.

    Args:
        host: the address to listen on.
        port: the port (0: any free one; ``address`` says which).
        metrics: the exposition source.
        health: the health checks.
    """

    def __init__(self, host: str, port: int, metrics: DaemonMetrics, health: HealthRegistry):
        handler = _handler_class(metrics, health)
        if ":" in host:  # an IPv6 literal
            server_class = type("_Server6", (ThreadingHTTPServer,), {"address_family": 10})
        else:
            server_class = ThreadingHTTPServer
        try:
            self._server = server_class((host, port), handler)
        except OSError as err:
            raise OSError(
                err.errno, f"cannot listen on --metrics-address {host}:{port}: {err.strerror}"
            ) from err
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="status-endpoint", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        """The (host, port) actually listened on."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        """Start answering requests."""
        self._thread.start()

    def stop(self) -> None:
        """Stop answering and close the listening socket."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()


def _handler_class(metrics: DaemonMetrics, health: HealthRegistry) -> type:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, metrics.exposition(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                report = health.check()
                if report.healthy:
                    self._answer(200, b"ok\n")
                else:
                    self._answer(503, ("\n".join(report.reasons) + "\n").encode())
            else:
                self._answer(404, b"not found: try /metrics or /healthz\n")

        def _answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            _log.debug("%s %s", self.address_string(), format % args)

    return Handler
