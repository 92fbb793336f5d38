"""``cause_target``: what ``qrmd journal show`` prints after a record's seq and time."""

from __future__ import annotations

from typing import Any

import pytest

from qrmd.offline.journal_view import cause_target


@pytest.mark.parametrize(
    ("cause", "expected"),
    [
        pytest.param(
            {"rpc": "Allocate", "request": {"pod_uid": "p", "container_name": "c"}},
            ("Allocate", "p", "c"),
            id="rpc-with-request",
        ),
        pytest.param(
            {
                "rpc": "Allocate",
                "cause_version": 3,
                "request": {"pod_uid": "p", "container_name": "c"},
                "pod": {"phase": "Running"},
            },
            ("Allocate", "p", "c"),
            id="allocate-cause-whose-pod-is-its-phase",
        ),
        pytest.param({"command": "Tick", "now": 1.5}, ("Tick", "", ""), id="balancer-tick"),
        pytest.param(
            {"command": "GetEvictPods", "active_pods": ["a"]},
            ("GetEvictPods", "", ""),
            id="balancer-eviction",
        ),
        pytest.param({"now": 1.5}, ("", "", ""), id="nothing-named"),
    ],
)
def test_cause_target(cause: dict[str, Any], expected: tuple[str, str, str]) -> None:
    assert cause_target(cause) == expected
