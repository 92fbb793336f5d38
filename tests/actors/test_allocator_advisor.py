"""The Allocator with sys-advisor (actors.allocator_advisor): responses applied in its mailbox,
the request-based fallback, AddContainer after Allocate and RemovePod before a removal, sick
versus refused (cpu-policy §7.2, §10.6, §11.5, §11.8; the issue's deviation for a sick advisor).

Driven through ``AllocatorCore`` on a real journal (``StateStoreCore``, durability ``none``) with
a fake advisor client and injected clocks, so every advisor record can be re-run from the
journal; and once through the real pykka actors, for the order of a response that arrives
while an Allocate waits for AddContainer. Worked values: (16,2,4), reserve ``0,2``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.advisor_link import LinkStats
from actors.advisor_messages import (
    AdvisorLinkChanged,
    ApplyAdvice,
    CheckAdvisorSilence,
    ReportSickAdvisor,
)
from actors.allocator import AllocatorActor, AllocatorCore
from actors.allocator_advisor import AdvisorCalls
from actors.allocator_messages import (
    Allocate,
    GetResourcesAllocation,
    RemovePod,
    RemoveResidualPods,
    ResidualRemoval,
    StartPolicy,
)
from actors.ports.advisor import AdvisorRefused, AdvisorSick
from actors.state_store import StateStoreCore, StoreConfig
from actors.store_messages import Snapshot
from journal import read_records
from machines import advisor_link as machine
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.refusal import AdvisorRefusedError
from policy.cpu.advisor.response import AdvisorResponse
from policy.cpu.context import PolicyContext
from policy.state.events import Event
from qrmd.offline.decision_rerun import rerun_in_journal
from tests.actors.fakes import FakeClock, FakePodSource
from tests.policy.cpu.advisor.fixtures import info, pool, response
from tests.policy.cpu.residual_fixtures import evidence
from tests.policy.decision_fixtures import request
from tests.topologies import SYNTH_16_2_4, cpus

CTX = PolicyContext(topology=SYNTH_16_2_4, reserved=cpus("0,2"), advisor_enabled=True)
T0 = 1715180645.0
UNHEALTHY_AFTER_S = 300.0
RESERVE = pool("reserve", 2)
#: The pools by requests on (16,2,4) after the §11.8 example's share of 6 (§9.3, §16 item 19).
FALLBACK_POOLS = {"reserve": "0,2", "share": "1,3-7,11-14", "reclaim": "8-10,15"}


def share_of(size: int, *pods: str) -> AdvisorResponse:
    """A response sizing ``share`` to ``size`` with ``pods``' container ``app`` in it."""
    members = {pod: {"app": info("share", {})} for pod in pods}
    return response(pool("share", size), RESERVE, members)


@dataclass
class ScriptedAdvisor:
    """An AdvisorClient whose answers tests script per pod; it records every call."""

    add: dict[str, Exception] = field(default_factory=dict)
    remove: dict[str, Exception] = field(default_factory=dict)
    added: list[ContainerMetadata] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    timeouts: list[float] = field(default_factory=list)
    gate: threading.Event | None = None  # AddContainer waits for it (a slow advisor)
    entered: threading.Event = field(default_factory=threading.Event)

    def connect(self, timeout_s: float) -> None:
        pass

    def add_container(self, metadata: ContainerMetadata, timeout_s: float) -> None:
        self.timeouts.append(timeout_s)
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(10)
        if metadata.pod_uid in self.add:
            raise self.add[metadata.pod_uid]
        self.added.append(metadata)

    def remove_pod(self, pod_uid: str, timeout_s: float) -> None:
        self.timeouts.append(timeout_s)
        if pod_uid in self.remove:
            raise self.remove[pod_uid]
        self.removed.append(pod_uid)

    def list_and_watch(self) -> Any:
        raise AssertionError("the Allocator never opens the stream")

    def close(self) -> None:
        pass


SICK = AdvisorSick("AddContainer", "DEADLINE_EXCEEDED", "Deadline Exceeded")
REFUSED = AdvisorRefused("AddContainer", "INVALID_ARGUMENT", "unknown qos level")


@dataclass
class HealthLog:
    updates: list[str | None] = field(default_factory=list)

    def update(self, error: str | None, now: float) -> None:
        self.updates.append(error)


class StoreCommitter:
    def __init__(self, core: StateStoreCore) -> None:
        self.core = core

    def commit(self, events: tuple[Event, ...], cause: Any) -> Snapshot:
        return self.core.commit(events, cause)

    def latest(self) -> Snapshot:
        return self.core.snapshot


class Node:
    """An Allocator with the advisor enabled, on a real journal in ``directory``."""

    def __init__(self, directory: Path, *, link_state: str = machine.WATCHING) -> None:
        self.directory = str(directory)
        self.store = StateStoreCore.open(
            StoreConfig(self.directory, "advisor-node", durability="none"), SYNTH_16_2_4
        )
        self.clock = FakeClock(T0)
        self.mono = FakeClock(10.0)
        self.advisor = ScriptedAdvisor()
        self.stats = LinkStats()
        self.health = HealthLog()
        self.link: list[Any] = []
        self.calls = AdvisorCalls(
            client=self.advisor,
            call_timeout_s=2.0,
            unhealthy_after_s=UNHEALTHY_AFTER_S,
            report_sick=self.link.append,
            stats=self.stats,
            health=self.health,
            monotonic=self.mono.time,
            started_at=T0,
        )
        self.core = AllocatorCore(
            self.store.snapshot,
            CTX,
            StoreCommitter(self.store),
            self.clock.time,
            FakePodSource(),
            advisor=self.calls,
        )
        self.core.handle(StartPolicy())
        self.core.handle(AdvisorLinkChanged(link_state, 10.0))

    @property
    def state(self) -> Any:
        return self.core.snapshot.state

    def pools(self) -> dict[str, str]:
        return {name: str(c) for name, c in self.state.cpu.pools.items()}

    def cpuset(self, pod: str, container: str = "app") -> str:
        listing = self.core.handle(GetResourcesAllocation())
        return str(listing.pod_resources[pod][container].allocation_result)

    def rpcs(self) -> list[str]:
        return [r.cause["rpc"] for r in read_records(self.directory)]

    def admit(self, *pods: str, cpu: float = 1) -> None:
        """Allocate each pod's ``app`` and let its ramp-up end (it joins ``share``)."""
        for pod in pods:
            self.core.handle(Allocate(request(pod, cpu=cpu)))
        self.clock.advance(31)
        self.core.handle(GetResourcesAllocation())

    def close(self) -> None:
        self.store.close(checkpoint=False)


@pytest.fixture(name="node")
def _node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path)
    yield n
    n.close()


# -- responses ----------------------------------------------------------------------------------


def test_the_spec_example_response_resizes_share_and_reclaim_with_exact_cpusets(node: Node):
    node.admit("p1", "p2")
    node.core.handle(ApplyAdvice(share_of(6, "p1", "p2"), 11.0))
    # §11.8 / §16 item 27: share block 6 -> 1,3-4,9,11-12, implicit reclaim 5-8,10,13-15
    assert node.pools() == {"reserve": "0,2", "share": "1,3-4,9,11-12", "reclaim": "5-8,10,13-15"}
    assert node.cpuset("p1") == node.cpuset("p2") == "1,3-4,9,11-12"
    assert node.rpcs()[-1] == "ListAndWatch"
    assert node.stats.read()["applied"] == 1 and node.health.updates == [None]


def test_a_refused_response_is_journaled_changes_no_cpu_and_reports_not_ready(node: Node):
    node.admit("p1")
    before = node.state.cpu
    node.core.handle(ApplyAdvice(response(pool("share", 6), pool("reserve", 3)), 11.0))
    assert node.state.cpu == before
    assert node.rpcs()[-1] == "ListAndWatch"
    figures = node.stats.read()
    assert figures["applied"] == 0 and figures["refused_by_stage"] == {"validate": 1}
    (reason,) = node.health.updates
    assert reason is not None and reason.startswith("ValidateCPUAdvisorResp failed with error:")


def test_an_identical_response_is_coalesced_but_still_counts_as_applied(node: Node):
    node.admit("p1")
    node.core.handle(ApplyAdvice(share_of(4, "p1"), 11.0))
    records = len(node.rpcs())
    node.clock.advance(250)
    node.core.handle(ApplyAdvice(share_of(4, "p1"), 12.0))
    assert len(node.rpcs()) == records
    assert node.stats.read()["applied"] == 2
    # the coalesced response restarted the silence clock: no fallback 300 s after the first
    node.clock.advance(100)
    node.core.handle(CheckAdvisorSilence(node.clock.now))
    assert not node.state.advisor.is_sized_by_requests()


# -- the request-based fallback -------------------------------------------------------------------


def test_silence_switches_to_request_sizing_and_the_next_response_switches_back(node: Node):
    node.admit("p1")
    node.core.handle(ApplyAdvice(share_of(6, "p1"), 11.0))
    assert node.pools()["share"] == "1,3-4,9,11-12"
    node.clock.advance(UNHEALTHY_AFTER_S - 1)
    node.core.handle(CheckAdvisorSilence(node.clock.now))
    assert not node.state.advisor.is_sized_by_requests()
    node.clock.advance(1)
    node.core.handle(CheckAdvisorSilence(node.clock.now))
    assert node.state.advisor.is_sized_by_requests()
    assert node.rpcs()[-1] == "AdvisorSilence"
    # by requests, as without the advisor: enable_reclaim is off, so reclaim keeps its 4 CPUs
    # and the surplus goes to share (§16 item 19)
    assert node.pools() == FALLBACK_POOLS
    assert node.cpuset("p1") == FALLBACK_POOLS["share"]
    # while in force, a new shared pod is placed by the request rules too
    node.admit("p2", cpu=2)
    sizes = {name: len(c) for name, c in node.state.cpu.pools.items()}
    assert sizes == {"reserve": 2, "share": 10, "reclaim": 4}
    assert node.cpuset("p2") == node.pools()["share"]
    node.core.handle(CheckAdvisorSilence(node.clock.now))  # already in force: nothing more
    assert node.rpcs().count("AdvisorSilence") == 1
    node.core.handle(ApplyAdvice(share_of(6, "p1", "p2"), 20.0))
    assert not node.state.advisor.is_sized_by_requests()
    assert node.pools()["share"] == "1,3-4,9,11-12"


def test_silence_is_counted_from_start_when_nothing_was_applied(node: Node):
    node.clock.advance(UNHEALTHY_AFTER_S)
    node.core.handle(CheckAdvisorSilence(node.clock.now))
    assert node.state.advisor.is_sized_by_requests()


def test_a_restarted_allocator_counts_silence_from_the_last_applied_response(tmp_path: Path):
    stats = LinkStats()
    stats.record_outcome(True, "", 5.0, wall=T0 + 100)
    calls = AdvisorCalls(
        client=ScriptedAdvisor(),
        call_timeout_s=2.0,
        unhealthy_after_s=UNHEALTHY_AFTER_S,
        report_sick=lambda _m: None,
        stats=stats,
        health=None,
        monotonic=lambda: 0.0,
        started_at=T0,
    )
    assert calls.silent_since == T0 + 100
    assert calls.link_state == machine.DISABLED  # what the link last published


# -- AddContainer after Allocate ----------------------------------------------------------------


def test_allocate_tells_the_advisor_with_the_request_rounded_up(node: Node):
    node.core.handle(Allocate(request("pod-a", cpu=1.2)))
    (added,) = node.advisor.added
    assert (added.pod_uid, added.container_name, added.qos_level) == (
        "pod-a",
        "app",
        "shared_cores",
    )
    assert added.request_quantity == 2  # ceil(1.2), §7.2
    assert node.advisor.timeouts == [2.0]


@pytest.mark.parametrize(
    "link_state",
    [
        pytest.param(machine.BACKING_OFF, id="a link backing off is not called"),
        pytest.param(machine.DIALING, id="a link dialing is not called"),
        pytest.param(machine.SYNCING, id="a link syncing is not called (the push covers it)"),
    ],
)
def test_allocate_answers_without_an_advisor_that_is_not_watching(tmp_path: Path, link_state):
    node = Node(tmp_path, link_state=link_state)
    try:
        node.core.handle(Allocate(request("pod-a", cpu=2)))
        assert node.advisor.added == [] and node.cpuset("pod-a") == "1,3-15"
    finally:
        node.close()


def test_a_sick_advisor_keeps_the_allocation_and_is_not_called_until_watching_again(node: Node):
    node.advisor.add["pod-a"] = SICK
    reply = node.core.handle(Allocate(request("pod-a", cpu=2)))
    assert reply is not None and node.cpuset("pod-a") == "1,3-15"
    assert node.link == [ReportSickAdvisor(str(SICK))]
    node.core.handle(Allocate(request("pod-b", cpu=1)))  # queued behind: no second wait
    assert node.advisor.timeouts == [2.0]
    node.core.handle(AdvisorLinkChanged(machine.BACKING_OFF, 12.0))
    node.core.handle(AdvisorLinkChanged(machine.WATCHING, 13.0))
    node.core.handle(Allocate(request("pod-c", cpu=1)))
    assert [m.pod_uid for m in node.advisor.added] == ["pod-c"]


def test_a_refusal_fails_the_allocate_and_undoes_it_in_the_same_turn(node: Node):
    node.advisor.add["pod-a"] = REFUSED
    with pytest.raises(AdvisorRefusedError) as caught:
        node.core.handle(Allocate(request("pod-a", cpu=2)))
    assert str(caught.value) == (
        "add container to qos aware server failed with error: AddContainer to sys-advisor "
        "failed: INVALID_ARGUMENT: unknown qos level"
    )
    assert node.state.cpu.entry("pod-a", "app") is None
    assert node.rpcs()[-2:] == ["Allocate", "AddContainerRefused"]
    assert node.link == []  # the link stays as it is
    assert node.calls.watching


# -- RemovePod before the removal ---------------------------------------------------------------


def test_remove_pod_tells_the_advisor_first(node: Node):
    node.core.handle(Allocate(request("pod-a", cpu=2)))
    node.core.handle(RemovePod("pod-a"))
    assert node.advisor.removed == ["pod-a"] and node.state.cpu.entry("pod-a", "app") is None


def test_a_refused_remove_pod_fails_and_leaves_the_state_untouched(node: Node):
    node.core.handle(Allocate(request("pod-a", cpu=2)))
    node.advisor.remove["pod-a"] = AdvisorRefused("RemovePod", "INTERNAL", "busy")
    seq = node.core.snapshot.seq
    with pytest.raises(AdvisorRefusedError, match=r"^remove pod in QoS aware server failed"):
        node.core.handle(RemovePod("pod-a"))
    assert node.core.snapshot.seq == seq and node.state.cpu.entry("pod-a", "app") is not None


def test_a_sick_remove_pod_removes_anyway_and_reports_the_advisor(node: Node):
    node.core.handle(Allocate(request("pod-a", cpu=2)))
    sick = AdvisorSick("RemovePod", "UNAVAILABLE", "connection refused")
    node.advisor.remove["pod-a"] = sick
    node.core.handle(RemovePod("pod-a"))
    assert node.state.cpu.entry("pod-a", "app") is None
    assert node.link == [ReportSickAdvisor(str(sick))]


def residual_removal(node: Node, *due: str, listed: tuple[str, ...] = ()) -> ResidualRemoval:
    """The residual checker's evidence after ten listings that missed ``due`` (§12.4: ten
    sightings of absence), sent as it sends it; the Allocator's answer."""
    node.clock.advance(30)
    proof = evidence(*due, at=node.clock.now - 1, listed=listed or ("other",))
    answer = node.core.handle(RemoveResidualPods(proof))
    assert isinstance(answer, ResidualRemoval)
    return answer


def test_residual_pods_are_removed_from_the_advisor_first_and_a_refused_one_is_kept(node: Node):
    for pod in ("pod-a", "pod-b", "pod-c"):
        node.core.handle(Allocate(request(pod, cpu=1)))
    node.advisor.remove["pod-b"] = AdvisorRefused("RemovePod", "INTERNAL", "busy")
    answer = residual_removal(node, "pod-a", "pod-b", listed=("pod-c",))
    # §12.4 step 4: the advisor's RemovePod for each candidate, by uid; a failure keeps the pod
    assert answer == ResidualRemoval(("pod-a",), (), kept=("pod-b",))
    assert node.advisor.removed == ["pod-a"]
    assert node.state.cpu.entry("pod-b", "app") is not None
    # The refusal is an input of the journaled decision, which re-runs from its record.
    last = list(read_records(node.directory))[-1]
    assert last.cause["rpc"] == "RemoveResidualPods"
    assert last.cause["pod_uids"] == ["pod-a", "pod-b"]
    assert last.cause["advisor_refused"] == ["pod-b"]
    assert rerun_in_journal(node.directory, last.seq, CTX).same_events
    # The next round's evidence still calls pod-b due: kept until then, as the reference does.
    del node.advisor.remove["pod-b"]
    assert residual_removal(node, "pod-a", "pod-b", listed=("pod-c",)) == ResidualRemoval(
        ("pod-b",), ()
    )
    assert node.advisor.removed == ["pod-a", "pod-b"]


def test_residual_pods_are_removed_without_a_sick_advisor(node: Node):
    for pod in ("pod-a", "pod-b"):
        node.core.handle(Allocate(request(pod, cpu=1)))
    sick = AdvisorSick("RemovePod", "UNAVAILABLE", "connection refused")
    node.advisor.remove["pod-a"] = sick
    assert residual_removal(node, "pod-a", "pod-b") == ResidualRemoval(("pod-a", "pod-b"), ())
    assert node.advisor.removed == []  # sick at pod-a: pod-b is not sent either
    assert node.link == [ReportSickAdvisor(str(sick))]
    assert list(read_records(node.directory))[-1].cause["advisor_refused"] == []


def test_residual_pods_are_removed_without_an_advisor_that_is_not_watching(tmp_path: Path):
    node = Node(tmp_path, link_state=machine.BACKING_OFF)
    try:
        node.core.handle(Allocate(request("pod-a", cpu=1)))
        assert residual_removal(node, "pod-a") == ResidualRemoval(("pod-a",), ())
        assert node.advisor.removed == []
    finally:
        node.close()


def test_every_candidate_refused_keeps_them_all(node: Node):
    """§12.4 step 4: every advisor call failed, nothing is removed (the pools are adjusted
    all the same, policy.cpu.residual_removal)."""
    node.core.handle(Allocate(request("pod-a", cpu=1)))
    node.advisor.remove["pod-a"] = AdvisorRefused("RemovePod", "INTERNAL", "busy")
    assert residual_removal(node, "pod-a") == ResidualRemoval((), (), kept=("pod-a",))
    assert node.state.cpu.entry("pod-a", "app") is not None


# -- re-run ------------------------------------------------------------------------------------


def test_every_advisor_record_re_runs_from_the_journal_to_the_same_events(node: Node):
    node.admit("p1", "p2")
    node.core.handle(ApplyAdvice(share_of(6, "p1", "p2"), 11.0))
    node.core.handle(ApplyAdvice(response(pool("reserve", 3)), 12.0))  # refused
    node.clock.advance(UNHEALTHY_AFTER_S)
    node.core.handle(CheckAdvisorSilence(node.clock.now))
    node.advisor.add["p3"] = REFUSED
    with pytest.raises(AdvisorRefusedError):
        node.core.handle(Allocate(request("p3", cpu=1)))
    node.core.handle(ApplyAdvice(share_of(4, "p1", "p2"), 13.0))  # resumes
    records = list(read_records(node.directory))
    advisor_rpcs = {"ListAndWatch", "AdvisorSilence", "AddContainerRefused"}
    seqs = [r.seq for r in records if r.cause["rpc"] in advisor_rpcs]
    assert [r.cause["rpc"] for r in records if r.seq in seqs] == [
        "ListAndWatch",
        "ListAndWatch",
        "AdvisorSilence",
        "AddContainerRefused",
        "ListAndWatch",
    ]
    for seq in seqs:
        rerun = rerun_in_journal(node.directory, seq, CTX)
        assert rerun.same_events, (seq, rerun.cause.rpc)


# -- one mailbox --------------------------------------------------------------------------------


def test_a_response_arriving_during_an_allocate_is_decided_after_it(tmp_path: Path):
    node = Node(tmp_path)
    node.admit("p1")
    node.advisor.gate = threading.Event()
    actor = AllocatorActor.start(node.core)
    try:
        pending = actor.ask(Allocate(request("p2", cpu=1)), block=False)
        assert node.advisor.entered.wait(5)  # the Allocate is committed and waits for the advisor
        actor.tell(ApplyAdvice(share_of(6, "p1", "p2"), 11.0))
        node.advisor.gate.set()
        pending.get(timeout=10)
        actor.ask(GetResourcesAllocation(), timeout=10)
    finally:
        actor.stop()
        pykka.ActorRegistry.stop_all()
    try:
        rpcs = node.rpcs()
        allocate_p2 = len(rpcs) - 1 - rpcs[::-1].index("Allocate")
        assert rpcs.index("ListAndWatch") > allocate_p2
        # decided on the state holding p2: the response names it, so it validates and applies
        assert node.stats.read()["applied"] == 1
        assert node.pools()["share"] == "1,3-4,9,11-12"
    finally:
        node.close()


def test_qrmd_journal_rerun_re_runs_every_advisor_record_the_same(node: Node):
    node.admit("p1", "p2")
    node.core.handle(ApplyAdvice(share_of(6, "p1", "p2"), 11.0))
    node.core.handle(ApplyAdvice(response(pool("reserve", 3)), 12.0))  # refused
    node.clock.advance(UNHEALTHY_AFTER_S)
    node.core.handle(CheckAdvisorSilence(node.clock.now))
    node.advisor.add["p3"] = REFUSED
    with pytest.raises(AdvisorRefusedError):
        node.core.handle(Allocate(request("p3", cpu=1)))
    node.store.close(checkpoint=False)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    done = subprocess.run(
        [sys.executable, "-m", "qrmd", "journal", "rerun", node.directory,
         "--topology", "synthetic:cpus=16,sockets=2,numas=4", "--reserved-cpu-cores", "2",
         "--json", "--enable-cpu-advisor"],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["no_rerunner"] == {} and summary["divergences"] == []
    assert summary["rerun"] == summary["same"] == len(node.rpcs())
