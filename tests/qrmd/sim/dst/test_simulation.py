"""The whole simulation (qrmd.sim.dst.simulation): a few seeds run clean, with faults of many
kinds, and a seed's trace is its own and the same every time. ``make sim`` runs more."""

from __future__ import annotations

from collections import Counter

from qrmd.sim.dst.faults import FAULT_KINDS
from qrmd.sim.dst.invariants import INVARIANTS
from qrmd.sim.dst.simulation import run

SEEDS = range(10)
STEPS = 200


def test_ten_seeds_run_clean_with_many_fault_kinds_and_distinct_traces() -> None:
    outcomes = [run(seed, STEPS) for seed in SEEDS]
    failures = [(o.seed, f) for o in outcomes for f in o.failures]
    assert failures == []
    kinds: Counter[str] = Counter()
    for o in outcomes:
        kinds.update(o.faults_injected)
        assert o.steps == STEPS and o.invariants_checked == STEPS * len(INVARIANTS)
    assert len(kinds) >= 6, kinds
    assert len({o.trace_digest for o in outcomes}) == len(outcomes)
    # Kubelet's lifecycle is exercised: dozens of Allocates answered (stalled and refusing
    # advisors and the CPU pressure actor's commits take their share of the steps).
    assert sum(o.kubelet_calls.get("Allocate:OK", 0) for o in outcomes) > 40


def test_the_same_seed_gives_the_same_trace() -> None:
    first, second = run(4, STEPS), run(4, STEPS)
    assert first.trace_digest == second.trace_digest and first.trace == second.trace


def test_without_faults_nothing_is_injected_and_the_process_boots_once() -> None:
    outcome = run(1, STEPS, faults=())
    assert outcome.faults_injected == {} and outcome.boots == 1 and not outcome.failures


def test_every_fault_kind_is_injected_by_some_seed() -> None:
    seen: set[str] = set()
    for seed in range(30):
        seen.update(run(seed, 120).faults_injected)
        if seen == set(FAULT_KINDS):
            break
    assert seen == set(FAULT_KINDS)


def test_the_seed_picks_whether_the_node_runs_sys_advisor_unless_told() -> None:
    picked = {run(seed, 5, faults=()).cpu_advisor for seed in range(10)}
    assert picked == {True, False}
    told = run(0, 5, faults=(), cpu_advisor=not run(0, 5, faults=()).cpu_advisor)
    assert told.as_json()["cpu_advisor"] is told.cpu_advisor
    assert told.cpu_advisor is not run(0, 5, faults=()).cpu_advisor
