"""The reference's table cases (``reference_cases``), run in-process through the decisions.

Each case's last tick must answer exactly what the Go test asserts: the met type, scope and
condition; the target pods and their order; the pool sample's value and bounds (within the
Go test's 0.01); the offered pods and their reason texts.
"""

from __future__ import annotations

from typing import Any

import pytest

from policy.cpu.pressure.plan import parse_plan, run_plan
from tests.policy.cpu.pressure.reference_cases import ALL_CASES, ReferenceCase


def last_answers(case: ReferenceCase) -> dict[str, Any]:
    results, _ = run_plan(parse_plan(case.plan))
    return results[-1].to_json()


def check_answers(got: dict[str, Any], want: dict[str, Any]) -> None:
    for call, expected in want.items():
        if call == "collect":
            assert got[call]["unsampled_pools"] == expected["unsampled_pools"]
            assert got[call]["pools"].keys() == expected["pools"].keys()
            for pool, sample in expected["pools"].items():
                for bound, value in sample.items():
                    assert got[call]["pools"][pool][bound] == pytest.approx(value, abs=0.01)
        else:
            assert got[call] == expected, call


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_reference_table_case_answers_exactly_as_the_go_test(case: ReferenceCase) -> None:
    check_answers(last_answers(case), case.want)
