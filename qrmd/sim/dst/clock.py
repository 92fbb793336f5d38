"""The simulation's clock: virtual time behind the ``Clock`` port (``actors.ports.clock``).

Nothing in the simulation sleeps: time moves only when the simulation moves it (each delivered
message costs a little, an fsync costs its latency, an idle step jumps to the next timer).
Monotonic time never goes backwards; wall time is monotonic time plus an offset that a clock
jump (an NTP step, a fault) may move either way, as a real node's wall clock can.
"""

from __future__ import annotations

__all__ = ["VirtualClock"]

#: 2026-01-01 00:00:00 UTC: any fixed instant, so the same seed stamps the same records.
EPOCH_S = 1767225600.0


class VirtualClock:
    """A ``Clock`` the simulation advances by hand.

    Args:
        wall_s: the wall time at monotonic zero.
    """

    def __init__(self, wall_s: float = EPOCH_S) -> None:
        self._mono = 0.0
        self._wall_offset = wall_s

    def time(self) -> float:
        """Wall-clock seconds since the epoch (may jump, see ``jump_wall``)."""
        return self._wall_offset + self._mono

    def monotonic(self) -> float:
        """Seconds since the simulation began, never going backwards."""
        return self._mono

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass on both clocks.

        Raises:
            ValueError: ``seconds`` is negative.
        """
        if seconds < 0:
            raise ValueError(f"virtual time cannot go back: advance({seconds})")
        self._mono += seconds

    def jump_wall(self, seconds: float) -> None:
        """Step the wall clock by ``seconds`` (either way); monotonic time is untouched."""
        self._wall_offset += seconds
