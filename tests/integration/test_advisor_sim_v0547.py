"""The sys-advisor simulator as a Katalyst v0.5.47 advisor, over real unix sockets: GetAdvice
answered from the request, blocks that keep dedicated NUMA nodes apart (which v0.5.47 applies
and refuses from a v0.5.3-style advisor), and UNIMPLEMENTED from the v0.5.3 simulator."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace

import pytest

from actors.ports.advisor import AdvisorRefused
from policy.cpu.advisor.advice import advice_request
from policy.cpu.advisor.decision import AdvisorSettings, apply_advice
from policy.cpu.reference import V0_5_47
from policy.state.entries import InPool
from policy.state.events import PoolSet
from policy.topology.cpuset import CPUSet
from qrmd.sim.advisor import LoadModel, SimNode, SysAdvisorSimulator, plan_response
from tests.policy.pool_fixtures import (
    CTX,
    cpus,
    dedicated,
    fresh_state,
    reclaimed,
    shared,
    with_events,
)
from wire.advisor_checkpoint import CheckpointServer, read_checkpoint
from wire.advisor_client import GrpcAdvisorClient

CTX_V0547 = replace(CTX, reference_version=V0_5_47, advisor_enabled=True)
#: (16,2,4): NUMA 2 holds 4-5,12-13; pod-d is bound to it and holds half of it.
STATE = with_events(
    fresh_state(CTX_V0547),
    dedicated("pod-d", "4,12"),
    PoolSet("share", cpus("6-7")),
    shared("pod-a", InPool("share"), quantity=2),
    reclaimed("pod-c"),
)
NODE = SimNode({0: 4, 1: 4, 2: 4, 3: 4})
NUMA_2 = cpus("4-5,12-13")


@pytest.fixture
def directory() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="qadv", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def serve(directory: str, *, at_v0_5_47: bool) -> tuple[SysAdvisorSimulator, GrpcAdvisorClient]:
    advisor_socket = os.path.join(directory, "cpu_advisor.sock")
    sim = SysAdvisorSimulator(
        advisor_socket,
        os.path.join(directory, "cpu_plugin.sock"),
        NODE,
        LoadModel(load=1.0),
        period_s=0.05,
        at_v0_5_47=at_v0_5_47,
    )
    sim.start()
    client = GrpcAdvisorClient(advisor_socket, at_v0_5_47=True)
    client.connect(5.0)
    return sim, client


def test_a_v0547_simulator_answers_getadvice_and_v0547_applies_it(directory: str):
    sim, client = serve(directory, at_v0_5_47=True)
    try:
        reply = client.get_advice(advice_request(STATE.cpu), 5.0)
    finally:
        client.close()
        sim.stop()
    assert sim.stats.advice_calls == 1 and sim.stats.checkpoint_reads == 0
    assert set(sim.containers()) == {("pod-a", "c"), ("pod-c", "c"), ("pod-d", "c")}
    response = reply.response
    # What pod-d leaves of NUMA 2 is a reclaim block of its own; the headroom crossed the wire.
    reclaim = response.info("reclaim", "")
    assert reclaim is not None and reclaim.numa_quantities() == {-1: 8, 2: 2}
    assert response.numa_headroom_sent and response.numa_headroom[2] == 2.0
    decision = apply_advice(STATE, response, AdvisorSettings(CTX_V0547), 1.0)
    assert decision.reply.applied, decision.reply.reason
    after = with_events(STATE, *decision.events)
    share = after.cpu.pools["share"]
    assert share.intersection(NUMA_2).is_empty()
    assert after.cpu.entry("pod-d", "c") is not None


def test_the_v053_model_is_refused_at_v0547_and_the_v0547_model_is_not():
    """Why phase 7 of the demo needed a v0.5.47 advisor: v0.5.3's blocks ignore that NUMA 2
    is withheld from the blocks tied to no NUMA node."""
    checkpoint = {
        name: {sub: item.allocation for sub, item in subs.items()}
        for name, subs in advice_request(STATE.cpu).entries.items()
    }
    containers = {
        (name, sub): item.metadata
        for name, subs in advice_request(STATE.cpu).entries.items()
        for sub, item in subs.items()
        if sub
    }
    settings = AdvisorSettings(CTX_V0547)
    model = LoadModel(load=1.0)
    old = plan_response(NODE, checkpoint, containers, model)
    new = plan_response(NODE, checkpoint, containers, model, at_v0_5_47=True)
    assert not apply_advice(STATE, old, settings, 1.0).reply.applied
    assert apply_advice(STATE, new, settings, 1.0).reply.applied


def test_a_v053_simulator_answers_getadvice_unimplemented(directory: str):
    sim, client = serve(directory, at_v0_5_47=False)
    try:
        with pytest.raises(AdvisorRefused) as refused:
            client.get_advice(advice_request(STATE.cpu), 5.0)
    finally:
        client.close()
        sim.stop()
    assert refused.value.code == "UNIMPLEMENTED"


def test_the_checkpoint_server_shows_reclaimed_cpus_at_v0547(directory: str):
    path = os.path.join(directory, "cpu_plugin.sock")
    server = CheckpointServer(path, lambda: STATE.cpu, at_v0_5_47=True)
    server.start()
    try:
        entries = read_checkpoint(path, timeout_s=5.0)
    finally:
        server.stop()
    assigned = entries["pod-c"]["c"].topology_aware_assignments
    assert assigned is not None and CPUSet().union(*assigned.values()) == STATE.cpu.pools["reclaim"]
