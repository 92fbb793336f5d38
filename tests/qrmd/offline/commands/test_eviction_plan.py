"""``qrmd eviction plan``: the reference's table cases through the command (its ``--json``
equals the in-process run), the shipped example, the human view, and one-line errors naming
the field."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from policy.cpu.pressure.plan import parse_plan, run_plan
from qrmd.cli import main
from qrmd.offline.commands.eviction import plan_json
from tests.policy.cpu.pressure.reference_cases import ALL_CASES, ReferenceCase
from tests.policy.cpu.pressure.suppression_timeline import PODS, SETTINGS, TIMELINES, Timeline
from tests.policy.cpu.pressure.test_reference_cases import check_answers

REPO = Path(__file__).resolve().parents[4]
EXAMPLE = REPO / "docs" / "examples" / "eviction" / "squeezed-reclaim.json"
GONE = REPO / "docs" / "examples" / "eviction" / "reclaim-pool-gone.json"


def plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["eviction", "plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, document: object) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document))
    return str(path)


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_reference_table_case_through_the_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: ReferenceCase
) -> None:
    code, out, err = plan(capsys, "--json", write(tmp_path, case.plan))
    assert (code, err) == (0, "")
    lines = [json.loads(line) for line in out.splitlines()]
    in_process, _ = run_plan(parse_plan(case.plan))
    assert lines == [json.loads(json.dumps(plan_json(r))) for r in in_process]
    check_answers(lines[-1], case.want)


def test_the_example_squeezes_the_reclaim_pool_and_offers_a_reclaimed_pod(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = plan(capsys, str(EXAMPLE))
    assert (code, err) == (0, "")
    blocks = out.strip().split("\ntick ")
    assert len(blocks) == 6
    assert "threshold_met: SOFT_MET pool share" in blocks[2]
    assert "top_eviction_pods: pool share: evict shop/web (uid-web)" in blocks[4]
    assert (
        "evict_pods: evict batch/etl (uid-etl): current pool suppression rate 2.00 is over "
        "than the pod suppression tolerance rate 1.20"
    ) in blocks[4]
    # The last tick: web and etl are gone; still HARD, but in the cool-down.
    assert "top_eviction_pods: no pods" in blocks[5]
    assert "in eviction cool-down time, skip eviction" in blocks[5]


def test_stdin_is_read_for_a_dash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(EXAMPLE.read_bytes())))
    code, out, _ = plan(capsys, "--json", "-")
    assert code == 0 and len(out.splitlines()) == 6


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param({"ticks": []}, "ticks: expected a non-empty list", id="no ticks"),
        pytest.param(
            {"ticks": [{"time": 1, "pods": [{"namespace": "x"}]}]},
            r"ticks\[0\].pods\[0\].uid: expected a string",
            id="a pod without its uid",
        ),
        pytest.param(
            {"ticks": [{"time": 1, "pools": {"share": -2}}]},
            r"ticks\[0\].pools.share: expected a CPU count",
            id="a negative pool size",
        ),
        pytest.param(
            {"settings": {"load_metric_ring_size": 0}, "ticks": [{"time": 1}]},
            "load_metric_ring_size: a ring holds at least 1 sample",
            id="a ring of no samples",
        ),
        pytest.param(
            {"ticks": [{"time": 2}, {"time": 1}]},
            r"ticks\[1\].time: 1.0 is before the previous tick's 2.0",
            id="time going backwards",
        ),
        pytest.param(
            {"ticks": [{"time": 1, "calls": ["evict"]}]},
            r"ticks\[0\].calls: expected a list of",
            id="an unknown call",
        ),
    ],
)
def test_a_bad_file_is_one_error_line_naming_the_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, document: object, message: str
) -> None:
    code, out, err = plan(capsys, write(tmp_path, document))
    assert code != 0 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("qrmd eviction plan: error: ")
    assert re.search(message, err), err


def test_a_missing_reclaim_pool_is_an_answer_error_not_a_crash(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = {
        "settings": {"enable_suppression_eviction": True},
        "ticks": [{"time": 1, "pools": {"share": 4}, "calls": ["evict_pods"]}],
    }
    code, out, _ = plan(capsys, write(tmp_path, document))
    assert code == 0
    # The reference's text ("get reclaim pool failed: " + GetCPUSetForPool's "pool not
    # found"), after the RPC's name, with the status qrmd's plugin answers (wire.errors).
    assert out.splitlines()[1] == (
        "  evict_pods: error (FAILED_PRECONDITION): "
        "GetEvictPods: get reclaim pool failed: pool not found"
    )
    code, out, _ = plan(capsys, "--json", write(tmp_path, document))
    assert code == 0
    assert json.loads(out)["evict_pods"] == {
        "code": "FAILED_PRECONDITION",
        "error": "GetEvictPods: get reclaim pool failed: pool not found",
    }


def test_the_guide_example_is_a_plan(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    guide = (REPO / "docs" / "cpu-pressure.md").read_text()
    section = guide[guide.index("## Asking the CPU eviction plugins offline") :]
    block = section.split("```json\n", 1)[1].split("```", 1)[0]
    code, out, err = plan(capsys, write(tmp_path, json.loads(block)))
    assert (code, err) == (0, "")
    assert "collect: share load 11 (soft > 8, hard > 14.4)" in out


def timeline_plan(timeline: Timeline) -> dict[str, Any]:
    """The timeline as a plan: one tick per step asking ``GetEvictPods`` only."""
    ticks, now = [], 1_000.0
    for step in timeline.steps:
        now += step.advance_s
        pools = {} if step.reclaim_pool is None else {"reclaim": step.reclaim_pool}
        ticks.append(
            {
                "time": now,
                "settings": {"enable_suppression_eviction": step.enabled},
                "pools": pools,
                "pods": [PODS[p].to_json() for p in step.pods],
                "calls": ["evict_pods"],
            }
        )
    return {"settings": SETTINGS.to_json(), "ticks": ticks}


@pytest.mark.parametrize("timeline", TIMELINES, ids=lambda t: t.id)
def test_the_suppression_timers_through_the_early_returns(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, timeline: Timeline
) -> None:
    code, out, err = plan(capsys, "--json", write(tmp_path, timeline_plan(timeline)))
    assert (code, err) == (0, "")
    for n, (step, line) in enumerate(zip(timeline.steps, out.splitlines(), strict=True)):
        answer = json.loads(line)["evict_pods"]
        if step.error:
            # The reference's text, after the RPC's name, as qrmd's plugin answers it.
            assert answer == {"code": "FAILED_PRECONDITION", "error": f"GetEvictPods: {step.error}"}
        else:
            assert [o["pod_uid"] for o in answer["evict_pods"]] == list(step.offered), f"step {n}"


def test_the_reclaim_pool_gone_example_offers_the_pod_when_the_pool_is_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = plan(capsys, str(GONE))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1] == "  evict_pods: no pods; no condition"
    assert lines[3] == (
        "  evict_pods: error (FAILED_PRECONDITION): "
        "GetEvictPods: get reclaim pool failed: pool not found"
    )
    assert lines[5] == (
        "  evict_pods: evict batch/etl (uid-etl): current pool suppression rate 2.00 is over "
        "than the pod suppression tolerance rate 1.20 (force_evict false, "
        'eviction_plugin_name "", no deletion options); no condition'
    )


def field_names(value: object, parent: str = "") -> set[str]:
    """Every key of the JSON output, but the names of pools and calls (values, not fields)."""
    names: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if parent not in ("pools", "answer_pools"):
                names.add(key)
            names |= field_names(item, key)
    elif isinstance(value, list):
        for item in value:
            names |= field_names(item, parent)
    return names


def test_the_docs_name_every_field_of_the_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    docs = (REPO / "docs" / "eviction-plan.md").read_text()
    names: set[str] = set()
    for example in (EXAMPLE, GONE):
        code, out, _ = plan(capsys, "--json", str(example))
        assert code == 0
        for line in out.splitlines():
            names |= field_names(json.loads(line))
    assert {"force_evict", "deletion_options", "shared_pools_limit", "code"} <= names
    assert sorted(n for n in names if f"`{n}`" not in docs) == []


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda tmp: tmp / "absent", "not a directory", id="a path that is not there"),
        pytest.param(lambda tmp: tmp, "holds no segment", id="a directory with no journal"),
    ],
)
def test_rerun_of_no_journal_is_one_error_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make: Any, message: str
) -> None:
    code = main(["eviction", "rerun", str(make(tmp_path))])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    (line,) = err.strip().splitlines()
    assert line.startswith("qrmd eviction rerun: error: no journal at ") and message in line


def _v0547_tick(time: float, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A tick whose reclaim pool of 10 CPUs is judged by its parts (the v0.5.47 rule)."""
    reclaimed = {
        "katalyst.kubewharf.io/qos_level": "reclaimed_cores",
        "katalyst.kubewharf.io/cpu_enhancement": '{"suppression_tolerance_rate": "1.2"}',
    }
    pods = [{"uid": f"uid-{n}", "namespace": n, "name": n, "annotations": reclaimed,
             "containers": [{"name": n, "requests": {"cpu": cpu}}]}
            for n, cpu in (("pod-1", "15"), ("pod-2", "4"))]  # fmt: skip
    return {"time": time, "pools": {"reclaim": 10}, "pods": pods, "calls": ["evict_pods"],
            "reclaim_parts": parts}  # fmt: skip


def test_a_tick_with_reclaim_parts_is_judged_by_the_v0_5_47_rule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The reference's quota-limited case (pressure_suppression_test.go "over tolerance rate,
    # because quota limited"): 10 CPUs at 0.5, cgroup usage 55, quota 5000 / 1000: supply 5.
    part = {
        "numa": -1,
        "cpus": 10,
        "missing": "",
        "sample": {"pool_usage": 5, "cgroup_usage": 55, "cfs_quota": 5000, "cfs_period": 1000},
    }
    settings = {"enable_suppression_eviction": True, "min_suppression_tolerance_duration_s": 0.01,
                "grace_period_s": 30}  # fmt: skip
    missing = {"numa": -1, "cpus": 10, "sample": None, "missing": "/kubepods/besteffort: gone"}
    ticks = [_v0547_tick(0, [part]), _v0547_tick(0.020, [part]), _v0547_tick(1, [missing])]
    code, out, _ = plan(capsys, "--json", write(tmp_path, {"settings": settings, "ticks": ticks}))
    assert code == 0
    first, second, third = (json.loads(line) for line in out.splitlines())
    assert first["evict_pods"]["evict_pods"] == []
    (offer,) = second["evict_pods"]["evict_pods"]
    assert offer["pod_uid"] == "uid-pod-1"
    assert offer["reason"] == ("current pool suppression rate 3.80 is over than the pod "
                               "suppression tolerance rate 1.20")  # fmt: skip
    assert offer["deletion_options"] == {"grace_period_seconds": 30}
    assert third["evict_pods"] == {
        "code": "FAILED_PRECONDITION",
        "error": "GetEvictPods: get reclaim metrics failed: /kubepods/besteffort: gone",
    }
    bad = [_v0547_tick(0, [{"numa": -1, "cpus": "ten"}])]
    code, _, err = plan(capsys, write(tmp_path, {"settings": settings, "ticks": bad}))
    assert code != 0 and "ticks[0].reclaim_parts[0].cpus" in err
