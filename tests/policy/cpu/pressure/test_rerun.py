"""Re-running a CPU pressure cause: a cause that is not one, or whose inputs do not decode, is an
``InputError`` naming the field (the happy path re-runs every journaled decision in
``tests/actors/test_cpu_pressure.py``)."""

from __future__ import annotations

import pytest

from policy.cpu.pressure import InputError, PressureSettings
from policy.cpu.pressure.rerun import rerun_cause
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
    ],
)
def test_a_bad_cause_names_the_field(cause: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        rerun_cause(PressureHistory(), cause)
