"""Fetch + parse of kubelet's ``/pods`` by qrmd's pod source (DESIGN.md, "pod source").

Run: ``PYTHONPATH=. python bench/bench_pod_list.py [--pods N] [--quick]``.

A real HTTP server on loopback answers a PodList of N pods (50,000 by default) in two shapes:

* **compact**: the fields qrmd reads and a few more (about 0.6 KB a pod, like the kubelet
  simulator's answer);
* **kubelet-like**: each pod padded with what a real kubelet also sends (spec with env,
  volumes and mounts, conditions, managed fields), about 4 KB a pod.

Each is fetched and parsed by ``KubeletPodFetcher.fetch`` (the adapter ``qrmd run`` uses), the
best of three runs printed with the body's size and the resident memory afterwards.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from qrmd.host.kubelet_pods import KubeletEndpoint, KubeletPodFetcher


def _pod(i: int, padded: bool) -> dict[str, Any]:
    uid = f"{i:08x}-0000-4000-8000-{i:012x}"
    pod: dict[str, Any] = {
        "metadata": {"name": f"pod-{i}", "namespace": f"ns-{i % 50}", "uid": uid,
                     "labels": {"app": f"app-{i % 300}"}},
        "spec": {"nodeName": "node-a", "containers": [{"name": "app"}, {"name": "sidecar"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "app", "containerID": f"containerd://{i:064x}", "ready": True},
                {"name": "sidecar", "containerID": f"containerd://{i + 1:064x}", "ready": True},
            ],
        },
    }  # fmt: skip
    if padded:
        pod["metadata"]["managedFields"] = [
            {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
             "fieldsV1": {f"f:{k}": {} for k in ("conditions", "containerStatuses", "hostIP",
                                                  "phase", "podIP", "podIPs", "startTime")}}
        ]  # fmt: skip
        pod["spec"]["volumes"] = [
            {"name": f"vol-{v}", "configMap": {"name": f"cm-{v}"}} for v in range(4)
        ]
        for container in pod["spec"]["containers"]:
            container["image"] = "registry.example.com/team/app:1.2.3"
            container["env"] = [{"name": f"ENV_{e}", "value": "x" * 24} for e in range(12)]
            container["volumeMounts"] = [
                {"name": f"vol-{v}", "mountPath": f"/etc/app/{v}"} for v in range(4)
            ]
            container["resources"] = {"requests": {"cpu": "2", "memory": "4Gi"}}
        pod["status"]["conditions"] = [
            {"type": t, "status": "True", "lastTransitionTime": "2026-12-01T19:00:00Z"}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]
    return pod


def _body(n: int, padded: bool) -> bytes:
    items = [_pod(i, padded) for i in range(n)]
    return json.dumps({"kind": "PodList", "apiVersion": "v1", "items": items}).encode()


@contextmanager
def _serve(body: bytes) -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    """Print the fetch + parse time of each shape."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=50_000, help="pods in the list")
    parser.add_argument("--quick", action="store_true", help="one run of 5,000 pods")
    args = parser.parse_args()
    n, runs = (5_000, 1) if args.quick else (args.pods, 3)
    for shape, padded in (("compact", False), ("kubelet-like", True)):
        body = _body(n, padded)
        with _serve(body) as port:
            fetcher = KubeletPodFetcher(
                KubeletEndpoint(f"http://127.0.0.1:{port}/pods", timeout_s=60),
                empty_is_error=False,
            )
            best = float("inf")
            for _ in range(runs):
                started = time.perf_counter()
                snapshot = fetcher.fetch()
                best = min(best, time.perf_counter() - started)
            assert len(snapshot.pods) == n
        print(
            f"{shape:>13}: {n:,} pods, {len(body) / 1e6:6.1f} MB: fetch + parse {best:5.2f} s "
            f"(best of {runs}); RSS {_rss_mib():.0f} MiB"
        )
        del body, snapshot


if __name__ == "__main__":
    main()
