"""Random valid event sequences against a reference-style model
(spec cpu-policy §5; DESIGN.md, Journal).

The model keeps what the reference keeps: a full AllocationInfo copy per container, rewritten
for every container of a pool when the pool changes. After every step the live state must:
equal the replay of all events from empty; survive an encode/decode round trip (indexes
included); derive exactly the model's per-container copies; and answer pooled, adjustable,
available, per-NUMA and quantity queries as the naive O(pods) oracle of §5.4/§5.6 does.
"""

from __future__ import annotations

from dataclasses import replace

import immutables
import msgpack
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from policy.errors import StateError
from policy.state.codec import decode_state, encode_state
from policy.state.entries import (
    DEDICATED_CORES,
    RAMPING,
    RECLAIMED_CORES,
    SHARED_CORES,
    AllocationInfo,
    InPool,
    OwnCPUs,
    Placement,
    Ramping,
)
from policy.state.events import (
    ContainerAllocated,
    ContainerPlaced,
    ContainerRemoved,
    ContainerReRamped,
    Event,
    PodRemoved,
    PoolRemoved,
    PoolSet,
    RampCPUsSet,
    RampUpFinished,
    RequestQuantitySet,
    TimestampReset,
)
from policy.state.machine_state import generate_machine_state
from policy.state.sections import State, apply, apply_all, apply_to_sections, empty_state
from policy.topology.cpuset import CPUSet
from policy.topology.model import numa_aware_assignments
from tests.policy.state_fixtures import (
    RESERVED,
    SYNTH_16_2_4,
    container,
    naive_adjustable,
    naive_filtered_numa_set,
    naive_isolated_quantity_map,
    naive_machine_state,
    naive_pooled,
    naive_shared_quantity_map,
    reference_record,
)

TOPO = SYNTH_16_2_4
POOLS = ["reserve", "reclaim", "share", "batch"]
PODS = ["p1", "p2", "p3", "p4"]
CONTAINERS = ["app", "side"]
QUANTITIES = [0.0, 0.1, 0.2, 0.5, 1.0, 1.5, 2.7]

cpusets = st.one_of(
    st.integers(min_value=0, max_value=2**16 - 1).map(CPUSet.from_mask),
    st.just(CPUSet.uninitialized()),
)

Key = tuple[str, str]


class ReferenceModel:
    """Per-container full copies, as the reference stores them (§5.1, §9.8)."""

    def __init__(self) -> None:
        self.pools: dict[str, CPUSet] = {}
        self.ramp: CPUSet | None = None
        self.records: dict[Key, AllocationInfo] = {}
        self.follows: dict[Key, str | None] = {}  # "pool:<P>", "ramp", or None (own CPUs)

    def _place(self, key: Key, base: AllocationInfo, placement: Placement) -> None:
        if isinstance(placement, InPool):
            res = orig = self.pools[placement.pool_name]
            self.follows[key] = f"pool:{placement.pool_name}"
        elif isinstance(placement, Ramping):
            assert self.ramp is not None
            res = orig = self.ramp
            self.follows[key] = "ramp"
        else:
            res, orig = placement.result, placement.original
            self.follows[key] = None
        self.records[key] = replace(
            base,
            allocation_result=res,
            original_allocation_result=orig,
            topology_aware_assignments=numa_aware_assignments(TOPO, res),
            original_topology_aware_assignments=numa_aware_assignments(TOPO, orig),
        )

    def _refresh(self, tag: str, cpus: CPUSet) -> None:
        for key, follows in self.follows.items():
            if follows == tag:
                self._place(key, self.records[key], OwnCPUs.of(cpus))
                self.follows[key] = tag

    def _drop(self, key: Key) -> None:
        del self.records[key], self.follows[key]

    def apply(self, event: Event) -> None:
        if isinstance(event, PoolSet):
            self.pools[event.name] = event.cpuset
            self._refresh(f"pool:{event.name}", event.cpuset)
        elif isinstance(event, PoolRemoved):
            del self.pools[event.name]
        elif isinstance(event, RampCPUsSet):
            self.ramp = event.cpuset
            self._refresh("ramp", event.cpuset)
        elif isinstance(event, ContainerAllocated):
            e = event.entry
            self._place(e.key, reference_record(e, CPUSet(), CPUSet(), TOPO), e.placement)
        elif isinstance(event, ContainerPlaced):
            key = (event.pod_uid, event.container_name)
            base = replace(self.records[key], owner_pool_name=event.owner_pool_name)
            self._place(key, base, event.placement)
        elif isinstance(event, RampUpFinished):
            key = (event.pod_uid, event.container_name)
            self.records[key] = replace(self.records[key], ramp_up=False)
            if self.follows[key] == "ramp":
                self.follows[key] = None  # the copy stays put
        elif isinstance(event, ContainerReRamped):
            key = (event.pod_uid, event.container_name)
            base = replace(
                self.records[key],
                ramp_up=True,
                owner_pool_name="",
                init_timestamp=event.init_timestamp,
            )
            on_ramp = event.pooled_cpus == self.ramp
            self._place(key, base, RAMPING if on_ramp else OwnCPUs.of(event.pooled_cpus))
        elif isinstance(event, TimestampReset):
            key = (event.pod_uid, event.container_name)
            self.records[key] = replace(self.records[key], init_timestamp=event.init_timestamp)
        elif isinstance(event, RequestQuantitySet):
            key = (event.pod_uid, event.container_name)
            self.records[key] = replace(self.records[key], request_quantity=event.request_quantity)
        elif isinstance(event, ContainerRemoved):
            self._drop((event.pod_uid, event.container_name))
        elif isinstance(event, PodRemoved):
            for key in [k for k in self.records if k[0] == event.pod_uid]:
                self._drop(key)
        else:
            raise AssertionError(f"model cannot apply {event!r}")

    def members(self, pool: str) -> int:
        return sum(1 for f in self.follows.values() if f == f"pool:{pool}")


class StateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state: State = empty_state(TOPO)
        self.events: list[Event] = []
        self.model = ReferenceModel()

    def commit(self, event: Event) -> None:
        self.state = apply(self.state, event)
        self.events.append(event)
        self.model.apply(event)

    def draw_placement(self, data: st.DataObject, qos: str, ramp_up: bool) -> tuple[Placement, str]:
        choices = ["own"]
        if qos != DEDICATED_CORES:
            if self.model.pools:
                choices.append("pool")
            if self.model.ramp is not None and ramp_up:
                choices.append("ramp")
        kind = data.draw(st.sampled_from(choices))
        if kind == "pool":
            pool = data.draw(st.sampled_from(sorted(self.model.pools)))
            return InPool(pool), pool
        if kind == "ramp":
            return RAMPING, ""
        owner = data.draw(st.sampled_from(["", "dedicated", "fallback", *POOLS]))
        return OwnCPUs(data.draw(cpusets), data.draw(cpusets)), owner

    def existing(self, data: st.DataObject) -> Key:
        return data.draw(st.sampled_from(sorted(self.model.records)))

    # -- rules: pools and the ramp set -----------------------------------------------------

    @rule(name=st.sampled_from(POOLS), cpus=cpusets)
    def set_pool(self, name: str, cpus: CPUSet) -> None:
        self.commit(PoolSet(name, cpus))

    @rule(data=st.data())
    def remove_pool(self, data: st.DataObject) -> None:
        free = sorted(p for p in self.model.pools if not self.model.members(p))
        if free:
            self.commit(PoolRemoved(data.draw(st.sampled_from(free))))

    @rule(cpus=cpusets)
    def set_ramp(self, cpus: CPUSet) -> None:
        self.commit(RampCPUsSet(cpus))

    # -- rules: containers -----------------------------------------------------------------

    @rule(
        data=st.data(),
        pod=st.sampled_from(PODS),
        name=st.sampled_from(CONTAINERS),
        qos=st.sampled_from([SHARED_CORES, SHARED_CORES, RECLAIMED_CORES, DEDICATED_CORES]),
        ramp_up=st.booleans(),
        numa_binding=st.booleans(),
        numa_exclusive=st.booleans(),
        quantity=st.sampled_from(QUANTITIES),
    )
    def allocate(
        self,
        data: st.DataObject,
        pod: str,
        name: str,
        qos: str,
        ramp_up: bool,
        numa_binding: bool,
        numa_exclusive: bool,
        quantity: float,
    ) -> None:
        placement, owner = self.draw_placement(data, qos, ramp_up)
        entry = container(
            pod,
            name,
            placement,
            qos=qos,
            ramp_up=ramp_up,
            owner=owner,
            quantity=quantity,
            numa_binding=numa_binding,
            numa_exclusive=numa_exclusive,
            container_type=data.draw(st.sampled_from(["MAIN", "SIDECAR"])),
        )
        self.commit(ContainerAllocated(entry))

    @precondition(lambda self: self.model.records)
    @rule(data=st.data())
    def place(self, data: st.DataObject) -> None:
        key = self.existing(data)
        record = self.model.records[key]
        placement, owner = self.draw_placement(data, record.qos_level, record.ramp_up)
        self.commit(ContainerPlaced(*key, placement, owner))

    @precondition(lambda self: any(r.ramp_up for r in self.model.records.values()))
    @rule(data=st.data())
    def finish_ramp_up(self, data: st.DataObject) -> None:
        ramping = sorted(k for k, r in self.model.records.items() if r.ramp_up)
        self.commit(RampUpFinished(*data.draw(st.sampled_from(ramping))))

    @precondition(lambda self: any(r.is_shared() for r in self.model.records.values()))
    @rule(data=st.data(), stamp=st.sampled_from(["", "t1", "t2"]))
    def re_ramp(self, data: st.DataObject, stamp: str) -> None:
        shared = sorted(k for k, r in self.model.records.items() if r.is_shared())
        pooled = self.model.ramp if self.model.ramp and data.draw(st.booleans()) else None
        pooled = pooled if pooled is not None else data.draw(cpusets).clone()
        self.commit(ContainerReRamped(*data.draw(st.sampled_from(shared)), stamp, pooled))

    @precondition(lambda self: self.model.records)
    @rule(data=st.data(), quantity=st.sampled_from(QUANTITIES), stamp=st.text(max_size=3))
    def touch(self, data: st.DataObject, quantity: float, stamp: str) -> None:
        key = self.existing(data)
        self.commit(RequestQuantitySet(*key, quantity))
        self.commit(TimestampReset(*key, stamp))

    @precondition(lambda self: self.model.records)
    @rule(data=st.data())
    def remove_container(self, data: st.DataObject) -> None:
        self.commit(ContainerRemoved(*self.existing(data)))

    @precondition(lambda self: self.model.records)
    @rule(data=st.data())
    def remove_pod(self, data: st.DataObject) -> None:
        self.commit(PodRemoved(self.existing(data)[0]))

    @rule(
        event=st.sampled_from(
            [
                ContainerRemoved("ghost", "app"),
                PodRemoved("ghost"),
                ContainerPlaced("ghost", "app", RAMPING, ""),
                PoolRemoved("ghost-pool"),
                RampCPUsSet(CPUSet.parse("16")),
            ]
        )
    )
    def refused(self, event: Event) -> None:
        before = self.state
        try:
            apply_all(self.state, [event])
        except StateError as err:
            assert self.state is before
            message = str(err)
        else:
            raise AssertionError(f"{event!r} should not fit")
        # Replay's in-place apply refuses the same event with the same message.
        sections = dict(self.state.sections)
        with pytest.raises(StateError) as refused:
            apply_to_sections(sections, [event])
        assert str(refused.value) == message

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def replay_equals_live_state(self) -> None:
        assert apply_all(empty_state(TOPO), self.events) == self.state
        sections = dict(empty_state(TOPO).sections)
        apply_to_sections(sections, self.events)
        assert State(immutables.Map(sections)) == self.state

    @invariant()
    def codec_round_trip(self) -> None:
        data = msgpack.unpackb(msgpack.packb(encode_state(self.state)))
        back = decode_state(data, TOPO)
        assert back == self.state
        assert back.cpu.indexes == self.state.cpu.indexes  # rebuilt == maintained

    @invariant()
    def derived_records_equal_reference_copies(self) -> None:
        cpu = self.state.cpu
        derived = {(i.pod_uid, i.container_name): i for i in cpu.allocation_infos()}
        assert derived == self.model.records
        assert dict(cpu.pools) == self.model.pools and cpu.ramp_cpus == self.model.ramp

    @invariant()
    def machine_queries_equal_the_naive_oracle(self) -> None:
        cpu = self.state.cpu
        records = list(self.model.records.values())
        machine = naive_machine_state(TOPO, records)
        assert cpu.pooled_cpus(RESERVED) == naive_pooled(machine, RESERVED)
        assert cpu.adjustable_cpus(RESERVED) == naive_adjustable(machine, RESERVED)
        assert (
            cpu.available(RESERVED)
            == CPUSet.union_all(ns.default_cpuset for ns in machine.values()) - RESERVED
        )
        for n, ns in machine.items():
            assert cpu.allocated_cpuset(n) == ns.allocated_cpuset
            assert cpu.default_cpuset(n) == ns.default_cpuset
            assert cpu.numa_available(n, RESERVED) == ns.default_cpuset - RESERVED
        assert cpu.numas_without_numa_binding() == naive_filtered_numa_set(
            machine, AllocationInfo.is_numa_binding
        )
        assert cpu.numas_with_dedicated_numa_binding() == set(machine) - naive_filtered_numa_set(
            machine, AllocationInfo.is_dedicated_numa_binding
        )
        exported = generate_machine_state(cpu)
        for n, ns in exported.items():
            assert (ns.default_cpuset, ns.allocated_cpuset) == (
                machine[n].default_cpuset,
                machine[n].allocated_cpuset,
            )
            flat = [ai for pod in (ns.pod_entries or {}).values() for ai in pod.values()]
            key = lambda ai: (ai.pod_uid, ai.container_name)  # noqa: E731
            assert sorted(flat, key=key) == sorted(machine[n].entries, key=key)
            assert (ns.pod_entries is None) == (not machine[n].entries)

    @invariant()
    def quantity_maps_and_indexes(self) -> None:
        cpu = self.state.cpu
        records = self.model.records
        assert cpu.shared_quantity_map() == naive_shared_quantity_map(records.values())
        assert cpu.isolated_quantity_map() == naive_isolated_quantity_map(records.values())
        # The pod source answers for p1 and p2 only (§5.5).
        lookup = lambda pod, c: {"p1": 1500.0, "p2": 300.0}.get(pod)  # noqa: E731
        assert cpu.shared_quantity_map(lookup=lookup) == naive_shared_quantity_map(
            records.values(), lookup
        )
        assert cpu.isolated_quantity_map(lookup=lookup) == naive_isolated_quantity_map(
            records.values(), lookup
        )
        unpooled = {
            k
            for k, r in records.items()
            if not r.is_dedicated() and not (self.model.follows[k] or "").startswith("pool:")
        }
        assert set(cpu.unpooled_containers()) == unpooled
        assert set(cpu.ramping_containers()) == {k for k, r in records.items() if r.ramp_up}
        assert set(cpu.dedicated_containers()) == {
            k for k, r in records.items() if r.is_dedicated()
        }
        owners = {r.owner_pool_name for r in records.values() if r.owner_pool_name}
        assert cpu.owner_pool_names() == owners
        for owner in owners:
            assert set(cpu.containers_owned_by(owner)) == {
                k for k, r in records.items() if r.owner_pool_name == owner
            }


StateMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestStateMachine = StateMachine.TestCase
