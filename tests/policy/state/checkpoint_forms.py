"""The CPU section's containers as checkpoints wrote them before the columnar form: a list of
entry maps by field name, written by the codec's ``entries`` form (``--checkpoint-form
entries``, for a rollback to a release before the columns)."""

from __future__ import annotations

from typing import Any

from policy.state import codec
from policy.state.sections import State


def encode_state_as_before(state: State) -> dict[str, Any]:
    """``encode_state(state)`` with the containers as a list of entry maps, sorted by key."""
    return codec.encode_state(state, "entries")
