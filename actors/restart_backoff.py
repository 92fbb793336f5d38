"""How long the Supervisor waits before restarting a child: a pure function of the times it is
given (DESIGN.md "Time": one injectable clock; STYLE.md: decisions are values).

Two rules, both doubling from ``first_s`` up to ``longest_s``:

* **A crash loop is slowed down.** A child that dies within ``stable_s`` of its last restart
  died *quickly*; the n-th quick death in a row waits ``first_s × 2^(n-1)`` before the restart
  (capped). A child that stayed up ``stable_s`` or longer is restarted at once, and its count
  starts again — so a daemon that crashes once a day is never slowed down, and one whose
  store dies at every start does not spin the CPU or flood the log.
* **A restart that fails is retried ever more slowly**: the k-th retry (from 0) waits
  ``first_s × 2^k`` (capped).

The Supervisor reads the monotonic clock it was given and passes the readings here; tests call
these functions with plain numbers, and drive the Supervisor with a fake clock.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RestartBackoff", "RestartDelay", "plan_restart"]


@dataclass(frozen=True, slots=True)
class RestartBackoff:
    """The Supervisor's back-off settings.

    Attributes:
        first_s: the first wait (after the first quick death, and before the first retry).
        longest_s: no wait is longer than this.
        stable_s: a child alive this long after a restart is restarted at once if it dies.

    Raises:
        ValueError: a setting is not positive, or ``first_s`` exceeds ``longest_s``.
    """

    first_s: float = 0.5
    longest_s: float = 30.0
    stable_s: float = 10.0

    def __post_init__(self) -> None:
        if not self.first_s > 0:
            raise ValueError(f"the first restart back-off must be positive, got {self.first_s} s")
        if not self.longest_s >= self.first_s:
            raise ValueError(
                f"the longest restart back-off ({self.longest_s} s) must be at least the first "
                f"({self.first_s} s)"
            )
        if not self.stable_s > 0:
            raise ValueError(f"the stable time must be positive, got {self.stable_s} s")

    def doubled(self, times: int) -> float:
        """``first_s`` doubled ``times`` times, at most ``longest_s``.

        Raises:
            ValueError: ``times`` is negative.
        """
        if times < 0:
            raise ValueError(f"a back-off step cannot be negative, got {times}")
        # Stop doubling past 64 steps: a long crash loop must not overflow the float.
        if times >= 64:
            return self.longest_s
        wait: float = self.first_s * 2.0**times
        return min(wait, self.longest_s)

    def retry_delay(self, attempt: int) -> float:
        """Seconds to wait after failed restart attempt ``attempt`` (0: the first) (rule 2)."""
        return self.doubled(attempt)


@dataclass(frozen=True, slots=True)
class RestartDelay:
    """When to restart a child that has just died.

    Attributes:
        quick_deaths: how many times in a row it died within ``stable_s`` of a restart,
            this death included (0: it had been stable, or was never restarted).
        wait_s: seconds to wait before restarting it (0: at once).
    """

    quick_deaths: int
    wait_s: float


def plan_restart(
    backoff: RestartBackoff, *, quick_deaths: int, restarted_at: float | None, now: float
) -> RestartDelay:
    """The wait before restarting a child that died at ``now`` (rule 1).

    Args:
        backoff: the settings.
        quick_deaths: the child's count of quick deaths before this one.
        restarted_at: the monotonic time of its last restart, or None if never restarted.
        now: the monotonic time it was found dead.

    Returns:
        The child's new count of quick deaths and the wait.
    """
    if restarted_at is None or now - restarted_at >= backoff.stable_s:
        return RestartDelay(quick_deaths=0, wait_s=0.0)
    count = quick_deaths + 1
    return RestartDelay(quick_deaths=count, wait_s=backoff.doubled(count - 1))
