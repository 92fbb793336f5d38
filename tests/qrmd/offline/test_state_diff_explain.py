"""``qrmd journal state|diff|explain`` against the live states of a scripted node history.

The oracle is the live state the StateStore published after each commit
(``tests.qrmd.offline.scenario``): ``state`` at a point must equal it, ``diff`` must equal
the difference of two of them, and ``explain`` must list every record that changed the pod's
CPUs as a brute-force comparison of consecutive live states finds them.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from qrmd.cli import main
from qrmd.offline import walk
from qrmd.offline.changes import container_changes, pool_changes
from qrmd.offline.journal_view import format_time
from qrmd.offline.state_view import container_view, state_document
from tests.qrmd.offline.scenario import (
    NODE,
    TOPOLOGY_SPEC,
    Scenario,
    refuse_advice,
    write_scenario,
)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return write_scenario(tmp_path_factory.mktemp("node") / "journal")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["journal", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code, out, err = run(capsys, *argv, "--topology", TOPOLOGY_SPEC, "--json")
    assert code == 0, err
    return json.loads(out)


def live_document(scenario: Scenario, seq: int) -> dict:
    doc = state_document(scenario.live[seq], seq=seq, wall_time=scenario.wall_times[seq])
    return json.loads(json.dumps(doc, default=str))


# -- state -------------------------------------------------------------------------------------


def test_state_at_every_seq_equals_the_live_state_after_that_record(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    for seq in scenario.live:
        shown = run_json(capsys, "state", str(scenario.directory), "--seq", str(seq))
        assert shown == live_document(scenario, seq), f"seq {seq}"


def test_state_without_a_point_is_the_newest_state(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    newest = max(scenario.live)
    assert run_json(capsys, "state", str(scenario.directory)) == live_document(scenario, newest)
    code, out, _ = run(capsys, "state", str(scenario.directory), "--topology", TOPOLOGY_SPEC)
    assert code == 0 and f"after seq {newest} (" in out


def test_state_at_a_time_is_the_last_record_at_or_before_it(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    for seq, wall in scenario.wall_times.items():
        for at in (str(wall), format_time(wall), str(wall + 1.0)):
            shown = run_json(capsys, "state", str(scenario.directory), "--at", at)
            assert shown == live_document(scenario, seq), f"--at {at}"


def test_state_at_a_relative_time_counts_back_from_the_newest_record(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    last = max(scenario.wall_times.values())
    # 10 s before the newest record (seq 9 at +0 s, seq 8 at -5 s, seq 7 at -10 s)
    shown = run_json(capsys, "state", str(scenario.directory), "--at", "10s")
    expected = max(s for s, w in scenario.wall_times.items() if w <= last - 10)
    assert shown["seq"] == expected == 7


def test_state_holds_the_per_numa_map_pools_and_balancer_section(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = run_json(capsys, "state", str(scenario.directory), "--seq", "9")
    db = next(p for p in shown["pods"] if p["uid"] == "uid-db")
    assert db["pod"] == "default/db"
    assert db["containers"][0]["placement"] == "own CPUs"
    assert db["containers"][0]["numa"] == {"1": db["containers"][0]["cpuset"]}
    assert sorted(shown["pools"]) == ["reclaim", "reserve", "share"]
    assert [n["numa"] for n in shown["numa"]] == [0, 1, 2, 3]
    assert sum(n["total"] for n in shown["numa"]) == 16
    assert shown["balance"] == {"current": None, "last": None}


def test_state_text_draws_the_numa_map_and_the_pool_table(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "state", str(scenario.directory), "--seq", "4", "--topology", TOPOLOGY_SPEC
    )
    assert code == 0
    assert "after seq 4 (2024-05-08T15:04:20.000Z): 3 pods" in out
    assert "NUMA 1 · socket 0" in out and "reclaim" in out and "balancer: no round stored" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--seq", "99"], "seq 99 is outside", id="a seq after the last record"),
        pytest.param(
            ["--at", "2001-01-01T00:00:00Z"],
            "is before the first record",
            id="a time before the first record",
        ),
        pytest.param(["--at", "soon"], "neither epoch seconds", id="a time in no known form"),
    ],
)
def test_state_refuses_a_point_outside_the_journal(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(
        capsys, "state", str(scenario.directory), *argv, "--topology", TOPOLOGY_SPEC
    )
    assert code == 2 and out == "" and message in err and err.count("\n") == 1


def test_state_refuses_the_topology_of_another_machine(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys,
        "state",
        str(scenario.directory),
        "--seq",
        "1",
        "--topology",
        "synthetic:cpus=8,sockets=1,numas=1",
    )
    assert code == 2 and "was written for topology" in err


def test_state_refuses_an_empty_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "state", str(tmp_path), "--seq", "1", "--topology", TOPOLOGY_SPEC)
    assert code == 2 and "holds no journal segment" in err


# -- diff --------------------------------------------------------------------------------------


def brute_force_records(scenario: Scenario, start: int, end: int) -> tuple[dict, dict]:
    """For each container and pool: the seqs in (start, end] whose record changed it."""
    containers: dict[tuple[str, str], list[int]] = {}
    pools: dict[str, list[int]] = {}
    for seq in range(start + 1, end + 1):
        before = scenario.live.get(seq - 1, scenario.initial)
        assert before is not None
        for change in container_changes(before.cpu, scenario.live[seq].cpu):
            containers.setdefault(change.key, []).append(seq)
        for pool in pool_changes(before.cpu, scenario.live[seq].cpu):
            pools.setdefault(pool.name, []).append(seq)
    return containers, pools


PAIRS = [(1, 9), (2, 5), (4, 8), (5, 7), (8, 8), (1, 2)]


@pytest.mark.parametrize(("start", "end"), PAIRS, ids=[f"seq {a} to seq {b}" for a, b in PAIRS])
def test_diff_is_the_difference_of_two_states_with_the_records_that_made_it(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], start: int, end: int
) -> None:
    shown = run_json(
        capsys, "diff", str(scenario.directory), "--from", f"seq:{start}", "--to", f"seq:{end}"
    )
    a, b = scenario.live[start].cpu, scenario.live[end].cpu
    expected = [c.to_json() for c in container_changes(a, b)]
    assert [{k: v for k, v in c.items() if k != "records"} for c in shown["containers"]] == (
        expected
    )
    assert [{k: v for k, v in p.items() if k != "records"} for p in shown["pools"]] == [
        p.to_json() for p in pool_changes(a, b)
    ]
    by_container, by_pool = brute_force_records(scenario, start, end)
    for change in shown["containers"]:
        assert change["records"] == by_container[(change["pod_uid"], change["container"])]
    for pool in shown["pools"]:
        assert pool["records"] == by_pool[pool["pool"]]


def test_diff_accepts_times_and_names_moves_in_text(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "diff",
        str(scenario.directory),
        "--from",
        format_time(scenario.wall_times[4]),
        "--to",
        "0s",
        "--topology",
        TOPOLOGY_SPEC,
    )
    assert code == 0
    assert "seq 4 → seq 9" in out
    assert "container default/api/app removed" in out
    assert "pool share added" in out


def test_diff_refuses_a_reversed_range(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys,
        "diff",
        str(scenario.directory),
        "--from",
        "seq:6",
        "--to",
        "seq:2",
        "--topology",
        TOPOLOGY_SPEC,
    )
    assert code == 2 and "--from seq:6 (seq 6) is after --to seq:2 (seq 2)" in err


def test_diff_names_the_records_that_changed_another_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = write_scenario(tmp_path / "journal")
    refuse_advice(node.directory, NODE, ["blocks"])  # seq 10
    shown = run_json(capsys, "diff", str(node.directory), "--from", "seq:9", "--to", "seq:10")
    assert shown["sections"] == {"advisor": [10]}
    assert shown["containers"] == [] and shown["pools"] == []
    state = run_json(capsys, "state", str(node.directory), "--seq", "10")
    assert state["sections"]["advisor"]["last_stage"] == "blocks"


# -- explain -----------------------------------------------------------------------------------


def changed_seqs(scenario: Scenario, uid: str) -> list[int]:
    """Brute force: every record after which one of the pod's containers looked different."""
    seqs = []
    for seq in sorted(scenario.live):
        before = scenario.live.get(seq - 1, scenario.initial)
        assert before is not None
        names = set(before.cpu.pod_containers(uid)) | set(
            scenario.live[seq].cpu.pod_containers(uid)
        )
        if any(
            container_view(before.cpu, (uid, n)) != container_view(scenario.live[seq].cpu, (uid, n))
            for n in names
        ):
            seqs.append(seq)
    return seqs


@pytest.mark.parametrize("uid", ["uid-web", "uid-api", "uid-db", "uid-web2", "uid-batch"])
def test_explain_lists_every_record_that_changed_the_pods_cpus(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], uid: str
) -> None:
    shown = run_json(capsys, "explain", str(scenario.directory), uid)
    listed = [r["seq"] for r in shown["records"]]
    assert set(changed_seqs(scenario, uid)) <= set(listed)
    assert listed == sorted(listed)
    for item in shown["records"]:
        for change in item["changes"]:
            assert change["pod_uid"] == uid


def test_explain_shows_the_pool_resize_that_moved_a_shared_pod(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = run_json(capsys, "explain", str(scenario.directory), "default/web", "app")
    by_seq = {r["seq"]: r for r in shown["records"]}
    assert shown["uid"] == "uid-web"
    assert by_seq[2]["kind"] == "Allocate" and by_seq[2]["how"] == "names the pod"
    # The scenario's Allocate was journaled with its reply: the allocation sent, as sent.
    assert by_seq[2]["replies"] == {"app": "cpuset 1,3-15 (14 CPUs)"}
    assert by_seq[2]["reply"]["containers"] == {
        "app": {"allocation_result": "1,3-15", "allocated_quantity": 14.0}
    }
    assert by_seq[2]["moves"] == {}
    # RemovePod of api resizes share: web's CPUs move although the record never names it;
    # that is a move kubelet was not answered about, not a reply
    assert by_seq[8]["how"] == "through its pool share"
    assert by_seq[8]["replies"] == {} and by_seq[8]["reply"] is None
    assert by_seq[8]["moves"] == {"app": "moved by RemovePod of uid-api"}
    assert by_seq[8]["changes"][0]["cpuset_before"] == "1,4-6,9,12-13"
    assert by_seq[8]["changes"][0]["cpuset_after"] == "1,4-6,9,13-14"
    assert any("PoolSet name=share" in e for e in by_seq[8]["events"])


def test_explain_names_every_candidate_of_an_ambiguous_name(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        capsys, "explain", str(scenario.directory), "web", "--topology", TOPOLOGY_SPEC
    )
    assert code == 2
    assert "pod 'web' is ambiguous: it names default/web (uid-web), other/web (uid-web2)" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["nobody"], "no pod 'nobody' in the journal", id="an unknown pod"),
        pytest.param(
            ["uid-db", "sidecar"], "never had a container 'sidecar'", id="an unknown container"
        ),
    ],
)
def test_explain_refuses_what_the_journal_never_had(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(
        capsys, "explain", str(scenario.directory), *argv, "--topology", TOPOLOGY_SPEC
    )
    assert code == 2 and message in err


def test_explain_prints_cause_and_cpus_in_text(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "explain", str(scenario.directory), "uid-api", "--topology", TOPOLOGY_SPEC
    )
    assert code == 0
    assert out.startswith("default/api (uid-api):")
    assert "RemovePod: uid-api  (names the pod)" in out
    assert "app: 1,4-6,9,12-13 → - (removed, gone)" in out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_replay_draws_a_progress_bar_on_a_terminal_stderr_only(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(walk, "PROGRESS_MIN_RECORDS", 1)
    monkeypatch.setattr(sys, "stderr", terminal)
    shown = run_json(capsys, "state", str(scenario.directory), "--seq", "9")
    assert shown == live_document(scenario, 9)  # stdout holds the answer alone
    assert "replaying" in terminal.getvalue()
