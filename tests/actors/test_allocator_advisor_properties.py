"""The Allocator with sys-advisor under any interleaving (the issue's hypothesis property).

Random responses (valid and not), kubelet calls, an advisor that answers, is sick or refuses
each AddContainer and RemovePod, link state changes and the silence fallback, all through
``AllocatorCore`` as the daemon drives it. Whatever happens:

* no CPU is in two exclusive allocations, the reserve stays the reserve, and no pool but
  reclaim overlaps another (``check`` of the policy's property);
* a refused Allocate leaves no entry for its container;
* replaying every committed event from the initial state equals the live state.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.advisor_link import LinkStats
from actors.advisor_messages import AdvisorLinkChanged, ApplyAdvice, CheckAdvisorSilence
from actors.allocator import AllocatorCore
from actors.allocator_advisor import AdvisorCalls
from actors.allocator_messages import Allocate, RemovePod, StartPolicy
from actors.ports.advisor import AdvisorRefused, AdvisorSick
from machines import advisor_link as machine
from policy.cpu.advisor.refusal import AdvisorRefusedError
from policy.errors import PolicyError
from policy.state.sections import empty_state
from tests.actors.fakes import ApplyingCommitter, FakeClock
from tests.actors.test_allocator_advisor import ScriptedAdvisor
from tests.policy.cpu.advisor.test_properties import ADVISED, check, responses
from tests.policy.decision_fixtures import T0, dedicated, request

ANSWERS = {
    "answers": None,
    "sick": AdvisorSick("AddContainer", "UNAVAILABLE", "connection refused"),
    "refuses": AdvisorRefused("AddContainer", "INVALID_ARGUMENT", "no"),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_interleaving_keeps_the_invariants_and_replays_to_the_live_state(
    data: st.DataObject,
) -> None:
    base = empty_state(ADVISED.topology)
    store = ApplyingCommitter(base)
    clock = FakeClock(T0)
    advisor = ScriptedAdvisor()
    calls = AdvisorCalls(
        client=advisor,
        call_timeout_s=2.0,
        unhealthy_after_s=60.0,
        report_sick=lambda _message: None,
        stats=LinkStats(),
        health=None,
        monotonic=clock.time,
        started_at=T0,
    )
    core = AllocatorCore(store.latest(), ADVISED, store, clock.time, advisor=calls)
    core.handle(StartPolicy())
    core.handle(AdvisorLinkChanged(machine.WATCHING, T0))
    actions = ["advice", "advice", "shared", "dedicated", "remove", "link", "silence"]
    for _ in range(data.draw(st.integers(1, 14))):
        action = data.draw(st.sampled_from(actions))
        pod = f"pod-{data.draw(st.integers(0, 4))}"
        answer = ANSWERS[data.draw(st.sampled_from(sorted(ANSWERS)))]
        advisor.add = {} if answer is None else {pod: answer}
        advisor.remove = {} if answer is None else {pod: answer}
        try:
            if action == "advice":
                core.handle(ApplyAdvice(data.draw(responses(core.snapshot.state)), clock.now))
            elif action == "shared":
                core.handle(Allocate(request(pod, cpu=data.draw(st.integers(1, 3)))))
            elif action == "dedicated":
                core.handle(Allocate(dedicated(pod, hint=(data.draw(st.integers(0, 3)),))))
            elif action == "remove":
                core.handle(RemovePod(pod))
            elif action == "link":
                state = data.draw(st.sampled_from([machine.WATCHING, machine.BACKING_OFF]))
                core.handle(AdvisorLinkChanged(state, clock.now))
            else:
                clock.advance(data.draw(st.sampled_from([1.0, 30.0, 61.0])))
                core.handle(CheckAdvisorSilence(clock.now))
        except AdvisorRefusedError:
            if action in ("shared", "dedicated"):
                assert core.snapshot.state.cpu.entry(pod, "app") is None
        except PolicyError:
            pass
        check(core.snapshot.state, base, store.events)
