"""The random kubelet call sequences of ``test_facade_stateful`` at the v0.5.47 reference
level, with shared cores bound to a NUMA (SNB) among them (spec cpu-policy-v0.5.47 (a)).

After every step, besides that machine's checks (dedicated CPUs exclusive, NUMA-binding
allocations within their hint, capacity, replay equals the live state):

* every SNB pool lies inside its NUMA, and so does every SNB container;
* no non-binding pool (and no ramping or non-binding shared container) holds a CPU of a NUMA
  hosting an SNB pool;
* no shared pool or container holds a dedicated container's CPU, a reserved CPU, or a CPU of
  a NUMA hosting a NUMA-exclusive dedicated container (at v0.5.47 pools may use the free CPUs
  of NUMAs whose dedicated containers are not exclusive).
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from policy.cpu.reference import V0_5_47
from policy.cpu.request import ContainerType, TopologyHint
from policy.cpu.snb import is_snb, numa_of_pool, snb_pools
from policy.errors import PolicyError
from policy.state.entries import RESERVE_POOL, RESIDENT_POOLS
from policy.topology.cpuset import CPUSet
from tests.policy.cpu.test_facade_stateful import PolicyMachine
from tests.policy.decision_fixtures import Node, request

SNB_PODS = st.sampled_from(["snb-0", "snb-1", "snb-2"])


class SNBMachine(PolicyMachine):
    @initialize(
        sockets=st.integers(1, 2),
        numas_per_socket=st.integers(1, 2),
        per_numa=st.sampled_from([4, 6, 8]),
        reserve=st.integers(0, 2),
    )
    def start(self, sockets: int, numas_per_socket: int, per_numa: int, reserve: int) -> None:
        super().start(sockets, numas_per_socket, per_numa, reserve)
        ctx = dataclasses.replace(self.node.ctx, reference_version=V0_5_47)
        self.node = Node(ctx)
        self.node.phases = self.phases

    @rule(pod=SNB_PODS, cpu=st.sampled_from([0.5, 1, 1.5, 2, 3]), pick=st.integers(0, 20))
    def allocate_snb(self, pod: str, cpu: float, pick: int) -> None:
        asked = request(pod, cpu=cpu, qos="shared_cores", numa_binding=True)
        try:
            hints = self.node.hints(asked)
        except PolicyError:
            hints = None
        nodes = hints[pick % len(hints)].nodes if hints else (pick % 2,)
        self._allocate(dataclasses.replace(asked, hint=TopologyHint(nodes, True)))

    @rule(pod=SNB_PODS)
    def allocate_snb_sidecar(self, pod: str) -> None:
        self._allocate(
            request(pod, "side", cpu=1, qos="shared_cores", numa_binding=True,
                    container_type=ContainerType.SIDECAR)
        )  # fmt: skip

    @rule(pod=SNB_PODS)
    def remove_snb(self, pod: str) -> None:
        self.node.remove(pod)

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def snb_pools_stay_inside_their_numa(self) -> None:
        if not hasattr(self, "node"):
            return
        state, topology = self.node.state.cpu, self.node.ctx.topology
        for name, cpus in state.pools.items():
            numa = numa_of_pool(name)
            if numa is not None:
                assert cpus <= topology.cpus_in_numa(numa), (name, str(cpus))
        for info in state.allocation_infos():
            if is_snb(info.qos_level, info.annotations) and info.owner_pool_name:
                numa = numa_of_pool(info.owner_pool_name)
                assert numa is not None, (info.pod_uid, info.owner_pool_name)
                assert info.allocation_result <= topology.cpus_in_numa(numa)

    @invariant()
    def non_binding_pools_never_take_an_snb_numa(self) -> None:
        if not hasattr(self, "node"):
            return
        state, topology = self.node.state.cpu, self.node.ctx.topology
        bound = CPUSet.union_all(topology.cpus_in_numa(n) for n in snb_pools(state).values())
        for name, cpus in state.pools.items():
            if name not in RESIDENT_POOLS and numa_of_pool(name) is None:
                assert not cpus & bound, (name, str(cpus), str(bound))
        if state.ramp_cpus is not None:
            assert not state.ramp_cpus & bound
        for info in state.allocation_infos():
            if info.is_shared() and not info.is_numa_binding():
                assert not info.allocation_result & bound, (info.pod_uid, str(bound))

    @invariant()
    def shared_cpus_avoid_dedicated_numa_and_reserve(self) -> None:
        # v0.5.47's version of the base machine's rule (module docstring)
        if not hasattr(self, "node"):
            return
        state, topology = self.node.state.cpu, self.node.ctx.topology
        dedicated_cpus = CPUSet()
        exclusive = CPUSet()
        for info in state.allocation_infos():
            if info.is_dedicated() and not info.is_sidecar():
                dedicated_cpus = dedicated_cpus | info.allocation_result
                if info.is_numa_exclusive():
                    # the base machine's sidecars always ask numa_exclusive, whatever their
                    # main container asked: only main containers say what the pod is
                    for numa in info.topology_aware_assignments or {}:
                        exclusive = exclusive | topology.cpus_in_numa(numa)
        forbidden = dedicated_cpus | exclusive | self.node.ctx.reserved
        for name, cpuset in state.pools.items():
            if name not in RESIDENT_POOLS:
                assert not cpuset & forbidden, (name, str(cpuset), str(forbidden))
        assert state.pools.get(RESERVE_POOL) == self.node.ctx.reserved
        for info in state.allocation_infos():
            if info.is_shared() and not info.is_sidecar():
                assert not info.allocation_result & forbidden, (info.pod_uid, str(forbidden))


SNBMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_snb_machine = SNBMachine.TestCase
