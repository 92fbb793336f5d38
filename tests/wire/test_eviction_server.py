"""The balancer's eviction plugin over its real unix socket, driven as katalyst-agent drives it
(wire.md §8.3, §11; memory-balancer.md §9, §10).

Behind the server is the real MemoryBalancer actor (``actors.memory_balancer``) on a journaling
committer, fed worked example 2 through its ports (``tests.actors.balancer_fakes``: latency
``[75, 50, 30, 20]``, bandwidth ``[900, 300, 200, 100]``, the example's pods): one tick stores
the example's record, whose eviction pod is ``r1`` on source NUMA 0.
"""

from __future__ import annotations

import shutil
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pykka
import pytest

from actors.balancer_messages import BalancerUnavailable, GetBalancerState, RoundReport, Tick
from actors.memory_balancer import MemoryBalancerActor
from machines.lifecycle import InvalidTransition, Step
from policy.balance import NumaMetrics, RoundResult
from tests.actors.balancer_fakes import Balancer as ExampleNode
from tests.actors.balancer_fakes import FakeMetrics, JournalingCommitter
from tests.policy.balance.examples import NOW
from tests.wire.eviction_agent import EvictionAgent, go_pod, unknown_fields_of
from wire.errors import code_for
from wire.eviction_server import EvictionPluginServer
from wire.gen import evictionplugin_pb2 as ep
from wire.gen import evictionplugin_pb2_grpc as ep_grpc
from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc

REASON = "the memory node 0 is under bandwidth pressure"  # example 2: source NUMA 0
PLUGIN_INFO = reg.PluginInfo(
    type="EvictionPlugin", name="numa_memory_balancer", endpoint="", supported_versions=["v1alpha1"]
)

#: What the agent lists: r1 among pods the balancer does not evict.
ACTIVE_PODS = (
    go_pod("web-0", "uid-web-0"),
    go_pod("r1", "r1", namespace="batch"),
    go_pod("s1", "s1"),
)


class HeldSamples:
    """Wraps a metric source: while ``hold`` is set, a sample (and so the balancer) waits."""

    def __init__(self, source: FakeMetrics) -> None:
        self._sample = source.sample
        self.hold: threading.Event | None = None
        self.held = threading.Event()

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        if self.hold is not None:
            self.held.set()
            self.hold.wait(timeout=10)
        return self._sample(numa_ids)


@dataclass
class Balancer:
    ref: pykka.ActorRef[MemoryBalancerActor]
    committer: JournalingCommitter
    metrics: HeldSamples

    def tick(self) -> RoundReport:
        report: RoundReport = self.ref.ask(Tick(NOW), timeout=10)
        return report


def start_balancer(*, tick: bool = True) -> Balancer:
    """The real MemoryBalancer on example 2's node; with ``tick``, its round is stored."""
    example = ExampleNode()
    held = HeldSamples(example.metrics)
    example.metrics.sample = held.sample  # type: ignore[method-assign]
    balancer = Balancer(MemoryBalancerActor.start(example.core), example.store, held)
    if tick:
        report = balancer.tick()
        assert report.result is RoundResult.STORED and report.record is not None
        assert [p.uid for p in report.record.evict_pods] == ["r1"]
    return balancer


@dataclass
class Plugin:
    server: EvictionPluginServer
    balancer: Balancer
    steps: list[Step]
    agent: EvictionAgent

    @property
    def triggers(self) -> list[str]:
        return [s.trigger for s in self.steps]


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Short on purpose: pytest's tmp_path can exceed the 107-byte socket path limit.
    directory = Path(tempfile.mkdtemp(prefix="qrmd-ev-", dir="/tmp"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def make_plugin(socket_dir: Path, *, tick: bool = True) -> Plugin:
    balancer = start_balancer(tick=tick)
    steps: list[Step] = []
    server = EvictionPluginServer(socket_dir, balancer.ref, on_registration=steps.append)
    return Plugin(server, balancer, steps, EvictionAgent(server.socket_path))


@pytest.fixture
def plugin(socket_dir: Path) -> Iterator[Plugin]:
    made = make_plugin(socket_dir)
    made.server.start()
    try:
        yield made
    finally:
        made.agent.close()
        made.server.stop()
        made.balancer.ref.stop()


def _committed(plugin: Plugin) -> list[str]:
    return [type(e).__name__ for e in plugin.balancer.committer.events]


def test_the_agent_registers_the_plugin_and_polls_it(plugin: Plugin) -> None:
    path = plugin.server.socket_path
    assert path == path.parent / "numa_memory_balancer.sock"
    assert stat.S_ISSOCK(path.lstat().st_mode) and stat.S_IMODE(path.lstat().st_mode) == 0o600

    info = plugin.agent.register()

    assert info == PLUGIN_INFO
    assert plugin.agent.token == ""
    assert plugin.server.registration_state == "registered"
    assert plugin.triggers == ["serve", "registration_accepted"]

    first = plugin.agent.run_pass(ACTIVE_PODS)

    # §9.1: r1, found among the active pods, echoed whole, force-evicted by the balancer.
    assert first.evict == ep.GetEvictPodsResponse(
        evict_pods=[
            ep.EvictPod(
                pod=ACTIVE_PODS[1],
                reason=REASON,
                force_evict=True,
                eviction_plugin_name="numa_memory_balancer",
            )
        ]
    )
    (evict,) = first.evict.evict_pods
    assert not evict.HasField("deletion_options") and not first.evict.HasField("condition")
    assert evict.pod.SerializeToString() == ACTIVE_PODS[1].SerializeToString()
    assert (evict.pod.metadata.namespace, evict.pod.metadata.name) == ("batch", "r1")
    echoed = evict.pod.SerializeToString()
    assert all(unknown in echoed for unknown in unknown_fields_of("r1"))
    # §9.2: never met, so the agent asks no top pods.
    assert first.threshold == ep.ThresholdMetResponse()
    assert first.threshold.SerializeToString() == b""
    assert first.top is None

    # Taken once, and journaled before the answer: the next pass is offered nothing.
    assert _committed(plugin).count("BalanceEvictionTaken") == 1
    second = plugin.agent.run_pass(ACTIVE_PODS)
    assert second.evict == ep.GetEvictPodsResponse()
    assert second.evict.SerializeToString() == b""
    assert _committed(plugin).count("BalanceEvictionTaken") == 1
    view = plugin.balancer.ref.ask(GetBalancerState(), timeout=10)
    assert view.state.current is not None and view.state.current.evict_executed


def test_top_eviction_pods_names_none(plugin: Plugin) -> None:
    plugin.agent.register()
    top = plugin.agent.plugin.GetTopEvictionPods(
        ep.GetTopEvictionPodsRequest(active_pods=ACTIVE_PODS, topN=1, eviction_scope="memory"),
        timeout=10,
    )
    assert top == ep.GetTopEvictionPodsResponse()
    assert top.SerializeToString() == b""


def test_the_offer_is_taken_even_when_no_active_pod_matches(plugin: Plugin) -> None:
    plugin.agent.register()
    assert plugin.agent.run_pass([ACTIVE_PODS[0], ACTIVE_PODS[2]]).evict.evict_pods == []
    assert plugin.agent.run_pass(ACTIVE_PODS).evict.evict_pods == []  # O10


def test_no_stored_record_offers_nothing(socket_dir: Path) -> None:
    made = make_plugin(socket_dir, tick=False)
    made.server.start()
    try:
        made.agent.register()
        assert made.agent.run_pass(ACTIVE_PODS).evict == ep.GetEvictPodsResponse()
    finally:
        made.agent.close()
        made.server.stop()
        made.balancer.ref.stop()


def _stale_socket(path: Path) -> None:
    """A socket file left by a killed process: bound, never unlinked, nobody listening."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as leftover:
        leftover.bind(str(path))


def _stale_file(path: Path) -> None:
    path.write_text("left over")


@pytest.mark.parametrize(
    "leave",
    [
        pytest.param(_stale_socket, id="a stale socket is replaced"),
        pytest.param(_stale_file, id="a stale regular file is replaced"),
    ],
)
def test_a_stale_file_at_the_socket_path_is_replaced(socket_dir: Path, leave: Any) -> None:
    made = make_plugin(socket_dir)
    leave(made.server.socket_path)
    made.server.start()
    try:
        assert made.agent.register() == PLUGIN_INFO
        assert made.agent.run_pass(ACTIVE_PODS).evict.evict_pods[0].reason == REASON
    finally:
        made.agent.close()
        made.server.stop()
        made.balancer.ref.stop()


def test_a_missing_registration_directory_is_created(socket_dir: Path) -> None:
    made = make_plugin(socket_dir / "plugin-socks")
    made.server.start()
    try:
        assert made.agent.register() == PLUGIN_INFO
    finally:
        made.agent.close()
        made.server.stop()
        made.balancer.ref.stop()


def test_a_rejected_registration_recreates_the_socket(plugin: Plugin) -> None:
    recreated = threading.Event()
    steps = plugin.steps

    def watch(step: Step) -> None:
        steps.append(step)
        if step.trigger == "socket_recreated":
            recreated.set()

    plugin.server._socket._on_step = watch
    path = plugin.server.socket_path
    first = path.lstat()

    plugin.agent.register(accept=False, error="a plugin named numa_memory_balancer exists")

    assert recreated.wait(timeout=10)
    assert plugin.triggers == ["serve", "registration_rejected", "socket_recreated"]
    assert plugin.server.registration_state == "serving"
    # A new file (the inode number may be reused): the watcher sees a socket created anew.
    assert path.lstat().st_ctime_ns > first.st_ctime_ns
    assert stat.S_IMODE(path.lstat().st_mode) == 0o600

    # The agent registers the new socket, and the balancer's offer is still there.
    assert plugin.agent.register() == PLUGIN_INFO
    assert plugin.server.registration_state == "registered"
    assert plugin.agent.run_pass(ACTIVE_PODS).evict.evict_pods[0].pod == ACTIVE_PODS[1]


def test_a_restarted_agent_re_registers_the_same_socket(plugin: Plugin) -> None:
    plugin.agent.register()
    plugin.agent.register()
    assert plugin.triggers == ["serve", "registration_accepted", "registration_accepted"]
    assert plugin.server.registration_state == "registered"


def test_stop_removes_the_socket_and_is_idempotent(plugin: Plugin) -> None:
    plugin.agent.register()
    plugin.server.stop()
    assert not plugin.server.socket_path.exists()
    assert plugin.server.registration_state == "deregistered"
    plugin.server.stop()
    assert plugin.triggers == ["serve", "registration_accepted", "stop"]
    with pytest.raises(InvalidTransition):
        plugin.server.start()


def test_no_socket_while_the_balancer_is_not_running(socket_dir: Path) -> None:
    made = make_plugin(socket_dir)
    made.balancer.ref.stop()
    with pytest.raises(RuntimeError, match=r"numa_memory_balancer.*not ready"):
        made.server.start()
    assert not made.server.socket_path.exists()
    assert made.server.registration_state == "not_serving"


def test_a_socket_path_over_107_bytes_is_refused(socket_dir: Path) -> None:
    balancer = start_balancer(tick=False)
    try:
        with pytest.raises(ValueError, match="limited to 107 bytes"):
            EvictionPluginServer(socket_dir / ("d" * 100), balancer.ref)
    finally:
        balancer.ref.stop()


def _code_of(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    error: Any = caught.value
    return error.code(), error.details()


def test_a_refused_taken_mark_is_unavailable_and_takes_nothing(plugin: Plugin) -> None:
    plugin.agent.register()
    plugin.balancer.committer.refuse_next("disk full")
    request = ep.GetEvictPodsRequest(active_pods=ACTIVE_PODS)
    code, details = _code_of(lambda: plugin.agent.plugin.GetEvictPods(request, timeout=10))
    assert code == grpc.StatusCode.UNAVAILABLE
    assert details.startswith("GetEvictPods: the eviction offer was not taken: ")
    assert details.endswith("disk full")
    assert "BalanceEvictionTaken" not in _committed(plugin)
    # Nothing was taken: the agent's next poll gets the offer.
    assert plugin.agent.run_pass(ACTIVE_PODS).evict.evict_pods[0].reason == REASON


def test_a_stopped_balancer_is_unavailable(plugin: Plugin) -> None:
    plugin.agent.register()
    plugin.balancer.ref.stop()
    code, details = _code_of(lambda: plugin.agent.plugin.ThresholdMet(ep.Empty(), timeout=10))
    assert (code, details) == (
        grpc.StatusCode.UNAVAILABLE,
        "ThresholdMet: the memory balancer is not running",
    )


def test_a_busy_balancer_answers_within_the_callers_deadline(plugin: Plugin) -> None:
    plugin.agent.register()
    release = threading.Event()
    # A round in progress: the balancer waits on its metric source.
    plugin.balancer.metrics.hold = release
    plugin.balancer.ref.tell(Tick(NOW + 60))
    assert plugin.balancer.metrics.held.wait(timeout=10)
    try:
        code, details = _code_of(lambda: plugin.agent.plugin.GetToken(ep.Empty(), timeout=0.5))
        # The server's answer, sent just before the caller's deadline, says who was slow.
        assert code == grpc.StatusCode.UNAVAILABLE
        assert details.startswith("GetToken: the memory balancer did not answer within 0.4")
    finally:
        release.set()
    assert plugin.agent.plugin.GetToken(ep.Empty(), timeout=10).token == ""


def test_a_call_without_a_deadline_is_answered(plugin: Plugin) -> None:
    # The server asks with its own 10 s default; a caller without a deadline still gets answers.
    with grpc.insecure_channel(f"unix:{plugin.server.socket_path}") as channel:
        info = reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest())
        token_answer = ep_grpc.EvictionPluginStub(channel).GetToken(ep.Empty())
    assert info == PLUGIN_INFO and token_answer == ep.GetTokenResponse(token="")


def test_garbage_request_bytes_are_an_invalid_argument(plugin: Plugin) -> None:
    with grpc.insecure_channel(f"unix:{plugin.server.socket_path}") as channel:
        send_bytes = channel.unary_unary("/evictionplugin.v1alpha1.EvictionPlugin/GetEvictPods")
        code, details = _code_of(lambda: send_bytes(b"\x0a\xff", timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid evictionplugin.v1alpha1.GetEvictPodsRequest" in details
    # Nothing was taken by the refused call.
    assert plugin.agent.register() == PLUGIN_INFO
    assert plugin.agent.run_pass(ACTIVE_PODS).evict.evict_pods[0].reason == REASON


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(BalancerUnavailable("disk full"), grpc.StatusCode.UNAVAILABLE,
                     id="a balancer that cannot answer now is UNAVAILABLE"),
        pytest.param(ValueError("offer points nowhere"), grpc.StatusCode.INTERNAL,
                     id="an offer that cannot be converted is INTERNAL"),
    ],
)  # fmt: skip
def test_status_of_the_eviction_plugins_errors(error: BaseException, code: grpc.StatusCode) -> None:
    assert code_for(error) == code
