"""The CPU section's containers as checkpoints wrote them before the columnar form: a list of
entry maps by field name (what ``policy.state.codec`` writes for an event's entry)."""

from __future__ import annotations

from typing import Any

from policy.state import codec
from policy.state.sections import State


def encode_state_as_before(state: State) -> dict[str, Any]:
    """``encode_state(state)`` with the containers as a list of entry maps, sorted by key."""
    data = codec.encode_state(state)
    entries = sorted(state.cpu.entries(), key=lambda e: e.key)
    data["sections"]["cpu"]["containers"] = [codec._encode_entry(e) for e in entries]
    return data
