"""The journal's retention settings of ``qrmd run``: ``--journal-retention-size`` and
``--journal-retention-age`` (``JOURNAL_OPTIONS``, part of ``qrmd.config.OPTIONS``; DESIGN.md
"Journal": old segments are kept for forensics up to a retention limit).

Recovery always keeps what it needs: the two newest checkpoints and every record after the
older of them (``journal.retention``, rule 1). These two limits bound only what is kept
beyond that, for ``qrmd journal`` on a copied journal: the oldest segments and checkpoints
go first while they together exceed the size, or while the oldest is older than the age.
``none`` lifts a limit. The defaults are ``journal.Retention``'s own (the help shows them as
``256Mi`` and ``7d``; a test checks that these parse to the journal's values).

Sizes are bytes, with an optional binary or decimal unit: ``268435456``, ``256Mi``, ``1G``,
``512KiB``; ages are durations (``7d``, ``36h``, ``90m``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Final

from journal import (
    DEFAULT_CHECKPOINT_EVERY_RECORDS,
    DEFAULT_CHECKPOINT_EVERY_S,
    DEFAULT_DURABILITY,
    DEFAULT_RETENTION_MAX_AGE_S,
    DEFAULT_RETENTION_MAX_BYTES,
    DURABILITIES,
    Durability,
    Retention,
)
from policy.state.checkpoint_form import (
    CHECKPOINT_FORMS,
    DEFAULT_CHECKPOINT_FORM,
    CheckpointForm,
)
from qrmd.config_values import (
    Option,
    Socket,
    choice,
    count,
    duration,
    nonempty,
    parse_duration,
    single_value,
)
from qrmd.store.takeover_settings import TakeoverSettings

__all__ = [
    "DEFAULT_RETENTION_AGE",
    "DEFAULT_RETENTION_SIZE",
    "DEFAULT_STATE_DIR",
    "JOURNAL_OPTIONS",
    "MIN_CHECKPOINT_EVERY_S",
    "STORE_OPTIONS",
    "StoreSettings",
    "journal_retention",
    "retention_age",
    "retention_size",
]

DEFAULT_STATE_DIR: Final = "/var/lib/qrmd"
#: A checkpoint rewrites the whole state: more often than this is a mistake, not a setting.
MIN_CHECKPOINT_EVERY_S: Final = 1.0
DEFAULT_RETENTION_SIZE: Final = "256Mi"
DEFAULT_RETENTION_AGE: Final = "7d"

_UNITS: Final = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "ki": 1 << 10,
    "kib": 1 << 10,
    "mi": 1 << 20,
    "mib": 1 << 20,
    "gi": 1 << 30,
    "gib": 1 << 30,
    "ti": 1 << 40,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]*)")
_DAY_S: Final = 86400.0


def retention_size(raw: object) -> int | None:
    """``--journal-retention-size``: bytes (module docstring for the units), or ``none``.

    Raises:
        ValueError: not a size.
    """
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 0:
            raise ValueError(f"{raw} bytes is negative")
        return raw
    text = single_value(raw).strip()
    if text.lower() == "none":
        return None
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size (use 268435456, 256Mi, 1G or none)")
    return int(float(match.group(1)) * _UNITS[unit])


def retention_age(raw: object) -> float | None:
    """``--journal-retention-age``: a duration (``7d``, ``36h``; a config file's number is
    seconds), or ``none``.

    Raises:
        ValueError: not a duration.
    """
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        if not (math.isfinite(raw) and raw >= 0):
            raise ValueError(f"{raw!r} s must be 0 or more")
        return float(raw)
    text = single_value(raw).strip()
    if text.lower() == "none":
        return None
    # Days are the natural unit of an age; the shared duration parser stops at hours.
    days = re.fullmatch(r"(\d+(?:\.\d+)?)d", text)
    if days:
        return float(days.group(1)) * _DAY_S
    return parse_duration(text)


#: The retention options of ``qrmd run``; fields of ``DaemonConfig``.
JOURNAL_OPTIONS: tuple[Option, ...] = (
    Option("journal-retention-size", "journal_retention_max_bytes", retention_size,
           DEFAULT_RETENTION_SIZE,
           "old journal segments and checkpoints kept for forensics beyond what recovery "
           "needs, at most this many bytes together (256Mi, 1G, none)",
           "none (the reference keeps no history)", "SIZE|none"),
    Option("journal-retention-age", "journal_retention_max_age_s", retention_age,
           DEFAULT_RETENTION_AGE,
           "old journal segments and checkpoints beyond what recovery needs are deleted once "
           "older than this (7d, 36h, none)",
           "none (the reference keeps no history)", "DURATION|none"),
)  # fmt: skip


def journal_retention(max_bytes: int | None, max_age_s: float | None) -> Retention:
    """The journal's ``Retention`` of the two settings."""
    return Retention(max_bytes=max_bytes, max_age_s=max_age_s)


def _checkpoint_interval(raw: object) -> float:
    value = duration(raw)
    if value < MIN_CHECKPOINT_EVERY_S:
        raise ValueError(f"{raw!r} is shorter than the minimum {MIN_CHECKPOINT_EVERY_S:g}s")
    return value


#: The state store's options: where the journal is, how it is synced and checkpointed, whose
#: node it is, and its retention; fields of ``DaemonConfig``.
STORE_OPTIONS: tuple[Option, ...] = (
    Option("state-dir", "state_dir", nonempty, DEFAULT_STATE_DIR,
           "directory of the journal and its checkpoints", "--qrm-state-dir", "DIR"),
    Option("durability", "durability", choice(*DURABILITIES), DEFAULT_DURABILITY,
           "'always' fsyncs each record before answering kubelet; 'none' does not "
           "(a killed process loses nothing, a power loss may)",
           "none (the reference rewrites a state file)", "|".join(DURABILITIES)),
    Option("checkpoint-every-records", "checkpoint_every_records", count(1),
           str(DEFAULT_CHECKPOINT_EVERY_RECORDS),
           "write a checkpoint (the whole state) after this many journal records, or after "
           "--checkpoint-every, whichever comes first",
           "none (the reference rewrites its state file on every change)", "N"),
    Option("checkpoint-form", "checkpoint_form", choice(*CHECKPOINT_FORMS),
           DEFAULT_CHECKPOINT_FORM,
           "'entries' before a rollback, else 'columns': how checkpoints hold the containers; "
           "'entries' is one map per container, the form qrmd releases before the columns form "
           "read (run with it and stop with SIGTERM, which writes a checkpoint, before rolling "
           "back; docs/running.md)",
           "none (the reference rewrites a state file)", "|".join(CHECKPOINT_FORMS)),
    Option("checkpoint-every", "checkpoint_every_s", _checkpoint_interval, "5m",
           "write a checkpoint this long after the last one once a record is not in one, "
           "even on an idle node (at least 1s)",
           "none (the reference rewrites its state file on every change)", "DURATION"),
    Option("node-name", "node_name", nonempty, "$NODE_NAME, else this host's name",
           "node name written into the journal, checked when it is reopened", "", "NAME"),
    *JOURNAL_OPTIONS,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """The state store's settings: its option rows (``STORE_OPTIONS``) and the takeover's
    (``TAKEOVER_OPTIONS``), each the ``DaemonConfig`` field of the same name
    (``qrmd.config_values.settings_of``).

    Attributes:
        state_dir: journal and checkpoints.
        node_name: the journal's node name.
        durability: ``always`` (fsync before acknowledging) or ``none``.
        checkpoint_every_records: a checkpoint after this many journal records...
        checkpoint_every_s: ...or this many seconds, whichever first (ticked on an idle node).
        checkpoint_form: how checkpoints hold the containers (``columns``, or ``entries`` for
            a rollback; ``policy.state.checkpoint_form``).
        journal_retention_max_bytes: forensic history kept, in bytes; None: no limit.
        journal_retention_max_age_s: forensic history older than this is deleted; None: never.
        takeover: what to do with katalyst-agent's checkpoint.
    """

    state_dir: str = DEFAULT_STATE_DIR
    node_name: str = ""
    durability: Durability = DEFAULT_DURABILITY
    checkpoint_every_records: int = DEFAULT_CHECKPOINT_EVERY_RECORDS
    checkpoint_every_s: float = DEFAULT_CHECKPOINT_EVERY_S
    checkpoint_form: CheckpointForm = DEFAULT_CHECKPOINT_FORM
    journal_retention_max_bytes: int | None = DEFAULT_RETENTION_MAX_BYTES
    journal_retention_max_age_s: float | None = DEFAULT_RETENTION_MAX_AGE_S
    takeover: TakeoverSettings = field(default_factory=TakeoverSettings)

    @property
    def enabled(self) -> bool:
        """The store always runs: every other subsystem commits through it."""
        return True

    def sockets(self) -> tuple[Socket, ...]:
        """None: the journal is files."""
        return ()

    def retention(self) -> Retention:
        """The journal's ``Retention`` of the two retention settings."""
        return journal_retention(self.journal_retention_max_bytes, self.journal_retention_max_age_s)
