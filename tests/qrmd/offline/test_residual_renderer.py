"""How ``qrmd journal show`` renders a residual removal's cause: the due pods with their
sightings, the listing's fingerprint and size, the advisor's refusals (policy.cpu.cause
version 3), and an older cause that named only its candidates."""

from __future__ import annotations

from typing import Any

import pytest

from journal import Record
from policy.cpu.cause import cause_of
from policy.cpu.residual_check import listing_fingerprint
from policy.cpu.residual_removal import ResidualPods
from qrmd.offline.renderers import render_cause
from tests.policy.cpu.residual_fixtures import evidence

T0 = 1715180645.0


def _record(cause: dict[str, Any]) -> Record:
    return Record(seq=7, wall_time=T0, monotonic_time=1.0, cause=cause, events=[])


@pytest.mark.parametrize(
    ("cause", "line"),
    [
        pytest.param(
            cause_of(ResidualPods(evidence("pod-b", "pod-c", at=T0), ("pod-c",)), T0),
            "RemoveResidualPods: residual pods pod-b (missed 10× since 2024-05-08T14:59:35.000Z), "
            "pod-c (missed 10× since 2024-05-08T14:59:35.000Z), listing "
            f"{listing_fingerprint({'pod-a'})} of 1 pods; advisor refused pod-c",
            id="the evidence: sightings, the listing and the advisor's refusals",
        ),
        pytest.param(
            {"rpc": "RemoveResidualPods", "cause_version": 2, "now": T0, "pod_uids": ["pod-b"]},
            "RemoveResidualPods: residual pods pod-b",
            id="a version-2 cause names its candidates only",
        ),
    ],
)
def test_a_residual_removal_is_rendered_with_its_evidence(cause: dict[str, Any], line: str) -> None:
    assert render_cause(_record(cause)) == line
