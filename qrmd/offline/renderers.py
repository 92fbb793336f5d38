"""One line per record's cause, by cause kind: a registry, so a new record kind needs only a
renderer (and gets a generic line until it has one).

A cause names its kind in ``rpc`` (the Allocator's kubelet RPCs), ``command`` (the balancer's
``Tick``, ``GetEvictPods``, ``GetAdvices``), ``kind`` or ``handler`` (checkers, daemon starts,
later kinds) — ``qrmd.offline.journal_view.cause_target``. A renderer picks the fields on-call needs
out of the cause; the generic one prints the cause's scalar fields and the names of its nested
ones, so a kind written by a newer qrmd (advisor responses, pod-source answers, evictions) is
still readable, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from journal import Record
from qrmd.offline.journal_view import cause_target, format_event, format_time

__all__ = [
    "EVENT_RENDERERS",
    "RENDERERS",
    "cause_kind",
    "event_renderer",
    "pod_label",
    "render_cause",
    "render_event",
    "renderer",
]

Renderer = Callable[[Mapping[str, Any]], str]

#: cause kind → renderer of that kind's cause.
RENDERERS: dict[str, Renderer] = {}

_GENERIC_SCALARS = 6

EventRenderer = Callable[[Mapping[str, Any]], str]

#: event kind → a short rendering of that kind's event (others: ``format_event``, cut short).
EVENT_RENDERERS: dict[str, EventRenderer] = {}

#: The longest line ``render_event`` prints for an event without a renderer of its own.
EVENT_LINE_MAX = 240


def renderer(*kinds: str) -> Callable[[Renderer], Renderer]:
    """Register the decorated function as the renderer of ``kinds``."""

    def register(function: Renderer) -> Renderer:
        for kind in kinds:
            RENDERERS[kind] = function
        return function

    return register


def cause_kind(cause: Mapping[Any, Any]) -> str:
    """The kind a cause names, ``"?"`` when it names none."""
    return cause_target(dict(cause))[0] or "?"


def render_cause(record: Record) -> str:
    """``kind: what it was about`` for one record."""
    kind = cause_kind(record.cause)
    render = RENDERERS.get(kind, _generic)
    return f"{kind}: {render(record.cause)}".rstrip(": ")


def _request(cause: Mapping[str, Any]) -> Mapping[str, Any]:
    request = cause.get("request")
    if isinstance(request, Mapping):
        return request
    inputs = cause.get("inputs")  # versioned decision inputs hold the request inside
    nested = inputs.get("request") if isinstance(inputs, Mapping) else None
    return nested if isinstance(nested, Mapping) else {}


def pod_label(request: Mapping[str, Any]) -> str:
    """``namespace/name (uid)`` of the pod a request names, or as much of it as it holds."""
    name = request.get("pod_name")
    namespace = request.get("pod_namespace")
    uid = request.get("pod_uid") or cause_target(dict(request))[1]
    if name:
        return f"{namespace}/{name} ({uid})" if namespace else f"{name} ({uid})"
    return str(uid or "")


def event_renderer(*kinds: str) -> Callable[[EventRenderer], EventRenderer]:
    """Register the decorated function as the short rendering of events of ``kinds``."""

    def register(function: EventRenderer) -> EventRenderer:
        for kind in kinds:
            EVENT_RENDERERS[kind] = function
        return function

    return register


def render_event(raw: Any) -> str:
    """One event on one short line: its kind's renderer, else ``format_event`` cut short."""
    kind = raw.get("kind") if isinstance(raw, Mapping) else None
    render = EVENT_RENDERERS.get(kind) if isinstance(kind, str) else None
    if render is not None:
        return f"{kind} {render(raw)}"
    line = format_event(raw)
    return line if len(line) <= EVENT_LINE_MAX else line[: EVENT_LINE_MAX - 1] + "…"


def _uids(pods: object) -> str:
    if not isinstance(pods, list):
        return "[]"
    return "[" + ", ".join(str(p.get("UID")) for p in pods if isinstance(p, Mapping)) + "]"


@event_renderer("BalanceRoundRecorded")
def _round_recorded(raw: Mapping[str, Any]) -> str:
    record = raw.get("record")
    if not isinstance(record, Mapping):
        return format_event(raw)[:EVENT_LINE_MAX]
    source = record.get("sourceNuma")
    numa = source.get("NumaID") if isinstance(source, Mapping) else None
    failed = f" failed={record.get('failedReason')!r}" if record.get("failedReason") else ""
    return (
        f"status={record.get('status')} level={record.get('balanceLevel')} sourceNuma={numa} "
        f"evict={_uids(record.get('evictPods'))} migrate={_uids(record.get('balancePods'))}"
        f"{failed}"
    )


@renderer("Allocate", "GetTopologyHints", "PreStartContainer")
def _allocation(cause: Mapping[str, Any]) -> str:
    request = _request(cause)
    parts = [f"{pod_label(request)}/{request.get('container_name', '?')}"]
    qos = (request.get("annotations") or {}).get("katalyst.kubewharf.io/qos_level")
    if qos:
        parts.append(f"qos={qos}")
    cpu = (request.get("resource_requests") or {}).get("cpu")
    if cpu is not None:
        parts.append(f"cpu={cpu}")
    hint = request.get("hint")
    if isinstance(hint, Mapping):
        preferred = " preferred" if hint.get("preferred") else ""
        parts.append(f"hint=NUMA {hint.get('nodes')}{preferred}")
    return " ".join(parts)


@renderer("RemovePod")
def _remove_pod(cause: Mapping[str, Any]) -> str:
    return str(cause.get("pod_uid") or _request(cause).get("pod_uid") or "?")


@renderer("RemoveResidualPods")
def _residual(cause: Mapping[str, Any]) -> str:
    """The due pods and the checker's evidence (``policy.cpu.cause``, version 3):
    ``pod-b (missed 10× since 2024-…), listing 9f2c… of 41 pods; advisor refused pod-c``."""
    due = cause.get("pod_uids")
    sightings = cause.get("sightings")
    sightings = sightings if isinstance(sightings, Mapping) else {}
    parts = []
    for uid in due if isinstance(due, list) else []:
        seen = sightings.get(uid)
        if isinstance(seen, Mapping) and isinstance(seen.get("first_at"), (int, float)):
            parts.append(
                f"{uid} (missed {seen.get('count')}× since {format_time(seen['first_at'])})"
            )
        else:
            parts.append(str(uid))
    line = "residual pods " + (", ".join(parts) or "?")
    listing = cause.get("listing")
    if isinstance(listing, Mapping):
        line += f", listing {listing.get('fingerprint')} of {listing.get('pods')} pods"
    refused = cause.get("advisor_refused")
    if isinstance(refused, list) and refused:
        line += f"; advisor refused {', '.join(map(str, refused))}"
    return line


@renderer("Tick")
def _balance_round(cause: Mapping[str, Any]) -> str:
    now = cause.get("now")
    return "balance round" + (f" at {format_time(now)}" if isinstance(now, (int, float)) else "")


@renderer("GetEvictPods", "GetAdvices", "GetTopEvictionPods", "ThresholdMet")
def _balancer_rpc(cause: Mapping[str, Any]) -> str:
    taken = [name for name in ("advice", "execution", "eviction") if name in cause]
    return "balancer RPC" + (f", took {', '.join(taken)}" if taken else "")


@renderer("DaemonStarted")
def _daemon_started(cause: Mapping[str, Any]) -> str:
    recovery = cause.get("recovery")
    figures = ""
    if isinstance(recovery, Mapping):
        figures = " " + " ".join(f"{k}={v}" for k, v in recovery.items() if _is_scalar(v))
    return (
        f"qrmd {cause.get('version', '?')} settings {cause.get('settings_fingerprint', '?')}"
        f"{figures}"
    )


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _generic(cause: Mapping[str, Any]) -> str:
    skip = {"rpc", "kind", "command", "handler"}
    scalars = [f"{k}={v}" for k, v in cause.items() if k not in skip and _is_scalar(v) and v != ""][
        :_GENERIC_SCALARS
    ]
    nested = sorted(str(k) for k, v in cause.items() if k not in skip and not _is_scalar(v))
    return " ".join(scalars + ([f"[{', '.join(nested)}]"] if nested else []))
