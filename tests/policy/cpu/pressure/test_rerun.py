"""Re-running a CPU pressure cause: a cause that is not one, or whose inputs do not decode, is an
``InputError`` naming the field (the happy path re-runs every journaled decision in
``tests/actors/test_cpu_pressure.py``)."""

from __future__ import annotations

import pytest

from policy.cpu.pressure import ActivePod, InputError, PressureSettings
from policy.cpu.pressure.rerun import rerun_cause
from policy.cpu.pressure.suppression_numa import (
    NON_BOUND,
    NUMASuppressionInputs,
    ReclaimPart,
    ReclaimSample,
)
from policy.cpu.reference import V0_5_47, ReferenceOptions, reference_cause
from policy.state.pressure import PressureHistory

SETTINGS = PressureSettings(enable_load_eviction=True).to_json()


@pytest.mark.parametrize(
    ("cause", "message"),
    [
        pytest.param({"command": "Allocate", "now": 1}, "cause.command: 'Allocate'", id="not ours"),
        pytest.param({"command": "ThresholdMet", "now": "noon"}, "cause.now", id="no time"),
        pytest.param(
            {"command": "ThresholdMet", "now": 1, "settings": {"ring": 3}},
            "cause.settings: unknown keys",
            id="unknown settings",
        ),
        pytest.param(
            {"command": "CollectLoad", "now": 1, "settings": SETTINGS, "inputs": {"loads": [[1]]}},
            r"cause.inputs.loads\[0\]: expected a list of 3 items",
            id="a load row cut short",
        ),
        pytest.param(
            {
                "command": "GetEvictPods",
                "now": 1,
                "settings": SETTINGS,
                "inputs": {"reclaim_pool_size": -1},
            },
            "cause.inputs.reclaim_pool_size: expected a CPU count",
            id="a negative pool",
        ),
        pytest.param(
            {
                "command": "GetEvictPods",
                "now": 1,
                "settings": SETTINGS,
                "reference": {"version": "v0.5.47", "options": {}},
                "inputs": {"reclaim_pool_size": 4, "parts": [{"numa": -2, "cpus": 4}]},
            },
            r"cause.inputs.parts\[0\].numa: expected -1 or a NUMA id",
            id="a v0.5.47 cause's inputs are read as the v0.5.47 rule's",
        ),
        pytest.param(
            {
                "command": "GetEvictPods",
                "now": 1,
                "settings": SETTINGS,
                "reference": {"version": "v9"},
                "inputs": {"reclaim_pool_size": 4},
            },
            "cause.reference: cause records reference level 'v9'",
            id="an unknown reference level",
        ),
    ],
)
def test_a_bad_cause_names_the_field(cause: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        rerun_cause(PressureHistory(), cause)


def test_a_v0_5_47_cause_is_re_decided_by_the_supply_of_its_parts() -> None:
    settings = PressureSettings(
        enable_suppression_eviction=True, min_suppression_tolerance_duration_s=0.0,
        max_suppression_tolerance_rate=1.5, grace_period_s=15,
    )  # fmt: skip
    pod = ActivePod(uid="u1", namespace="ns", name="etl",
                    annotations={"katalyst.kubewharf.io/qos_level": "reclaimed_cores"},
                    containers=(("app", {"cpu": "6"}),))  # fmt: skip
    # 4 CPUs half busy, the cgroup using 1: a supply of 3; 6 CPUs on 3 is a rate of 2 over
    # the maximum tolerance 1.5 (v0.5.3 would divide by the pool's 4: 1.5, kept).
    part = ReclaimPart(NON_BOUND, 4, ReclaimSample(2.0, 1.0, -1.0, 100000.0))
    inputs = NUMASuppressionInputs(4, (part,), (pod,))
    cause = {"command": "GetEvictPods", "now": 10.0, "settings": settings.to_json(),
             "inputs": inputs.to_json()}  # fmt: skip
    history = PressureHistory(tolerance_since=(("ns/etl", 1.0),))
    # Without the level the cause is v0.5.3's, whose inputs have no parts.
    with pytest.raises(InputError, match=r"cause.inputs: unknown keys \['parts'\]"):
        rerun_cause(history, cause)
    cause["reference"] = reference_cause(V0_5_47, ReferenceOptions())
    again = rerun_cause(history, cause)
    assert [o.pod_uid for o in again.reply.offers] == ["u1"]
    assert again.reply.to_json()["evict_pods"][0]["deletion_options"] == {
        "grace_period_seconds": 15
    }
