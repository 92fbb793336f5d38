"""Random advisor responses, valid and not, interleaved with kubelet calls (cpu-policy §11.6–§11.8).

Whatever the advisor sends:

* a refused response changes no CPU state (only the advisor section's record);
* dedicated containers that own CPUs never share one, the reserve stays the reserve and no pool
  but reclaim's fallback overlaps another (distinct blocks are distinct CPUs, §11.7);
* replaying every committed event, through the journal's encoding, from the empty state equals
  the live state.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.cpu import facade as cpu_policy
from policy.cpu.advisor.decision import AdvisorSettings, apply_advice
from policy.cpu.advisor.response import AdvisorResponse, Block, CalculationInfo
from policy.cpu.commands import RemovePod
from policy.decision import Event
from policy.errors import PolicyError
from policy.state.codec import decode_event, encode_event
from policy.state.sections import State, apply_all, empty_state
from tests.policy.decision_fixtures import CTX, T0, allocate_inputs, dedicated, request

ADVISED = replace(CTX, advisor_enabled=True)
SETTINGS = AdvisorSettings(ADVISED)


@st.composite
def responses(draw: st.DrawFn, state: State) -> AdvisorResponse:
    """A response that is right about the state more often than not."""
    cpu = state.cpu
    entries: dict[str, dict[str, CalculationInfo | None] | None] = {}
    ids = iter(f"b{i}" for i in range(1000))
    if draw(st.integers(0, 9)) > 0:  # mostly the right reserve
        size = len(cpu.pools["reserve"]) + draw(st.sampled_from([0, 0, 0, 1]))
        entries["reserve"] = {"": CalculationInfo("reserve", {-1: (Block(size, next(ids)),)})}
    for key in sorted(cpu.dedicated_containers()):
        if draw(st.integers(0, 9)) == 0:
            continue  # forgotten
        info = cpu.allocation_info(*key)
        assert info is not None
        numas = info.topology_aware_assignments or {}
        blocks = {
            n: (Block(len(c) + draw(st.sampled_from([0, 0, 0, 1])), next(ids)),)
            for n, c in numas.items()
        }
        entries.setdefault(key[0], {})[key[1]] = CalculationInfo("dedicated", blocks)  # type: ignore[index]
    for name in draw(
        st.lists(st.sampled_from(["share", "isolation0", "reclaim", "batch"]), unique=True)
    ):
        numa = draw(st.sampled_from([-1, -1, -1, 0, 1, 2, 3, 9]))
        entries[name] = {
            "": CalculationInfo(name, {numa: (Block(draw(st.integers(0, 8)), next(ids)),)})
        }
    for entry in sorted(cpu.pods):
        for container in sorted(cpu.pods[entry]):
            if draw(st.integers(0, 4)) == 0 and entry not in entries:
                owner = draw(st.sampled_from(["share", "isolation0", "reclaim"]))
                entries.setdefault(entry, {})[container] = CalculationInfo(owner, {})  # type: ignore[index]
    if draw(st.integers(0, 19)) == 0:
        entries["ghost"] = None
    if draw(st.integers(0, 19)) == 0 and entries:
        name = draw(st.sampled_from(sorted(entries)))
        entries[name] = {"": None}
    return AdvisorResponse(entries)


def check(state: State, base: State, events: list[Event]) -> None:
    cpu = state.cpu
    assert cpu.pools["reserve"] == CTX.reserved
    held = 0
    for key in sorted(cpu.dedicated_containers()):
        found = cpu.require_entry(*key)
        if found.owner_pool_name != "dedicated" or not found.is_main():
            continue
        result, _ = cpu.placement_cpus(found.placement)
        assert not held & result.mask, f"{key} shares CPUs with another dedicated container"
        held |= result.mask
    seen = 0
    for name in sorted(cpu.pools):
        if name == "reclaim":
            continue
        assert not seen & cpu.pools[name].mask, f"pool {name} overlaps another pool"
        seen |= cpu.pools[name].mask
    assert not cpu.pools["reclaim"].mask & CTX.reserved.mask
    replayed = apply_all(base, [decode_event(encode_event(e)) for e in events])
    assert replayed == state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_responses_and_kubelet_calls_keep_the_invariants(data: st.DataObject) -> None:
    base = empty_state(CTX.topology)
    start = cpu_policy.start(base, ADVISED)
    events: list[Event] = list(start.events)
    state = apply_all(base, start.events)
    for step in range(data.draw(st.integers(1, 12))):
        action = data.draw(st.sampled_from(["advice", "advice", "shared", "dedicated", "remove"]))
        if action == "advice":
            resp = data.draw(responses(state))
            decision = apply_advice(state, resp, SETTINGS, T0 + step)
            after = apply_all(state, decision.events)
            if decision.error is not None:
                assert after.cpu == state.cpu
        else:
            pod = f"pod-{data.draw(st.integers(0, 4))}"
            try:
                if action == "shared":
                    req = request(pod, cpu=data.draw(st.integers(1, 3)))
                    decision = cpu_policy.allocate(state, allocate_inputs(req), ADVISED, T0 + step)
                elif action == "dedicated":
                    hint = (data.draw(st.integers(0, 3)),)
                    inputs = allocate_inputs(dedicated(pod, hint=hint))
                    decision = cpu_policy.allocate(state, inputs, ADVISED, T0 + step)
                else:
                    decision = cpu_policy.remove_pod(state, RemovePod(pod), ADVISED, T0 + step)
            except PolicyError:
                continue
            after = apply_all(state, decision.events)
        events.extend(decision.events)
        state = after
        check(state, base, events)
