"""The balance record and its parts, with the reference's JSON field names (spec §5.1–§5.5).

A *record* (``BalanceInfo``) is what one computed round produces: the raw per-NUMA metrics, the
pressure verdict, the source and destination NUMA nodes, the pod to evict and the pods to
migrate, the status, and two flags set later when the advice and the eviction are taken. Every
value here is immutable; "setting a flag" makes a new record (``dataclasses.replace``).

``to_json`` gives the plain-dict form with Go's field names and order, ``to_json_text`` the exact
text the reference logs (Go number formatting, RFC 3339 ``detectTime``), and ``from_json`` reads
either back, which is how a journaled round or the "last emitted round" of a round file returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from policy.balance.decode import (
    as_bool,
    as_float,
    as_int,
    as_list,
    as_object,
    as_str,
    reject_unknown,
    required,
)
from policy.balance.errors import BalanceError, within
from policy.balance.gojson import check_time, encode, format_time, parse_time

__all__ = [
    "BalanceInfo",
    "BalanceLevel",
    "BalancePod",
    "BalanceStatus",
    "BandwidthLevel",
    "EvictPod",
    "NumaInfo",
    "NumaLatencyInfo",
]


class BalanceStatus(StrEnum):
    """Where a record's round ended (§2, §6.3)."""

    PREPARING = "preparing"
    PREPARE_SUCCESS = "prepareSuccess"
    PREPARE_FAILED = "prepareFailed"


class BalanceLevel(StrEnum):
    """How strongly a round balances; empty until latency pressure is found (§7.4)."""

    NONE = ""
    FORCE = "forceBalance"
    GRACE = "graceBalance"


class BandwidthLevel(StrEnum):
    """The max-latency NUMA's bandwidth relative to the busiest NUMA (§7.6)."""

    NONE = ""
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


@dataclass(frozen=True, slots=True)
class NumaLatencyInfo:
    """One NUMA node's metrics in a round (§5.1)."""

    numa_id: int
    read_latency: float
    read_write_bandwidth: float

    def to_json(self) -> dict[str, object]:
        """``{"NumaID", "ReadLatency", "ReadWriteBandwidth"}``."""
        return {
            "NumaID": self.numa_id,
            "ReadLatency": self.read_latency,
            "ReadWriteBandwidth": self.read_write_bandwidth,
        }

    @classmethod
    def from_json(cls, value: object, where: str) -> NumaLatencyInfo:
        """Decode; raises ``BalanceError`` naming the field."""
        obj = as_object(value, where)
        reject_unknown(obj, ("NumaID", "ReadLatency", "ReadWriteBandwidth"), where)
        return cls(
            numa_id=as_int(required(obj, "NumaID", where), f"{where}.NumaID"),
            read_latency=_metric(obj, "ReadLatency", where),
            read_write_bandwidth=_metric(obj, "ReadWriteBandwidth", where),
        )


@dataclass(frozen=True, slots=True)
class NumaInfo:
    """A candidate or destination NUMA node: its metrics and its distance from the NUMA whose
    distance list built the list (§5.2). Go flattens the embedded metrics into this object."""

    numa_id: int
    read_latency: float
    read_write_bandwidth: float
    distance: int

    @classmethod
    def at(cls, info: NumaLatencyInfo, distance: int) -> NumaInfo:
        """The node of ``info`` seen at ``distance``."""
        return cls(info.numa_id, info.read_latency, info.read_write_bandwidth, distance)

    def to_json(self) -> dict[str, object]:
        """``{"NumaID", "ReadLatency", "ReadWriteBandwidth", "Distance"}``."""
        return {
            "NumaID": self.numa_id,
            "ReadLatency": self.read_latency,
            "ReadWriteBandwidth": self.read_write_bandwidth,
            "Distance": self.distance,
        }

    @classmethod
    def from_json(cls, value: object, where: str) -> NumaInfo:
        """Decode; raises ``BalanceError`` naming the field."""
        obj = as_object(value, where)
        reject_unknown(obj, ("NumaID", "ReadLatency", "ReadWriteBandwidth", "Distance"), where)
        return cls(
            numa_id=as_int(required(obj, "NumaID", where), f"{where}.NumaID"),
            read_latency=_metric(obj, "ReadLatency", where),
            read_write_bandwidth=_metric(obj, "ReadWriteBandwidth", where),
            distance=as_int(required(obj, "Distance", where), f"{where}.Distance"),
        )


@dataclass(frozen=True, slots=True)
class EvictPod:
    """The reclaimed pod a round offers for eviction (§5.3)."""

    namespace: str
    name: str
    uid: str

    def to_json(self) -> dict[str, object]:
        """``{"namespace", "name", "UID"}``."""
        return {"namespace": self.namespace, "name": self.name, "UID": self.uid}

    @classmethod
    def from_json(cls, value: object, where: str) -> EvictPod:
        """Decode; raises ``BalanceError`` naming the field."""
        obj = as_object(value, where)
        reject_unknown(obj, ("namespace", "name", "UID"), where)
        return cls(
            namespace=as_str(required(obj, "namespace", where), f"{where}.namespace"),
            name=as_str(required(obj, "name", where), f"{where}.name"),
            uid=as_str(required(obj, "UID", where), f"{where}.UID"),
        )


@dataclass(frozen=True, slots=True)
class BalancePod:
    """A pod whose anonymous memory on the source NUMA is to be migrated (§5.4).

    ``dest_numas`` is the pod's pool NUMA list, not the advice's destinations.
    """

    namespace: str
    name: str
    uid: str
    containers: tuple[str, ...]
    rss_on_source_numa: float
    dest_numas: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        """``{"namespace", "name", "UID", "containers", "RSSOnSourceNuma", "destNumas"}``."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "UID": self.uid,
            "containers": list(self.containers),
            "RSSOnSourceNuma": self.rss_on_source_numa,
            "destNumas": list(self.dest_numas),
        }

    @classmethod
    def from_json(cls, value: object, where: str) -> BalancePod:
        """Decode; raises ``BalanceError`` naming the field."""
        obj = as_object(value, where)
        keys = ("namespace", "name", "UID", "containers", "RSSOnSourceNuma", "destNumas")
        reject_unknown(obj, keys, where)
        containers = as_list(required(obj, "containers", where), f"{where}.containers")
        dest = as_list(required(obj, "destNumas", where), f"{where}.destNumas")
        return cls(
            namespace=as_str(required(obj, "namespace", where), f"{where}.namespace"),
            name=as_str(required(obj, "name", where), f"{where}.name"),
            uid=as_str(required(obj, "UID", where), f"{where}.UID"),
            containers=tuple(
                as_str(c, f"{where}.containers[{i}]") for i, c in enumerate(containers)
            ),
            rss_on_source_numa=_metric(obj, "RSSOnSourceNuma", where),
            dest_numas=tuple(as_int(n, f"{where}.destNumas[{i}]") for i, n in enumerate(dest)),
        )


_RECORD_KEYS = (
    "evictPods",
    "balancePods",
    "destNumas",
    "needBalance",
    "bandwidthPressure",
    "balanceLevel",
    "totalRSS",
    "maxLatencyNuma",
    "maxBandwidthNuma",
    "rawNumaLatencyInfo",
    "maxLatencyNumaBandwidthLevel",
    "sourceNuma",
    "status",
    "failedReason",
    "detectTime",
    "balanceExecuted",
    "evictExecuted",
)


@dataclass(frozen=True, slots=True)
class BalanceInfo:
    """One balance round's record (§5.5); defaults are the initial values of a new round.

    ``dest_numas`` is None until the destinations are computed, then a tuple (possibly empty).
    ``detect_time`` is the round's start in Unix seconds.
    """

    detect_time: float
    evict_pods: tuple[EvictPod, ...] = ()
    balance_pods: tuple[BalancePod, ...] = ()
    dest_numas: tuple[NumaInfo, ...] | None = None
    need_balance: bool = False
    bandwidth_pressure: bool = False
    balance_level: BalanceLevel = BalanceLevel.NONE
    total_rss: float = 0.0
    max_latency_numa: NumaLatencyInfo | None = None
    max_bandwidth_numa: NumaLatencyInfo | None = None
    raw_numa_latency_info: tuple[NumaLatencyInfo, ...] = ()
    max_latency_numa_bandwidth_level: BandwidthLevel = BandwidthLevel.NONE
    source_numa: NumaLatencyInfo | None = None
    status: BalanceStatus = BalanceStatus.PREPARING
    failed_reason: str = ""
    balance_executed: bool = False
    evict_executed: bool = False

    def __post_init__(self) -> None:
        check_time(self.detect_time, "detectTime")
        if self.evict_pods and self.source_numa is None:
            # The eviction reason names the source NUMA (§9.1); a record cannot offer a pod
            # without one.
            raise BalanceError("a record with evictPods must have a sourceNuma")

    def to_json(self) -> dict[str, object]:
        """The plain-dict form, Go's field names in Go's order (§5.5)."""
        return {
            "evictPods": [p.to_json() for p in self.evict_pods],
            "balancePods": [p.to_json() for p in self.balance_pods],
            "destNumas": None
            if self.dest_numas is None
            else [n.to_json() for n in self.dest_numas],
            "needBalance": self.need_balance,
            "bandwidthPressure": self.bandwidth_pressure,
            "balanceLevel": str(self.balance_level),
            "totalRSS": self.total_rss,
            "maxLatencyNuma": _optional(self.max_latency_numa),
            "maxBandwidthNuma": _optional(self.max_bandwidth_numa),
            "rawNumaLatencyInfo": [n.to_json() for n in self.raw_numa_latency_info],
            "maxLatencyNumaBandwidthLevel": str(self.max_latency_numa_bandwidth_level),
            "sourceNuma": _optional(self.source_numa),
            "status": str(self.status),
            "failedReason": self.failed_reason,
            "detectTime": format_time(self.detect_time),
            "balanceExecuted": self.balance_executed,
            "evictExecuted": self.evict_executed,
        }

    def to_json_text(self) -> str:
        """The record exactly as the reference logs it: compact Go-formatted JSON."""
        return encode(self.to_json())

    @classmethod
    def from_json(cls, value: object, where: str = "record") -> BalanceInfo:
        """Decode the plain-dict form; every field is required, as the reference writes all.

        Raises:
            BalanceError: a missing, unknown or mistyped field, named with its path.
        """
        obj = as_object(value, where)
        reject_unknown(obj, _RECORD_KEYS, where)
        for key in _RECORD_KEYS:
            required(obj, key, where)

        def items(key: str) -> list[object]:
            return as_list(obj[key], f"{where}.{key}")

        def numa(key: str) -> NumaLatencyInfo | None:
            raw = obj[key]
            return None if raw is None else NumaLatencyInfo.from_json(raw, f"{where}.{key}")

        dest = obj["destNumas"]
        try:
            return cls(
                evict_pods=tuple(
                    EvictPod.from_json(p, f"{where}.evictPods[{i}]")
                    for i, p in enumerate(items("evictPods"))
                ),
                balance_pods=tuple(
                    BalancePod.from_json(p, f"{where}.balancePods[{i}]")
                    for i, p in enumerate(items("balancePods"))
                ),
                dest_numas=None
                if dest is None
                else tuple(
                    NumaInfo.from_json(n, f"{where}.destNumas[{i}]")
                    for i, n in enumerate(items("destNumas"))
                ),
                need_balance=as_bool(obj["needBalance"], f"{where}.needBalance"),
                bandwidth_pressure=as_bool(obj["bandwidthPressure"], f"{where}.bandwidthPressure"),
                balance_level=_enum(BalanceLevel, obj["balanceLevel"], f"{where}.balanceLevel"),
                total_rss=as_float(obj["totalRSS"], f"{where}.totalRSS"),
                max_latency_numa=numa("maxLatencyNuma"),
                max_bandwidth_numa=numa("maxBandwidthNuma"),
                raw_numa_latency_info=tuple(
                    NumaLatencyInfo.from_json(n, f"{where}.rawNumaLatencyInfo[{i}]")
                    for i, n in enumerate(items("rawNumaLatencyInfo"))
                ),
                max_latency_numa_bandwidth_level=_enum(
                    BandwidthLevel,
                    obj["maxLatencyNumaBandwidthLevel"],
                    f"{where}.maxLatencyNumaBandwidthLevel",
                ),
                source_numa=numa("sourceNuma"),
                status=_enum(BalanceStatus, obj["status"], f"{where}.status"),
                failed_reason=as_str(obj["failedReason"], f"{where}.failedReason"),
                detect_time=parse_time(obj["detectTime"], f"{where}.detectTime"),
                balance_executed=as_bool(obj["balanceExecuted"], f"{where}.balanceExecuted"),
                evict_executed=as_bool(obj["evictExecuted"], f"{where}.evictExecuted"),
            )
        except BalanceError as exc:
            raise within(where, exc) from None

    def metric_tags(self) -> dict[str, str]:
        """Tags of the round metric ``numa_memory_balance`` (§12), in the reference's order."""
        return {
            "need_balance": _go_bool(self.need_balance),
            "balance_level": str(self.balance_level),
            "bandwidth_pressure": _go_bool(self.bandwidth_pressure),
            "status": str(self.status),
            "bandwidth_level": str(self.max_latency_numa_bandwidth_level),
            "failed_reason": self.failed_reason,
        }


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


def _optional(info: NumaLatencyInfo | None) -> dict[str, object] | None:
    return None if info is None else info.to_json()


def _metric(obj: Mapping[str, object], key: str, where: str) -> float:
    return as_float(required(obj, key, where), f"{where}.{key}")


_E = TypeVar("_E", BalanceLevel, BandwidthLevel, BalanceStatus)


def _enum(kind: type[_E], value: object, where: str) -> _E:
    text = as_str(value, where)
    try:
        return kind(text)
    except ValueError:
        allowed = ", ".join(repr(str(m)) for m in kind)
        raise BalanceError(f"{where}: {text!r} is not one of {allowed}") from None
