"""What ``qrmd demo`` is asked to do and what it reports: its settings, result and error."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qrmd.sim.demo.balance_phase import BalanceOutcome

__all__ = ["DemoError", "DemoResult", "DemoSettings"]


class DemoError(Exception):
    """The demo could not complete; the message is one line naming the phase and the cause."""


@dataclass(frozen=True, slots=True)
class DemoSettings:
    """How to run the demo.

    Attributes:
        state_dir: the daemon's state directory; None makes a fresh one under /tmp.
        keep: leave the daemon running at the end.
        fast: 1 s reconcile and transition periods instead of the kubelet's 3 s.
        metrics: serve the daemon's metrics on a free loopback port (else ``off``).
        residual_max_age: the daemon's ``--residual-max-age``: how long ``/pods`` must miss
            the forgotten pod before qrmd removes it (short, so the demo sees it go). The
            deleted pods stay listed until their ``RemovePod``, so it may be shorter than
            the kubelet's garbage collection period without changing the story.
    """

    state_dir: Path | None = None
    keep: bool = False
    fast: bool = False
    metrics: bool = True
    residual_max_age: str = "2s"

    @property
    def reconcile_period_s(self) -> float:
        return 1.0 if self.fast else 3.0

    @property
    def transition_period(self) -> str:
        return "1s" if self.fast else "3s"

    @property
    def balance_period(self) -> str:
        """The balancer's ``--qos-aware-sync-period`` (the reference's default is 5 s)."""
        return "500ms" if self.fast else "1s"


@dataclass(frozen=True, slots=True)
class DemoResult:
    """Where the demo left things, and what recovery showed."""

    work_dir: Path
    state_dir: Path
    socket_path: Path
    log_path: Path
    metrics_address: str
    recovered: int  # allocations GetResourcesAllocation answered after the restart
    identical: bool
    balance: BalanceOutcome
    kept_pid: int | None  # the daemon left running (--keep), else None
    elapsed_s: float
    qrmd_command: str  # how the user runs qrmd from where the demo was started
