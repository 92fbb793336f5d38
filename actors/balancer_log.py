"""A log line that repeats every round, said once and then at most once per interval.

A broken balancer set-up (a metrics file that is not there, a collector that lost a node)
fails every round the same way, every ``qos-aware-sync-period``: logged each time, that is a
line every 5 s, forever, and the one line that says what changed drowns. The first line of a
kind is logged at once; the same line again is logged no more than once per ``interval_s``,
saying how many were left out since; a different line (or the kind ending, ``clear``) is
logged at once. Time is an argument: the round's own time, so tests need no clock.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

__all__ = ["REPEAT_LOG_INTERVAL_S", "RepeatedLine"]

#: A repeated line is logged again at most this often.
REPEAT_LOG_INTERVAL_S = 600.0


@dataclass(slots=True)
class _Said:
    text: str
    at: float
    left_out: int = 0


class RepeatedLine:
    """One kind of line (a failed round, say) logged with repeats left out.

    Args:
        logger: where the line goes.
        level: its level.
        interval_s: the least time between two logs of the same text.
    """

    def __init__(
        self, logger: logging.Logger, level: int, interval_s: float = REPEAT_LOG_INTERVAL_S
    ) -> None:
        self._logger = logger
        self._level = level
        self._interval_s = interval_s
        self._said: _Said | None = None

    def log(self, text: str, now: float) -> bool:
        """Log ``text`` at ``now`` unless it repeats the last one within the interval.

        Returns:
            Whether the line was logged.
        """
        said = self._said
        if said is not None and said.text == text and 0 <= now - said.at < self._interval_s:
            said.left_out += 1
            return False
        if said is not None and said.text == text and said.left_out:
            self._logger.log(
                self._level,
                "%s (%d more times in the last %.0f s)",
                text,
                said.left_out,
                now - said.at,
            )
        else:
            self._logger.log(self._level, "%s", text)
        self._said = _Said(text, now)
        return True

    def clear(self, recovered: str = "") -> None:
        """The line's condition ended: the next one is logged at once; with ``recovered``,
        say so (at INFO) if the line was logged."""
        said, self._said = self._said, None
        if said is not None and recovered:
            repeats = f" (after {said.left_out} more)" if said.left_out else ""
            self._logger.info("%s%s", recovered, repeats)
