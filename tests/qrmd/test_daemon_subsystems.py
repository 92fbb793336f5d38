"""The daemon is its ordered list of subsystems (qrmd.daemon.SUBSYSTEMS): the enabled ones are
built and started in list order, stopped in reverse, and closed once the actors have stopped;
a disabled one is never built; a failed start stops what had started.

Every subsystem here is the real one, wrapped to record its hooks (the CPU plugin on the
harness's fake servers); the memory balancer and CPU pressure eviction are stand-ins, so the
order is checked without their host sources.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.supervisor import ChildSpec
from qrmd.daemon import SUBSYSTEMS, Builder, Daemon
from qrmd.status.health import ProblemSource
from qrmd.store import subsystem as store
from qrmd.subsystem import Running, Shared, Subsystem, SubsystemParts
from tests.qrmd.test_daemon import Harness


class Recorded(SubsystemParts):
    """A subsystem whose hooks are written to ``events`` before they run the real one's."""

    def __init__(self, name: str, inner: Subsystem | None, events: list[str]) -> None:
        self.name = name
        self.inner = inner
        self.events = events

    def children(self) -> Sequence[ChildSpec]:
        return () if self.inner is None else self.inner.children()

    def health_sources(self) -> Sequence[ProblemSource]:
        return () if self.inner is None else self.inner.health_sources()

    def readiness_sources(self) -> Sequence[ProblemSource]:
        return () if self.inner is None else self.inner.readiness_sources()

    def start(self, running: Running) -> None:
        self.events.append(f"start {self.name}")
        if self.inner is not None:
            self.inner.start(running)

    def serve(self, running: Running) -> None:
        self.events.append(f"serve {self.name}")
        if self.inner is not None:
            self.inner.serve(running)

    def stop(self) -> None:
        self.events.append(f"stop {self.name}")
        if self.inner is not None:
            self.inner.stop()

    def close(self) -> None:
        actors = "actors stopped" if not pykka.ActorRegistry.get_all() else "actors running"
        self.events.append(f"close {self.name} ({actors})")
        if self.inner is not None:
            self.inner.close()

    def serving(self) -> str:
        return "" if self.inner is None else self.inner.serving()


def recording(harness: Harness, events: list[str], *, fail_start: str = "") -> dict[str, Builder]:
    # The real store and CPU plugin; the others stand in with no parts of their own.
    real: dict[str, Builder] = {"store": store.build, **harness.builders()}
    builders: dict[str, Builder] = {}
    for entry in SUBSYSTEMS:
        inner = real.get(entry.name)

        def build(
            settings: Any, shared: Shared, name: str = entry.name, inner: Any = inner
        ) -> Subsystem:
            events.append(f"build {name}")
            built = Recorded(name, None if inner is None else inner(settings, shared), events)
            if name == fail_start:

                def refuse(running: Running) -> None:
                    events.append(f"start {name}")
                    raise OSError(f"{name} cannot start")

                built.start = refuse  # type: ignore[method-assign]
            return built

        builders[entry.name] = build
    return builders


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    yield Harness(tmp_path)
    pykka.ActorRegistry.stop_all()


SOME = {"enable-memory-balancer": True, "enable-cpu-pressure-eviction": True}


@pytest.mark.parametrize(
    ("flags", "fail_start", "expected"),
    [
        pytest.param(
            SOME,
            "",
            [
                "build store", "build cpu_plugin", "build balancer", "build cpu_pressure",
                "start store", "serve store", "start cpu_plugin", "serve cpu_plugin",
                "start balancer", "serve balancer", "start cpu_pressure", "serve cpu_pressure",
                "stop cpu_pressure", "stop balancer", "stop cpu_plugin", "stop store",
                "close cpu_pressure (actors stopped)", "close balancer (actors stopped)",
                "close cpu_plugin (actors stopped)", "close store (actors stopped)",
            ],
            id="enabled subsystems start and serve in order and stop in reverse, closed after "
            "the actors",
        ),
        pytest.param(
            {},
            "",
            [
                "build store", "build cpu_plugin",
                "start store", "serve store", "start cpu_plugin", "serve cpu_plugin",
                "stop cpu_plugin", "stop store",
                "close cpu_plugin (actors stopped)", "close store (actors stopped)",
            ],
            id="a disabled subsystem is never built",
        ),
        pytest.param(
            SOME,
            "balancer",
            [
                "build store", "build cpu_plugin", "build balancer", "build cpu_pressure",
                "start store", "serve store", "start cpu_plugin", "serve cpu_plugin",
                "start balancer",
                "stop cpu_pressure", "stop balancer", "stop cpu_plugin", "stop store",
                "close cpu_pressure (actors stopped)", "close balancer (actors stopped)",
                "close cpu_plugin (actors stopped)", "close store (actors stopped)",
            ],
            id="a failed start stops every subsystem in reverse, started or not",
        ),
    ],
)  # fmt: skip
def test_the_daemon_runs_its_subsystems_in_list_order(
    harness: Harness, flags: dict[str, object], fail_start: str, expected: list[str]
) -> None:
    events: list[str] = []
    config = harness.config(**{"plugin-registration-dir": str(harness.root / "ev"), **flags})
    daemon = Daemon(config, builders=recording(harness, events, fail_start=fail_start))
    if fail_start:
        with pytest.raises(OSError, match=f"{fail_start} cannot start"):
            daemon.start()
    else:
        daemon.start()
        daemon.stop()
    assert events == expected
