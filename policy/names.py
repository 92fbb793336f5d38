"""Kubernetes' own bounds on the strings a request carries (Kubernetes' name limits).

kubelet only sends what the API server accepted, so a string past these bounds is not a pod's:
it is refused (INVALID_ARGUMENT, naming the field) before it reaches the journal, where one
4 MiB ``pod_name`` once grew the log by 8 MB per Allocate. The bounds are apimachinery's:

========================  =======  ==================================================
field                     bytes    Kubernetes rule
========================  =======  ==================================================
``pod_uid``               128      a UUID is 36; generous, and non-empty (tests and
                                   simulators use short ids, so no minimum beyond that)
``pod_name``              253      DNS subdomain (``IsDNS1123Subdomain``)
``pod_namespace``         63       DNS label (``IsDNS1123Label``)
``container_name``        63       DNS label
``pod_role``/``pod_type`` 253      free-form names; a DNS subdomain's bound
``resource_name``         253      a qualified resource name
label key                 317      qualified name: 253-byte prefix, ``/``, 63-byte name
label value               63       ``IsValidLabelValue``
labels + annotations      256 KiB  ``TotalAnnotationSizeLimitB``, keys plus values
========================  =======  ==================================================

Only lengths are checked, not the character rules: qrmd never interprets these strings, and a
simulator's ids need not be DNS names. Shared by the CPU request validation
(``policy.cpu.request``) and the balancer's inputs (``policy.balance.inputs``).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "MAX_CONTAINER_NAME_BYTES",
    "MAX_LABEL_KEY_BYTES",
    "MAX_LABEL_VALUE_BYTES",
    "MAX_MAPS_BYTES",
    "MAX_NAMESPACE_BYTES",
    "MAX_OPAQUE_NAME_BYTES",
    "MAX_POD_NAME_BYTES",
    "MAX_POD_UID_BYTES",
    "MAX_SHOWN_CHARS",
    "map_bytes",
    "shown",
    "too_long",
]

MAX_POD_UID_BYTES = 128
MAX_POD_NAME_BYTES = 253
MAX_NAMESPACE_BYTES = 63
MAX_CONTAINER_NAME_BYTES = 63
#: ``pod_role``, ``pod_type``, ``resource_name``.
MAX_OPAQUE_NAME_BYTES = 253
MAX_LABEL_KEY_BYTES = 317
MAX_LABEL_VALUE_BYTES = 63
#: Labels and annotations together, keys plus values, in UTF-8 bytes.
MAX_MAPS_BYTES = 256 * 1024
#: How much of a string an error message quotes: a refused 4 MiB name is not echoed back.
MAX_SHOWN_CHARS = 80


def too_long(value: str, field: str, limit: int) -> str | None:
    """Why ``value`` is refused as ``field``, or None if it fits.

    Args:
        value: the string.
        field: its name in the request (``pod_name``), for the message.
        limit: the most UTF-8 bytes allowed.

    Returns:
        ``"pod_name is 300 bytes, more than Kubernetes allows (253)"``, or None.
    """
    size = _utf8_size(value)
    if size <= limit:
        return None
    return f"{field} is {size} bytes, more than Kubernetes allows ({limit})"


def map_bytes(*maps: Mapping[str, str] | None) -> int:
    """UTF-8 bytes of every key and value of the maps together (``None`` counts as empty)."""
    return sum(
        _utf8_size(key) + _utf8_size(value)
        for mapping in maps
        if mapping
        for key, value in mapping.items()
    )


def _utf8_size(value: str) -> int:
    """UTF-8 bytes of ``value``, a lone surrogate counted as the 3 bytes ``surrogatepass``
    writes. An ASCII string (every name kubelet sends, in practice) is one byte a character:
    its length, read without encoding it (``isascii`` reads a flag the string keeps)."""
    if value.isascii():
        return len(value)
    return len(value.encode("utf-8", "surrogatepass"))


def shown(value: str) -> str:
    """``value`` as an error message may quote it: cut to :data:`MAX_SHOWN_CHARS` characters."""
    if len(value) <= MAX_SHOWN_CHARS:
        return value
    return f"{value[:MAX_SHOWN_CHARS]}… ({len(value)} characters)"
