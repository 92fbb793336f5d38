"""``qrmd eviction plan --json`` answers what the running plugins answer: the same inputs (the
CPU state's pools and owners, the containers' loads, the settings, the pods and the times) fed
to the daemon's two CPU eviction plugins over their real unix sockets, as katalyst-agent's
eviction manager calls them, and to the plan; each plan call's answer equals the decoded gRPC
reply field for field (``tests.wire.eviction_decode``), each collection equals the report the
daemon journaled, with the shared pools' limit it derived from the CPU state, and an error is
the status code and message the plugin answers."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import pykka
import pytest

from actors.allocator_messages import Allocate, GetResourcesAllocation
from actors.cpu_pressure import CPUPressureActor, CPUPressureCore, PressurePorts
from actors.store_messages import GetSnapshot
from journal import read_records
from policy.cpu.pressure import PressureSettings
from policy.cpu.pressure.state_view import pool_map
from policy.state.events import PoolSet
from policy.state.sections import apply_all, empty_state
from policy.topology.cpuset import CPUSet
from qrmd.cli import main
from qrmd.cpu_pressure.subsystem import CPUPressureWiring
from qrmd.daemon import Daemon
from qrmd.sim.host.cpu_load import SimulatedContainerLoads
from tests.actors.fakes import ApplyingCommitter, FakeClock
from tests.policy.state_fixtures import SYNTH_16_2_4, cpus
from tests.qrmd.test_daemon import shared
from tests.qrmd.test_daemon_cpu_pressure import RECLAIMED, PressureHarness, pod
from tests.wire.eviction_agent import EvictionAgent
from tests.wire.eviction_decode import decoded
from wire.cpu_pressure_rpcs import SUPPRESSION_PLUGIN_RPCS
from wire.eviction_server import EvictionPluginServer
from wire.gen import k8s_core_v1_pb2 as core

ETL_ANNOTATIONS = {
    **RECLAIMED,
    "katalyst.kubewharf.io/cpu_enhancement": '{"suppression_tolerance_rate": "1.5"}',
}


@dataclass(frozen=True)
class Scenario:
    id: str
    flags: dict[str, Any]
    advised: bool


SCENARIOS = [
    Scenario(
        "pool bounds from the pool sizes: HARD_MET, a target with its grace period, an offer",
        {},
        advised=False,
    ),
    Scenario(
        "advised bounds: each collection shows the shared pools' limit derived from the state",
        {"enable-reclaim": True, "reserved-resource-for-allocate": "cpu=0"},
        advised=True,
    ),
]


@pytest.fixture
def ph() -> Iterator[PressureHarness]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qp") as root:
        yield PressureHarness(Path(root))
    pykka.ActorRegistry.stop_all()


def plan_pod(sent: core.Pod, owners: dict[tuple[str, str], str], loads: dict[str, float]) -> Any:
    """The pod the plugins were sent, in the plan's form, with its container's pool and load."""
    uid = sent.metadata.uid
    containers = []
    for c in sent.spec.containers:
        container: dict[str, Any] = {
            "name": c.name,
            "requests": {name: q.string for name, q in c.resources.requests.items()},
        }
        if (uid, c.name) in owners:
            container["pool"] = owners[(uid, c.name)]
        if uid in loads:
            container["load"] = loads[uid]
        containers.append(container)
    return {
        "uid": uid,
        "namespace": sent.metadata.namespace,
        "name": sent.metadata.name,
        "annotations": dict(sent.metadata.annotations),
        "priority": sent.spec.priority if sent.spec.HasField("priority") else None,
        "containers": containers,
    }


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_the_plan_answers_field_for_field_what_the_plugins_answer(
    ph: PressureHarness, capsys: pytest.CaptureFixture[str], scenario: Scenario
) -> None:
    config = ph.config(
        **{
            "enable-cpu-pressure-eviction": True,
            "eviction-load-enable": True,
            "eviction-load-metric-ring-size": "2",
            "eviction-suppression-enable": True,
            "eviction-suppression-min-tolerance-duration": "30s",
            "eviction-cpu-grace-period": "15",
            "eviction-load-sync-period": "1h",
            "plugin-registration-dir": str(ph.root / "ev"),
            "transition-period": "1s",
            **scenario.flags,
        }
    )
    daemon = Daemon(config, builders=ph.pressure_builders(), clock=ph.clock)
    daemon.start()
    replies: dict[str, list[dict[str, Any]]] = {"threshold_met": [], "top": [], "evict": []}
    ticks: list[dict[str, Any]] = []
    try:
        assert daemon.find(CPUPressureWiring) is not None and daemon.supervisor is not None
        assert daemon.find(CPUPressureWiring).settings.uses_advised_threshold is scenario.advised
        allocator = ph.servers[0].allocator
        for uid in ("web", "api"):
            allocator.ask(Allocate(shared(uid)))
        allocator.ask(Allocate(replace(shared("etl"), annotations=RECLAIMED, labels=RECLAIMED)))
        ph.clock.advance(2)
        allocator.ask(GetResourcesAllocation())  # ramp-up over: web and api join the share pool
        state = daemon.supervisor.ref("store").ask(GetSnapshot(), timeout=10).state.cpu
        view = pool_map(state)
        owners = {(c.pod_uid, c.container): c.pool for c in view.containers}
        share, reclaim = view.pools["share"], view.pools["reclaim"]
        loads = {"web": share * 1.5, "api": share * 0.5}  # together 2 × the pool: over 1.8 ×
        for uid, value in loads.items():
            ph.loads.set_load(uid, "app", value)
        active = [
            pod("web", "2"),
            pod("api", "2", priority=100),
            pod("etl", str(reclaim * 2), ETL_ANNOTATIONS),
        ]

        def tick(calls: list[str]) -> None:
            ticks.append(
                {
                    "time": ph.clock.time(),
                    "pools": dict(view.pools),
                    "pods": [plan_pod(p, owners, loads) for p in active],
                    "top_n": 1,
                    "calls": calls,
                }
            )

        for _ in range(2):
            tick(["collect"])
            daemon.find(CPUPressureWiring).tick()
            ph.clock.advance(30)
        sockets = {
            name: s.socket_path for name, s in daemon.find(CPUPressureWiring).servers.items()
        }
        load = EvictionAgent(sockets["cpu-pressure-load-plugin"])
        suppression = EvictionAgent(sockets["cpu-pressure-suppression-plugin"])
        try:
            load.register()
            suppression.register()
            for _ in range(2):
                passed = load.run_pass(active)
                replies["threshold_met"].append(decoded(passed.threshold))
                calls = ["threshold_met"]
                if passed.top is not None:  # the agent asks for targets on HARD_MET only
                    replies["top"].append(decoded(passed.top))
                    calls.append("top_eviction_pods")
                replies["evict"].append(decoded(suppression.run_pass(active).evict))
                tick([*calls, "evict_pods"])
                ph.clock.advance(31)  # past the minimum duration: etl is offered next time
        finally:
            load.close()
            suppression.close()
    finally:
        daemon.stop()

    settings = daemon.find(CPUPressureWiring).settings
    collected = [
        r.cause
        for r in read_records(str(ph.root / "state"))
        if isinstance(r.cause, dict) and r.cause.get("command") == "CollectLoad"
    ]
    if scenario.advised:
        # The plan is given the limit the daemon derived from the CPU state (its inputs).
        for t, cause in zip(ticks[:2], collected, strict=True):
            t["shared_pools_limit"] = cause["inputs"]["shared_pools_limit"]
    path = ph.root / "plan.json"
    path.write_text(json.dumps({"settings": settings.to_json(), "ticks": ticks}))
    capsys.readouterr()
    assert main(["eviction", "plan", "--json", str(path)]) == 0
    results = [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    # The collections: the plan's report is the one the daemon journaled.
    assert [r["collect"] for r in results[:2]] == [c["answer"] for c in collected]
    if scenario.advised:
        limit = results[0]["collect"]["shared_pools_limit"]
        assert isinstance(limit, int) and limit > 0
        assert results[0]["collect"]["shared_pools_size"] == share
    else:
        assert results[0]["collect"]["shared_pools_limit"] is None
    # The RPCs: every field of every reply.
    asked = results[2:]
    assert [r["threshold_met"] for r in asked] == replies["threshold_met"]
    assert [r["top_eviction_pods"] for r in asked if "top_eviction_pods" in r] == replies["top"]
    assert [r["evict_pods"] for r in asked] == replies["evict"]
    # What the scenario is about, so the comparison above compared something.
    offered = replies["evict"][-1]["evict_pods"]
    assert [o["pod_uid"] for o in offered] == ["etl"]
    assert offered[0]["force_evict"] is False and offered[0]["deletion_options"] is None
    if not scenario.advised:
        assert replies["threshold_met"][0]["met_type"] == "HARD_MET"
        assert replies["top"][0] == {
            "pod_uids": ["web"],
            "deletion_options": {"grace_period_seconds": 15},
        }


def test_no_reclaim_pool_is_the_same_error_from_the_plan_and_the_plugin(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A CPU state with a share pool and no reclaim pool, the suppression plugin served over
    # its unix socket in front of the CPU pressure actor.
    state = apply_all(empty_state(SYNTH_16_2_4), [PoolSet("share", cpus("0-7"))])
    committer = ApplyingCommitter(state)
    clock = FakeClock(1_000.0)
    settings = PressureSettings(enable_suppression_eviction=True)
    core_ = CPUPressureCore(
        committer.snapshot,
        committer,
        PressurePorts(SimulatedContainerLoads()),
        settings,
        reserved=CPUSet.parse(""),
        now_fn=clock.time,
    )
    actor = CPUPressureActor.start(core_)
    sockets = tempfile.TemporaryDirectory(dir="/tmp", prefix="qp")  # a short socket path
    server = EvictionPluginServer(
        Path(sockets.name),
        actor,
        name="cpu-pressure-suppression-plugin",
        rpcs=SUPPRESSION_PLUGIN_RPCS,
        who="the CPU pressure actor",
    )
    server.start()
    agent = EvictionAgent(server.socket_path)
    etl = pod("etl", "8", ETL_ANNOTATIONS)
    try:
        agent.register()
        with pytest.raises(grpc.RpcError) as raised:
            agent.run_pass([etl])
    finally:
        agent.close()
        server.stop()
        actor.stop()
        sockets.cleanup()
    error = raised.value
    assert isinstance(error, grpc.Call)
    document = {
        "settings": settings.to_json(),
        "ticks": [
            {
                "time": clock.time(),
                "pools": {"share": 8},
                "pods": [plan_pod(etl, {}, {})],
                "calls": ["evict_pods"],
            }
        ],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document))
    capsys.readouterr()
    assert main(["eviction", "plan", "--json", str(path)]) == 0
    answer = json.loads(capsys.readouterr().out)["evict_pods"]
    assert answer == {"code": error.code().name, "error": error.details()}
    # The reference's status message (GetEvictPods' error text, sent as is by grpc-go) is in
    # it after the RPC's name.
    assert error.details() == "GetEvictPods: get reclaim pool failed: pool not found"
