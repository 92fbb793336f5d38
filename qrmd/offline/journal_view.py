"""How ``qrmd journal show`` and ``stats`` read records: filters, one-line renderings, sums.

A record's cause says which RPC (or tick, or operator command) decided and about which pod and
container; its events say what changed. ``show`` filters on both (DESIGN.md, on-call's
``qrmd journal``):

- ``--pod``/``--container`` keep a record whose cause names that pod/container, or that has an
  event about it (``policy.state.events.event_target``, or for an event of another section, one
  whose data names the pod's UID: a balance round offering it); ``--kind`` keeps records whose cause
  or an event is of that kind, ``--exclude-kind`` leaves them out. When an event filter is
  given, only the matching events are printed — except for a record selected by its cause,
  whose events are all printed (they are the decision).
- ``--since``/``--until`` compare wall times; ``--from-seq``/``--to-seq`` seqs (inclusive).

Nothing here reads files: the command passes records in (``journal.read_records``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from journal import Record
from policy.errors import StateError
from policy.state.codec import EVENT_TYPES, decode_event
from policy.state.events import event_target

__all__ = [
    "JournalSums",
    "RecordFilter",
    "cause_target",
    "format_event",
    "format_time",
    "known_kinds",
    "mentions",
    "parse_time",
    "record_document",
    "record_kinds",
    "sum_records",
]


def parse_time(text: str) -> float:
    """Seconds since the epoch from ``1732924800.5`` or ISO 8601 (no zone means UTC).

    Raises:
        ValueError: neither form; the message shows both.
    """
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"time {text!r} is neither epoch seconds (1732924800) nor ISO 8601 "
            f"(2024-11-30T00:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def format_time(wall_time: float) -> str:
    """A wall time as ISO 8601 UTC with milliseconds: ``2024-11-30T00:00:00.000Z``."""
    moment = dt.datetime.fromtimestamp(wall_time, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def cause_target(cause: dict[Any, Any]) -> tuple[str, str, str]:
    """``(rpc, pod_uid, container_name)`` a cause names ("" when it does not).

    The pod and container are looked up at the top of the cause and in its ``request``.
    """
    # The balancer's causes name their command (``Tick``, ``GetEvictPods``, ``GetAdvices``).
    rpc = str(
        cause.get("rpc") or cause.get("kind") or cause.get("handler") or cause.get("command") or ""
    )
    places = [cause]
    if isinstance(cause.get("request"), dict):
        places.append(cause["request"])
    pod = container = ""
    for place in places:
        pod = pod or _name(place, "pod_uid", "pod")
        container = container or _name(place, "container_name", "container")
    return rpc, pod, container


def _name(place: dict[Any, Any], *keys: str) -> str:
    """The first of ``keys`` whose value is a name; an Allocate's ``pod`` is its phase record
    (``{"phase": ...}``), not a name, and the pod is then named by its ``request``."""
    for key in keys:
        value = place.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _raw_target(raw: Any) -> tuple[str, str] | None:
    try:
        return event_target(decode_event(raw))
    except StateError:
        return None


def _raw_kind(raw: Any) -> str:
    return str(raw.get("kind", "?")) if isinstance(raw, dict) else "?"


def mentions(value: Any, needle: str) -> bool:
    """True when the string ``needle`` is a key or a string value anywhere in ``value``."""
    if isinstance(value, str):
        return value == needle
    if isinstance(value, dict):
        return any(k == needle or mentions(v, needle) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(mentions(item, needle) for item in value)
    return False


def record_kinds(record: Record) -> set[str]:
    """The kinds a record has: its cause's kind and each of its events' kinds."""
    kinds = {_raw_kind(raw) for raw in record.events}
    kinds.add(cause_target(record.cause)[0] or "?")
    return kinds


def known_kinds() -> set[str]:
    """Every event kind this qrmd's codec knows (a journal may hold more, from a newer one)."""
    return set(EVENT_TYPES)


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """What ``show`` keeps (module docstring); None or empty keeps everything.

    ``kinds`` keeps a record whose cause is of one of those kinds (all its events), or the
    events of those kinds; ``exclude_kinds`` then drops a record whose cause is of an excluded
    kind, and the events of excluded kinds (a record left with none of its events is dropped).
    """

    pod: str | None = None
    container: str | None = None
    kinds: frozenset[str] = frozenset()
    exclude_kinds: frozenset[str] = frozenset()
    since: float | None = None
    until: float | None = None

    def _event_matches(self, raw: Any) -> bool:
        if self.kinds and _raw_kind(raw) not in self.kinds:
            return False
        if self.pod is None and self.container is None:
            return True
        target = _raw_target(raw)
        if target is None:
            # An event of another section (a balance round offering the pod for eviction, an
            # advisor response) names pods inside its data, not as its target.
            return self.container is None and self.pod is not None and mentions(raw, self.pod)
        return (self.pod is None or target[0] == self.pod) and (
            self.container is None or target[1] == self.container
        )

    def select(self, record: Record) -> list[Any] | None:
        """The events to print for ``record``, or None when the record is filtered out."""
        if self.since is not None and record.wall_time < self.since:
            return None
        if self.until is not None and record.wall_time > self.until:
            return None
        rpc, pod, container = cause_target(record.cause)
        if (rpc or "?") in self.exclude_kinds:
            return None
        events = self._selected(record, rpc or "?", pod, container)
        if events is None or not self.exclude_kinds:
            return events
        kept = [raw for raw in events if _raw_kind(raw) not in self.exclude_kinds]
        return kept if kept or not events else None

    def _selected(self, record: Record, kind: str, pod: str, container: str) -> list[Any] | None:
        if self.pod is None and self.container is None and not self.kinds:
            return list(record.events)
        by_cause = (
            (not self.kinds or kind in self.kinds)
            and (self.pod is None or pod == self.pod)
            and (self.container is None or container == self.container)
        )
        if by_cause:
            return list(record.events)
        matching = [raw for raw in record.events if self._event_matches(raw)]
        return matching or None


def _compact(value: Any) -> str:
    if isinstance(value, dict) and "kind" in value and len(value) <= 3:
        inner = ", ".join(f"{k}={_compact(v)}" for k, v in value.items() if k != "kind")
        return f"{value['kind']}({inner})" if inner else str(value["kind"])
    if isinstance(value, str):
        return value if value and " " not in value else json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


_ENTRY_FIELDS = ("qos_level", "placement", "owner_pool_name", "request_quantity", "ramp_up")


def format_event(raw: Any) -> str:
    """One event on one line: kind, target, then its fields (a container entry abridged)."""
    if not isinstance(raw, dict):
        return _compact(raw)
    parts = [_raw_kind(raw)]
    target = _raw_target(raw)
    if target is not None:
        parts.append(f"{target[0]}/{target[1]}" if target[1] else target[0])
    for name, value in raw.items():
        if name == "kind" or (target is not None and name in ("pod_uid", "container_name")):
            continue
        if name == "entry" and isinstance(value, dict):
            parts.extend(f"{k}={_compact(value[k])}" for k in _ENTRY_FIELDS if k in value)
        else:
            parts.append(f"{name}={_compact(value)}")
    return " ".join(parts)


def record_document(record: Record, events: list[Any]) -> dict[str, Any]:
    """A record as one JSON object (``show --json``)."""
    return {
        "seq": record.seq,
        "time": format_time(record.wall_time),
        "wall_time": record.wall_time,
        "monotonic_time": record.monotonic_time,
        "schema": record.schema_version,
        "cause": record.cause,
        "events": events,
    }


@dataclass(slots=True)
class JournalSums:
    """What ``stats`` adds up over the records."""

    records: int = 0
    events: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    first_time: float | None = None
    last_time: float | None = None
    events_by_kind: Counter[str] = field(default_factory=Counter)
    records_by_cause: Counter[str] = field(default_factory=Counter)


def sum_records(records: Iterable[Record], sums: JournalSums | None = None) -> JournalSums:
    """Add ``records`` to ``sums`` (a new one by default) and return it.

    Filled in as it goes, so a caller that meets damage mid-way still has the sums so far.
    """
    sums = sums if sums is not None else JournalSums()
    for record in records:
        sums.records += 1
        sums.events += len(record.events)
        if sums.first_seq is None:
            sums.first_seq, sums.first_time = record.seq, record.wall_time
        sums.last_seq, sums.last_time = record.seq, record.wall_time
        sums.events_by_kind.update(_raw_kind(raw) for raw in record.events)
        sums.records_by_cause[cause_target(record.cause)[0] or "?"] += 1
    return sums
