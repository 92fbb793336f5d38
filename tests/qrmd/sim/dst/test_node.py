"""The simulated node is qrmd run's own process (qrmd.sim.dst.node): the daemon's subsystem
list, built and supervised as the daemon does, on the simulation's runtime and host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors.state_store import InTurnCommitter
from qrmd.cpu_plugin.subsystem import CpuPluginWiring
from qrmd.daemon import SUBSYSTEMS
from qrmd.sim.dst.simulation import Simulation, _quiet


@pytest.fixture(name="sims")
def _sims() -> Iterator[list[Simulation]]:
    made: list[Simulation] = []
    yield made
    for sim in made:
        sim.node.crash()  # its actors leave pykka's registry


def booted(sims: list[Simulation], cpu_advisor: bool) -> Simulation:
    sim = Simulation(3, cpu_advisor=cpu_advisor)
    sims.append(sim)
    with _quiet():
        assert sim.node.boot()
    return sim


@pytest.mark.parametrize(
    ("cpu_advisor", "children"),
    [
        pytest.param(
            False,
            ["store", "allocator", "memory_balancer", "cpu_pressure", "checkers"],
            id="every subsystem but the advisor link, in the daemon's supervision order",
        ),
        pytest.param(
            True,
            ["store", "allocator", "memory_balancer", "cpu_pressure", "checkers", "advisor_link"],
            id="with sys-advisor the link is the last child",
        ),
    ],
)
def test_a_boot_builds_the_daemon_s_subsystems_under_one_supervisor(
    sims: list[Simulation], cpu_advisor: bool, children: list[str]
) -> None:
    sim = booted(sims, cpu_advisor)
    assert sim.node.supervisor is not None
    assert [c.name for c in sim.node.supervisor.status().children] == children
    modules = [type(part).__module__ for part in sim.node.subsystems]
    expected = [e.module for e in SUBSYSTEMS if cpu_advisor or e.name != "advisor"]
    assert modules == expected


def test_the_allocator_commits_in_its_own_turn_and_no_socket_is_served(
    sims: list[Simulation],
) -> None:
    sim = booted(sims, False)
    core = sim.node.allocator_core()
    assert core is not None and isinstance(core._durable._committer, InTurnCommitter)
    plugin = sim.node.find(CpuPluginWiring)
    assert plugin is not None and plugin.servers == []


def test_healthz_names_an_actor_that_died_as_the_daemon_does(sims: list[Simulation]) -> None:
    sim = booted(sims, False)
    assert sim.node.crash_actor("memory_balancer")
    with _quiet():
        while sim.scheduler.step():
            pass
    assert "actor memory_balancer is down" in sim.node.healthz()
    sim.node.crash()
    assert sim.node.healthz() == ["qrmd is not running"]
