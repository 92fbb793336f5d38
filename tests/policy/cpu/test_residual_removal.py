"""The residual removal decided on the checker's evidence (policy.cpu.residual_removal; spec
cpu-policy §12.4 step 4), on ``synthetic:cpus=16,sockets=2,numas=4`` with reserve ``0,2``:
pod-a, pod-b and pod-c hold 2 shared CPUs each."""

from __future__ import annotations

import pytest

from policy.cpu import facade as cpu_policy
from policy.cpu.residual_removal import ResidualOutcome, ResidualPods, residual_candidates
from policy.state.events import PodRemoved
from tests.policy.cpu.residual_fixtures import evidence
from tests.policy.decision_fixtures import CTX, T0, Node, request


def _node() -> Node:
    node = Node()
    for pod in ("pod-a", "pod-b", "pod-c"):
        node.allocate(request(pod, cpu=2))
    node.reconcile(T0 + 31)
    return node


@pytest.mark.parametrize(
    ("due", "refused", "removed", "kept"),
    [
        pytest.param(("pod-b",), (), ("pod-b",), (), id="a due pod goes"),
        pytest.param(("pod-c", "pod-b"), (), ("pod-b", "pod-c"), (),
                     id="due pods go by ascending uid"),
        pytest.param(("pod-b", "gone"), (), ("pod-b",), (),
                     id="a due pod the state no longer holds is no candidate"),
        pytest.param(("pod-b", "pod-c"), ("pod-c",), ("pod-b",), ("pod-c",),
                     id="a pod the advisor refused is kept until the next round"),
        pytest.param(("pod-b",), ("pod-b",), (), ("pod-b",),
                     id="every candidate refused removes nothing"),
    ],
)  # fmt: skip
def test_the_removal_of_due_pods(
    due: tuple[str, ...], refused: tuple[str, ...], removed: tuple[str, ...], kept: tuple[str, ...]
) -> None:
    node = _node()
    inputs = ResidualPods(evidence(*due, at=T0 + 330), refused)
    decision = node.commit(cpu_policy.remove_residual_pods(node.state, inputs, CTX, T0 + 331))
    assert decision.reply == ResidualOutcome(removed, kept)
    assert [e.pod_uid for e in decision.events if isinstance(e, PodRemoved)] == list(removed)
    for pod in ("pod-a", "pod-b", "pod-c"):
        assert bool(node.state.cpu.pod_containers(pod)) is (pod not in removed)
    assert node.replayed() == node.state


def test_the_pools_are_re_sized_after_a_removal() -> None:
    node = _node()
    inputs = ResidualPods(evidence("pod-a", "pod-b", "pod-c", at=T0 + 330))
    node.commit(cpu_policy.remove_residual_pods(node.state, inputs, CTX, T0 + 331))
    # No shared container left: the share pool goes and reclaim takes its CPUs (§6.3).
    assert node.pools() == {"reserve": "0,2", "reclaim": "1,3-15"}


def test_evidence_with_no_candidate_decides_nothing() -> None:
    node = _node()
    inputs = ResidualPods(evidence("gone", at=T0 + 330, missing=("pod-b",)))
    decision = cpu_policy.remove_residual_pods(node.state, inputs, CTX, T0 + 331)
    assert decision.events == () and decision.reply == ResidualOutcome()


def test_the_candidates_are_the_due_pods_still_held() -> None:
    node = _node()
    proof = evidence("pod-c", "gone", "pod-b", at=T0, missing=("pod-a",))
    assert residual_candidates(node.state.cpu, proof) == ("pod-b", "pod-c")
