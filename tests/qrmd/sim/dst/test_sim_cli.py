"""``qrmd sim run`` and ``qrmd sim shrink`` (qrmd.commands.sim): exit codes, one-line input
errors, the JSON document, the replay command on a failure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.cpu.reference import V0_5_3
from qrmd.cli import main
from tests.qrmd.sim.dst.test_teeth import first_failing_seed


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["sim", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["run", "--seed", "x"],
            "--seed must be an integer, got 'x'",
            id="a seed that is not a number",
        ),
        pytest.param(
            ["run", "--seed", "1", "--steps", "0"], "--steps must be at least 1", id="no steps"
        ),
        pytest.param(
            ["run", "--seed", "1", "--faults", "meteor"],
            "unknown fault kind meteor",
            id="an unknown fault kind",
        ),
        pytest.param(
            ["run", "--seed", "1", "--fault-rate", "0.9"],
            "--fault-rate must lie between 0 and 0.4",
            id="a fault rate past the limit",
        ),
        pytest.param(
            ["run", "--seed", "1", "--reference-version", "v0.6"],
            "--reference-version must be one of v0.5.3, v0.5.47, got 'v0.6'",
            id="an unknown reference version",
        ),
        pytest.param(
            ["shrink", "--seed", "1", "--plant", "typo"],
            "unknown defect 'typo'",
            id="an unknown defect",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


def test_json_has_the_documented_keys_and_a_clean_run_exits_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / "trace.txt"
    code, out, _ = run_cli(
        capsys, "run", "--seed", "3", "--steps", "60", "--json", "--trace", str(trace)
    )
    doc = json.loads(out)
    assert code == 0
    assert {
        "seed",
        "steps",
        "trace_digest",
        "faults_injected",
        "invariants_checked",
        "failures",
    } <= set(doc)
    assert doc["seed"] == 3 and doc["steps"] == 60 and doc["failures"] == []
    assert len(trace.read_text().splitlines()) >= 60


def test_a_failure_exits_1_naming_seed_step_invariant_and_the_replay(
    capsys: pytest.CaptureFixture[str],
) -> None:
    seed = first_failing_seed("skip-dedicated-disjointness")
    assert seed is not None
    # At the level first_failing_seed searched at (else the seed picks one of its own).
    code, _, err = run_cli(
        capsys,
        "run",
        "--seed",
        str(seed),
        "--reference-version",
        V0_5_3,
        "--plant",
        "skip-dedicated-disjointness",
    )
    assert code == 1
    assert f"seed {seed} failed at step" in err and "exclusive-cpus-disjoint" in err
    replay = err.split("replay it: ")[1].strip()
    assert replay.startswith(f"qrmd sim run --seed {seed} --steps ")
    code, _, again = run_cli(capsys, *replay.split()[2:])
    assert code == 1 and again == err


def test_shrink_prints_a_smaller_reproduction(capsys: pytest.CaptureFixture[str]) -> None:
    seed = first_failing_seed("ack-before-fsync")
    assert seed is not None
    code, out, _ = run_cli(
        capsys, "shrink", "--seed", str(seed), "--plant", "ack-before-fsync", "--json"
    )
    doc = json.loads(out)
    assert code == 1 and "power_loss" in doc["faults"]
    assert doc["failure"]["invariant"] == "acknowledged-survive"
    assert doc["replay"].startswith(f"qrmd sim run --seed {seed} --steps {doc['steps']} ")


def test_shrinking_a_seed_that_does_not_fail_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "shrink", "--seed", "1", "--steps", "30")
    assert code == 0 and "does not fail" in out


@pytest.mark.parametrize("level", ["v0.5.3", "v0.5.47"])
def test_the_level_is_in_the_json_and_the_replay_and_replays_the_same_run(
    capsys: pytest.CaptureFixture[str], level: str
) -> None:
    args = ("run", "--seed", "5", "--steps", "40", "--json")
    _, out, _ = run_cli(capsys, *args, "--reference-version", level)
    doc = json.loads(out)
    assert doc["reference_version"] == level
    assert doc["replay"].endswith(f"--reference-version {level}")
    _, again, _ = run_cli(capsys, *doc["replay"].split()[2:], "--json")
    assert json.loads(again)["trace_digest"] == doc["trace_digest"]


def test_without_the_flag_the_seed_picks_the_level_and_the_replay_names_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run_cli(capsys, "run", "--seed", "5", "--steps", "10", "--json")
    doc = json.loads(out)
    assert doc["replay"].endswith(f"--reference-version {doc['reference_version']}")


def test_a_higher_fault_rate_injects_more_and_replays_with_its_rate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, low, _ = run_cli(capsys, "run", "--seed", "2", "--steps", "150", "--json")
    _, high, _ = run_cli(
        capsys, "run", "--seed", "2", "--steps", "150", "--json", "--fault-rate", "0.2"
    )
    low_doc, high_doc = json.loads(low), json.loads(high)
    assert sum(high_doc["faults_injected"].values()) > sum(low_doc["faults_injected"].values())
    assert "--fault-rate 0.2" in high_doc["replay"] and "--fault-rate" not in low_doc["replay"]
