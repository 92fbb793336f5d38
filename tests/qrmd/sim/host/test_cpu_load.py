"""The settable CPU load stand-in: what a test sets is what the plugin samples, a container
never set is idle, and an unreadable one is a ``MissingLoad`` with its reason (never 0)."""

from __future__ import annotations

from actors.ports.cpu_load import ContainerLoadSource, MissingLoad
from qrmd.sim.host.cpu_load import SimulatedContainerLoads

WANTED = [("uid-web", "main"), ("uid-api", "main"), ("uid-db", "main")]


def test_the_simulator_is_a_container_load_source() -> None:
    assert isinstance(SimulatedContainerLoads(), ContainerLoadSource)


def test_the_simulator_answers_what_was_set() -> None:
    source = SimulatedContainerLoads()
    source.set_load("uid-web", "main", 9.0)
    source.make_unreadable("uid-api", "main", "collector down")
    assert source.sample(WANTED) == {
        ("uid-web", "main"): 9.0,
        ("uid-api", "main"): MissingLoad("collector down"),
        ("uid-db", "main"): 0.0,
    }


def test_a_later_load_replaces_an_unreadable_one() -> None:
    source = SimulatedContainerLoads({("uid-web", "main"): 1.0})
    source.make_unreadable("uid-web", "main")
    source.set_load("uid-web", "main", 2.5)
    assert source.sample(WANTED[:1]) == {("uid-web", "main"): 2.5}
