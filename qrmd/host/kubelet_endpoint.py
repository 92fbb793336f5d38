"""Where and how kubelet's pod list is fetched, as plain data (``KubeletEndpoint``): the
pod source's settings (``qrmd.pods.settings``) build one without loading the fetcher
(``qrmd.host.kubelet_pods``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_FETCH_TIMEOUT_S", "DEFAULT_MAX_BODY_BYTES", "KubeletEndpoint"]

#: The reference's client timeout for kubelet calls (``native.defaultTimeout``).
DEFAULT_FETCH_TIMEOUT_S = 10.0
#: A PodList larger than this is refused rather than read into memory (a 50,000-pod node's
#: list is about 100 MB).
DEFAULT_MAX_BODY_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class KubeletEndpoint:
    """Where and how the pod list is fetched.

    Attributes:
        url: the full URL of the pods endpoint.
        token_file: the bearer token's file (secure port only), read at every fetch.
        ca_file: the CA bundle the kubelet's certificate is verified against; ``None`` on
            the secure port skips verification, as the reference does.
        timeout_s: the whole fetch (connect, headers and body) must finish within this.
        max_body_bytes: a longer body is refused.
    """

    url: str
    token_file: str | None = None
    ca_file: str | None = None
    timeout_s: float = DEFAULT_FETCH_TIMEOUT_S
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    @classmethod
    def read_only(
        cls, port: int, endpoint: str = "/pods", timeout_s: float = DEFAULT_FETCH_TIMEOUT_S
    ) -> KubeletEndpoint:
        """``http://localhost:<port><endpoint>``, the reference's default."""
        return cls(f"http://localhost:{port}/{endpoint.lstrip('/')}", timeout_s=timeout_s)

    @classmethod
    def secure(
        cls,
        node_address: str,
        port: int,
        endpoint: str,
        token_file: str,
        ca_file: str | None,
        *,
        timeout_s: float = DEFAULT_FETCH_TIMEOUT_S,
    ) -> KubeletEndpoint:
        """``https://<node_address>:<port><endpoint>`` with a bearer token.

        Raises:
            ValueError: no node address (the reference's "node address is empty").
        """
        if not node_address:
            raise ValueError("--node-address is empty: the secure port needs the node's address")
        host = f"[{node_address}]" if ":" in node_address else node_address
        url = f"https://{host}:{port}/{endpoint.lstrip('/')}"
        return cls(url, token_file=token_file, ca_file=ca_file, timeout_s=timeout_s)

    @property
    def is_secure(self) -> bool:
        """Whether the URL is HTTPS."""
        return self.url.startswith("https://")
