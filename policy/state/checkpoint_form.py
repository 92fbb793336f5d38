"""How a checkpoint writes the CPU section's containers (``policy.state.codec``).

* ``columns`` (the default): one list per container field, repeated values written once
  (``policy.state.codec_columns``);
* ``entries``: a list of one map per container, by field name — the form qrmd releases before
  the columns form read. An operator rolling back to such a release runs once with it and
  stops with SIGTERM (which writes a checkpoint) first: the older release refuses a columns
  checkpoint, and the segments it could replay instead may already be gone by retention.

Either form decodes to the same state. Plain data: the settings import it.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["CHECKPOINT_FORMS", "DEFAULT_CHECKPOINT_FORM", "CheckpointForm"]

CheckpointForm = Literal["columns", "entries"]

#: Every form, the default first.
CHECKPOINT_FORMS: Final[tuple[CheckpointForm, ...]] = ("columns", "entries")
DEFAULT_CHECKPOINT_FORM: Final[CheckpointForm] = "columns"
