"""A real local HTTP(S) server answering ``/pods`` as kubelet does, for the pod-source tests.

The HTTPS side uses a CA and a server certificate generated here (``cryptography``), so a
test can hand qrmd the right CA, a wrong one, or none.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def pod_item(
    uid: str,
    name: str = "",
    namespace: str = "default",
    phase: str = "Running",
    containers: dict[str, str] | None = None,
    init_containers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One PodList item as kubelet writes it (the fields qrmd reads, and some it ignores)."""
    containers = containers if containers is not None else {"app": f"containerd://{uid}-app"}
    return {
        "metadata": {
            "name": name or f"pod-{uid}",
            "namespace": namespace,
            "uid": uid,
            "labels": {"app": name or uid},
            "annotations": {"katalyst.kubewharf.io/qos_level": "shared_cores"},
        },
        "spec": {
            "nodeName": "node-a",
            "containers": [
                {"name": n, "image": "registry.example/app:1.0", "resources": {}}
                for n in containers
            ],
        },
        "status": {
            "phase": phase,
            "hostIP": "10.0.0.1",
            "podIP": "10.1.0.2",
            "initContainerStatuses": [
                {"name": n, "containerID": cid, "ready": True}
                for n, cid in (init_containers or {}).items()
            ],
            "containerStatuses": [
                {"name": n, "containerID": cid, "ready": True, "restartCount": 0}
                for n, cid in containers.items()
            ],
        },
    }


def pod_list(items: list[dict[str, Any]]) -> bytes:
    """A PodList body."""
    return json.dumps(
        {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
    ).encode()


@dataclass
class KubeletStub:
    """What the stub answers, and what it was asked (mutable by the test, read by the handler)."""

    body: bytes = field(default_factory=lambda: pod_list([]))
    status: int = 200
    delay_s: float = 0.0
    content_length: int | None = None  # announce another length than the body's (a cut)
    authorizations: list[str | None] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


def _handler(stub: KubeletStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            stub.authorizations.append(self.headers.get("Authorization"))
            stub.paths.append(self.path)
            if stub.delay_s:
                time.sleep(stub.delay_s)  # a slow kubelet, for the timeout test
            body = stub.body if stub.status == 200 else b'{"kind":"Status"}'
            try:
                self.send_response(stub.status)
                self.send_header("Content-Type", "application/json")
                length = stub.content_length if stub.content_length is not None else len(body)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def log_message(self, format: str, *args: object) -> None:
            del format, args

    return Handler


@contextmanager
def serve(stub: KubeletStub, tls: ssl.SSLContext | None = None) -> Iterator[int]:
    """Serve ``stub`` on 127.0.0.1 (HTTPS when ``tls``); yields the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="kubelet-stub", daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@dataclass(frozen=True)
class Pki:
    """A CA file and a TLS server context whose certificate the CA signed (for 127.0.0.1)."""

    ca_file: Path
    server: ssl.SSLContext


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_pki(directory: Path, label: str = "kubelet") -> Pki:
    """A fresh CA and a server certificate for ``localhost``/``127.0.0.1`` signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{label}-ca"))
        .issuer_name(_name(f"{label}-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    ca_file = directory / f"{label}-ca.crt"
    ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    cert_file = directory / f"{label}.crt"
    key_file = directory / f"{label}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    return Pki(ca_file, server)
