"""Before ``qrmd run`` opens its journal: never start from nothing on a node whose CPUs
katalyst-agent assigned (docs/takeover.md; the settings are ``qrmd.store.takeover_settings``).

The rule, in order:

1. ``--katalyst-checkpoint=ignore``: nothing is looked at.
2. The journal holds records (a segment or a checkpoint): the journal is the state; the file,
   imported earlier or stale, is not looked at.
3. No file at ``--katalyst-checkpoint``: a node without Katalyst; start from nothing.
4. The file is there and ``--import-katalyst-if-present``: import it, with every check
   ``qrmd journal import-katalyst`` makes (``qrmd.store.katalyst_import``); the journal then holds
   the import record, so rule 2 holds at every later start and the import happens once.
5. The file is there and nothing was said: refuse to start. Starting would allocate the CPUs
   of running dedicated pods to new ones; the message names the file and the three ways on.

A refusal is a ``TakeoverRefusedError`` (a ``ValueError``: ``qrmd run`` prints it as one line and
exits 2, which the systemd unit does not restart).
"""

from __future__ import annotations

import logging
import os

from policy.topology.model import CPUTopology
from qrmd.store.takeover_settings import IGNORE, TakeoverSettings

__all__ = ["TakeoverRefusedError", "adopt_katalyst_state"]

_log = logging.getLogger("qrmd.takeover")


class TakeoverRefusedError(ValueError):
    """``qrmd run`` must not start on this node as things are; the message says what to do."""


def adopt_katalyst_state(
    settings: TakeoverSettings, state_dir: str, node_name: str, topology: CPUTopology
) -> int | None:
    """Apply the module docstring's rule before the journal is opened.

    Args:
        settings: ``--katalyst-checkpoint`` and ``--import-katalyst-if-present``.
        state_dir: ``--state-dir``.
        node_name: the journal's node name.
        topology: this machine.

    Returns:
        The import record's seq when the file was imported; None when nothing was done.

    Raises:
        TakeoverRefusedError: rule 5, or the import (rule 4) refused the file; nothing was written.
    """
    path = settings.katalyst_checkpoint
    # 1, 3. Nothing to take over: the checks that need none of the import's code come first.
    if path is None or not os.path.lexists(path):
        return None
    # The import (katalyst's layouts and decoders) is loaded only where its file is: on every
    # other node it would be a tenth of the daemon's imports for nothing.
    from qrmd.store.katalyst_import import (  # noqa: PLC0415
        KatalystCheckpointError,
        holds_journal,
        import_checkpoint,
    )

    # 2. The journal is the state.
    if holds_journal(state_dir):
        return None
    # 5. Refuse: starting empty would give running pods' CPUs away.
    if not settings.import_if_present:
        raise TakeoverRefusedError(
            f"katalyst-agent's checkpoint {path} is present and the journal in {state_dir} is "
            f"empty: starting would give the CPUs of the pods it names to others. Take it "
            f"over once with --import-katalyst-if-present (or qrmd journal import-katalyst "
            f"{state_dir} {path}); if katalyst-agent no longer manages this node's CPUs and "
            f"the file is stale, pass --katalyst-checkpoint={IGNORE} (docs/takeover.md)"
        )
    # 4. Import once.
    try:
        result = import_checkpoint(state_dir, path, topology, node_name)
    except KatalystCheckpointError as err:
        raise TakeoverRefusedError(
            f"--import-katalyst-if-present: {err} (qrmd did not start; docs/takeover.md)"
        ) from None
    for note in result.notes:
        _log.warning("import of %s: %s", path, note)
    _log.info(
        "took over %s into %s as record %d: %d containers, pools %s",
        path, state_dir, result.seq, result.containers, ", ".join(result.pools) or "none",
    )  # fmt: skip
    return result.seq
