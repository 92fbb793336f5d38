"""The simulator's ``/pods``: kubelet's pod list over real HTTP, from what the kubelet admitted.

A real kubelet serves ``GET /pods`` (a ``v1.PodList``) on its read-only port; qrmd's pod source
reads it (``qrmd.host.kubelet_pods``). This server answers the same shape from the simulated
kubelet: every admitted pod ``Running``, the pod being admitted ``Pending``, each with its
namespace, name, UID, QoS annotations and labels, and a container status per init and app
container whose ``containerID`` is ``containerd://<64 hex>``, derived from the pod UID and the
container name so it is the same at every answer (as a running container's is).

For tests and the demo a failure can be switched on (``fail_with(503)``: every answer is that
HTTP status until ``fail_with(None)``), as a restarting kubelet answers.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from qrmd.sim.kubelet.kubelet import Kubelet
from qrmd.sim.kubelet.pods import Pod

__all__ = ["PodsEndpoint", "container_id", "pod_list_document"]

log = logging.getLogger(__name__)

PODS_PATH = "/pods"


def container_id(pod_uid: str, container_name: str) -> str:
    """The runtime ID the simulated containerd gives a container: stable for (pod, name)."""
    digest = hashlib.sha256(f"{pod_uid}/{container_name}".encode()).hexdigest()
    return f"containerd://{digest}"


def _status(pod: Pod, name: str) -> dict[str, Any]:
    return {"name": name, "containerID": container_id(pod.uid, name), "ready": True}


def _item(pod: Pod, phase: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
            "labels": dict(pod.labels),
            "annotations": dict(pod.annotations),
        },
        "spec": {
            "initContainers": [{"name": c.name} for c in pod.init_containers],
            "containers": [{"name": c.name} for c in pod.containers],
        },
        "status": {
            "phase": phase,
            "qosClass": pod.native_qos_class,
            "initContainerStatuses": [_status(pod, c.name) for c in pod.init_containers],
            "containerStatuses": [_status(pod, c.name) for c in pod.containers],
        },
    }


def pod_list_document(kubelet: Kubelet) -> dict[str, Any]:
    """The ``v1.PodList`` the kubelet's ``/pods`` answers now."""
    items = [_item(pod, phase) for pod, phase in kubelet.listed_pods()]
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}


class PodsEndpoint:
    """Serves ``GET /pods`` for a simulated kubelet on ``host:port`` (port 0: any free one).

    Args:
        kubelet: whose pods are listed.
        host: the address to listen on (loopback: nothing else should reach it).
        port: the TCP port, 0 for a free one (see ``port`` once started).
    """

    def __init__(self, kubelet: Kubelet, host: str = "127.0.0.1", port: int = 0) -> None:
        self.kubelet = kubelet
        self._failure: int | None = None
        self._lock = threading.Lock()
        self.requests = 0
        self._server = ThreadingHTTPServer((host, port), _handler(self._answer))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The TCP port it listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://host:port/pods``."""
        host = str(self._server.server_address[0])
        return f"http://{host}:{self.port}{PODS_PATH}"

    def fail_with(self, status: int | None) -> None:
        """Answer every request with HTTP ``status`` from now on; ``None``: answer again."""
        with self._lock:
            self._failure = status

    def _answer(self, path: str) -> tuple[int, bytes]:
        with self._lock:
            self.requests += 1
            failure = self._failure
        if path.split("?", 1)[0].rstrip("/") != PODS_PATH:
            return 404, b'{"kind":"Status","code":404}'
        if failure is not None:
            return failure, json.dumps({"kind": "Status", "code": failure}).encode()
        return 200, json.dumps(pod_list_document(self.kubelet)).encode()

    def start(self) -> None:
        """Serve on a background thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="kubelet-pods", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> PodsEndpoint:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(answer: Callable[[str], tuple[int, bytes]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("pods endpoint: " + format, *args)

    return Handler
