"""What ``deploy/`` grants, checked against what qrmd does with it: the ClusterRole against the
kubelet paths the pod source requests, the DaemonSets' privileges against the subsystems their
settings turn on, the takeover's file against the pod's mounts, and the label gate."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from qrmd.host.kubelet_pods import KubeletEndpoint, KubeletPodFetcher
from tests.deploy.test_deploy import BUNDLES, NODES_PROXY_RBAC, daemonset_config, manifests

#: kubelet's authorizer: the resource a request path is checked as, on the node object
#: (pkg/kubelet/server/auth.go; "Kubelet authentication/authorization" in the Kubernetes
#: docs). Fine-grained authorization (KEP-2862, the KubeletFineGrainedAuthz gate: beta and on
#: by default in 1.33, GA in 1.36) gives /pods, /runningpods, /healthz and /configz their own
#: subresources; before it, and for every other path, the check is "proxy".
FINE_GRAINED = {
    "/pods": "nodes/pods",
    "/runningpods": "nodes/pods",
    "/healthz": "nodes/healthz",
    "/configz": "nodes/configz",
    "/stats": "nodes/stats",
    "/metrics": "nodes/metrics",
    "/logs": "nodes/log",
}
COARSE = {"/stats": "nodes/stats", "/metrics": "nodes/metrics", "/logs": "nodes/log"}
#: kubelet's verbs by HTTP method (the apiserver's request-info mapping).
VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
         "DELETE": "delete"}  # fmt: skip


def resource_of(path: str, table: dict[str, str]) -> str:
    for prefix, resource in table.items():
        if path == prefix or path.startswith(prefix + "/"):
            return resource
    return "nodes/proxy"


class KubeletStandIn(http.server.BaseHTTPRequestHandler):
    """Answers every GET with an empty PodList and records the method and path."""

    seen: list[tuple[str, str]]

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path))
        body = json.dumps({"kind": "PodList", "apiVersion": "v1", "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def kubelet() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    seen: list[tuple[str, str]] = []
    handler = type("Recorder", (KubeletStandIn,), {"seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def granted(name: str, role: str) -> set[tuple[str, str]]:
    (cluster_role,) = [
        d for d in manifests(name) if d["kind"] == "ClusterRole" and d["metadata"]["name"] == role
    ]
    return {
        (verb, resource)
        for rule in cluster_role["rules"]
        for verb in rule["verbs"]
        for resource in rule["resources"]
        if rule["apiGroups"] == [""]
    }


def requested(
    bundle: str,
    table: dict[str, str],
    kubelet: tuple[str, list[tuple[str, str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> set[tuple[str, str]]:
    """What the shipped pod source asks kubelet, as kubelet's authorizer checks it: the real
    fetcher, at the path the bundle's settings give, against a stand-in kubelet."""
    settings = daemonset_config(bundle, tmp_path, monkeypatch).pod_source
    path = urlsplit(settings.endpoint().url).path
    base, seen = kubelet
    KubeletPodFetcher(KubeletEndpoint(base + path), empty_is_error=False).fetch()
    return {(VERBS[method], resource_of(urlsplit(p).path, table)) for method, p in seen}


@pytest.mark.parametrize("bundle", BUNDLES)
def test_the_cluster_role_grants_exactly_what_the_pod_source_requests(
    bundle: str,
    kubelet: tuple[str, list[tuple[str, str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    needed = requested(bundle, FINE_GRAINED, kubelet, tmp_path, monkeypatch)
    assert needed == {("get", "nodes/pods")}
    assert granted(bundle, "qrmd") == needed


def test_the_opt_in_rbac_grants_what_an_older_kubelet_checks_and_no_more(
    kubelet: tuple[str, list[tuple[str, str]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needed = requested("daemonset.yaml", COARSE, kubelet, tmp_path, monkeypatch)
    assert needed == {("get", "nodes/proxy")}
    assert granted(NODES_PROXY_RBAC, "qrmd-nodes-proxy") == needed
    (binding,) = [d for d in manifests(NODES_PROXY_RBAC) if d["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "qrmd", "namespace": "kube-system"}
    ]


def pod_spec(bundle: str) -> dict[str, Any]:
    (ds,) = [d for d in manifests(bundle) if d["kind"] == "DaemonSet"]
    spec: dict[str, Any] = ds["spec"]["template"]["spec"]
    return spec


def container(bundle: str) -> dict[str, Any]:
    (only,) = pod_spec(bundle)["containers"]
    return dict(only)


@pytest.mark.parametrize(
    ("bundle", "balancer", "host_pid", "capabilities"),
    [
        pytest.param("daemonset.yaml", True, True, {"SYS_NICE", "SYS_PTRACE"},
                     id="the memory balancer gets host PIDs and the two capabilities it uses"),
        pytest.param("daemonset-cpu-only.yaml", False, False, set(),
                     id="the cpu plugin alone gets no host PIDs and no capability"),
    ],
)  # fmt: skip
def test_privileges_follow_the_memory_balancer(
    bundle: str,
    balancer: bool,
    host_pid: bool,
    capabilities: set[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = daemonset_config(bundle, tmp_path, monkeypatch)
    assert config.enable_memory_balancer == balancer
    assert pod_spec(bundle)["hostPID"] == host_pid
    security = container(bundle)["securityContext"]
    assert security["capabilities"]["drop"] == ["ALL"]
    assert set(security["capabilities"].get("add", [])) == capabilities
    assert security["allowPrivilegeEscalation"] is False and security["privileged"] is False
    mounts = {m["name"]: m for m in container(bundle)["volumeMounts"]}
    # Nothing writes cgroup files unless cpu.idle is synced.
    assert not config.pod_source.enable_syncing_cpu_idle and mounts["cgroup"]["readOnly"]


def test_the_two_bundles_differ_only_by_the_memory_balancer() -> None:
    full, cpu_only = manifests("daemonset.yaml"), manifests("daemonset-cpu-only.yaml")
    assert [d for d in full if d["kind"] != "DaemonSet"] == [
        d for d in cpu_only if d["kind"] != "DaemonSet"
    ]
    balancer_only = {"--enable-memory-balancer", "--plugin-registration-dir"}
    args = [a for a in container("daemonset.yaml")["args"] if a.split("=")[0] not in balancer_only]
    assert container("daemonset-cpu-only.yaml")["args"] == args
    volumes = [
        v for v in pod_spec("daemonset.yaml")["volumes"] if v["name"] != "katalyst-plugin-socks"
    ]
    assert pod_spec("daemonset-cpu-only.yaml")["volumes"] == volumes
    assert container("daemonset-cpu-only.yaml")["image"] == container("daemonset.yaml")["image"]


@pytest.mark.parametrize("bundle", BUNDLES)
def test_only_labelled_nodes_run_qrmd_and_see_the_checkpoint_they_take_over(
    bundle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert pod_spec(bundle)["nodeSelector"] == {"qrmd.io/cpu-plugin": "qrmd"}
    config = daemonset_config(bundle, tmp_path, monkeypatch)
    checkpoint = config.takeover.katalyst_checkpoint
    assert checkpoint is not None and config.takeover.import_if_present
    # The file must be on the node's disk as the pod sees it: a hostPath of the same path.
    host_paths = {
        v["name"]: v["hostPath"]["path"] for v in pod_spec(bundle)["volumes"] if "hostPath" in v
    }
    mounted = {
        m["mountPath"]: host_paths[m["name"]]
        for m in container(bundle)["volumeMounts"]
        if m["name"] in host_paths
    }
    directory = str(Path(checkpoint).parent)
    assert mounted.get(directory) == directory
    # ...and the journal too, so "empty journal" means the node's, not the container's.
    assert mounted.get(config.state_dir) == config.state_dir


@pytest.mark.parametrize("bundle", BUNDLES)
def test_the_image_is_fully_qualified(bundle: str) -> None:
    image = container(bundle)["image"]
    registry, _, rest = image.partition("/")
    # A short name ("qrmd:0.2.0") is docker.io's, where anyone may own it.
    assert "." in registry or ":" in registry, image
    assert ":" in rest.rsplit("/", 1)[-1] or "@sha256:" in rest, image
