"""The ``cpu_pressure`` section's events and value as msgpack-able primitives, and back.

The format (part of ``policy.state.codec``'s schema):

* a sample is ``[time, value, upper_bound, lower_bound]`` (numbers);
* a ring is ``{"max_len": N, "samples": [SAMPLE, ...]}``, oldest sample first;
* ``LoadSamplesCollected`` is ``{"time", "ring_size", "expired": [[entry, container], ...],
  "containers": [[pod_uid, container, SAMPLE], ...], "pools": [[pool, SAMPLE], ...]}``;
* ``LoadHistoryCleared`` is ``{"reason": STR}``, ``LoadEvictionPoolSet`` ``{"pool": STR}``,
  ``LoadEvictionOffered`` ``{"time", "pool", "pod_uids": [STR]}``, ``SuppressionTimersSet``
  ``{"since": [[key, time]], "evicted": [[key, reason]]}``;
* the section is ``{"pools": {pool: RING}, "containers": [[pod_uid, container, RING]],
  "eviction_pool": STR, "last_eviction_time": time or None, "tolerance_since": {key: time}}``.

Decoding raises ``CodecError`` naming the field, and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import immutables

from policy.decision import Event
from policy.errors import CodecError, StateError
from policy.state.pressure.events import (
    LoadEvictionOffered,
    LoadEvictionPoolSet,
    LoadHistoryCleared,
    LoadSamplesCollected,
    PressureEvent,
    SuppressionTimersSet,
)
from policy.state.pressure.history import LoadSample, MetricRing, PressureHistory
from policy.topology.model import CPUTopology

__all__ = [
    "decode_pressure_event",
    "decode_pressure_section",
    "encode_pressure_event",
    "encode_pressure_section",
]

_SECTION_FIELDS = ("pools", "containers", "eviction_pool", "last_eviction_time", "tolerance_since")


def encode_pressure_event(event: Event) -> dict[str, Any]:
    """A ``cpu_pressure`` event's fields as primitives (without its ``kind``).

    Raises:
        CodecError: not an event of this section.
    """
    match event:
        case LoadSamplesCollected(time=t, ring_size=size, expired=gone, containers=cs, pools=ps):
            return {
                "time": t,
                "ring_size": size,
                "expired": [[entry, name] for entry, name in gone],
                "containers": [[pod, name, _sample(s)] for pod, name, s in cs],
                "pools": [[pool, _sample(s)] for pool, s in ps],
            }
        case LoadHistoryCleared(reason=reason):
            return {"reason": reason}
        case LoadEvictionPoolSet(pool=pool):
            return {"pool": pool}
        case LoadEvictionOffered(time=t, pool=pool, pod_uids=uids):
            return {"time": t, "pool": pool, "pod_uids": list(uids)}
        case SuppressionTimersSet(since=since, evicted=evicted):
            return {
                "since": [[key, t] for key, t in since],
                "evicted": [[key, reason] for key, reason in evicted],
            }
    raise CodecError(f"{type(event).__name__} is not a cpu_pressure event")


def decode_pressure_event(cls: type[Event], fields: Mapping[str, Any], where: str) -> PressureEvent:
    """The ``cpu_pressure`` event of type ``cls`` with these fields (their names checked).

    Raises:
        CodecError: a field is malformed; the message names it.
    """
    if cls is LoadSamplesCollected:
        return LoadSamplesCollected(
            time=_number(fields["time"], f"{where}.time"),
            ring_size=_ring_size(fields["ring_size"], f"{where}.ring_size"),
            expired=tuple(
                (_str(e, f"{where}.expired[{i}][0]"), _str(c, f"{where}.expired[{i}][1]"))
                for i, (e, c) in enumerate(_rows(fields["expired"], 2, f"{where}.expired"))
            ),
            containers=tuple(
                (
                    _str(pod, f"{where}.containers[{i}][0]"),
                    _str(name, f"{where}.containers[{i}][1]"),
                    _decode_sample(s, f"{where}.containers[{i}][2]"),
                )
                for i, (pod, name, s) in enumerate(
                    _rows(fields["containers"], 3, f"{where}.containers")
                )
            ),
            pools=tuple(
                (_str(pool, f"{where}.pools[{i}][0]"), _decode_sample(s, f"{where}.pools[{i}][1]"))
                for i, (pool, s) in enumerate(_rows(fields["pools"], 2, f"{where}.pools"))
            ),
        )
    if cls is LoadHistoryCleared:
        return LoadHistoryCleared(_str(fields["reason"], f"{where}.reason"))
    if cls is LoadEvictionPoolSet:
        return LoadEvictionPoolSet(_str(fields["pool"], f"{where}.pool"))
    if cls is LoadEvictionOffered:
        uids = fields["pod_uids"]
        if not isinstance(uids, list):
            raise CodecError(f"{where}.pod_uids: expected a list, got {type(uids).__name__}")
        return LoadEvictionOffered(
            time=_number(fields["time"], f"{where}.time"),
            pool=_str(fields["pool"], f"{where}.pool"),
            pod_uids=tuple(_str(u, f"{where}.pod_uids[{i}]") for i, u in enumerate(uids)),
        )
    if cls is SuppressionTimersSet:
        return SuppressionTimersSet(
            since=tuple(
                (_str(k, f"{where}.since[{i}][0]"), _number(t, f"{where}.since[{i}][1]"))
                for i, (k, t) in enumerate(_rows(fields["since"], 2, f"{where}.since"))
            ),
            evicted=tuple(
                (_str(k, f"{where}.evicted[{i}][0]"), _str(r, f"{where}.evicted[{i}][1]"))
                for i, (k, r) in enumerate(_rows(fields["evicted"], 2, f"{where}.evicted"))
            ),
        )
    raise CodecError(f"{where}: {cls.__name__} is not a cpu_pressure event")


def encode_pressure_section(history: PressureHistory) -> dict[str, Any]:
    """The section as primitives (rings in key order, so equal states encode equally)."""
    return {
        "pools": {pool: _ring(history.pool_rings[pool]) for pool in sorted(history.pool_rings)},
        "containers": [
            [pod, name, _ring(history.container_rings[(pod, name)])]
            for pod, name in sorted(history.container_rings)
        ],
        "eviction_pool": history.eviction_pool,
        "last_eviction_time": history.last_eviction_time,
        "tolerance_since": dict(sorted(history.tolerance_since.items())),
    }


def decode_pressure_section(data: object, topology: CPUTopology) -> PressureHistory:
    """The section a dict from :func:`encode_pressure_section` describes.

    Args:
        data: the encoded section.
        topology: unused; every section decoder takes the node's topology.

    Raises:
        CodecError: malformed; the message names the field.
    """
    del topology
    where = "sections.cpu_pressure"
    if not isinstance(data, dict) or set(data) != set(_SECTION_FIELDS):
        raise CodecError(f"{where}: expected a map with exactly the keys {list(_SECTION_FIELDS)}")
    pools = _map(data["pools"], f"{where}.pools")
    containers = _rows(data["containers"], 3, f"{where}.containers")
    last = data["last_eviction_time"]
    tolerance = _map(data["tolerance_since"], f"{where}.tolerance_since")
    return PressureHistory(
        pool_rings=immutables.Map(
            {
                _str(p, f"{where}.pools key"): _decode_ring(r, f"{where}.pools.{p}")
                for p, r in pools.items()
            }
        ),
        container_rings=immutables.Map(
            {
                (
                    _str(pod, f"{where}.containers[{i}][0]"),
                    _str(name, f"{where}.containers[{i}][1]"),
                ): _decode_ring(ring, f"{where}.containers[{i}][2]")
                for i, (pod, name, ring) in enumerate(containers)
            }
        ),
        eviction_pool=_str(data["eviction_pool"], f"{where}.eviction_pool"),
        last_eviction_time=None if last is None else _number(last, f"{where}.last_eviction_time"),
        tolerance_since=immutables.Map(
            {
                _str(k, f"{where}.tolerance_since key"): _number(t, f"{where}.tolerance_since.{k}")
                for k, t in tolerance.items()
            }
        ),
    )


# -- parts -----------------------------------------------------------------------------------


def _sample(sample: LoadSample) -> list[float]:
    return [sample.time, sample.value, sample.upper_bound, sample.lower_bound]


def _decode_sample(value: object, where: str) -> LoadSample:
    if not isinstance(value, list) or len(value) != 4:
        raise CodecError(f"{where}: expected [time, value, upper_bound, lower_bound]")
    t, v, upper, lower = (_number(x, f"{where}[{i}]") for i, x in enumerate(value))
    return LoadSample(t, v, upper, lower)


def _ring(ring: MetricRing) -> dict[str, Any]:
    return {"max_len": ring.max_len, "samples": [_sample(s) for s in ring.samples]}


def _decode_ring(value: object, where: str) -> MetricRing:
    if not isinstance(value, dict) or set(value) != {"max_len", "samples"}:
        raise CodecError(f"{where}: expected a map with exactly the keys max_len, samples")
    samples = value["samples"]
    if not isinstance(samples, list):
        raise CodecError(f"{where}.samples: expected a list, got {type(samples).__name__}")
    try:
        return MetricRing(
            _ring_size(value["max_len"], f"{where}.max_len"),
            tuple(_decode_sample(s, f"{where}.samples[{i}]") for i, s in enumerate(samples)),
        )
    except CodecError:
        raise
    except StateError as err:
        raise CodecError(f"{where}: {err}") from None


def _rows(value: object, width: int, where: str) -> list[list[Any]]:
    if not isinstance(value, list):
        raise CodecError(f"{where}: expected a list, got {type(value).__name__}")
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != width:
            raise CodecError(f"{where}[{i}]: expected a list of {width} items")
    return value


def _map(value: object, where: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise CodecError(f"{where}: expected a map, got {type(value).__name__}")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise CodecError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CodecError(f"{where}: expected a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise CodecError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _ring_size(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise CodecError(f"{where}: expected a ring size from 1 to 1000000, got {value!r:.40}")
    return value
