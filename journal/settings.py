"""The journal's settings, checked once when it is opened.

Durability (DESIGN.md, Journal) is ``"always"`` — every record is fsynced before ``append``
returns, the default — or ``"none"`` — written before ``append`` returns (a killed process loses
nothing) but never fsynced (a power loss may lose the newest records); for tests and benchmarks.
A value out of range is a ``ValueError`` naming the setting and the value.

The defaults are defined here once (retention's beside ``Retention``, in ``journal.retention``);
``Journal.open``, the StateStore's ``StoreConfig`` and the daemon's configuration all take them
from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

from journal.retention import Retention

__all__ = [
    "DEFAULT_CHECKPOINT_EVERY_RECORDS",
    "DEFAULT_CHECKPOINT_EVERY_S",
    "DEFAULT_DURABILITY",
    "DEFAULT_SEGMENT_MAX_BYTES",
    "DURABILITIES",
    "MIN_SEGMENT_MAX_BYTES",
    "Durability",
    "JournalSettings",
    "check_settings",
]

Durability = Literal["always", "none"]
#: Every durability setting, in the order the help text lists them.
DURABILITIES: Final[tuple[Durability, ...]] = get_args(Durability)
#: fsync before acknowledging: nothing acknowledged to kubelet can be lost (DESIGN.md, Journal).
DEFAULT_DURABILITY: Final[Durability] = "always"
#: A new segment starts before one would grow past this.
DEFAULT_SEGMENT_MAX_BYTES: Final = 64 * 1024 * 1024
#: The smallest segment limit accepted: one that holds a header and a few records.
MIN_SEGMENT_MAX_BYTES: Final = 1024
#: A checkpoint after this many records...
DEFAULT_CHECKPOINT_EVERY_RECORDS: Final = 10_000
#: ...or this many seconds since the last one, whichever comes first.
DEFAULT_CHECKPOINT_EVERY_S: Final = 300.0


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
    if settings.durability not in DURABILITIES:
        raise ValueError(
            f"journal durability must be 'always' or 'none', got {settings.durability!r}"
        )
    if settings.segment_max_bytes < MIN_SEGMENT_MAX_BYTES:
        raise ValueError(
            f"journal segment_max_bytes must be >= {MIN_SEGMENT_MAX_BYTES}, "
            f"got {settings.segment_max_bytes}"
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
