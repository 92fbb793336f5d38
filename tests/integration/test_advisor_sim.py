"""The real advisor client and checkpoint server against the sys-advisor simulator, over real
unix sockets: every fault mode, and the AdvisorLink actor end to end (cpu-policy §11; wire.md
§6, §10)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from actors.advisor_link import AdvisorLinkActor, AdvisorLinkCore
from actors.advisor_messages import AdvisorLinkChanged, ApplyAdvice, GetLinkStatus
from actors.ports.advisor import AdvisorRefused, AdvisorSick
from policy.cpu.advisor.decision import AdvisorSettings, apply_advice
from policy.cpu.advisor.push import push_list
from policy.state.entries import InPool
from policy.state.events import PoolSet
from policy.state.sections import apply_all
from qrmd.sim.advisor import INVALID_KINDS, Fault, LoadModel, SimNode, SysAdvisorSimulator
from tests.policy.pool_fixtures import (
    CTX,
    cpus,
    dedicated,
    fresh_state,
    reclaimed,
    shared,
    with_events,
)
from wire.advisor_checkpoint import CheckpointServer, GrpcCheckpointProbe, read_checkpoint
from wire.advisor_client import GrpcAdvisorClient
from wire.sockets import ServingError

STATE = with_events(
    fresh_state(),
    dedicated("pod-d", "1,8-9"),
    PoolSet("share", cpus("4-7")),
    shared("pod-a", InPool("share"), quantity=2),
    shared("pod-b", InPool("share"), quantity=1),
    reclaimed("pod-c"),
)
NODE = SimNode({0: 4, 1: 4, 2: 4, 3: 4})
SETTINGS = AdvisorSettings(CTX)


class Rig:
    def __init__(self, directory: str) -> None:
        self.advisor_socket = os.path.join(directory, "cpu_advisor.sock")
        self.plugin_socket = os.path.join(directory, "cpu_plugin.sock")
        self.state = STATE
        self.checkpoint = CheckpointServer(self.plugin_socket, lambda: self.state.cpu)
        self.sim = SysAdvisorSimulator(
            self.advisor_socket, self.plugin_socket, NODE, LoadModel(load=2.0), period_s=0.05
        )
        self.client = GrpcAdvisorClient(self.advisor_socket)

    def push(self) -> None:
        for item in push_list(self.state.cpu):
            self.client.add_container(item, 2.0)  # type: ignore[arg-type]


@pytest.fixture
def rig() -> Iterator[Rig]:
    directory = tempfile.mkdtemp(prefix="qadv", dir="/tmp")
    r = Rig(directory)
    r.checkpoint.start()
    r.sim.start()
    r.client.connect(5.0)
    yield r
    r.client.close()
    r.sim.stop()
    r.checkpoint.stop()
    shutil.rmtree(directory, ignore_errors=True)


def first(stream, timeout_s: float = 5.0):
    """The first response of a stream, or the error it ended with, read on a thread."""
    out: list[object] = []

    def read() -> None:
        try:
            for response in stream:
                out.append(response)
                return
        except (AdvisorSick, AdvisorRefused) as err:
            out.append(err)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    stream.cancel()
    return out[0] if out else None


def test_a_healthy_advisor_sizes_the_pools_and_its_result_applies(rig: Rig) -> None:
    rig.push()
    assert {m.pod_uid for m in rig.sim.containers().values()} == {
        "pod-a",
        "pod-b",
        "pod-c",
        "pod-d",
    }
    response = first(rig.client.list_and_watch())
    decision = apply_advice(rig.state, response, SETTINGS, 0.0)
    assert decision.error is None, decision.error
    after = apply_all(rig.state, decision.events)
    # load 2.0 × (2 + 1) requested cores = 6 CPUs of share; the dedicated pod keeps 1,8-9.
    assert len(after.cpu.pools["share"]) == 6
    assert after.cpu.allocation_info("pod-d", "c").allocation_result == cpus("1,8-9")  # type: ignore[union-attr]


def test_the_advisor_can_make_an_isolation_pool_and_move_a_container_into_it(rig: Rig) -> None:
    rig.push()
    rig.sim.set_model(LoadModel(load=1.0, isolation=2))
    response = first(rig.client.list_and_watch())
    decision = apply_advice(rig.state, response, SETTINGS, 0.0)
    assert decision.error is None, decision.error
    after = apply_all(rig.state, decision.events)
    assert len(after.cpu.pools["isolation0"]) == 2
    assert after.cpu.require_entry("pod-a", "c").placement == InPool("isolation0")
    assert after.cpu.require_entry("pod-b", "c").placement == InPool("share")


def test_the_checkpoint_reaches_the_advisor(rig: Rig) -> None:
    checkpoint = read_checkpoint(rig.plugin_socket)
    assert checkpoint["pod-d"]["c"].topology_aware_assignments == {0: cpus("1,8-9")}
    assert checkpoint["pod-a"]["c"].owner_pool_name == "share"
    assert oct(os.stat(rig.plugin_socket).st_mode & 0o777) == "0o600"


def test_an_explicit_refusal_is_refused_not_sick(rig: Rig) -> None:
    rig.sim.set_fault(Fault.REFUSE_ADD)
    with pytest.raises(AdvisorRefused) as caught:
        rig.push()
    assert caught.value.code == "INVALID_ARGUMENT"


def test_an_unavailable_advisor_is_sick(rig: Rig) -> None:
    rig.sim.set_fault(Fault.UNAVAILABLE)
    with pytest.raises(AdvisorSick) as caught:
        rig.client.remove_pod("pod-a", 2.0)
    assert caught.value.code == "UNAVAILABLE"


def test_a_stalled_advisor_is_sick_within_the_call_timeout(rig: Rig) -> None:
    rig.sim.set_fault(Fault.STALL)
    started = time.monotonic()
    with pytest.raises(AdvisorSick) as caught:
        rig.client.remove_pod("pod-a", 0.3)
    assert caught.value.code == "DEADLINE_EXCEEDED"
    assert time.monotonic() - started < 2.0
    assert first(rig.client.list_and_watch(), timeout_s=0.5) is None  # open, silent


def test_a_slow_advisor_answers_within_a_long_enough_timeout(rig: Rig) -> None:
    rig.sim.set_fault(Fault.SLOW, slow_s=0.4)
    with pytest.raises(AdvisorSick):
        rig.client.remove_pod("pod-a", 0.1)
    rig.client.remove_pod("pod-a", 3.0)
    assert "pod-a" in rig.sim.stats.removed


def test_a_dropped_stream_ends_as_sick(rig: Rig) -> None:
    rig.sim.set_fault(Fault.DROP_STREAM)
    stream = rig.client.list_and_watch()
    seen: list[object] = []
    with pytest.raises(AdvisorSick) as caught:
        for response in stream:
            seen.append(response)
    assert len(seen) == 1 and caught.value.code == "UNAVAILABLE"


def test_a_flapping_advisor_alternates(rig: Rig) -> None:
    rig.sim.set_fault(Fault.FLAP, flap_s=0.3)
    rig.client.remove_pod("pod-x", 1.0)
    time.sleep(0.35)  # into the unavailable phase of the simulated advisor (not a period wait)
    with pytest.raises(AdvisorSick):
        rig.client.remove_pod("pod-x", 1.0)


@pytest.mark.parametrize("kind", sorted(INVALID_KINDS))
def test_each_invalid_response_is_refused_by_validation(rig: Rig, kind: str) -> None:
    rig.push()
    rig.sim.set_fault(Fault.INVALID, invalid_kind=kind)
    response = first(rig.client.list_and_watch())
    decision = apply_advice(rig.state, response, SETTINGS, 0.0)
    assert decision.reply.stage == "validate", (kind, decision.reply)
    assert str(decision.error).startswith("ValidateCPUAdvisorResp failed with error: ")
    assert apply_all(rig.state, decision.events).cpu == rig.state.cpu


def test_a_nil_entry_crosses_the_wire_as_nil(rig: Rig) -> None:
    rig.sim.set_fault(Fault.INVALID, invalid_kind="nil_entry")
    response = first(rig.client.list_and_watch())
    assert response.entries["nil-entry"] is None  # type: ignore[union-attr]


def test_the_checkpoint_server_keeps_a_socket_another_process_serves(rig: Rig) -> None:
    second = CheckpointServer(rig.plugin_socket, lambda: STATE.cpu)
    with pytest.raises(ServingError, match="another process serves"):
        second.start()
    GrpcCheckpointProbe(rig.plugin_socket).check(2.0)  # the first still answers


def test_the_checkpoint_server_removes_a_stale_socket_file() -> None:
    directory = tempfile.mkdtemp(prefix="qadv", dir="/tmp")
    path = Path(directory) / "cpu_plugin.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens
    server = CheckpointServer(str(path), lambda: STATE.cpu)
    try:
        server.start()
        GrpcCheckpointProbe(str(path)).check(2.0)
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


class Collector(pykka.ThreadingActor):
    def __init__(self) -> None:
        super().__init__()
        self.told: list[object] = []

    def on_receive(self, message: object) -> object:
        if message == "read":
            return list(self.told)
        self.told.append(message)
        return None


def test_the_link_actor_pushes_watches_and_comes_back_after_a_drop(rig: Rig) -> None:
    allocator = Collector.start()

    def build(timers, spawn, deliver) -> AdvisorLinkCore:
        return AdvisorLinkCore(
            enabled=True,
            client=GrpcAdvisorClient(rig.advisor_socket),
            probe=GrpcCheckpointProbe(rig.plugin_socket),
            latest_state=lambda: rig.state,
            allocator=allocator,
            timers=timers,
            spawn=spawn,
            deliver=deliver,
            monotonic=time.monotonic,
            call_timeout_s=2.0,
        )

    link = AdvisorLinkActor.start(build)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            told = allocator.ask("read")
            if sum(isinstance(m, ApplyAdvice) for m in told) >= 2:
                break
            time.sleep(0.02)
        assert len(rig.sim.stats.added) == 4
        advice = [m for m in allocator.ask("read") if isinstance(m, ApplyAdvice)]
        assert apply_advice(rig.state, advice[0].response, SETTINGS, 0.0).error is None
        # The advisor drops its stream: the link backs off, reconnects and pushes again.
        rig.sim.set_fault(Fault.DROP_STREAM)
        time.sleep(0.3)
        rig.sim.set_fault(Fault.HEALTHY)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(rig.sim.stats.added) < 8:
            time.sleep(0.02)
        assert len(rig.sim.stats.added) >= 8
        states = [m.state for m in allocator.ask("read") if isinstance(m, AdvisorLinkChanged)]
        assert "backing_off" in states and states[-1] in ("watching", "syncing", "dialing")
        assert link.ask(GetLinkStatus()).stream_failures >= 1
    finally:
        link.stop()
        allocator.stop()
