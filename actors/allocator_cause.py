"""The cause of an Allocator commit: the command that led to it, as plain msgpack values.

A journal record keeps the whole input of its decision (journal package docstring) so that
forensics can say "because of which request" and re-run it through the policy: the RPC's name,
the request's fields and the wall time the decision used. Example:

    {"rpc": "Allocate", "now": 1715180645.0,
     "request": {"pod_uid": "pod-a", ..., "container_type": "MAIN",
                 "resource_requests": {"cpu": 2.0},
                 "hint": {"nodes": [0, 1], "preferred": true}, "annotations": {...}}}

Plain means: ``None``, bool, int, float, str, lists and string-keyed maps. Enums become their
names (readable in a dump, stable if values are renumbered), sets become sorted lists.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Set
from typing import Any

from actors.allocator_messages import AllocatorCommand

__all__ = ["cause_of", "plain"]


def cause_of(command: AllocatorCommand, now: float) -> dict[str, Any]:
    """The journal cause of a decision taken for ``command`` at ``now``.

    Args:
        command: the Allocator command (a frozen dataclass).
        now: the wall time, in seconds since the epoch, the policy was given.

    Returns:
        ``{"rpc": <command name>, "now": now, <field>: <plain value>, ...}``.
    """
    cause: dict[str, Any] = {"rpc": type(command).__name__, "now": now}
    for field in dataclasses.fields(command):
        cause[field.name] = plain(getattr(command, field.name))
    return cause


def plain(value: object) -> Any:
    """``value`` as msgpack-able plain data (see the module docstring).

    Args:
        value: a domain value: a dataclass, enum, mapping, set, sequence or scalar.

    Returns:
        The same information in plain types.

    Raises:
        TypeError: a value with no plain form (names its type).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (int, float)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (Set, frozenset)):
        return sorted(plain(item) for item in value)
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    raise TypeError(f"no plain form for a cause value of type {type(value).__name__}")
