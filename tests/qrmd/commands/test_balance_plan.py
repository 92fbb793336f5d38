"""``qrmd balance plan``: the shipped example files, every §15 worked example through the CLI
(exported to JSON, computed offline, compared with the in-process round and the spec's exact
record and advice text), the human view, cool-down, and one-line errors naming the field.

The human views of the example files are golden: regenerate them with
``QRMD_UPDATE_GOLDEN=1 pytest tests/qrmd/commands/test_balance_plan.py``.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from policy.balance import (
    BalanceInfo,
    MemoryAdvice,
    RoundInputs,
    RoundOutcome,
    RoundResult,
    plan_round,
)
from policy.balance.gojson import encode
from qrmd.cli import main
from qrmd.commands.balance import load_inputs, plan_document
from tests.policy.balance.examples import EX2_B, EX2_L, EX2_PODS, NOW, last_round, make_inputs
from tests.policy.balance.test_properties import round_inputs
from tests.policy.balance.test_worked_examples import EXAMPLES, Example

REPO = Path(__file__).resolve().parents[3]
EXAMPLE_DIR = REPO / "docs" / "examples" / "balance"
GOLDEN = Path(__file__).parent / "golden" / "balance_plan"
EXAMPLE_FILES = sorted(p.stem for p in EXAMPLE_DIR.glob("*.json"))
UPDATE = os.environ.get("QRMD_UPDATE_GOLDEN") == "1"


def plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["balance", "plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def in_process(path: Path) -> str:
    """What ``--json`` must print for a round file: the round computed here, in-process."""
    outcome = plan_round(RoundInputs.from_json(json.loads(path.read_text())))
    return encode(plan_document(outcome)) + "\n"


def exit_code(outcome: RoundOutcome) -> int:
    """A failed round exits 1, any other 0 (``qrmd.commands.balance`` docstring)."""
    return 1 if outcome.result is RoundResult.FAILED else 0


def test_the_examples_are_shipped() -> None:
    assert {"pressure", "quiet", "missing-metric"} <= set(EXAMPLE_FILES)


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_json_output_of_each_example_file_equals_the_in_process_round(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = EXAMPLE_DIR / f"{name}.json"
    code, out, err = plan(capsys, str(path), "--json")
    assert (code, err) == (exit_code(plan_round(load_inputs(str(path)))), "")
    assert out == in_process(path)


@pytest.mark.parametrize("name", EXAMPLE_FILES)
def test_human_view_of_each_example_file_is_golden(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    path = EXAMPLE_DIR / f"{name}.json"
    code, out, err = plan(capsys, str(path))
    assert (code, err) == (exit_code(plan_round(load_inputs(str(path)))), "")
    golden = GOLDEN / f"{name}.txt"
    if UPDATE:
        golden.write_text(out)
    assert out == golden.read_text(), f"regenerate with QRMD_UPDATE_GOLDEN=1 if intended: {golden}"


def test_the_guide_shows_the_quiet_example_verbatim() -> None:
    guide = (REPO / "docs" / "balancer.md").read_text()
    section = guide.split("## Asking the balancer offline: `qrmd balance plan`", 1)[1]
    shown = section.split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(shown) == json.loads((EXAMPLE_DIR / "quiet.json").read_text())


def test_pressure_example_yields_migration_advice_and_an_eviction_offer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = EXAMPLE_DIR / "pressure.json"
    _, out, _ = plan(capsys, str(path), "--json")
    document = json.loads(out)
    assert document["outcome"] == "stored"
    assert document["record"]["status"] == "prepareSuccess"
    assert document["record"]["evictPods"][0]["name"] == "spark-exec-1"
    advice = MemoryAdvice.from_json(document["advice"])
    assert (advice.source_numa, advice.dest_numa_list) == (0, (1,))
    assert advice.total_rss == 9126805504
    # The human view shows the same advice text, whole, on one line.
    _, human, _ = plan(capsys, str(path))
    assert f"\n{advice.to_json_text()}\n" in human
    assert (
        "Eviction offer: batch/spark-exec-1 (UID 6f1c9a52-0001-4d7e-9a51-2c1f0e7b8a01), force, "
        "reason: the memory node 0 is under bandwidth pressure\n"
    ) in human


def test_quiet_example_has_no_advice(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = plan(capsys, str(EXAMPLE_DIR / "quiet.json"), "--json")
    document = json.loads(out)
    assert document["advice"] is None
    assert document["record"]["needBalance"] is False
    assert document["record"]["status"] == "preparing"


def test_missing_metric_example_fails_the_round(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = plan(capsys, str(EXAMPLE_DIR / "missing-metric.json"), "--json")
    document = json.loads(out)
    assert document["outcome"] == "failed"
    assert document["record"]["failedReason"] == (
        "failed to get numa metric, metric name: mem.latency.read.numa, numa id: 1, "
        "err: metric data expired"
    )


# -- §15 worked examples through the CLI -----------------------------------------------------

WORKED = [pytest.param(p.values[0], id=p.id) for p in EXAMPLES]


@pytest.mark.parametrize("example", WORKED)
def test_worked_example_through_the_cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, example: Example
) -> None:
    path = tmp_path / "round.json"
    path.write_text(json.dumps(example.inputs.to_json()))
    code, out, err = plan(capsys, str(path), "--json")
    outcome = plan_round(example.inputs)
    assert (code, err) == (exit_code(outcome), "")
    # The same as in-process ...
    assert out == encode(plan_document(outcome)) + "\n"
    # ... and as the spec's worked values: the exact record and advice text.
    document = json.loads(out)
    assert document["outcome"] == str(example.result)
    assert BalanceInfo.from_json(document["record"]) == example.record
    assert f'"record":{example.record.to_json_text()}' in out
    advice = document["advice"]
    assert (None if advice is None else MemoryAdvice.from_json(advice).to_json_text()) == (
        example.advice
    )
    if example.advice is not None:
        assert f'"advice":{example.advice},"evictPods":' in out
    # ... and the eviction offers GetEvictPods would answer with (§9.1).
    assert [(o["uid"], o["reason"]) for o in document["evictPods"]] == list(example.evictions)
    assert all(
        o["forceEvict"] is True and o["evictionPluginName"] == "numa_memory_balancer"
        for o in document["evictPods"]
    )


@pytest.mark.parametrize("example", WORKED)
def test_worked_example_human_view_shows_the_verdict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, example: Example
) -> None:
    path = tmp_path / "round.json"
    path.write_text(json.dumps(example.inputs.to_json()))
    code, out, _ = plan(capsys, str(path))
    assert code == exit_code(plan_round(example.inputs))
    record = example.record
    if example.result is RoundResult.FAILED:
        assert f"failed: {record.failed_reason}" in out
    else:
        assert f"stored · status {record.status}" in out
    assert (example.advice or "Advice: none") in out
    for uid, reason in example.evictions:
        assert f"(UID {uid}), force, reason: {reason}" in out


# -- cool-down, stdin, errors ---------------------------------------------------------------


def test_a_round_in_the_cool_down_is_skipped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first = plan_round(make_inputs(EX2_L, EX2_B, EX2_PODS))
    assert first.record is not None
    emitted = dataclasses.replace(first.record, balance_executed=True)
    later = make_inputs(EX2_L, EX2_B, EX2_PODS, last=emitted, now=NOW + 12.5)
    path = tmp_path / "round.json"
    path.write_text(json.dumps(later.to_json()))
    _, out, _ = plan(capsys, str(path), "--json")
    assert out == '{"outcome":"skipped","record":null,"advice":null,"evictPods":[]}\n'
    _, human, _ = plan(capsys, str(path))
    assert "skipped: cool-down. The last emitted round started at 2026-11-29T23:25:21.5Z, " in human
    assert "12.5 s before now." in human


def test_dash_reads_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = EXAMPLE_DIR / "quiet.json"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    code, out, _ = plan(capsys, "-", "--json")
    assert (code, out) == (0, in_process(path))


QUIET = json.loads((EXAMPLE_DIR / "quiet.json").read_text())


def edited(**changes: object) -> str:
    document = json.loads(json.dumps(QUIET))
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        target = document
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value
    return json.dumps(document)


_DELETE = object()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(None, "cannot read FILE: No such file or directory", id="no such file"),
        pytest.param("{", "FILE: not JSON: Expecting property name", id="not JSON"),
        pytest.param(edited(now=_DELETE), "FILE: inputs: missing field 'now'", id="missing now"),
        pytest.param(
            edited(pods__0__containers__0__anon={"1": -5}),
            "FILE: inputs.pods[0].containers[0].anon['1']: -5 is outside [0, ",
            id="negative anon names the field",
        ),
        pytest.param(
            edited(numaMetric=[]),
            "FILE: inputs: unknown field 'numaMetric' (known: ",
            id="a typo is an unknown field",
        ),
        pytest.param(
            edited(numaMetrics__0__readLatency=-1),
            "FILE: inputs.numaMetrics[0].readLatency: -1 is outside [0, inf]",
            id="negative latency",
        ),
        pytest.param(
            edited(now="yesterday"),
            "FILE: inputs.now: 'yesterday' is not an RFC 3339 timestamp",
            id="bad time",
        ),
    ],
)
def test_bad_files_are_one_error_line_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str | None, message: str
) -> None:
    path = tmp_path / "round.json"
    if text is not None:
        path.write_text(text)
    code, out, err = plan(capsys, str(path))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith("qrmd balance plan: error: " + message.replace("FILE", str(path))), err


# -- any round: the CLI and the in-process planner agree ------------------------------------------


def one_node(inputs: RoundInputs) -> RoundInputs:
    """The inputs with only the pods whose pool is listed: what one node's daemon gives the
    planner (the CLI refuses the others, ``test_inputs_that_mix_nodes_are_refused``)."""
    pods = tuple(p for p in inputs.pods if p.pool in inputs.pools)
    return dataclasses.replace(inputs, pods=pods)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(inputs=round_inputs().map(one_node))
def test_any_round_through_the_cli_equals_the_in_process_round(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, inputs: RoundInputs
) -> None:
    path = tmp_path / "round.json"
    path.write_text(json.dumps(inputs.to_json()))
    code, out, err = plan(capsys, str(path), "--json")
    outcome = plan_round(inputs)
    assert (code, err) == (exit_code(outcome), "")
    assert out == encode(plan_document(outcome)) + "\n"
    # The human view renders every outcome without error.
    code, _, err = plan(capsys, str(path))
    assert (code, err) == (exit_code(outcome), "")


# -- one node's inputs, one time format, the exit status of a failed round -----------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            edited(numaMetrics=[*QUIET["numaMetrics"], {"numa": 2, "readLatency": 1}]),
            "FILE: numaMetrics name NUMA nodes [0, 1, 2] but distances name [0, 1]",
            id="metrics for a NUMA node missing from the distances",
        ),
        pytest.param(
            edited(distances__0=[[0, 10], [1, 21], [3, 32]]),
            "FILE: distances[0] names NUMA nodes [3], which have no distance list",
            id="a distance to an unknown NUMA node",
        ),
        pytest.param(
            edited(pools__share=[0, 1, 5]),
            "FILE: pools['share'] names unknown NUMA nodes [5]",
            id="a pool on an unknown NUMA node",
        ),
        pytest.param(
            edited(pods__0__pool="batch"),
            "FILE: pod '0d3b7c11-aaaa-4bbb-8ccc-000000000001' is in pool 'batch', which pools "
            "does not list (pools: ['reclaim', 'share'])",
            id="a pod in an unknown pool",
        ),
        pytest.param(
            edited(pods__0__containers__0__anon={"0": 1, "7": 2}),
            "has anon on unknown NUMA nodes [7]",
            id="memory on an unknown NUMA node",
        ),
    ],
)
def test_inputs_that_mix_nodes_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "round.json"
    path.write_text(text)
    code, out, err = plan(capsys, str(path))
    assert (code, out) == (2, "")
    assert message.replace("FILE", str(path)) in err and err.count("\n") == 1


def test_last_detect_time_takes_the_unix_seconds_now_takes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    last = last_round(0, [1], 0.1)  # inside the cool-down: the round depends on detectTime
    document = make_inputs(EX2_L, EX2_B, EX2_PODS, last=last).to_json()
    as_rfc3339 = json.loads(json.dumps(document))
    as_unix = json.loads(json.dumps(document))
    as_unix["last"]["detectTime"] = last.detect_time
    assert isinstance(as_rfc3339["last"]["detectTime"], str)
    outputs = []
    for name, doc in (("rfc3339", as_rfc3339), ("unix", as_unix)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        code, out, err = plan(capsys, str(path), "--json")
        assert err == ""
        outputs.append((code, out))
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0][1])["outcome"] == "skipped"


def test_a_failed_round_exits_1_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(capsys, str(EXAMPLE_DIR / "missing-metric.json"))
    assert code == 1
    assert "failed: failed to get numa metric" in out


def test_json_carries_the_eviction_offer(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = plan(capsys, str(EXAMPLE_DIR / "pressure.json"), "--json")
    document = json.loads(out)
    assert code == 0
    assert document["evictPods"]
    assert [o["uid"] for o in document["evictPods"]] == [
        p["UID"] for p in document["record"]["evictPods"]
    ]
    assert set(document["evictPods"][0]) == {"uid", "reason", "forceEvict", "evictionPluginName"}
