"""sys-advisor's calculation result as plain values (cpu-policy §11.1, wire.md §6.3).

A ``ListAndWatchResponse`` maps entry names (a pool name, or a pod uid) to sub-entries (``""``
for a pool, else a container name), each a :class:`CalculationInfo`: the owner pool and, per
NUMA node (``-1`` = "not NUMA-specific"), a list of :class:`Block`. Several references to one
``block_id`` mean the same CPUs (§11.1).

Null values. Go can put a nil message in a map; on the wire that is a map entry with a key and
no value (wire.md §1.1). The wire layer keeps the distinction: ``None`` here is the reference's
nil (a top-level entry, a sub-entry or a NUMA result), an empty map or tuple is an empty
message. The rules of §11.6 say what each null means.

Katalyst v0.5.47 adds ``extra_entries``, advice tied to no pool and no container. qrmd reads
one of them, ``cpu_numa_headroom`` (``policy.cpu.advisor.extra_entries``): the reclaimable CPUs
of each NUMA node, :attr:`AdvisorResponse.numa_headroom`. At v0.5.3 it is never read, so a
v0.5.3 response's journal form is unchanged.

The response is a decision's input, so it is journaled as the record's cause
(:meth:`AdvisorResponse.to_json`, :meth:`AdvisorResponse.from_json`); its
:meth:`AdvisorResponse.fingerprint` is what "the same response as the previous one" compares
(``policy.state.advisor_section``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from policy.errors import ErrorKind, PolicyError

__all__ = [
    "NO_NUMA",
    "POOL_SUB_ENTRY",
    "AdvisorResponse",
    "Block",
    "CalculationInfo",
    "Entries",
    "OverlapTarget",
    "ResponseFormatError",
    "SubEntries",
]

#: The sub-entry name of a pool entry, and the NUMA id of blocks tied to no NUMA node (§11.1).
POOL_SUB_ENTRY: Final = ""
NO_NUMA: Final = -1

#: ``OverlapType`` names (wire.md §6.2), as the reference's ``String()`` prints them.
_OVERLAP_TYPE_NAMES: Final = {0: "OverlapWithPod", 1: "OverlapWithPool"}
_UINT64_MAX: Final = 2**64 - 1
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


class ResponseFormatError(PolicyError):
    """A journaled response that is not well formed; the message names the field."""

    kind = ErrorKind.INVALID


@dataclass(frozen=True, slots=True)
class OverlapTarget:
    """Informational: who else uses a block (ignored by this version, §15.13)."""

    pool_name: str = ""
    pod_uid: str = ""
    container_name: str = ""
    overlap_type: int = 0

    def go_string(self) -> str:
        """The reference's (gogo) ``String()``, which its error messages embed."""
        kind = _OVERLAP_TYPE_NAMES.get(self.overlap_type, str(self.overlap_type))
        return (
            f"&OverlapTarget{{OverlapTargetPoolName:{self.pool_name},"
            f"OverlapTargetPodUid:{self.pod_uid},"
            f"OverlapTargetContainerName:{self.container_name},OverlapType:{kind},}}"
        )


@dataclass(frozen=True, slots=True)
class Block:
    """A quantity of CPUs (``result``) named by ``block_id`` (§11.1)."""

    result: int
    block_id: str
    overlap_targets: tuple[OverlapTarget, ...] = ()

    def go_string(self) -> str:
        """The reference's (gogo) ``String()``, which its error messages embed (§11.6)."""
        targets = "".join(t.go_string() + "," for t in self.overlap_targets)
        return (
            f"&Block{{Result:{self.result},OverlapTargets:[]*OverlapTarget{{{targets}}},"
            f"BlockId:{self.block_id},}}"
        )


@dataclass(frozen=True, slots=True)
class CalculationInfo:
    """One sub-entry's result: its owner pool and its blocks by NUMA id (None = a nil result)."""

    owner_pool_name: str
    numa_blocks: Mapping[int, tuple[Block, ...] | None]

    def __post_init__(self) -> None:
        object.__setattr__(self, "numa_blocks", MappingProxyType(dict(self.numa_blocks)))

    def numa_quantities(self) -> dict[int, int]:
        """CPUs per NUMA id, nil NUMA results skipped (the reference's ``GetNUMAQuantities``)."""
        return {
            numa: sum(block.result for block in blocks)
            for numa, blocks in self.numa_blocks.items()
            if blocks is not None
        }

    def total_quantity(self) -> int:
        """CPUs over every NUMA id (``GetTotalQuantity``)."""
        return sum(self.numa_quantities().values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CalculationInfo):
            return NotImplemented
        return self.owner_pool_name == other.owner_pool_name and dict(self.numa_blocks) == dict(
            other.numa_blocks
        )

    def __hash__(self) -> int:
        return hash((self.owner_pool_name, tuple(sorted(self.numa_blocks.items()))))


#: Sub-entry name → info (None = nil); entry name → sub-entries (None = nil).
SubEntries = Mapping[str, CalculationInfo | None]
Entries = Mapping[str, SubEntries | None]


@dataclass(frozen=True, slots=True, eq=False)
class AdvisorResponse:
    """One ``cpuadvisor.ListAndWatchResponse`` (§11.1).

    Attributes:
        entries: entry name → sub-entries; ``None`` values are the reference's nil messages.
        allow_shared_cores_overlap_reclaimed_cores: ignored at v0.5.3 (§15.13); at v0.5.47
            reclaim may overlap the share-type pools (``policy.cpu.advisor.overlap``).
        numa_headroom: v0.5.47's ``cpu_numa_headroom`` extra entry, NUMA id → reclaimable
            CPUs; empty when the response carries none.
        numa_headroom_sent: the response carried one (possibly empty): the reference replaces
            its stored headroom then, and keeps it otherwise (``applyNUMAHeadroom``).
        asked_snb_entries: for a GetAdvice answer (v0.5.47), the ``(entry, sub-entry)`` keys
            its request sent as shared cores with ``numa_binding``, which the answer is checked
            against (``policy.cpu.advisor.validation.validate_request``); None for ListAndWatch.
    """

    entries: Entries
    allow_shared_cores_overlap_reclaimed_cores: bool = False
    numa_headroom: Mapping[int, float] = field(default_factory=dict)
    numa_headroom_sent: bool = False
    asked_snb_entries: frozenset[tuple[str, str]] | None = None

    def __post_init__(self) -> None:
        frozen = {
            name: None if subs is None else MappingProxyType(dict(subs))
            for name, subs in self.entries.items()
        }
        object.__setattr__(self, "entries", MappingProxyType(frozen))
        object.__setattr__(self, "numa_headroom", MappingProxyType(dict(self.numa_headroom)))
        if self.numa_headroom and not self.numa_headroom_sent:
            object.__setattr__(self, "numa_headroom_sent", True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AdvisorResponse):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash(self.fingerprint())

    def info(self, entry: str, sub_entry: str) -> CalculationInfo | None:
        """The info at ``(entry, sub_entry)``; None when absent or nil."""
        subs = self.entries.get(entry)
        return None if subs is None else subs.get(sub_entry)

    def walk(self) -> list[tuple[str, str, CalculationInfo]]:
        """Every non-nil ``(entry, sub_entry, info)``, by entry then sub-entry name.

        The reference walks Go maps in random order; sorting makes every rule that depends
        on the order (the first error reported, §15.11) deterministic.
        """
        out = []
        for name in sorted(self.entries):
            subs = self.entries[name]
            if subs is None:
                continue
            for sub in sorted(subs):
                found = subs[sub]
                if found is not None:
                    out.append((name, sub, found))
        return out

    # -- journal form ----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The response as msgpack-able primitives (NUMA ids as decimal strings, as msgpack
        maps from a journal are read back with string keys only). The NUMA headroom is
        written only when the response carried one, so a v0.5.3 response's form is as it was."""
        out: dict[str, Any] = {
            "entries": {
                name: None
                if subs is None
                else {sub: None if i is None else _info_json(i) for sub, i in sorted(subs.items())}
                for name, subs in sorted(self.entries.items())
            },
            "allow_shared_cores_overlap_reclaimed_cores": (
                self.allow_shared_cores_overlap_reclaimed_cores
            ),
        }
        if self.numa_headroom_sent:
            out["numa_headroom"] = {
                str(numa): value for numa, value in sorted(self.numa_headroom.items())
            }
        if self.asked_snb_entries is not None:
            out["asked_snb_entries"] = [list(key) for key in sorted(self.asked_snb_entries)]
        return out

    @classmethod
    def from_json(cls, value: object) -> AdvisorResponse:
        """The response :meth:`to_json` wrote.

        Raises:
            ResponseFormatError: a malformed value; the message names the field.
        """
        items = _dict(value, "response")
        _only(
            items,
            (
                "entries",
                "allow_shared_cores_overlap_reclaimed_cores",
                "numa_headroom",
                "asked_snb_entries",
            ),
            "response",
        )
        allow = items.get("allow_shared_cores_overlap_reclaimed_cores", False)
        if not isinstance(allow, bool):
            raise ResponseFormatError("response.allow_shared_cores_overlap_reclaimed_cores: bool")
        headroom_sent = "numa_headroom" in items
        headroom = _headroom_from_json(items.get("numa_headroom", {}))
        entries: dict[str, SubEntries | None] = {}
        for name, subs in _dict(items.get("entries", {}), "response.entries").items():
            where = f"response.entries[{name!r}]"
            if subs is None:
                entries[_str(name, where)] = None
                continue
            entries[_str(name, where)] = {
                _str(sub, f"{where} key"): None
                if raw is None
                else _info_from_json(raw, f"{where}[{sub!r}]")
                for sub, raw in _dict(subs, where).items()
            }
        asked = (
            _asked_from_json(items["asked_snb_entries"]) if "asked_snb_entries" in items else None
        )
        return cls(entries, allow, headroom, headroom_sent, asked)

    def fingerprint(self) -> str:
        """A digest of the content with block ids renamed by first use.

        sys-advisor v0.5.3 names every block with a fresh UUID in every result
        (``NewBlock(size, "")``), so two results that say the same thing differ in their ids
        only. The ids mean nothing but "the same CPUs" (§11.1), so they are renamed ``#0``,
        ``#1``... in the order the sorted walk meets them: equal fingerprints mean equal pools,
        sizes and sharing. Coalescing also requires the same outcome and no CPU change
        (``policy.cpu.advisor.decision``), so a renaming that changes a tie-break cannot hide
        a change. Map order does not matter either.
        """
        names: dict[str, str] = {}
        data = self.to_json()
        for subs in (data["entries"][name] for name in sorted(data["entries"])):
            for sub in sorted(subs or {}):
                info = subs[sub]
                if info is None:
                    continue
                for numa in sorted(info["numas"], key=int):
                    for block in info["numas"][numa] or ():
                        block_id = block["block_id"]
                        block["block_id"] = names.setdefault(block_id, f"#{len(names)}")
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _asked_from_json(value: object) -> frozenset[tuple[str, str]]:
    where = "response.asked_snb_entries"
    if not isinstance(value, list):
        raise ResponseFormatError(f"{where}: expected a list")
    keys = []
    for i, raw in enumerate(value):
        if not isinstance(raw, list) or len(raw) != 2 or not all(isinstance(x, str) for x in raw):
            raise ResponseFormatError(f"{where}[{i}]: expected [entry, sub-entry]")
        keys.append((raw[0], raw[1]))
    return frozenset(keys)


def _headroom_from_json(value: object) -> dict[int, float]:
    out = {}
    for key, raw in _dict(value, "response.numa_headroom").items():
        try:
            numa = int(_str(key, "response.numa_headroom key"))
        except ValueError:
            raise ResponseFormatError(
                f"response.numa_headroom: NUMA id {key!r:.20} is not a number"
            ) from None
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ResponseFormatError(f"response.numa_headroom[{numa}]: expected a number")
        out[numa] = float(raw)
    return out


def _info_json(info: CalculationInfo) -> dict[str, Any]:
    return {
        "owner_pool_name": info.owner_pool_name,
        "numas": {
            str(numa): None
            if blocks is None
            else [
                {
                    "result": b.result,
                    "block_id": b.block_id,
                    "overlap_targets": [
                        [t.pool_name, t.pod_uid, t.container_name, t.overlap_type]
                        for t in b.overlap_targets
                    ],
                }
                for b in blocks
            ]
            for numa, blocks in sorted(info.numa_blocks.items())
        },
    }


def _info_from_json(value: object, where: str) -> CalculationInfo:
    items = _dict(value, where)
    _only(items, ("owner_pool_name", "numas"), where)
    owner = _str(items.get("owner_pool_name", ""), f"{where}.owner_pool_name")
    numas: dict[int, tuple[Block, ...] | None] = {}
    for key, raw in _dict(items.get("numas", {}), f"{where}.numas").items():
        try:
            numa = int(_str(key, f"{where}.numas key"))
        except ValueError:
            raise ResponseFormatError(
                f"{where}.numas: NUMA id {key!r:.20} is not a number"
            ) from None
        if not _INT64_MIN <= numa <= _INT64_MAX:
            raise ResponseFormatError(f"{where}.numas: NUMA id {numa} is not an int64")
        if raw is None:
            numas[numa] = None
            continue
        if not isinstance(raw, list):
            raise ResponseFormatError(f"{where}.numas[{numa}]: expected a list of blocks")
        numas[numa] = tuple(
            _block_from_json(b, f"{where}.numas[{numa}][{i}]") for i, b in enumerate(raw)
        )
    return CalculationInfo(owner, numas)


def _block_from_json(value: object, where: str) -> Block:
    items = _dict(value, where)
    _only(items, ("result", "block_id", "overlap_targets"), where)
    result = items.get("result", 0)
    if isinstance(result, bool) or not isinstance(result, int) or not 0 <= result <= _UINT64_MAX:
        raise ResponseFormatError(f"{where}.result: expected a uint64, got {result!r:.30}")
    targets = []
    raw_targets = items.get("overlap_targets", [])
    if not isinstance(raw_targets, list):
        raise ResponseFormatError(f"{where}.overlap_targets: expected a list")
    for i, raw in enumerate(raw_targets):
        if (
            not isinstance(raw, list)
            or len(raw) != 4
            or not all(isinstance(x, str) for x in raw[:3])
            or isinstance(raw[3], bool)
            or not isinstance(raw[3], int)
        ):
            raise ResponseFormatError(
                f"{where}.overlap_targets[{i}]: expected [pool, pod, container, type]"
            )
        targets.append(OverlapTarget(raw[0], raw[1], raw[2], raw[3]))
    return Block(result, _str(items.get("block_id", ""), f"{where}.block_id"), tuple(targets))


def _dict(value: object, where: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise ResponseFormatError(f"{where}: expected a map, got {type(value).__name__}")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ResponseFormatError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _only(items: Mapping[Any, Any], allowed: tuple[str, ...], where: str) -> None:
    extra = sorted(repr(k) for k in items if k not in allowed)
    if extra:
        raise ResponseFormatError(f"{where}: unknown field {', '.join(extra):.80}")
