"""kubelet's ``/pods``: the node's pods with their UIDs, phases and container IDs (DESIGN.md
"Checkers"; the reference's metaserver, ``pkg/metaserver/agent/pod/kubelet.go`` at v0.5.3).

Where it is read, as katalyst-agent reads it:

* the read-only port: ``http://localhost:<--kubelet-read-only-port>/<--kubelet-pods-endpoint>``;
* with ``--enable-kubelet-secure-port``:
  ``https://<--node-address>:<--kubelet-secure-port><--kubelet-pods-endpoint>`` with the bearer
  token read from ``--api-auth-token-file``. The token file is read at every fetch, since a
  projected service-account token is rotated under a running pod. The reference skips TLS
  verification; qrmd verifies the kubelet's certificate (and its host name) against
  ``--kubelet-ca-file`` when one is given, and otherwise skips as the reference does and warns
  once.

The node's own kubelet is never reached through a proxy: ``HTTP(S)_PROXY`` in qrmd's
environment is ignored for it.

What the answer becomes: a ``PodListSnapshot`` (the ``PodSource`` port's value) of every pod's
``metadata.uid``/``namespace``/``name``, ``status.phase`` and the runtime container ID of each
container status, init containers included (a container not started yet has no ID and is
left out). A body that is not a PodList, or a pod without a UID, is a ``PodListError`` naming
what was wrong; so is an HTTP error, a refused connection or a fetch that outlasts its timeout.

An empty list. The reference treats it as an error ("kubelet should at least contain current
pod as an item"): katalyst-agent always runs as a pod, so kubelet lists at least that one, and
an empty answer is a kubelet that just restarted. qrmd keeps that rule when it runs as a pod
(the downward-API ``NODE_NAME`` of its DaemonSet is set, ``runs_as_pod``); outside a pod an
empty list is a valid answer, but the residual-state checker never removes anything on one
(``policy.cpu.residual_check``).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from actors.ports.pod_source import PodListing, PodListSnapshot
from qrmd.host.kubelet_endpoint import (
    DEFAULT_FETCH_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    KubeletEndpoint,
)

__all__ = [
    "DEFAULT_FETCH_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "KubeletEndpoint",
    "KubeletPodFetcher",
    "PodListError",
    "parse_pod_list",
    "runs_as_pod",
]

_log = logging.getLogger("qrmd.pod_source")

_CHUNK_BYTES = 1 << 20

#: The downward-API variable katalyst's DaemonSet (and qrmd's) sets from ``spec.nodeName``.
POD_ENVIRONMENT_VARIABLE = "NODE_NAME"


class PodListError(Exception):
    """kubelet's pod list could not be had or read; the message says where and why."""


def runs_as_pod(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether qrmd runs as a pod, judged by the downward-API ``NODE_NAME`` its DaemonSet sets."""
    return bool(environ.get(POD_ENVIRONMENT_VARIABLE))


def _text(value: object, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PodListError(f"{where} is {type(value).__name__}, not a string")
    return value


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PodListError(f"{where} is {type(value).__name__}, not an object")
    return value


def _container_ids(status: Mapping[str, Any], where: str) -> dict[str, str]:
    """Container name → runtime ID over init and app container statuses."""
    ids: dict[str, str] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        statuses = status.get(key)
        if statuses is None:
            continue
        if not isinstance(statuses, list):
            raise PodListError(f"{where}.status.{key} is not a list")
        for i, item in enumerate(statuses):
            entry = _mapping(item, f"{where}.status.{key}[{i}]")
            name = _text(entry.get("name"), f"{where}.status.{key}[{i}].name")
            container_id = _text(entry.get("containerID"), f"{where}.status.{key}[{i}]")
            if name and container_id:
                ids[name] = container_id
    return ids


def parse_pod_list(body: bytes, fetched_at: float) -> PodListSnapshot:
    """A kubelet ``PodList`` JSON body as a snapshot.

    Args:
        body: the response body.
        fetched_at: wall time of the fetch, seconds since the epoch.

    Returns:
        Every listed pod by UID (an empty list gives an empty snapshot: the caller decides
        whether that is an error).

    Raises:
        PodListError: not JSON, not a PodList, or a pod without a UID; the message says which
            item and field.
    """
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise PodListError(f"the pod list is not JSON: {err}") from None
    except RecursionError:
        raise PodListError("the pod list is not JSON a reader can take: nested too deep") from None
    if not isinstance(document, dict):
        raise PodListError(f"the pod list is a JSON {type(document).__name__}, not a PodList")
    kind = document.get("kind")
    if kind not in (None, "PodList"):
        raise PodListError(f"the answer is a {kind!r}, not a PodList")
    items = document.get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise PodListError("the PodList's items are not a list")
    pods: list[PodListing] = []
    for i, item in enumerate(items):
        where = f"items[{i}]"
        pod = _mapping(item, where)
        metadata = _mapping(pod.get("metadata"), f"{where}.metadata")
        status = _mapping(pod.get("status"), f"{where}.status")
        uid = _text(metadata.get("uid"), f"{where}.metadata.uid")
        if not uid:
            raise PodListError(f"{where} ({metadata.get('name')!r}) has no metadata.uid")
        pods.append(
            PodListing(
                uid=uid,
                namespace=_text(metadata.get("namespace"), f"{where}.metadata.namespace"),
                name=_text(metadata.get("name"), f"{where}.metadata.name"),
                phase=_text(status.get("phase"), f"{where}.status.phase"),
                container_ids=_container_ids(status, where),
            )
        )
    return PodListSnapshot.of(pods, fetched_at)


class KubeletPodFetcher:
    """Fetches and parses kubelet's pod list, one call at a time (see the module docstring).

    Args:
        endpoint: where and how.
        empty_is_error: an empty list is a ``PodListError`` (qrmd runs as a pod).
        wall: the wall clock stamping each snapshot.
        monotonic: the clock the timeout is measured on.
    """

    def __init__(
        self,
        endpoint: KubeletEndpoint,
        *,
        empty_is_error: bool,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = endpoint
        self._empty_is_error = empty_is_error
        self._wall = wall
        self._monotonic = monotonic
        self._context = self._tls_context() if endpoint.is_secure else None
        handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
        if self._context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=self._context))
        self._opener = urllib.request.build_opener(*handlers)
        self._warned_insecure = False
        self._lock = threading.Lock()

    def _tls_context(self) -> ssl.SSLContext:
        if self.endpoint.ca_file is not None:
            try:
                return ssl.create_default_context(cafile=self.endpoint.ca_file)
            except (OSError, ssl.SSLError) as err:
                raise PodListError(
                    f"--kubelet-ca-file {self.endpoint.ca_file!r} cannot be used: {err}"
                ) from None
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context

    def _warn_insecure_once(self) -> None:
        if self._warned_insecure:
            return
        self._warned_insecure = True
        _log.warning(
            "kubelet's certificate at %s is not verified (no --kubelet-ca-file given, as the "
            "reference does); give the kubelet's serving CA to verify it",
            self.endpoint.url,
        )

    def _request(self) -> urllib.request.Request:
        request = urllib.request.Request(self.endpoint.url, headers={"Accept": "application/json"})
        if self.endpoint.is_secure and self.endpoint.token_file is not None:
            try:
                with open(self.endpoint.token_file, encoding="utf-8") as file:
                    token = file.read().strip()
            except OSError as err:
                raise PodListError(
                    f"--api-auth-token-file {self.endpoint.token_file!r}: {err.strerror}"
                ) from None
            if not token:
                raise PodListError(f"--api-auth-token-file {self.endpoint.token_file!r} is empty")
            request.add_header("Authorization", f"Bearer {token}")
        return request

    def _read_body(self) -> bytes:
        endpoint = self.endpoint
        deadline = self._monotonic() + endpoint.timeout_s
        if endpoint.is_secure and endpoint.ca_file is None:
            self._warn_insecure_once()
        try:
            with self._opener.open(self._request(), timeout=endpoint.timeout_s) as response:
                chunks: list[bytes] = []
                size = 0
                while chunk := response.read(_CHUNK_BYTES):
                    size += len(chunk)
                    if size > endpoint.max_body_bytes:
                        raise PodListError(
                            f"GET {endpoint.url}: the body is over {endpoint.max_body_bytes} bytes"
                        )
                    if self._monotonic() > deadline:
                        raise PodListError(
                            f"GET {endpoint.url}: timed out after {endpoint.timeout_s:g} s "
                            f"({size} bytes read)"
                        )
                    chunks.append(chunk)
                # http.client ends a body cut short quietly: compare with what was announced.
                announced = response.headers.get("Content-Length")
                if announced is not None and announced.isdigit() and int(announced) != size:
                    raise PodListError(
                        f"GET {endpoint.url}: the connection closed after {size} of "
                        f"{announced} bytes"
                    )
                return b"".join(chunks)
        except urllib.error.HTTPError as err:
            raise PodListError(f"GET {endpoint.url}: HTTP {err.code} {err.reason}") from None
        except urllib.error.URLError as err:
            reason = err.reason
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise PodListError(
                    f"GET {endpoint.url}: kubelet's certificate is not trusted by "
                    f"--kubelet-ca-file {endpoint.ca_file!r}: {reason.verify_message}"
                ) from None
            if isinstance(reason, TimeoutError):
                raise PodListError(
                    f"GET {endpoint.url}: timed out after {endpoint.timeout_s:g} s"
                ) from None
            raise PodListError(f"GET {endpoint.url}: {reason}") from None
        except TimeoutError:
            raise PodListError(
                f"GET {endpoint.url}: timed out after {endpoint.timeout_s:g} s"
            ) from None
        except (OSError, ValueError, http.client.HTTPException) as err:
            # HTTPException: a connection cut mid-body (IncompleteRead) or a garbled answer.
            raise PodListError(f"GET {endpoint.url}: {type(err).__name__}: {err}") from None

    def fetch(self) -> PodListSnapshot:
        """One fetch and parse of the pod list.

        Returns:
            The snapshot, stamped with the wall time the fetch started.

        Raises:
            PodListError: the fetch or the body failed, or the list is empty while qrmd runs
                as a pod (the reference's rule).
        """
        with self._lock:
            fetched_at = self._wall()
            snapshot = parse_pod_list(self._read_body(), fetched_at)
            if not snapshot.pods and self._empty_is_error:
                # kubelet lists at least qrmd's own pod (the reference's rule).
                raise PodListError(
                    f"GET {self.endpoint.url}: kubelet returned an empty pod list, though qrmd "
                    "runs as a pod (kubelet is probably restarting)"
                )
            return snapshot
