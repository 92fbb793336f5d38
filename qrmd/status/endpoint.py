"""The metrics and health endpoint: one small HTTP server thread (DESIGN.md "Who uses it",
"Time, config, errors": nothing listens on TCP but this endpoint, on loopback).

``GET /metrics`` answers the Prometheus text exposition; ``GET /healthz`` answers 200 ``ok``
or 503 with one reason per line (spec cpu-policy §12.3 through ``HealthRegistry``). It listens
on ``--metrics-address``, loopback by default: it is the only TCP port qrmd opens (DESIGN.md).

Two probes sit beside ``/healthz`` for an orchestrator, answered the same way:

* ``/livez``: the process answers, its actors are up and the liveness sources of the health
  registry pass (the kubelet call path answered within a minute: ``wire.call_watch``; only a
  disk that holds an fsync that long fails it from outside, when qrmd cannot serve anyway).
  No peer can fail it — a kubelet or sys-advisor outage must not make Kubernetes restart
  qrmd in a loop, which would take the node's CPU plugin away exactly when it is needed.
* ``/readyz``: every plugin socket is serving and registered with kubelet.

``/healthz`` stays the alerting signal: it also fails on a handler that stopped running or a
journal that refuses commits. ``HEAD`` answers every path as ``GET`` does, without the body.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from qrmd.status.health import HealthRegistry, ProblemSource
from qrmd.status.listener import listen
from qrmd.status.metrics import DaemonMetrics

__all__ = ["StatusEndpoint"]

_log = logging.getLogger("qrmd.endpoint")


class StatusEndpoint:
    """Serves ``/metrics``, ``/healthz``, ``/livez`` and ``/readyz`` on a background thread.

    Args:
        host: the address to listen on.
        port: the port (0: any free one; ``address`` says which).
        metrics: the exposition source.
        health: the health checks (``/healthz``).
        liveness: reasons the process is not alive (``/livez``); none by default.
        readiness: reasons it is not ready (``/readyz``); none by default.
        listener: the socket already bound to ``host:port`` and listening
            (``qrmd.status.listener.listen``: the daemon binds it before recovery and builds
            the endpoint once kubelet is served); None: bind it now.
    """

    def __init__(
        self,
        host: str,
        port: int,
        metrics: DaemonMetrics,
        health: HealthRegistry,
        *,
        liveness: ProblemSource = tuple,
        readiness: ProblemSource = tuple,
        listener: socket.socket | None = None,
    ):
        probes: dict[str, ProblemSource] = {
            "/healthz": lambda: health.check().reasons,
            "/livez": lambda: [*liveness(), *health.liveness()],
            "/readyz": readiness,
        }
        handler = _handler_class(metrics, probes)
        if listener is None:
            listener = listen(host, port)
        # The server is given the bound socket instead of binding its own (which would also
        # ask the resolver for the host's full name, which nothing here reads).
        self._server = ThreadingHTTPServer((host, port), handler, bind_and_activate=False)
        self._server.socket.close()
        self._server.socket = listener
        self._server.server_address = listener.getsockname()
        self._server.server_name, self._server.server_port = host, self.address[1]
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


def _handler_class(metrics: DaemonMetrics, probes: Mapping[str, ProblemSource]) -> type:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._respond(with_body=True)

        def do_HEAD(self) -> None:
            self._respond(with_body=False)

        def _respond(self, *, with_body: bool) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, metrics.exposition(), with_body, CONTENT_TYPE_LATEST)
            elif path in probes:
                try:
                    reasons = list(probes[path]())
                except Exception as err:
                    reasons = [f"probe failed: {err!r}"]
                if reasons:
                    self._answer(503, ("\n".join(reasons) + "\n").encode(), with_body)
                else:
                    self._answer(200, b"ok\n", with_body)
            else:
                known = ", ".join(["/metrics", *probes])
                self._answer(404, f"not found: try {known}\n".encode(), with_body)

        def _answer(
            self, status: int, body: bytes, with_body: bool, content_type: str = "text/plain"
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            _log.debug("%s %s", self.address_string(), format % args)

    return Handler
