"""Shrink a failing seed: the shortest prefix, the fewest fault kinds and faults that still fail.

A run stops at its first failing step, and a run is a function of its seed: no shorter prefix
of the same run fails, so the prefix is the failing step. Fewer faults change the run (each
fault not injected leaves the seed's choices to other actions), so each candidate is run again
and kept only if it still fails, with any invariant:

1. Drop fault kinds one at a time (in the order listed), keeping each removal that still fails.
2. Lower the fault budget: the smallest budget, from zero up, that still fails.

Every candidate is a plain ``qrmd sim run`` command line, so the result replays as one.
"""

from __future__ import annotations

from dataclasses import dataclass

from policy.cpu.reference import V0_5_3
from qrmd.sim.dst.simulation import FAULT_RATE, Failure, Outcome, run

__all__ = ["Shrunk", "shrink"]


@dataclass(frozen=True, slots=True)
class Shrunk:
    """The smallest failing run found: replay it with these arguments."""

    steps: int
    kinds: tuple[str, ...]
    budget: int | None
    failure: Failure
    faults_injected: dict[str, int]
    runs: int
    #: The Katalyst release the node reproduced (the seed's pick, or the one asked for).
    reference_version: str = V0_5_3


def shrink(
    seed: int,
    steps: int,
    kinds: tuple[str, ...],
    budget: int | None = None,
    defect: str | None = None,
    *,
    fault_rate: float = FAULT_RATE,
    reference_version: str | None = None,
) -> Shrunk | None:
    """Shrink ``seed``'s failure (module rules); None when it does not fail in ``steps``."""
    runs = 1
    best = run(
        seed,
        steps,
        kinds,
        budget,
        defect,
        fault_rate=fault_rate,
        reference_version=reference_version,
    )
    if not best.failures:
        return None
    steps = best.steps
    # Every candidate at the level the failing run had (the seed's pick stays the same).
    level = best.reference_version

    def attempt(kinds: tuple[str, ...], budget: int | None) -> Outcome | None:
        nonlocal runs
        runs += 1
        outcome = run(
            seed, steps, kinds, budget, defect, fault_rate=fault_rate, reference_version=level
        )
        return outcome if outcome.failures else None

    # 1. Drop fault kinds one at a time.
    for kind in list(kinds):
        if kind not in kinds:
            continue
        fewer = tuple(k for k in kinds if k != kind)
        found = attempt(fewer, budget)
        if found is not None:
            kinds, best = fewer, found
    # 2. The smallest fault budget that still fails.
    injected = sum(best.faults_injected.values())
    for smaller in range(injected):
        found = attempt(kinds, smaller)
        if found is not None:
            budget, best = smaller, found
            break
    return Shrunk(
        best.steps, kinds, budget, best.failures[0], dict(best.faults_injected), runs, level
    )
