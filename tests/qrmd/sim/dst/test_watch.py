"""The simulation's watch of the Supervisor (``Simulation._watch``, the ``actors-supervised``
invariant): an actor dead before a poll must be alive after it, while one that dies during
the poll is the next poll's."""

from __future__ import annotations

from qrmd.sim.dst.simulation import run


def test_an_actor_that_dies_while_the_poll_restarts_another_is_the_next_polls() -> None:
    # Seed 241: the Allocator was told a message it cannot handle, the CPU pressure actor died
    # first; restarting it ran the scheduler, which delivered the Allocator its poison. The
    # Allocator died during that poll, and was taken for one the poll had left dead.
    outcome = run(241, 850)
    assert not outcome.failures
    assert outcome.faults_injected["actor_crash"] >= 2
