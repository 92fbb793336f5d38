"""The simulator's fault modes, and the invalid responses of cpu-policy §11.6 by name.

=================  ==========================================================================
fault              what the simulated advisor does
=================  ==========================================================================
``healthy``        answers everything, streams a result every period
``refuse_add``     answers ``AddContainer`` with INVALID_ARGUMENT (an explicit refusal)
``unavailable``    answers ``AddContainer`` and ``RemovePod`` with UNAVAILABLE
``stall``          keeps the stream open and sends nothing; calls hang until their deadline
``drop_stream``    ends the stream with UNAVAILABLE after each result
``slow``           answers ``AddContainer``/``RemovePod`` after ``slow_s``
``invalid``        sends results that §11.6 rejects (``invalid_kind``, one of INVALID_KINDS)
``flap``           healthy for ``flap_s``, then its stream drops and calls are UNAVAILABLE for
                   ``flap_s``, and so on
=================  ==========================================================================
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import replace
from typing import Final

from policy.cpu.advisor.response import AdvisorResponse, Block, CalculationInfo
from qrmd.sim.advisor.model import SimNode

__all__ = ["INVALID_KINDS", "Fault", "corrupt"]


class Fault(enum.Enum):
    HEALTHY = "healthy"
    REFUSE_ADD = "refuse_add"
    UNAVAILABLE = "unavailable"
    STALL = "stall"
    DROP_STREAM = "drop_stream"
    SLOW = "slow"
    INVALID = "invalid"
    FLAP = "flap"


def _entries(resp: AdvisorResponse) -> dict[str, dict[str, CalculationInfo | None] | None]:
    return {k: None if v is None else dict(v) for k, v in resp.entries.items()}


def _pool(
    name: str, size: int, numa: int = -1, block: str | None = None
) -> dict[str, CalculationInfo | None]:
    return {"": CalculationInfo(name, {numa: (Block(size, block or name),)})}


def _dedicated_count(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    entries["ghost-pod"] = {"c": CalculationInfo("dedicated", {0: (Block(1, "ghost"),)})}
    return AdvisorResponse(entries)


def _missing_dedicated(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    for name, subs in sorted(entries.items()):
        if subs and any(i is not None and i.owner_pool_name == "dedicated" for i in subs.values()):
            entries[name] = {
                k: v for k, v in subs.items() if v is None or v.owner_pool_name != "dedicated"
            }
            entries[f"{name}-twin"] = {"c": CalculationInfo("dedicated", {-1: (Block(1, "twin"),)})}
            break
    return AdvisorResponse(entries)


def _dedicated_size(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    for name, subs in sorted(entries.items()):
        for sub, info in sorted((subs or {}).items()):
            if info is not None and info.owner_pool_name == "dedicated":
                numa, blocks = sorted(info.numa_blocks.items())[0]
                grown = tuple(replace(b, result=b.result + 1) for b in blocks or ())
                entries[name][sub] = CalculationInfo("dedicated", {**info.numa_blocks, numa: grown})  # type: ignore[index]
                return AdvisorResponse(entries)
    return AdvisorResponse(entries)


def _reserve_missing(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    entries.pop("reserve", None)
    return AdvisorResponse(entries)


def _reserve_owner(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    info = resp.info("reserve", "")
    if info is not None:
        entries["reserve"] = {"": CalculationInfo("share", info.numa_blocks)}
    return AdvisorResponse(entries)


def _reserve_blocks(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    info = resp.info("reserve", "")
    if info is not None:
        size = info.total_quantity()
        entries["reserve"] = {
            "": CalculationInfo("reserve", {-1: (Block(size - 1, "r1"), Block(1, "r2"))})
        }
    return AdvisorResponse(entries)


def _reserve_size(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    info = resp.info("reserve", "")
    if info is not None:
        entries["reserve"] = _pool("reserve", info.total_quantity() + 1, block="reserve")
    return AdvisorResponse(entries)


def _block_two_numas(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    entries["twin-a"] = _pool("twin-a", 1, 0, "twin")
    entries["twin-b"] = _pool("twin-b", 1, 1, "twin")
    return AdvisorResponse(entries)


def _block_two_results(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    entries["twin-a"] = _pool("twin-a", 1, -1, "twin")
    entries["twin-b"] = _pool("twin-b", 2, -1, "twin")
    return AdvisorResponse(entries)


def _unknown_numa(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    entries["faraway"] = _pool("faraway", 1, max(node.numa_cpus) + 1)
    return AdvisorResponse(entries)


def _numa_capacity(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    entries["crowded"] = _pool(
        "crowded", node.numa_cpus[min(node.numa_cpus)] + 1, min(node.numa_cpus)
    )
    return AdvisorResponse(entries)


def _total_capacity(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    entries["huge"] = _pool("huge", node.num_cpus + 1)
    return AdvisorResponse(entries)


def _nil_entry(resp: AdvisorResponse, node: SimNode) -> AdvisorResponse:
    entries = _entries(resp)
    entries["nil-entry"] = None
    return AdvisorResponse(entries)


#: Each §11.6 rejection, by name: how to make a valid response fail it.
INVALID_KINDS: Final[dict[str, Callable[[AdvisorResponse, SimNode], AdvisorResponse]]] = {
    "dedicated_count": _dedicated_count,
    "missing_dedicated": _missing_dedicated,
    "dedicated_size": _dedicated_size,
    "reserve_missing": _reserve_missing,
    "reserve_owner": _reserve_owner,
    "reserve_blocks": _reserve_blocks,
    "reserve_size": _reserve_size,
    "block_two_numas": _block_two_numas,
    "block_two_results": _block_two_results,
    "unknown_numa": _unknown_numa,
    "numa_capacity": _numa_capacity,
    "total_capacity": _total_capacity,
    "nil_entry": _nil_entry,
}


def corrupt(resp: AdvisorResponse, kind: str, node: SimNode) -> AdvisorResponse:
    """``resp`` made invalid in the way ``kind`` names.

    Raises:
        ValueError: an unknown kind; the message lists the known ones.
    """
    make = INVALID_KINDS.get(kind)
    if make is None:
        raise ValueError(f"unknown invalid kind {kind!r}; known: {', '.join(INVALID_KINDS)}")
    return make(resp, node)
