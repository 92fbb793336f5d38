"""The memory advice a stored record yields (spec memory-balancer §5.6, §5.7, §8).

A record yields an advice only if it needs balance, succeeded, has balance pods and
destinations, and its advice was not taken yet (§8 step 2). The advice names the source, the
destinations in order, one entry per container of each balance pod (pod order, then pod-spec
container order) with that pod's pool NUMA list, the total RSS and the fixed threshold 0.7.

Its text is compact JSON with the reference's field order and Go's number formatting, so it is
byte-identical to the reference's; ``from_json`` reads it back for the executor (§11 step 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from policy.balance.constants import ADVICE_KEY, MIGRATE_PAGES_THRESHOLD
from policy.balance.decode import (
    as_float,
    as_int,
    as_list,
    as_object,
    as_str,
    reject_unknown,
    required,
)
from policy.balance.gojson import encode
from policy.balance.record import BalanceInfo, BalanceStatus

__all__ = ["ExtraMemoryAdvice", "MemoryAdvice", "MigrateContainer", "advice_for", "extra_entries"]


@dataclass(frozen=True, slots=True)
class MigrateContainer:
    """One container whose pages on the source NUMA are to be migrated."""

    pod_uid: str
    container_name: str
    dest_numa_list: tuple[int, ...]

    def to_json(self) -> dict[str, object]:
        """``{"podUID", "containerName", "destNumaList"}``."""
        return {
            "podUID": self.pod_uid,
            "containerName": self.container_name,
            "destNumaList": list(self.dest_numa_list),
        }


@dataclass(frozen=True, slots=True)
class MemoryAdvice:
    """The ``balance_numa_memory`` advice (``NumaMemoryBalanceAdvice``, §5.6)."""

    dest_numa_list: tuple[int, ...]
    source_numa: int
    migrate_containers: tuple[MigrateContainer, ...]
    total_rss: float
    threshold: float = MIGRATE_PAGES_THRESHOLD

    def to_json(self) -> dict[str, object]:
        """The plain-dict form, fields in the reference's order."""
        return {
            "destNumaList": list(self.dest_numa_list),
            "sourceNuma": self.source_numa,
            "migrateContainers": [c.to_json() for c in self.migrate_containers],
            "totalRSS": self.total_rss,
            "threshold": self.threshold,
        }

    def to_json_text(self) -> str:
        """The advice string exactly as the reference sends it."""
        return encode(self.to_json())

    @classmethod
    def from_json(cls, value: object, where: str = "advice") -> MemoryAdvice:
        """Decode the plain-dict form (the parsed advice string).

        Raises:
            BalanceError: a missing, unknown or mistyped field, named with its path.
        """
        obj = as_object(value, where)
        keys = ("destNumaList", "sourceNuma", "migrateContainers", "totalRSS", "threshold")
        reject_unknown(obj, keys, where)
        containers: list[MigrateContainer] = []
        for i, raw in enumerate(
            as_list(required(obj, "migrateContainers", where), f"{where}.migrateContainers")
        ):
            at = f"{where}.migrateContainers[{i}]"
            c = as_object(raw, at)
            reject_unknown(c, ("podUID", "containerName", "destNumaList"), at)
            containers.append(
                MigrateContainer(
                    pod_uid=as_str(required(c, "podUID", at), f"{at}.podUID"),
                    container_name=as_str(required(c, "containerName", at), f"{at}.containerName"),
                    dest_numa_list=_ids(required(c, "destNumaList", at), f"{at}.destNumaList"),
                )
            )
        return cls(
            dest_numa_list=_ids(required(obj, "destNumaList", where), f"{where}.destNumaList"),
            source_numa=as_int(required(obj, "sourceNuma", where), f"{where}.sourceNuma"),
            migrate_containers=tuple(containers),
            total_rss=as_float(required(obj, "totalRSS", where), f"{where}.totalRSS"),
            threshold=as_float(required(obj, "threshold", where), f"{where}.threshold"),
        )


def _ids(value: object, where: str) -> tuple[int, ...]:
    return tuple(as_int(n, f"{where}[{i}]") for i, n in enumerate(as_list(value, where)))


def advice_for(record: BalanceInfo | None) -> MemoryAdvice | None:
    """The advice ``GetAdvices`` emits for the current record, or None (§8 steps 1–3).

    Args:
        record: the stored record; None before the first stored round.

    Returns:
        None unless the record needs balance, is ``prepareSuccess``, has balance pods and
        destinations, and its advice has not been taken.
    """
    if (
        record is None
        or not record.need_balance
        or record.status is not BalanceStatus.PREPARE_SUCCESS
        or not record.balance_pods
        or not record.dest_numas
        or record.balance_executed
        or record.source_numa is None
    ):
        return None
    return MemoryAdvice(
        dest_numa_list=tuple(n.numa_id for n in record.dest_numas),
        source_numa=record.source_numa.numa_id,
        migrate_containers=tuple(
            MigrateContainer(pod.uid, container, pod.dest_numas)
            for pod in record.balance_pods
            for container in pod.containers
        ),
        total_rss=record.total_rss,
    )


@dataclass(frozen=True, slots=True)
class ExtraMemoryAdvice:
    """An ``ExtraEntries`` item of the advisor result (§5.7)."""

    cgroup_path: str
    values: Mapping[str, str]


def extra_entries(advice: MemoryAdvice | None) -> tuple[ExtraMemoryAdvice, ...]:
    """The advisor result's extra entries: none, or one with the advice under its key (§5.7)."""
    if advice is None:
        return ()
    return (ExtraMemoryAdvice("", MappingProxyType({ADVICE_KEY: advice.to_json_text()})),)
