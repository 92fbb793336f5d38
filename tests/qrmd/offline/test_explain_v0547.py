"""``qrmd journal explain`` and ``journal rerun`` on a journal a v0.5.47 node wrote: the SNB
pool a placement came from is named with its NUMA, and the re-run decides at the recorded
level with the default flags (spec cpu-policy-v0.5.47 (a); DESIGN.md "journal rerun")."""

from __future__ import annotations

import json

import pytest

from qrmd.cli import main
from tests.qrmd.offline.test_decision_rerun_v0547 import _journal47  # noqa: F401 (the fixture)

NODE = ["--topology", "synthetic:cpus=16,sockets=2,numas=4"]


def test_explain_names_the_snb_pool_and_its_numa(
    journal47: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["journal", "explain", journal47, "pod-s", *NODE])
    out = capsys.readouterr().out
    assert code == 0
    assert "(added, pool share-NUMA1 (shared cores bound to NUMA 1))" in out


def test_rerun_with_the_default_flags_finds_no_divergence(
    journal47: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["journal", "rerun", journal47, *NODE, "--reserved-cpu-cores", "2", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0, summary
    assert summary["rerun"] >= 4 and summary["divergences"] == []
