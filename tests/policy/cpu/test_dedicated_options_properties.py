"""Invariants at v0.5.47 with the dedicated allocation options in play (cpu-policy-v0.5.47 (b)):
no CPU is in two exclusive (dedicated) allocations, the state keeps the policy's invariants,
and replaying the committed events equals the live state."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.invariants import check_invariants
from policy.cpu.qos import CPU_ENHANCEMENT_KEY
from policy.cpu.reference import V0_5_47
from policy.errors import PolicyError
from tests.policy.decision_fixtures import CTX, Node, dedicated

CTX_V0547 = replace(CTX, reference_version=V0_5_47)

_options = st.fixed_dictionaries(
    {},
    optional={
        "align_by_socket": st.sampled_from(["true", "false"]),
        "distribute_evenly_across_numa": st.sampled_from(["true", "false"]),
        "full_pcpus_pairing": st.sampled_from(["true", "false"]),
        "katalyst.kubewharf.io/numa_number": st.sampled_from(["", "0", "1", "2", "3", "4"]),
        "katalyst.kubewharf.io/numa_ids": st.sampled_from(["", "0", "2-3", "0-2", "1,3"]),
    },
)
_pod = st.tuples(st.integers(1, 9), st.booleans(), _options, st.integers(0, 3))


@settings(max_examples=60, deadline=None)
@given(pods=st.lists(_pod, min_size=1, max_size=8))
def test_no_cpu_in_two_exclusive_allocations(
    pods: list[tuple[int, bool, dict[str, str], int]],
) -> None:
    node = Node(CTX_V0547)
    for i, (cpu, exclusive, options, pick) in enumerate(pods):
        base = dedicated(f"pod-{i}", cpu=cpu, exclusive=exclusive)
        req = replace(
            base, annotations={**base.annotations, CPU_ENHANCEMENT_KEY: json.dumps(options)}
        )
        try:
            hints = node.hints(req)
        except PolicyError:
            continue
        assert hints, "v0.5.47 refuses rather than answering no hint"
        hint = hints[pick % len(hints)]
        # A refusal discards the working transaction: nothing is committed.
        with contextlib.suppress(PolicyError):
            node.allocate(replace(req, hint=hint))
        owned: dict[int, str] = {}
        for pod, container in sorted(node.state.cpu.dedicated_containers()):
            entry = node.state.cpu.require_entry(pod, container)
            taken, _ = node.state.cpu.placement_cpus(entry.placement)
            for one in taken:
                assert one not in owned, f"CPU {one} in {owned[one]} and {pod}"
                owned[one] = pod
        # The policy's own invariants, rule 6 (dedicated CPUs are their own) among them.
        assert check_invariants(node.state.cpu, node.ctx) == []
    assert node.replayed() == node.state
