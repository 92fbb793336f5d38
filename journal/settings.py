"""The journal's settings, checked once when it is opened.

Durability (DESIGN.md, Journal) is ``"always"`` — every record is fsynced before ``append``
returns, the default — or ``"none"`` — written before ``append`` returns (a killed process loses
nothing) but never fsynced (a power loss may lose the newest records); for tests and benchmarks.
A value out of range is a ``ValueError`` naming the setting and the value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from journal.retention import Retention

__all__ = ["Durability", "JournalSettings", "check_settings"]

Durability = Literal["always", "none"]


@dataclass(frozen=True, slots=True)
class JournalSettings:
    """How a journal was opened (``Journal.open``'s keyword arguments)."""

    node_name: str
    topology_fingerprint: str
    durability: Durability
    segment_max_bytes: int
    checkpoint_every_records: int
    checkpoint_every_s: float
    retention: Retention


def check_settings(settings: JournalSettings) -> None:
    """Raise ``ValueError`` naming the first setting out of range."""
    if not settings.node_name:
        raise ValueError("journal node_name must not be empty")
    if not settings.topology_fingerprint:
        raise ValueError("journal topology_fingerprint must not be empty")
    if settings.durability not in ("always", "none"):
        raise ValueError(
            f"journal durability must be 'always' or 'none', got {settings.durability!r}"
        )
    if settings.segment_max_bytes < 1024:
        raise ValueError(
            f"journal segment_max_bytes must be >= 1024, got {settings.segment_max_bytes}"
        )
    if settings.checkpoint_every_records < 1:
        raise ValueError(
            "journal checkpoint_every_records must be >= 1, got "
            f"{settings.checkpoint_every_records}"
        )
    if settings.checkpoint_every_s <= 0:
        raise ValueError(
            f"journal checkpoint_every_s must be > 0, got {settings.checkpoint_every_s}"
        )
