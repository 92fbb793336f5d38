"""``qrmd journal explain``'s replies: the answer of the call that made each record, read from
the record (``qrmd.offline.explain``, module docstring).

The oracle is what the Allocator answered each command of the scripted history
(``tests.qrmd.offline.scenario``): every reply explain shows must be that answer, for the
containers it covered; every other change is a move. A record written before replies were
journaled (its cause without ``reply``) says ``reply not recorded``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from policy.cpu.allocation_listing import ResourcesAllocation
from policy.cpu.replies import AllocationReply
from qrmd.offline.explain import Explanation, explain, known_pods
from qrmd.offline.replies import NOT_RECORDED
from qrmd.offline.walk import ForensicsError, Step, open_walk
from tests.qrmd.offline.scenario import TOPOLOGY_SPEC, Scenario, write_scenario
from tests.topologies import SYNTH_16_2_4

PODS = ["uid-web", "uid-api", "uid-db", "uid-web2", "uid-batch"]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return write_scenario(tmp_path_factory.mktemp("node") / "journal")


@pytest.fixture(scope="module")
def steps(scenario: Scenario) -> list[Step]:
    return list(open_walk(str(scenario.directory), SYNTH_16_2_4, TOPOLOGY_SPEC).steps())


def explained(steps: list[Step], uid: str, container: str | None = None) -> list[Explanation]:
    return list(explain(steps, known_pods(steps)[uid], container))


def answered(reply: Any, uid: str) -> dict[str, dict[str, Any]]:
    """What the Allocator's reply value told kubelet about pod ``uid``'s containers."""
    if isinstance(reply, AllocationReply):
        if reply.identity.pod_uid != uid or reply.allocation is None:
            return {}
        allocation = reply.allocation
        return {
            reply.identity.container_name: {
                "allocation_result": allocation.allocation_result,
                "allocated_quantity": allocation.allocated_quantity,
            }
        }
    if isinstance(reply, ResourcesAllocation):
        return {
            name: {
                "allocation_result": a.allocation_result,
                "allocated_quantity": float(a.allocated_quantity),
            }
            for name, a in reply.pod_resources.get(uid, {}).items()
        }
    return {}


def without_replies(steps: list[Step]) -> list[Step]:
    """The same history as a journal written before replies were kept."""
    return [
        dataclasses.replace(
            step,
            record=dataclasses.replace(
                step.record, cause={k: v for k, v in step.record.cause.items() if k != "reply"}
            ),
        )
        for step in steps
    ]


@pytest.mark.parametrize("uid", PODS)
def test_every_reply_shown_is_the_answer_the_allocator_gave_for_that_record(
    scenario: Scenario, steps: list[Step], uid: str
) -> None:
    for item in explained(steps, uid):
        sent = answered(scenario.replies[item.record.seq], uid)
        shown = item.to_json()["reply"]
        if shown is None:
            assert sent == {}, f"seq {item.record.seq}: a reply kubelet got is missing"
            continue
        assert shown["recorded"] and shown["error"] is None
        assert shown["containers"] == sent, f"seq {item.record.seq}"


@pytest.mark.parametrize("uid", PODS)
def test_every_allocate_of_the_pod_is_explained_with_its_reply(
    scenario: Scenario, steps: list[Step], uid: str
) -> None:
    allocates = {
        seq
        for seq, reply in scenario.replies.items()
        if isinstance(reply, AllocationReply) and reply.identity.pod_uid == uid
    }
    with_reply = {e.record.seq for e in explained(steps, uid) if e.reply is not None}
    assert allocates and allocates <= with_reply


def test_the_listing_that_ends_a_ramp_up_names_the_cpusets_before_the_pool_adjustment(
    scenario: Scenario, steps: list[Step]
) -> None:
    # seq 5: the first GetResourcesAllocation ends web's ramp-up; the listing answers web's
    # ramp-up CPUs (§10.1 step 2), then the same record puts web into share (§15.6)
    item = next(e for e in explained(steps, "uid-web") if e.record.seq == 5)
    assert item.record.cause["rpc"] == "GetResourcesAllocation"
    sent = scenario.replies[5].pod_resources["uid-web"]["app"]
    after = item.changes[0].after
    assert after is not None and str(after.cpuset) != sent.allocation_result
    assert item.replies == {
        "app": f"cpuset {sent.allocation_result} ({sent.allocated_quantity} CPUs)"
    }
    assert item.moves == {
        "app": "moved after the listing by GetResourcesAllocation's pool adjustment"
    }


def test_another_pods_allocate_is_a_move_never_a_reply(steps: list[Step]) -> None:
    # seq 4: db's dedicated Allocate takes NUMA 1's CPUs away from the ramping web
    item = next(e for e in explained(steps, "uid-web") if e.record.seq == 4)
    assert item.reply is None and item.replies == {}
    assert item.moves == {"app": "moved by Allocate of default/db (uid-db)/app"}


@pytest.mark.parametrize(
    ("uid", "seq", "container"),
    [
        pytest.param("uid-web", 2, "app", id="an Allocate without its reply"),
        pytest.param("uid-web", 5, "app", id="a listing without the count of listed events"),
    ],
)
def test_a_record_written_before_replies_were_kept_says_reply_not_recorded(
    steps: list[Step], uid: str, seq: int, container: str
) -> None:
    item = next(e for e in explained(without_replies(steps), uid) if e.record.seq == seq)
    assert item.replies == {container: NOT_RECORDED}
    doc = item.to_json()["reply"]
    assert doc["recorded"] is False and doc["containers"] == {container: None}


def test_a_record_written_before_replies_were_kept_still_shows_its_moves(
    steps: list[Step],
) -> None:
    item = next(e for e in explained(without_replies(steps), "uid-web") if e.record.seq == 4)
    assert item.moves == {"app": "moved by Allocate of default/db (uid-db)/app"}


def test_a_listing_count_past_the_records_events_is_an_error_naming_the_record(
    steps: list[Step],
) -> None:
    damaged = [
        dataclasses.replace(
            step,
            record=dataclasses.replace(
                step.record, cause={**step.record.cause, "reply": {"listed_after_events": 99}}
            ),
        )
        if step.record.seq == 5
        else step
        for step in steps
    ]
    with pytest.raises(ForensicsError, match="record 5: its reply names 99 listed events"):
        explained(damaged, "uid-web")


#: A journal qrmd wrote at ac84ea9, before replies were kept (its README lists the records).
OLD_JOURNAL = Path(__file__).parents[2] / "fixtures" / "journal-ac84ea9"


def test_a_journal_written_before_replies_were_kept_guesses_no_reply() -> None:
    steps = list(open_walk(str(OLD_JOURNAL), SYNTH_16_2_4, TOPOLOGY_SPEC).steps())
    shown = {e.record.seq: e for e in explained(steps, "pod-a")}
    # 2: its Allocate; 5: the listing that ended its ramp-up
    assert shown[2].replies == {"app": NOT_RECORDED}
    assert shown[5].replies == {"app": NOT_RECORDED}
    assert shown[5].to_json()["reply"] == {
        "rpc": "GetResourcesAllocation",
        "recorded": False,
        "error": None,
        "containers": {"app": None},
    }
    # 3: pod-d's dedicated Allocate moved the ramping pod-a: a move, with or without replies
    assert shown[3].replies == {}
    assert shown[3].moves == {"app": "moved by Allocate of default/name-pod-d (pod-d)/app"}


def test_the_pods_own_removal_is_neither_a_reply_nor_a_move(steps: list[Step]) -> None:
    item = next(e for e in explained(steps, "uid-api") if e.record.cause["rpc"] == "RemovePod")
    assert item.changes and item.reply is None and item.moves == {}
