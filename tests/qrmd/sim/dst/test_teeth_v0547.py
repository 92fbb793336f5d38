"""Teeth of the v0.5.47 invariants: each planted v0.5.47 defect (qrmd.sim.dst.defects) is found
by its invariant within a bounded number of seeds of a v0.5.47 node, and the seed replays."""

from __future__ import annotations

import pytest

from policy.cpu.reference import V0_5_47
from qrmd.sim.dst.simulation import run

#: Seeds tried per defect (today: the SNB ones at seed 0, rnb-whole-reclaim-pool at seed 1;
#: reclaimed pods bound to a NUMA node need a seed with the option and sys-advisor on).
BOUND = 12
STEPS = 400


@pytest.mark.parametrize(
    ("defect", "invariant"),
    [
        pytest.param(
            "snb-pool-on-next-numa",
            "snb-pools-in-their-numa",
            id="an SNB pool sized on another NUMA node is outside its node",
        ),
        pytest.param(
            "ramp-on-snb-numa",
            "non-binding-pools-off-snb-numas",
            id="a ramp-up cpuset not cut off the SNB NUMA nodes runs beside bound pods",
        ),
        pytest.param(
            "rnb-whole-reclaim-pool",
            "rnb-cpus-in-their-numa",
            id="a NUMA-bound reclaimed container placed on the whole reclaim pool leaves its node",
        ),
    ],
)
def test_a_planted_v0_5_47_defect_is_found_and_its_seed_replays(
    defect: str, invariant: str
) -> None:
    found = next(
        (
            outcome
            for seed in range(BOUND)
            if (outcome := run(seed, STEPS, defect=defect, reference_version=V0_5_47)).failures
        ),
        None,
    )
    assert found is not None, f"{defect} not found in {BOUND} seeds"
    assert found.failures[0].invariant == invariant
    again = run(found.seed, found.steps, defect=defect, reference_version=V0_5_47)
    assert again.failures[0] == found.failures[0]
