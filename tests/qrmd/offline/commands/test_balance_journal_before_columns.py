"""A journal whose rounds hold their pods as pod maps (written before the columns of
``policy.balance.columns``) reads, re-runs and shows as it did, and as one written today does:
``qrmd balance plan --from-journal``, ``qrmd journal rerun`` and ``qrmd journal show``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from journal import read_records
from policy.balance.inputs import PlainInputs
from qrmd.cli import main
from tests.actors.test_memory_balancer_rerun import journal_some_ticks
from tests.qrmd.offline.test_rerun import NODE_FLAGS

FORMS = ("before the columns", "today")


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    today = tmp_path_factory.mktemp("today")
    journal_some_ticks(today)
    before = tmp_path_factory.mktemp("before")
    with pytest.MonkeyPatch.context() as patch:
        # The encoder before the columns packed the inputs' dict form (to_json) verbatim.
        patch.setattr(PlainInputs, "journal_form", PlainInputs.packable)
        journal_some_ticks(before)
    return {"before the columns": before, "today": today}


def round_inputs(directory: Path) -> list[dict[str, Any]]:
    return [
        e["inputs"]
        for r in read_records(str(directory))
        for e in r.events
        if e.get("kind") in ("BalanceRoundRecorded", "BalanceRoundFailed")
    ]


def test_the_two_journals_hold_the_two_forms(journals: dict[str, Path]) -> None:
    before, today = round_inputs(journals["before the columns"]), round_inputs(journals["today"])
    assert len(before) == len(today) == 3
    assert all("pods" in i and "podColumns" not in i for i in before)
    # The round that failed before its inputs were read journals its time alone.
    assert all("podColumns" in i and "pods" not in i for i in today if len(i) > 1)


def round_seqs(directory: Path) -> list[int]:
    return [
        r.seq
        for r in read_records(str(directory))
        if any(e.get("kind") == "BalanceRoundRecorded" for e in r.events)
    ]


@pytest.mark.parametrize("form", FORMS)
def test_balance_plan_matches_every_round_and_says_the_same_of_both(
    form: str, journals: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    seqs = round_seqs(journals[form])
    assert seqs == round_seqs(journals["today"])
    for seq in seqs:
        args = ["balance", "plan", "--from-journal", str(journals[form]), "--seq", str(seq)]
        assert main(args) == 0
        text = capsys.readouterr().out
        assert (
            main(["balance", "plan", "--from-journal", str(journals["today"]), "--seq", str(seq)])
            == 0
        )
        assert text == capsys.readouterr().out
        assert "matches the journal" in text
        assert main([*args, "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        journal = document.pop("journal")
        assert journal["matches"] and journal["journaled"] == journal["recomputed"]
        assert main([*args[:3], str(journals["today"]), *args[4:], "--json"]) == 0
        today = json.loads(capsys.readouterr().out)
        today.pop("journal")
        assert document == today


@pytest.mark.parametrize("form", FORMS)
def test_journal_rerun_finds_no_divergence(
    form: str, journals: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["journal", "rerun", str(journals[form]), *NODE_FLAGS, "--json"])
    found = json.loads(capsys.readouterr().out)
    assert code == 0 and found["divergences"] == [] and found["rerun"] >= 3


@pytest.mark.parametrize("form", FORMS)
def test_journal_show_lists_the_rounds(
    form: str, journals: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    directory = str(journals[form])
    assert main(["journal", "show", directory, "--kind", "BalanceRoundRecorded"]) == 0
    assert capsys.readouterr().out.count("BalanceRoundRecorded record={") == 2
    assert main(["journal", "show", directory, "--kind", "BalanceRoundRecorded", "--json"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["kind"] for r in shown for e in r["events"]] == ["BalanceRoundRecorded"] * 2
