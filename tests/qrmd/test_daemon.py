"""The composition root in-process, with a stand-in for the gRPC server: start order, the
servers' readiness, restarts that keep the durable state, health and metrics over HTTP, stop in
reverse. The real process over real gRPC is in ``tests/integration``."""

from __future__ import annotations

import functools
import socket
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pykka
import pytest

from actors.allocator_messages import (
    Allocate,
    AllocatorUnavailable,
    GetResourcesAllocation,
    RemovePod,
)
from actors.store_status import StoreHealth
from actors.supervisor import SupervisedRef
from journal import Journal, JournalError
from policy.cpu.request import ContainerType, ResourceRequest
from qrmd.config import DaemonConfig, load_config
from qrmd.config_values import settings_of
from qrmd.cpu_plugin import subsystem as cpu_plugin
from qrmd.cpu_plugin.settings import CpuPluginSettings
from qrmd.daemon import Builder, Daemon, DaemonError
from qrmd.store.subsystem import StoreWiring
from tests.integration.daemon_process import PluginClient
from wire.rpc import RpcObserver

SYNTH = "synthetic:cpus=16,sockets=2,numas=4"


class FakeServer:
    """Records what the daemon hands a plugin server and when it is started and stopped."""

    def __init__(
        self,
        events: list[str],
        socket_dir: str,
        allocator: SupervisedRef,
        ready: Callable[[], bool],
        observer: RpcObserver | None,
    ) -> None:
        self.events, self.socket_dir, self.allocator = events, socket_dir, allocator
        self.ready, self.observer = ready, observer
        self.ready_at_start: bool | None = None

    def start(self) -> None:
        self.ready_at_start = self.ready()
        self.events.append(f"serve {Path(self.socket_dir).name}")

    def stop(self, grace_s: float) -> None:
        self.events.append(f"stop {Path(self.socket_dir).name}")


class Harness:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.events: list[str] = []
        self.servers: list[FakeServer] = []

    def config(self, **flags: Any) -> DaemonConfig:
        base: dict[str, object] = {
            "topology": SYNTH,
            "reserved-cpu-cores": "2",
            "state-dir": str(self.root / "state"),
            "socket-dir": [str(self.root / "k1")],
            "metrics-address": "127.0.0.1:0",
            "durability": "none",
        }
        base.update(flags)
        return load_config(base)

    def factory(self, *args: Any) -> FakeServer:
        server = FakeServer(self.events, *args)
        self.servers.append(server)
        return server

    def builders(self) -> dict[str, Builder]:
        """The CPU plugin with this harness's fake servers."""
        return {"cpu_plugin": functools.partial(cpu_plugin.build, server_factory=self.factory)}

    def daemon(self, **flags: Any) -> Daemon:
        return Daemon(self.config(**flags), builders=self.builders())


@pytest.fixture
def harness() -> Iterator[Harness]:
    with tempfile.TemporaryDirectory(dir="/tmp") as root:
        yield Harness(Path(root))
    pykka.ActorRegistry.stop_all()


def shared(pod: str, container: str = "app") -> ResourceRequest:
    return ResourceRequest(
        pod_uid=pod,
        pod_namespace="default",
        pod_name=pod,
        container_name=container,
        container_type=ContainerType.MAIN,
        container_index=0,
        resource_name="cpu",
        resource_requests={"cpu": 2.0},
    )


def http(daemon: Daemon, path: str) -> tuple[int, str]:
    assert daemon.endpoint is not None
    host, port = daemon.endpoint.address
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_servers_start_last_one_per_directory_and_only_when_ready(harness: Harness) -> None:
    daemon = harness.daemon(**{"socket-dir": [str(harness.root / "k1"), str(harness.root / "k2")]})
    daemon.start()
    try:
        assert harness.events == ["serve k1", "serve k2"]
        assert all(s.ready_at_start for s in harness.servers)
        assert (harness.root / "k2").is_dir()
        assert http(daemon, "/healthz") == (200, "ok\n")
    finally:
        daemon.stop()
    assert harness.events[-2:] == ["stop k2", "stop k1"]
    assert pykka.ActorRegistry.get_all() == []


def test_a_directory_listed_twice_through_a_symlink_gets_one_server(harness: Harness) -> None:
    (harness.root / "k1").mkdir()
    (harness.root / "alias").symlink_to(harness.root / "k1")
    daemon = harness.daemon(
        **{"socket-dir": [str(harness.root / "k1"), str(harness.root / "alias")]}
    )
    daemon.start()
    daemon.stop()
    assert harness.events == ["serve k1", "stop k1"]


def test_allocations_survive_a_store_restart_and_a_daemon_restart(harness: Harness) -> None:
    daemon = harness.daemon()
    daemon.start()
    try:
        allocator = harness.servers[0].allocator
        allocator.ask(Allocate(shared("pod-a")))
        allocator.ask(Allocate(shared("pod-b")))
        allocator.ask(RemovePod("pod-b"))
        before = allocator.ask(GetResourcesAllocation())
        assert set(before.pod_resources) == {"pod-a"}
        assert daemon.supervisor is not None
        daemon.supervisor.current("store").stop()  # the store dies
        with pytest.raises(AllocatorUnavailable):
            allocator.ask(GetResourcesAllocation())
        wait_until(lambda: daemon.supervisor is not None and daemon.supervisor.available())
        assert allocator.ask(GetResourcesAllocation()) == before
    finally:
        daemon.stop()
    again = harness.daemon()
    again.start()
    try:
        assert harness.servers[-1].allocator.ask(GetResourcesAllocation()) == before
    finally:
        again.stop()


def take_the_journal_from_a_dead_store(daemon: Daemon, directory: Path) -> Journal:
    """Stop the store and open its journal before the supervisor restarts it (retrying if
    the supervisor wins the race)."""
    assert daemon.supervisor is not None and daemon.context is not None
    for _ in range(20):
        wait_until(daemon.supervisor.available)
        daemon.supervisor.current("store").stop()
        try:
            journal, _ = Journal.open(
                str(directory),
                node_name=daemon.config.node_name,
                topology_fingerprint=daemon.context.topology.fingerprint(),
                durability="none",
            )
        except JournalError:
            continue
        return journal
    raise AssertionError("the supervisor always restarted the store first")


def test_health_turns_unhealthy_while_an_actor_cannot_restart(harness: Harness) -> None:
    daemon = harness.daemon()
    daemon.start()
    try:
        assert daemon.supervisor is not None
        intruder = take_the_journal_from_a_dead_store(daemon, harness.root / "state")
        try:
            wait_until(lambda: "start failed" in http(daemon, "/healthz")[1])
            status, body = http(daemon, "/healthz")
            assert status == 503
            assert "actor store is down: start failed" in body
            assert "is in use by another process" in body
            assert 'qrmd_actor_up{actor="store"} 0.0' in http(daemon, "/metrics")[1]
        finally:
            intruder.close()
        wait_until(lambda: http(daemon, "/healthz") == (200, "ok\n"))
    finally:
        daemon.stop()


def test_metrics_show_reference_names_pools_and_recovery(harness: Harness) -> None:
    daemon = harness.daemon()
    daemon.start()
    try:
        harness.servers[0].allocator.ask(Allocate(shared("pod-a")))
        status, text = http(daemon, "/metrics")
        assert status == 200
        for line in (
            'heartbeat{policy="dynamic"} 1.0',
            'alloc_failed{policy="dynamic"} 0.0',
            'pool_size{policy="dynamic",poolName="reserve",pool_type="reserve"} 2.0',
            'pool_size{policy="dynamic",poolName="reclaim",pool_type="reclaim"} 4.0',
            "qrmd_recovery_records_replayed 0.0",
            'qrmd_actor_up{actor="allocator"} 1.0',
            "qrmd_healthy 1.0",
        ):
            assert line in text.splitlines()
        assert http(daemon, "/nope")[0] == 404
    finally:
        daemon.stop()


def test_a_journal_of_another_machine_is_one_clear_error_and_nothing_left_running(
    harness: Harness,
) -> None:
    first = harness.daemon()
    first.start()
    first.stop()
    other = harness.daemon(
        topology="synthetic:cpus=8,sockets=1,numas=1", **{"reserved-cpu-cores": "0"}
    )
    with pytest.raises(DaemonError, match=r"actor store failed to start: .*topology"):
        other.start()
    assert pykka.ActorRegistry.get_all() == []
    assert harness.events == ["serve k1", "stop k1"]  # the second daemon never served


def test_metrics_off_opens_no_port_and_keeps_no_registry(harness: Harness) -> None:
    daemon = harness.daemon(**{"metrics-address": "off"})
    daemon.start()
    try:
        assert daemon.endpoint is None
        assert daemon.metrics is None, "nothing would read a registry without an address"
        assert harness.servers[0].observer is None
    finally:
        daemon.stop()


def test_metrics_on_calls_answered_before_the_registry_exists_are_counted(
    harness: Harness,
) -> None:
    """The kubelet servers are handed a relay when they serve, before the registry is built
    (start step 7): what they answer in between is replayed into it, not lost."""

    def answer_at_serve(*args: Any) -> FakeServer:
        server = harness.factory(*args)
        assert server.observer is not None
        server.observer.observe("Allocate", 0.002, "OK")
        server.observer.observe(
            "/resourceplugin.v1alpha1.ResourcePlugin/Allocate", 0.001, "INTERNAL"
        )
        return server

    builders = {"cpu_plugin": functools.partial(cpu_plugin.build, server_factory=answer_at_serve)}
    daemon = Daemon(harness.config(), builders=builders)
    daemon.start()
    try:
        assert daemon.metrics is not None
        observer = harness.servers[0].observer
        assert observer is not None
        observer.observe("Allocate", 0.003, "OK")  # answered after the start: straight in
        exposition = http(daemon, "/metrics")[1]
        assert 'qrmd_rpc_duration_seconds_count{code="OK",rpc="Allocate"} 2.0' in exposition
        assert 'qrmd_rpc_duration_seconds_count{code="INTERNAL",rpc="Allocate"} 1.0' in exposition
        assert 'alloc_failed{policy="dynamic"} 1.0' in exposition
    finally:
        daemon.stop()


def test_a_probe_that_connects_before_the_endpoint_is_built_waits_for_the_truth(
    harness: Harness,
) -> None:
    """The endpoint's port is bound before recovery, its HTTP server built after kubelet is
    served: a /healthz sent while the kubelet server starts waits in the backlog and is
    answered once everything is up, never earlier."""
    with socket.socket() as probe_port:
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    probes: list[socket.socket] = []

    def probe_at_serve(*args: Any) -> FakeServer:
        server = harness.factory(*args)
        assert (daemon.metrics, daemon.endpoint) == (None, None), "built after kubelet's socket"
        probe = socket.create_connection(("127.0.0.1", port), timeout=5)
        probe.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        probe.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing answers it yet
            probe.recv(1)
        probes.append(probe)
        return server

    builders = {"cpu_plugin": functools.partial(cpu_plugin.build, server_factory=probe_at_serve)}
    daemon = Daemon(harness.config(**{"metrics-address": f"127.0.0.1:{port}"}), builders=builders)
    daemon.start()
    try:
        (probe,) = probes
        probe.settimeout(5)
        answer = b""
        while chunk := probe.recv(4096):
            answer += chunk
        probe.close()
        assert answer.startswith(b"HTTP/1.0 200 ")
        assert answer.endswith(b"\r\n\r\nok\n")
    finally:
        daemon.stop()


def test_a_taken_metrics_port_fails_before_recovery(harness: Harness) -> None:
    first = harness.daemon()
    first.start()
    try:
        assert first.endpoint is not None
        host, port = first.endpoint.address
        second = Harness(harness.root / "second")
        with pytest.raises(OSError, match=f"cannot listen on --metrics-address {host}:{port}"):
            second.daemon(**{"metrics-address": f"{host}:{port}"}).start()
        assert not (harness.root / "second" / "state").exists()
    finally:
        first.stop()


def test_over_grpc_the_daemon_answers_unavailable_while_the_store_is_down(
    harness: Harness,
) -> None:
    """The real PluginServer in front of the supervisor: while the StateStore cannot restart,
    kubelet's calls get UNAVAILABLE, never an answer from a state the disk may not hold."""
    daemon = Daemon(harness.config())  # the real gRPC server
    daemon.start()
    client = PluginClient(Path(settings_of(CpuPluginSettings, daemon.config).socket_paths()[0]))
    try:
        assert client.allocate("pod-a") == "1,3-15"
        intruder = take_the_journal_from_a_dead_store(daemon, harness.root / "state")
        try:
            for call in (lambda: client.allocate("pod-b"), client.allocations):
                with pytest.raises(grpc.RpcError) as err:
                    call()
                assert err.value.code() is grpc.StatusCode.UNAVAILABLE, err.value.details()
        finally:
            intruder.close()
        wait_until(lambda: daemon.supervisor is not None and daemon.supervisor.available())
        assert set(client.allocations()) == {"pod-a"}
    finally:
        client.close()
        daemon.stop()
    assert not Path(settings_of(CpuPluginSettings, daemon.config).socket_paths()[0]).exists()


def test_health_turns_unhealthy_when_the_store_refuses_commits(harness: Harness) -> None:
    """A journal that failed beyond repair (the store refuses every commit) is a reason."""
    daemon = harness.daemon()
    daemon.start()
    try:
        store = daemon.find(StoreWiring)
        assert store is not None and store.status is not None
        real = store.status
        # What the store publishes when its journal fails beyond repair (its status subscriber).
        store.publish_status(
            real.with_health(
                StoreHealth("state store refuses commits: cannot cut back segment 00000001")
            )
        )
        assert http(daemon, "/healthz") == (
            503,
            "state store refuses commits: cannot cut back segment 00000001\n",
        )
        assert "qrmd_state_store_healthy 0.0" in http(daemon, "/metrics")[1].splitlines()
        store.publish_status(real)
        assert http(daemon, "/healthz") == (200, "ok\n")
    finally:
        daemon.stop()
