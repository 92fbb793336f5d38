"""Reading kubelet's /pods (qrmd.host.kubelet_pods) against real local HTTP and HTTPS servers."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qrmd.host.kubelet_pods import (
    KubeletEndpoint,
    KubeletPodFetcher,
    PodListError,
    parse_pod_list,
    runs_as_pod,
)
from tests.host.kubelet_server import KubeletStub, make_pki, pod_item, pod_list, serve

T0 = 1715180645.0


def _fetcher(endpoint: KubeletEndpoint, *, empty_is_error: bool = False) -> KubeletPodFetcher:
    return KubeletPodFetcher(endpoint, empty_is_error=empty_is_error, wall=lambda: T0)


# -- parsing ---------------------------------------------------------------------------------


def test_a_pod_list_becomes_phases_and_container_ids_by_name_init_containers_too() -> None:
    body = pod_list(
        [
            pod_item(
                "uid-web",
                "web",
                "shop",
                "Running",
                containers={"app": "containerd://aaa", "sidecar": "containerd://bbb"},
                init_containers={"setup": "containerd://ccc"},
            ),
            pod_item("uid-job", "job", "batch", "Pending", containers={"main": ""}),
        ]
    )
    snapshot = parse_pod_list(body, T0)
    web = snapshot.pods["uid-web"]
    assert (web.namespace, web.name, web.phase) == ("shop", "web", "Running")
    assert dict(web.container_ids) == {
        "setup": "containerd://ccc",
        "app": "containerd://aaa",
        "sidecar": "containerd://bbb",
    }
    # A container not started yet has no ID: it is left out rather than listed as "".
    assert dict(snapshot.pods["uid-job"].container_ids) == {}
    assert snapshot.phase_of("uid-job") == "Pending"
    assert snapshot.fetched_at == T0


def test_a_pod_list_with_null_items_or_no_statuses_is_empty_or_bare() -> None:
    assert dict(parse_pod_list(b'{"kind":"PodList","items":null}', T0).pods) == {}
    bare = parse_pod_list(b'{"items":[{"metadata":{"uid":"u1"}}]}', T0).pods["u1"]
    assert (bare.name, bare.namespace, bare.phase, dict(bare.container_ids)) == ("", "", "", {})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"{not json", "not JSON", id="a body that is not JSON is refused"),
        pytest.param(b"\xff\xfe", "not JSON", id="bytes that are not text are refused"),
        pytest.param(b"[]", "JSON list, not a PodList", id="a JSON list is not a pod list"),
        pytest.param(b'{"kind":"Status"}', "'Status', not a PodList", id="a Status is refused"),
        pytest.param(b'{"items":{}}', "items are not a list", id="items must be a list"),
        pytest.param(b'{"items":[7]}', "items[0] is int", id="an item must be an object"),
        pytest.param(
            b'{"items":[{"metadata":{"name":"web"}}]}',
            "items[0] ('web') has no metadata.uid",
            id="a pod without a uid is refused, naming the item",
        ),
        pytest.param(
            b'{"items":[{"metadata":{"uid":5}}]}',
            "items[0].metadata.uid is int",
            id="a uid that is not a string is refused",
        ),
        pytest.param(
            b'{"items":[{"metadata":{"uid":"u"},"status":{"containerStatuses":{}}}]}',
            "items[0].status.containerStatuses is not a list",
            id="container statuses must be a list",
        ),
    ],
)
def test_malformed_pod_lists_raise_a_clear_error(body: bytes, message: str) -> None:
    with pytest.raises(PodListError, match=re.escape(message)):
        parse_pod_list(body, T0)


@pytest.mark.parametrize(
    ("environ", "in_pod"),
    [
        pytest.param({"NODE_NAME": "node-a"}, True, id="the downward-API node name means a pod"),
        pytest.param({"NODE_NAME": ""}, False, id="an empty node name is no pod"),
        pytest.param({}, False, id="no node name is no pod"),
    ],
)
def test_runs_as_pod(environ: dict[str, str], in_pod: bool) -> None:
    assert runs_as_pod(environ) is in_pod


# -- the read-only port ------------------------------------------------------------------------


def test_the_read_only_port_is_read_over_plain_http_without_a_token() -> None:
    stub = KubeletStub(body=pod_list([pod_item("uid-a")]))
    with serve(stub) as port:
        endpoint = KubeletEndpoint.read_only(port, "/pods")
        assert endpoint.url == f"http://localhost:{port}/pods"
        snapshot = _fetcher(endpoint).fetch()
    assert list(snapshot.pods) == ["uid-a"]
    assert stub.paths == ["/pods"] and stub.authorizations == [None]


def test_a_proxy_in_the_environment_is_not_used_for_the_nodes_kubelet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serve(KubeletStub()) as proxy_port:
        pass  # a proxy that refuses every connection
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy_port}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    stub = KubeletStub(body=pod_list([pod_item("uid-a")]))
    with serve(stub) as port:
        assert list(_fetcher(KubeletEndpoint.read_only(port)).fetch().pods) == ["uid-a"]


def test_an_http_error_names_the_url_and_the_status() -> None:
    stub = KubeletStub(status=503)
    with serve(stub) as port:
        endpoint = KubeletEndpoint.read_only(port)
        with pytest.raises(PodListError, match=rf"GET {endpoint.url}: HTTP 503"):
            _fetcher(endpoint).fetch()


def test_a_refused_connection_names_the_url() -> None:
    with serve(KubeletStub()) as port:
        pass  # the port is closed again
    endpoint = KubeletEndpoint.read_only(port)
    with pytest.raises(PodListError, match=rf"GET {endpoint.url}: .*refused"):
        _fetcher(endpoint).fetch()


def test_a_kubelet_slower_than_the_timeout_fails_the_fetch_in_time() -> None:
    stub = KubeletStub(body=pod_list([pod_item("uid-a")]), delay_s=2.0)
    with serve(stub) as port:
        endpoint = KubeletEndpoint(f"http://127.0.0.1:{port}/pods", timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(PodListError, match=r"timed out after 0.3 s"):
            _fetcher(endpoint).fetch()
        assert time.monotonic() - started < 1.5


def test_a_connection_cut_mid_body_is_a_pod_list_error() -> None:
    stub = KubeletStub(body=pod_list([pod_item("uid-a")]))
    with serve(stub) as port:
        # Announce more bytes than are sent: the client sees the connection end early.
        stub.body = stub.body[: len(stub.body) // 2]
        stub.content_length = len(stub.body) * 2
        with pytest.raises(PodListError, match=r"connection closed after \d+ of \d+ bytes"):
            _fetcher(KubeletEndpoint.read_only(port)).fetch()


def test_a_body_over_the_limit_is_refused() -> None:
    stub = KubeletStub(body=pod_list([pod_item(f"uid-{i}") for i in range(50)]))
    with serve(stub) as port:
        endpoint = KubeletEndpoint(f"http://127.0.0.1:{port}/pods", max_body_bytes=1000)
        with pytest.raises(PodListError, match="over 1000 bytes"):
            _fetcher(endpoint).fetch()


def test_malformed_json_from_the_server_is_a_clear_error() -> None:
    stub = KubeletStub(body=b'{"items": [')
    with serve(stub) as port, pytest.raises(PodListError, match="not JSON"):
        _fetcher(KubeletEndpoint.read_only(port)).fetch()


@pytest.mark.parametrize(
    ("empty_is_error", "fails"),
    [
        pytest.param(True, True, id="an empty list is an error when qrmd runs as a pod"),
        pytest.param(False, False, id="an empty list is an empty snapshot outside a pod"),
    ],
)
def test_an_empty_pod_list(empty_is_error: bool, fails: bool) -> None:
    with serve(KubeletStub(body=pod_list([]))) as port:
        fetcher = _fetcher(KubeletEndpoint.read_only(port), empty_is_error=empty_is_error)
        if fails:
            with pytest.raises(PodListError, match="empty pod list, though qrmd runs as a pod"):
                fetcher.fetch()
        else:
            assert dict(fetcher.fetch().pods) == {}


# -- the secure port ---------------------------------------------------------------------------


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("s3cr3t-token\n")
    return path


def test_the_secure_port_sends_the_token_and_verifies_the_kubelet_against_the_ca(
    tmp_path: Path, token_file: Path
) -> None:
    pki = make_pki(tmp_path / "pki")
    stub = KubeletStub(body=pod_list([pod_item("uid-a"), pod_item("uid-b")]))
    with serve(stub, pki.server) as port:
        endpoint = KubeletEndpoint.secure(
            "127.0.0.1", port, "/pods", str(token_file), str(pki.ca_file)
        )
        assert endpoint.url == f"https://127.0.0.1:{port}/pods"
        snapshot = _fetcher(endpoint).fetch()
        # The token is re-read at each fetch: a rotated token is sent the next time.
        token_file.write_text("rotated-token")
        _fetcher(endpoint).fetch()
    assert sorted(snapshot.pods) == ["uid-a", "uid-b"]
    assert stub.authorizations == ["Bearer s3cr3t-token", "Bearer rotated-token"]


def test_a_kubelet_certificate_another_ca_signed_is_refused(
    tmp_path: Path, token_file: Path
) -> None:
    kubelet = make_pki(tmp_path / "kubelet", "kubelet")
    other = make_pki(tmp_path / "other", "other")
    stub = KubeletStub(body=pod_list([pod_item("uid-a")]))
    with serve(stub, kubelet.server) as port:
        endpoint = KubeletEndpoint.secure(
            "127.0.0.1", port, "/pods", str(token_file), str(other.ca_file)
        )
        with pytest.raises(PodListError, match="not trusted by --kubelet-ca-file"):
            _fetcher(endpoint).fetch()
    # Refused before any request was sent: the token never left qrmd.
    assert stub.authorizations == []


def test_without_a_ca_the_secure_port_is_read_unverified_with_one_warning(
    tmp_path: Path, token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pki = make_pki(tmp_path / "pki")
    stub = KubeletStub(body=pod_list([pod_item("uid-a")]))
    with serve(stub, pki.server) as port, caplog.at_level(logging.WARNING, "qrmd.pod_source"):
        fetcher = _fetcher(
            KubeletEndpoint.secure("127.0.0.1", port, "/pods", str(token_file), None)
        )
        fetcher.fetch()
        fetcher.fetch()
    warnings = [r for r in caplog.records if "not verified" in r.getMessage()]
    assert len(warnings) == 1
    assert stub.authorizations == ["Bearer s3cr3t-token"] * 2


def test_a_missing_token_file_names_the_flag(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    with serve(KubeletStub(), pki.server) as port:
        endpoint = KubeletEndpoint.secure(
            "127.0.0.1", port, "/pods", str(tmp_path / "absent"), str(pki.ca_file)
        )
        with pytest.raises(PodListError, match=r"--api-auth-token-file .*absent"):
            _fetcher(endpoint).fetch()


def test_an_unreadable_ca_file_names_the_flag(tmp_path: Path) -> None:
    bad = tmp_path / "ca.crt"
    bad.write_text("not a certificate")
    with pytest.raises(PodListError, match="--kubelet-ca-file"):
        KubeletPodFetcher(
            KubeletEndpoint.secure("127.0.0.1", 1, "/pods", "t", str(bad)), empty_is_error=False
        )


def test_the_secure_port_needs_a_node_address() -> None:
    with pytest.raises(ValueError, match="--node-address is empty"):
        KubeletEndpoint.secure("", 10250, "/pods", "t", None)
    assert KubeletEndpoint.secure("fd00::1", 10250, "pods", "t", None).url == (
        "https://[fd00::1]:10250/pods"
    )


# -- size ----------------------------------------------------------------------------------------


def test_a_50000_pod_list_is_fetched_and_parsed_whole() -> None:
    items = [
        pod_item(f"uid-{i:05d}", containers={"app": f"containerd://{i:064x}"})
        for i in range(50_000)
    ]
    body = pod_list(items)
    stub = KubeletStub(body=body)
    with serve(stub) as port:
        snapshot = _fetcher(KubeletEndpoint.read_only(port)).fetch()
    assert len(snapshot.pods) == 50_000
    assert snapshot.pods["uid-49999"].container_ids["app"] == f"containerd://{49999:064x}"
    # How long it takes is bench/bench_pod_list.py's figure, not this test's.


def test_json_field_order_and_unknown_fields_do_not_matter() -> None:
    doc = {"items": [{"status": {"phase": "Running", "x": 1}, "metadata": {"uid": "u", "y": []}}]}
    assert parse_pod_list(json.dumps(doc).encode(), T0).phase_of("u") == "Running"


# -- garbage -------------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "items",
                    "metadata",
                    "uid",
                    "name",
                    "namespace",
                    "status",
                    "phase",
                    "containerStatuses",
                    "initContainerStatuses",
                    "containerID",
                    "kind",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


def _snapshot_or_error(body: bytes) -> None:
    """Garbage in: a ``PodListError``, or a snapshot whose pods all have a uid; nothing else."""
    try:
        snapshot = parse_pod_list(body, T0)
    except PodListError:
        return
    assert all(isinstance(uid, str) and uid for uid in snapshot.pods)
    assert all(
        isinstance(cid, str) for p in snapshot.pods.values() for cid in p.container_ids.values()
    )


@given(_JSON)
def test_any_json_is_a_snapshot_or_a_pod_list_error(document: object) -> None:
    _snapshot_or_error(json.dumps(document).encode())


@given(st.binary(max_size=200))
def test_any_bytes_are_a_snapshot_or_a_pod_list_error(body: bytes) -> None:
    _snapshot_or_error(body)


def test_json_nested_too_deep_is_a_pod_list_error() -> None:
    with pytest.raises(PodListError, match="not JSON"):
        parse_pod_list(b"[" * 100_000 + b"]" * 100_000, T0)
