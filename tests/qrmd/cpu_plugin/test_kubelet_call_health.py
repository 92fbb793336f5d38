"""The kubelet call path's watch in the daemon: real gRPC over a unix socket, real HTTP to the
endpoint. An Allocator held in its turn fails ``/healthz`` (then ``/livez``) with the watch's
reason and the gauge shows it; once calls are answered again both pass. The watch's clock
is advanced by hand, so no test waits for a limit to pass."""

from __future__ import annotations

import dataclasses
import logging
import re
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.allocator import AllocatorCore
from journal.clock import SYSTEM_CLOCK
from qrmd.config import load_config
from qrmd.cpu_plugin import subsystem as cpu_plugin
from qrmd.daemon import Daemon
from qrmd.subsystem import Shared
from tests.integration.daemon_process import PluginClient
from wire.plugin_server import plugin_socket_path


class AdvancedClock:
    """The system clock, with a monotonic time the test moves forward."""

    def __init__(self) -> None:
        self.ahead_s = 0.0

    def time(self) -> float:
        return SYSTEM_CLOCK.time()

    def monotonic(self) -> float:
        return SYSTEM_CLOCK.monotonic() + self.ahead_s


class Served:
    def __init__(self, daemon: Daemon, clock: AdvancedClock, socket_path: str) -> None:
        self.daemon, self.clock = daemon, clock
        self.kubelet = PluginClient(Path(socket_path))

    def http(self, path: str) -> tuple[int, str]:
        assert self.daemon.endpoint is not None
        host, port = self.daemon.endpoint.address
        try:
            with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def gauge(self) -> float:
        for line in self.http("/metrics")[1].splitlines():
            if line.startswith("qrmd_kubelet_calls_unanswered_seconds "):
                return float(line.split()[1])
        raise AssertionError("no qrmd_kubelet_calls_unanswered_seconds in /metrics")

    def watch(self) -> Any:
        wiring = self.daemon.find(cpu_plugin.CpuPluginWiring)
        assert wiring is not None
        return wiring.call_watch


@pytest.fixture
def served() -> Iterator[Served]:
    clock = AdvancedClock()

    def build(settings: Any, shared: Shared) -> cpu_plugin.CpuPluginWiring:
        # Only the CPU plugin (the watch, the Allocator) runs on the advanced clock.
        return cpu_plugin.build(settings, dataclasses.replace(shared, clock=clock))

    with tempfile.TemporaryDirectory(dir="/tmp") as root:
        config = load_config(
            {
                "topology": "synthetic:cpus=16,sockets=2,numas=4",
                "reserved-cpu-cores": "2",
                "state-dir": f"{root}/state",
                "socket-dir": [f"{root}/k"],
                "metrics-address": "127.0.0.1:0",
                "durability": "none",
            }
        )
        daemon = Daemon(config, builders={"cpu_plugin": build})
        daemon.start()
        serving = Served(daemon, clock, plugin_socket_path(f"{root}/k"))
        try:
            yield serving
        finally:
            serving.kubelet.close()
            daemon.stop()
    pykka.ActorRegistry.stop_all()


class HeldTurns:
    """Holds the Allocator in its turn while closed (the test's hook into its handler)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.open = threading.Event()
        self.open.set()
        self.held = threading.Event()
        handle = AllocatorCore.handle

        def held_handle(core: AllocatorCore, command: Any) -> Any:
            if not self.open.is_set():
                self.held.set()
                assert self.open.wait(30)
            return handle(core, command)

        monkeypatch.setattr(AllocatorCore, "handle", held_handle)


def test_an_allocator_that_does_not_answer_fails_healthz_then_livez_until_calls_are_answered(
    served: Served, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="qrmd.kubelet_calls")
    turns = HeldTurns(monkeypatch)
    assert served.kubelet.allocate("pod-a")
    assert served.http("/healthz") == (200, "ok\n")
    turns.open.clear()
    answer: dict[str, Any] = {}
    call = threading.Thread(target=lambda: answer.update(cpuset=served.kubelet.allocate("pod-b")))
    call.start()
    try:
        assert turns.held.wait(10)
        served.clock.ahead_s += 6
        status, body = served.http("/healthz")
        assert status == 503
        # 6 s ahead, and however long the real call has waited meanwhile.
        assert re.fullmatch(
            r"kubelet calls: none answered by the allocator for [67] s \(limit 5 s\), "
            r"0 queued now\n",
            body,
        )
        assert served.http("/livez") == (200, "ok\n")
        assert served.gauge() >= 6
        served.clock.ahead_s += 60
        status, body = served.http("/livez")
        assert status == 503
        assert "(limit 60 s)" in body and "the call path is wedged, a restart is due" in body
    finally:
        turns.open.set()
        call.join(15)
    assert answer["cpuset"]  # the held call was answered in time once the turn went on
    assert served.kubelet.allocate("pod-c")
    assert served.http("/healthz") == (200, "ok\n")
    assert served.http("/livez") == (200, "ok\n")
    assert served.gauge() == 0
    stuck, answered = [r.getMessage() for r in caplog.records if r.name == "qrmd.kubelet_calls"]
    assert stuck.startswith("kubelet calls: none answered by the allocator for ")
    assert re.fullmatch(
        r"kubelet calls are answered again, after at least 6[67] s without an answer from the "
        r"allocator",
        answered,
    )


def test_an_idle_kubelet_path_stays_healthy(served: Served) -> None:
    assert served.kubelet.allocate("pod-a")
    served.clock.ahead_s += 3600
    assert served.http("/healthz") == (200, "ok\n")
    assert served.http("/livez") == (200, "ok\n")
    assert served.gauge() == 0
    assert not served.watch().stuck
