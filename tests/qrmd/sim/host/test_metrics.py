"""The settable NUMA metric stand-in (spec memory-balancer §4.1): it reports what a test set,
relieves a node back to its quiet profile, loses a node as a collector would (``MissingSample``
with the reason, never 0), and answers as the daemon's fixed source does for the same figures.
"""

from __future__ import annotations

import pytest

from actors.ports.balancer import NumaMetricSource
from policy.balance import MissingSample, NumaMetrics
from qrmd.host.metrics_fixed import FixedNumaMetrics
from qrmd.sim.host.metrics import NumaProfile, SimulatedNumaMetrics


def test_quiet_then_pressure_then_relief() -> None:
    sim = SimulatedNumaMetrics.quiet(range(4))
    assert isinstance(sim, NumaMetricSource)
    assert sim.sample([2]) == {2: NumaMetrics(40, 100)}
    sim.put_under_pressure(2)
    assert sim.sample([2]) == {2: NumaMetrics(90, 900)}
    assert sim.profiles()[2] == NumaProfile(90, 900)
    sim.relieve(2)
    assert sim.sample([2]) == {2: NumaMetrics(40, 100)}


def test_an_unreadable_node_is_missing_until_relieved() -> None:
    sim = SimulatedNumaMetrics({0: NumaProfile(60, 100), 1: NumaProfile(50, 90)})
    sim.make_unreadable(1, "collector lost node 1")
    got = sim.sample([0, 1, 2])
    lost = MissingSample("collector lost node 1")
    assert got[1] == NumaMetrics(lost, lost)
    assert got[2].read_latency == MissingSample("NUMA node 2 is not simulated")
    sim.relieve(1)
    assert sim.sample([1]) == {1: NumaMetrics(50, 90)}


def test_a_node_without_a_profile_cannot_be_pressed() -> None:
    with pytest.raises(KeyError, match="NUMA node 7 is not simulated"):
        SimulatedNumaMetrics.quiet([0, 1]).put_under_pressure(7)


def test_it_answers_as_the_daemons_fixed_source_for_the_same_figures() -> None:
    sim = SimulatedNumaMetrics.quiet(range(3))
    sim.put_under_pressure(1)
    fixed = FixedNumaMetrics.quiet(range(3)).under_pressure([1])
    assert sim.sample([0, 1, 2, 5]) == fixed.sample([0, 1, 2, 5])


def test_every_change_shows_in_the_next_read_after_reads_that_kept_the_last() -> None:
    sim = SimulatedNumaMetrics.quiet(range(2))
    steps = [
        (lambda: None, NumaMetrics(40, 100)),
        (lambda: sim.put_under_pressure(1), NumaMetrics(90, 900)),
        (
            lambda: sim.make_unreadable(1, "lost"),
            NumaMetrics(MissingSample("lost"), MissingSample("lost")),
        ),
        (
            lambda: sim.set_profile(1, NumaProfile(1, 2)),
            NumaMetrics(MissingSample("lost"), MissingSample("lost")),
        ),
        (lambda: sim.relieve(1), NumaMetrics(40, 100)),
    ]
    for change, expected in steps:
        change()
        for _ in range(2):
            assert sim.sample([0, 1]) == {0: NumaMetrics(40, 100), 1: expected}
