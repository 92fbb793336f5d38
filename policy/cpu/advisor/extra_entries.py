"""Katalyst v0.5.47's ``extra_entries``: advice tied to no pool and no container.

Each extra entry is an ``advisorsvc.CalculationInfo``: a cgroup path and a map of control-knob
values. The CPU plugin reads two knobs (``policy_advisor_handler.go`` at tag v0.5.47):

* ``cpu_numa_headroom`` (``applyNUMAHeadroom``, :1302-1334): a JSON object, NUMA id → the CPUs
  reclaimed cores may use there (``cpuadvisor.CPUNUMAHeadroom``, ``map[int]float64``), which
  sys-advisor's ``assembleHeadroom`` sends (``cpu_server.go``:392-415). An entry without a
  result, or without the key, is skipped; each one that has it replaces the headroom, so the
  last one wins. A value that is not such an object fails the response.
* ``cgroup_config`` (``applyCgroupConfigs``): cgroup quotas qrmd does not apply (not
  reproduced, docs/reference-levels.md).

The headroom is what reclaimed cores with NUMA binding are sized by.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Final

from policy.errors import ErrorKind, PolicyError

__all__ = ["CPU_NUMA_HEADROOM", "HeadroomFormatError", "numa_headroom_of"]

#: ``cpuadvisor.ControlKnobKeyCPUNUMAHeadroom`` (``cpuadvisor/types.go``:22 at tag v0.5.47).
CPU_NUMA_HEADROOM: Final = "cpu_numa_headroom"

#: Go's ``strconv.ParseInt`` of a ``map[int]`` JSON key: an optional sign and decimal digits.
_GO_INT_KEY: Final = re.compile(r"[+-]?[0-9]+")
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


class HeadroomFormatError(PolicyError):
    """A ``cpu_numa_headroom`` value that is not a JSON object of NUMA id → number."""

    kind = ErrorKind.INVALID


def numa_headroom_of(
    extra_entries: Sequence[Mapping[str, str] | None],
) -> Mapping[int, float] | None:
    """The NUMA headroom the extra entries carry.

    Args:
        extra_entries: each entry's control-knob values, ``None`` for an entry without a
            calculation result.

    Returns:
        NUMA id → CPUs from the last entry with ``cpu_numa_headroom`` (JSON ``null`` is an
        empty headroom, as Go decodes it); ``None`` when no entry has one.

    Raises:
        HeadroomFormatError: a value that does not decode, with the reference's message.
    """
    found: Mapping[int, float] | None = None
    for values in extra_entries:
        if values is None or CPU_NUMA_HEADROOM not in values:
            continue
        found = _decode(values[CPU_NUMA_HEADROOM])
    return found


def _decode(text: str) -> dict[int, float]:
    try:
        value = json.loads(text)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError(f"cannot unmarshal {type(value).__name__} into map[int]float64")
        return {_numa(key): _cpus(raw, key) for key, raw in value.items()}
    except ValueError as err:
        shown = text if len(text) <= 200 else text[:200] + "…"
        raise HeadroomFormatError(
            f"applyNUMAHeadroom failed with error: unmarshal {CPU_NUMA_HEADROOM}: {shown} "
            f"failed with error: {err}"
        ) from None


def _numa(key: str) -> int:
    if not _GO_INT_KEY.fullmatch(key) or not _INT64_MIN <= int(key) <= _INT64_MAX:
        raise ValueError(f"NUMA id {key!r:.20} is not an int")
    return int(key)


def _cpus(raw: object, key: str) -> float:
    if raw is None:
        return 0.0  # Go leaves a null element at its zero value
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ValueError(f"NUMA {key}: {raw!r:.20} is not a number")
    return float(raw)
