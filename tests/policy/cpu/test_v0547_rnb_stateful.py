"""The random kubelet call sequences of ``test_v0547_stateful`` with
``--enable-reclaim-numa-binding true``: reclaimed pods with NUMA binding (RNB), plain
reclaimed pods with a one-NUMA hint, their sidecars, and sys-advisor's per-NUMA headroom
changing between calls (docs/reference-levels.md "Reclaimed cores bound to a NUMA node (RNB)").

After every step, besides the SNB machine's checks (dedicated CPUs exclusive, no CPU in two
exclusive allocations, SNB pools in their NUMA, replay equals the live state):

* every reclaimed container holds only reclaim-pool CPUs;
* a container with ``numa_hint`` holds only CPUs of that NUMA, and an actual RNB container
  holds every reclaim-pool CPU of it;
* the state (narrowed placements and headroom included) survives the codec.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from policy.cpu.reference import ReferenceOptions
from policy.cpu.request import ContainerType, TopologyHint
from policy.cpu.rnb import NO_NUMA, headroom_event, is_actual_rnb, numa_hint_of
from policy.errors import PolicyError
from policy.state.codec import decode_state, encode_state
from policy.state.entries import RECLAIM_POOL
from policy.state.sections import apply_all
from tests.policy.cpu.test_v0547_stateful import SNBMachine
from tests.policy.decision_fixtures import Node, request

RNB_PODS = st.sampled_from(["rnb-0", "rnb-1", "rnb-2", "plain-0", "plain-1"])


class RNBMachine(SNBMachine):
    @initialize(
        sockets=st.integers(1, 2),
        numas_per_socket=st.integers(1, 2),
        per_numa=st.sampled_from([4, 6, 8]),
        reserve=st.integers(0, 2),
    )
    def start(self, sockets: int, numas_per_socket: int, per_numa: int, reserve: int) -> None:
        super().start(sockets, numas_per_socket, per_numa, reserve)
        options = ReferenceOptions(enable_reclaim_numa_binding=True)
        self.node = Node(dataclasses.replace(self.node.ctx, reference=options))
        self.node.phases = self.phases

    @rule(headroom=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 4.0]), min_size=4, max_size=4))
    def advisor_sends_headroom(self, headroom: list[float]) -> None:
        numas = self.node.ctx.topology.numa_nodes()
        event = headroom_event({n: headroom[i % 4] for i, n in enumerate(numas)})
        self.node.events.append(event)
        self.node.state = apply_all(self.node.state, [event])

    @rule(pod=RNB_PODS, cpu=st.sampled_from([0.3, 1, 2]), pick=st.integers(0, 20))
    def allocate_reclaimed(self, pod: str, cpu: float, pick: int) -> None:
        binding = pod.startswith("rnb")
        asked = request(pod, cpu=cpu, qos="reclaimed_cores", numa_binding=binding)
        try:
            hints = self.node.hints(asked)
        except PolicyError:
            hints = None
        numas = self.node.ctx.topology.numa_nodes()
        nodes = hints[pick % len(hints)].nodes if hints else (numas[pick % len(numas)],)
        self._allocate(dataclasses.replace(asked, hint=TopologyHint(nodes, True)))

    @rule(pod=RNB_PODS, cpu=st.sampled_from([0.3, 1]))
    def allocate_reclaimed_sidecar(self, pod: str, cpu: float) -> None:
        # a sidecar copies its main container, numa_hint included (or gets nothing before it)
        binding = pod.startswith("rnb")
        asked = request(pod, "side", cpu=cpu, qos="reclaimed_cores", numa_binding=binding,
                        container_type=ContainerType.SIDECAR)  # fmt: skip
        self._allocate(asked)

    @rule(pod=RNB_PODS)
    def remove_reclaimed(self, pod: str) -> None:
        self.node.remove(pod)

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def reclaimed_containers_hold_their_part_of_the_reclaim_pool(self) -> None:
        if not hasattr(self, "node"):
            return
        state, topology = self.node.state.cpu, self.node.ctx.topology
        reclaim = state.pool_cpus(RECLAIM_POOL)
        for entry in state.entries():
            if not entry.is_reclaimed() or entry.owner_pool_name != RECLAIM_POOL:
                continue
            assert reclaim is not None
            cpus = state.placement_cpus(entry.placement)[0]
            assert cpus <= reclaim, (entry.pod_uid, str(cpus), str(reclaim))
            numa = numa_hint_of(entry)
            if numa != NO_NUMA:
                assert cpus <= topology.cpus_in_numa(numa), (entry.pod_uid, numa, str(cpus))
            if is_actual_rnb(entry):
                assert cpus == reclaim & topology.cpus_in_numa(numa), (entry.pod_uid, numa)

    @invariant()
    def the_state_survives_the_codec(self) -> None:
        if not hasattr(self, "node"):
            return
        state = self.node.state
        assert decode_state(encode_state(state), self.node.ctx.topology) == state


RNBMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_rnb_machine = RNBMachine.TestCase
