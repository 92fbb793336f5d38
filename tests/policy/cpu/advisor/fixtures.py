"""Builders for advisor-response tests on the spec's example node ((16,2,4), reserve 0,2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policy.cpu.advisor.decision import AdvisorSettings
from policy.cpu.advisor.response import AdvisorResponse, Block, CalculationInfo
from tests.policy.pool_fixtures import CTX

__all__ = ["SETTINGS", "info", "pool", "response"]

SETTINGS = AdvisorSettings(CTX)

#: ``{numa: [(result, block_id), ...] or None}``
NumaSpec = Mapping[int, Sequence[tuple[int, str]] | None]


def info(owner: str, numas: NumaSpec) -> CalculationInfo:
    """A calculation info from ``{numa: [(result, block_id)]}`` (None = a nil NUMA result)."""
    return CalculationInfo(
        owner,
        {
            numa: None if blocks is None else tuple(Block(r, b) for r, b in blocks)
            for numa, blocks in numas.items()
        },
    )


def pool(name: str, size: int, block_id: str | None = None, numa: int = -1) -> dict[str, Any]:
    """A pool entry ``{name: {"": info}}`` with one block."""
    return {name: {"": info(name, {numa: [(size, block_id or f"{name}-block")]})}}


def response(*parts: Mapping[str, Any]) -> AdvisorResponse:
    """A response merging entry maps (later parts win per entry)."""
    entries: dict[str, Any] = {}
    for part in parts:
        for name, subs in part.items():
            if subs is None:
                entries[name] = None
            else:
                entries.setdefault(name, {}).update(subs)
    return AdvisorResponse(entries)
