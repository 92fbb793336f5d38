"""``qrmd run --enable-cpu-advisor`` against the sys-advisor simulator, over real unix sockets
(cpu-policy §7.2, §10.6, §11, §16 items 24 and 27–29; wire.md §6, §10; the issue's deviation
for a sick advisor and its fallback).

Each test runs the real daemon as a process on ``synthetic:cpus=16,sockets=2,numas=4`` with
reserve ``0,2`` and a simulator in this process that reads the daemon's GetCheckpoint socket;
kubelet's side is a plain gRPC client. Waits poll with a deadline; nothing sleeps for a period.
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from journal import read_records
from qrmd.sim.advisor import INVALID_KINDS, Fault, LoadModel, SimNode, SysAdvisorSimulator
from tests.integration.daemon_process import (
    PluginClient,
    QrmdProcess,
    shared_request,
    wait_for,
)
from wire.advisor_checkpoint import read_checkpoint
from wire.gen import resourceplugin_pb2 as rp

NODE = SimNode({0: 4, 1: 4, 2: 4, 3: 4})
CALL_TIMEOUT_S = 0.5
QOS_KEY = "katalyst.kubewharf.io/qos_level"
MEMORY_KEY = "katalyst.kubewharf.io/memory_enhancement"


class Rig:
    """One daemon with the advisor enabled, a simulator, and kubelet's client."""

    def __init__(
        self,
        directory: Path,
        load: float = 3.0,
        extra: tuple[str, ...] = (),
        explicit_reclaim: bool = True,
    ) -> None:
        self.directory = directory
        self.advisor_socket = str(directory / "cpu_advisor.sock")
        self.plugin_socket = str(directory / "cpu_plugin.sock")
        self.model = LoadModel(load=load, explicit_reclaim=explicit_reclaim)
        self.sim = self.new_sim()
        self.sim.start()
        self.qrmd = QrmdProcess(
            directory / "state",
            [directory / "kubelet"],
            [
                "--enable-cpu-advisor",
                "--cpu-advisor-socket", self.advisor_socket,
                "--cpu-plugin-socket", self.plugin_socket,
                "--cpu-advisor-call-timeout", f"{int(CALL_TIMEOUT_S * 1000)}ms",
                "--durability", "none",
                *extra,
            ],
        ).start()  # fmt: skip
        self.kubelet = PluginClient(self.qrmd.socket_paths[0])
        self.wait_link("watching")

    def new_sim(self) -> SysAdvisorSimulator:
        return SysAdvisorSimulator(self.advisor_socket, self.plugin_socket, NODE, self.model, 0.1)

    def metric(self, series: str) -> float | None:
        """The value of one series (name and labels exactly as exposed), or None."""
        for line in self.qrmd.http("/metrics")[1].splitlines():
            if line.rsplit(" ", 1)[0] == series:
                return float(line.rsplit(" ", 1)[1])
        return None

    def link_state(self) -> str:
        for line in self.qrmd.http("/metrics")[1].splitlines():
            if line.startswith("qrmd_advisor_link_state{") and line.endswith(" 1.0"):
                return line.split('"')[1]
        return ""

    def wait_link(self, state: str, timeout_s: float = 20.0) -> None:
        wait_for(lambda: self.link_state() == state, timeout_s, f"the link to be {state}")

    def close(self) -> None:
        self.kubelet.close()
        self.qrmd.close()
        self.sim.stop()


@pytest.fixture(name="make_rig")
def _make_rig() -> Iterator[Callable[..., Rig]]:
    directory = Path(tempfile.mkdtemp(prefix="qadv", dir="/tmp"))
    rigs: list[Rig] = []

    def make(**kw: object) -> Rig:
        rig = Rig(directory, **kw)  # type: ignore[arg-type]
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.close()
    shutil.rmtree(directory, ignore_errors=True)


def reclaimed_request(pod: str, cores: float = 1.0) -> rp.ResourceRequest:
    request = shared_request(pod, cores)
    request.annotations[QOS_KEY] = "reclaimed_cores"
    request.labels[QOS_KEY] = "reclaimed_cores"
    return request


def dedicated_request(pod: str, cores: float, numa: int) -> rp.ResourceRequest:
    request = shared_request(pod, cores)
    request.annotations[QOS_KEY] = "dedicated_cores"
    request.labels[QOS_KEY] = "dedicated_cores"
    request.annotations[MEMORY_KEY] = json.dumps({"numa_binding": "true"})
    request.hint.nodes.append(numa)
    request.hint.preferred = True
    return request


def cpuset_of(answer: rp.ResourceAllocationResponse) -> str:
    return str(answer.allocation_result.resource_allocation["cpu"].allocation_result)


def end_ramp_up(rig: Rig) -> None:
    """Past the 1-s transition period, GetResourcesAllocation ends every ramp-up (§10.1)."""
    time.sleep(1.1)  # the daemon's transition period is wall time in another process
    rig.kubelet.allocations()


# -- the spec's items through the wire -----------------------------------------------------------


def test_the_spec_example_is_applied_with_exact_cpusets(make_rig: Callable[..., Rig]) -> None:
    # 2 shared CPUs requested x 3 -> share 6, reclaim implicit: the §11.8 example's response
    rig = make_rig(load=3.0, explicit_reclaim=False)
    rig.kubelet.allocate("p1", 1.0)
    rig.kubelet.allocate("p2", 1.0)
    rig.kubelet.plugin.Allocate(reclaimed_request("p3"), timeout=10)
    end_ramp_up(rig)
    want = {
        "p1": {"app": "1,3-4,9,11-12"},
        "p2": {"app": "1,3-4,9,11-12"},
        "p3": {"app": "5-8,10,13-15"},
    }
    wait_for(lambda: rig.kubelet.allocations() == want, 10, "the advisor's pools")
    assert rig.metric('pool_size{policy="dynamic",poolName="share",pool_type="share"}') == 6


def test_ramping_containers_under_the_advisor_get_all_but_reserve_and_dedicated(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    answer = rig.kubelet.plugin.Allocate(dedicated_request("pod-d", 4, numa=3), timeout=10)
    assert cpuset_of(answer) == "6-7,14-15"
    # §16 item 28: all − reserved − dedicated
    assert rig.kubelet.allocate("pod-a", 2.0) == "1,3-5,8-13"


def test_get_checkpoint_shows_ramp_up_owners_and_numa_of_non_pooled_entries_only(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    rig.kubelet.plugin.Allocate(dedicated_request("pod-d", 4, numa=3), timeout=10)
    rig.kubelet.allocate("pod-a", 2.0)
    checkpoint = read_checkpoint(rig.plugin_socket)
    # §16 item 29
    dedicated = checkpoint["pod-d"]["app"]
    assert dedicated.owner_pool_name == "dedicated"
    assert {n: str(c) for n, c in (dedicated.topology_aware_assignments or {}).items()} == {
        3: "6-7,14-15"
    }
    ramping = checkpoint["pod-a"]["app"]
    assert ramping.ramp_up and ramping.topology_aware_assignments is None


def test_remove_pod_tells_the_advisor_first(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    rig.kubelet.allocate("pod-a", 2.0)
    rig.kubelet.plugin.RemovePod(rp.RemovePodRequest(pod_uid="pod-a"), timeout=10)
    assert rig.sim.stats.removed == ["pod-a"]  # §16 item 24
    assert "pod-a" not in rig.kubelet.allocations()


def test_a_sick_advisor_does_not_stop_remove_pod(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    rig.kubelet.allocate("pod-a", 2.0)
    rig.sim.set_fault(Fault.UNAVAILABLE)
    # §16 item 24 with the deviation: the reference aborts the removal, qrmd removes
    rig.kubelet.plugin.RemovePod(rp.RemovePodRequest(pod_uid="pod-a"), timeout=10)
    assert "pod-a" not in rig.kubelet.allocations()
    rig.wait_link("backing_off")


def test_invalid_responses_are_refused_and_change_no_cpu(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    rig.kubelet.allocate("p1", 1.0)
    end_ramp_up(rig)
    refused = 'handle_advisor_resp_failed{policy="dynamic"}'
    rig.sim.set_fault(Fault.INVALID, invalid_kind="reserve_size")
    # The state as the last applied result left it: read once the refusals have begun.
    wait_for(lambda: (rig.metric(refused) or 0.0) > 0, 10, "a refused result")
    before = rig.kubelet.allocations()
    failed = rig.metric(refused) or 0.0
    wait_for(lambda: (rig.metric(refused) or 0.0) > failed + 2, 10, "more refused results")
    assert rig.kubelet.allocations() == before  # §16 item 27: any error leaves state unchanged
    assert rig.link_state() == "watching"


# -- reconnect, refusal, sickness ---------------------------------------------------------------


def test_a_reconnect_pushes_every_stored_container(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    rig.kubelet.allocate("pod-a", 1.0)
    rig.sim.stop()
    rig.wait_link("backing_off")
    rig.kubelet.allocate("pod-b", 1.0)  # answered without the advisor
    rig.kubelet.plugin.Allocate(dedicated_request("pod-d", 2, numa=1), timeout=10)
    rig.sim = rig.new_sim()
    rig.sim.start()
    rig.wait_link("watching", timeout_s=30)
    assert sorted(rig.sim.containers()) == [("pod-a", "app"), ("pod-b", "app"), ("pod-d", "app")]


def test_an_explicit_refusal_fails_that_allocate_undoes_it_and_keeps_watching(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    rig.kubelet.allocate("pod-a", 1.0)
    rig.sim.set_fault(Fault.REFUSE_ADD)
    with pytest.raises(grpc.RpcError) as caught:
        rig.kubelet.allocate("pod-b", 1.0)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert caught.value.details() == (
        "Allocate: pod default/name-pod-b (uid pod-b), container app: add container to qos "
        "aware server failed with error: AddContainer to sys-advisor failed: INVALID_ARGUMENT: "
        "simulated sys-advisor refuses pod pod-b container app"
    )
    assert sorted(rig.kubelet.allocations()) == ["pod-a"]
    assert rig.link_state() == "watching"


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(Fault.STALL, id="a stalled advisor (stream open, calls hang)"),
        pytest.param(Fault.UNAVAILABLE, id="an advisor answering UNAVAILABLE"),
        pytest.param(Fault.DROP_STREAM, id="an advisor dropping its stream"),
    ],
)
def test_a_sick_advisor_never_fails_or_stalls_kubelet_beyond_the_call_timeout(
    make_rig: Callable[..., Rig], fault: Fault
) -> None:
    rig = make_rig()
    rig.sim.set_fault(fault)
    slowest = 0.0
    began = time.monotonic()
    for index in range(8):
        started = time.monotonic()
        rig.kubelet.allocate(f"pod-{index}", 1.0)
        rig.kubelet.plugin.GetTopologyHints(shared_request(f"pod-{index}", 1.0), timeout=10)
        slowest = max(slowest, time.monotonic() - started)
    # One call at most waits for the timeout: the first finds the advisor sick, the others
    # answer without it (eight waits would take 4 s).
    assert slowest < CALL_TIMEOUT_S + 1.0
    assert time.monotonic() - began < CALL_TIMEOUT_S + 2.0
    assert sorted(rig.kubelet.allocations()) == [f"pod-{i}" for i in range(8)]


def test_silence_falls_back_to_request_sizing_and_a_result_takes_over_again(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig(extra=("--cpu-advisor-unhealthy-after", "2s"))
    rig.kubelet.allocate("p1", 1.0)
    end_ramp_up(rig)
    sized = 'qrmd_advisor_pools_sized_by{by="requests"}'
    assert rig.metric(sized) == 0.0
    rig.sim.stop()
    wait_for(lambda: rig.metric(sized) == 1.0, 15, "the fallback")
    status, body = rig.qrmd.http("/healthz")
    assert status == 503 and "pools sized by requests: no sys-advisor result applied" in body
    share = 'pool_size{policy="dynamic",poolName="share",pool_type="share"}'
    assert rig.metric(share) == 10  # by requests: reclaim keeps 4, share the surplus (§16.19)
    assert "no sys-advisor result applied since" in rig.qrmd.log()
    rig.sim = rig.new_sim()
    rig.sim.start()
    wait_for(lambda: rig.metric(sized) == 0.0, 30, "the advisor to size the pools again")
    wait_for(lambda: rig.metric(share) == 3, 10, "the advisor's share")  # ceil(3.0 x 1)
    assert "sys-advisor sizes the pools again" in rig.qrmd.log()


def test_every_invalid_response_kind_is_refused_through_the_wire_and_changes_no_cpu(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    rig.kubelet.plugin.Allocate(dedicated_request("pod-d", 2, numa=1), timeout=10)
    rig.kubelet.allocate("p1", 1.0)
    end_ramp_up(rig)
    refused = 'handle_advisor_resp_failed{policy="dynamic"}'
    rig.sim.set_fault(Fault.INVALID, invalid_kind="reserve_size")
    # The state as the last applied result left it: read once the refusals have begun.
    wait_for(lambda: (rig.metric(refused) or 0.0) > 0, 10, "a refused result")
    before = rig.kubelet.allocations()
    for kind in INVALID_KINDS:
        count = rig.metric(refused) or 0.0
        rig.sim.set_fault(Fault.INVALID, invalid_kind=kind)
        wait_for(lambda c=count: (rig.metric(refused) or 0.0) > c, 10, f"a refused {kind}")
        assert rig.kubelet.allocations() == before, kind  # §16 item 27
    assert rig.link_state() == "watching"
    rig.qrmd.signal(signal.SIGTERM)
    assert rig.qrmd.wait(15) == 0
    stages = {
        event["stage"]
        for record in read_records(str(rig.directory / "state"))
        for event in record.events
        if event.get("kind") == "AdvisorResponseRefused"
    }
    assert stages == {"validate"}  # every §11.6 rejection is the validator's


def test_a_response_arriving_during_an_allocate_waits_for_it_in_the_one_mailbox(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    rig.kubelet.allocate("p1", 1.0)
    end_ramp_up(rig)
    wait_for(lambda: rig.sim.stats.responses_sent > 3, 10, "results after ramp-up")
    slow_s = 0.4  # AddContainer answers after this; results keep coming every 0.1 s
    rig.sim.set_fault(Fault.SLOW, slow_s=slow_s)
    sent = rig.sim.stats.responses_sent
    started = time.monotonic()
    rig.kubelet.allocate("p2", 1.0)
    assert time.monotonic() - started >= slow_s
    assert rig.sim.stats.responses_sent > sent  # results arrived while the Allocate waited
    rig.sim.set_fault(Fault.HEALTHY)
    wait_for(lambda: ("p2", "app") in rig.sim.containers(), 10, "the advisor to know p2")
    rig.qrmd.signal(signal.SIGTERM)
    assert rig.qrmd.wait(15) == 0
    records = list(read_records(str(rig.directory / "state")))
    allocates = [r for r in records if r.cause.get("rpc") == "Allocate"]
    (allocate,) = [r for r in allocates if r.cause["request"]["pod_uid"] == "p2"]
    after = [r for r in records if r.seq > allocate.seq]
    assert after and after[0].cause.get("rpc") == "ListAndWatch"
    # Decided only once the Allocate had its AddContainer answer: it waited in the mailbox.
    assert after[0].cause["now"] >= allocate.cause["now"] + slow_s
