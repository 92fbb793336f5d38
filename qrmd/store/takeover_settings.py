"""The Katalyst takeover settings of ``qrmd run``: ``--katalyst-checkpoint`` and
``--import-katalyst-if-present`` (``TAKEOVER_OPTIONS``, part of ``qrmd.config.OPTIONS``;
docs/takeover.md; what they make ``qrmd run`` do is ``qrmd.store.katalyst_takeover``).

A node that ran katalyst-agent's CPU plugin holds its CPU assignments in
``<--qrm-state-dir>/cpu_plugin_state`` (katalyst-agent v0.5.3's default state directory is
``/var/lib/katalyst/qrm_advisor``, spec cpu-policy §13.1). qrmd starting there from an empty
journal would hand the CPUs of running dedicated pods to others, so with such a file present
and no journal yet, ``qrmd run`` refuses to start unless told what to do with it: import it
once (``--import-katalyst-if-present``), or ``--katalyst-checkpoint=ignore`` (the file is
stale: no pod it names runs any more). Once the journal holds records the file is not looked
at again: the journal is the state.

Plain data: parsing these settings imports nothing that touches a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from qrmd.config_values import Option, nonempty, switch

__all__ = [
    "DEFAULT_KATALYST_CHECKPOINT",
    "IGNORE",
    "TAKEOVER_OPTIONS",
    "TakeoverSettings",
    "takeover_values",
]

#: katalyst-agent's default ``--qrm-state-dir`` and its CPU plugin's file name (v0.5.3,
#: ``cmd/katalyst-agent/app/options/qrm/qrm_base.go``, ``dynamicpolicy/policy.go``).
DEFAULT_KATALYST_CHECKPOINT: Final = "/var/lib/katalyst/qrm_advisor/cpu_plugin_state"
#: The ``--katalyst-checkpoint`` value that turns the check off.
IGNORE: Final = "ignore"
_GROUP = "takeover"


@dataclass(frozen=True, slots=True)
class TakeoverSettings:
    """What ``qrmd run`` does with katalyst-agent's checkpoint before it opens its journal.

    Attributes:
        katalyst_checkpoint: the file looked for; ``None``: not looked for (``ignore``).
        import_if_present: with no journal yet and the file present, import it (once: the
            journal is not empty afterwards) rather than refuse to start.
    """

    katalyst_checkpoint: str | None = DEFAULT_KATALYST_CHECKPOINT
    import_if_present: bool = False


def _checkpoint_path(raw: object) -> str | None:
    text = nonempty(raw)
    if text.lower() == IGNORE:
        return None
    if not text.startswith("/"):
        raise ValueError(f"{text!r} is neither an absolute path nor {IGNORE}")
    return text


#: The takeover options of ``qrmd run``; the ``takeover`` group becomes
#: ``DaemonConfig.takeover``.
TAKEOVER_OPTIONS: tuple[Option, ...] = (
    Option("katalyst-checkpoint", "katalyst_checkpoint", _checkpoint_path,
           DEFAULT_KATALYST_CHECKPOINT,
           "katalyst-agent's cpu_plugin_state: while it exists and the journal is empty, "
           "qrmd run refuses to start (it would give running pods' CPUs away) unless "
           "--import-katalyst-if-present; 'ignore' for a stale file (docs/takeover.md)",
           "--qrm-state-dir (its cpu_plugin_state)", f"PATH|{IGNORE}", group=_GROUP),
    Option("import-katalyst-if-present", "import_if_present", switch, "false",
           "with an empty journal and --katalyst-checkpoint present, import it once "
           "(as qrmd journal import-katalyst) before starting",
           "none (katalyst-agent restores its own file)", switch=True, group=_GROUP),
)  # fmt: skip


def takeover_values(groups: Mapping[str, Mapping[str, object]]) -> dict[str, Any]:
    """The ``DaemonConfig`` field of the takeover, from the options' checked values.

    Args:
        groups: the checked keys given, by group (``takeover`` is read).

    Returns:
        ``{"takeover": TakeoverSettings}``.

    Raises:
        ValueError: ``--import-katalyst-if-present`` with ``--katalyst-checkpoint=ignore``.
    """
    given: dict[str, Any] = dict(groups.get(_GROUP, {}))
    settings = TakeoverSettings(**given)
    if settings.import_if_present and settings.katalyst_checkpoint is None:
        raise ValueError(
            f"--import-katalyst-if-present with --katalyst-checkpoint={IGNORE}: there is no "
            f"file to import; drop one of them"
        )
    return {"takeover": settings}
