"""``qrmd journal explain`` names exactly the replies kubelet got from a real ``qrmd run``.

A seeded kubelet workload — shared, reclaimed and dedicated NUMA-bound pods, ramp-ups ended by
listings (transition period 0 s, so every listing ends the ramp-ups before it: no waiting),
removals and a SIGKILL restart — drives the daemon over its unix socket with the kubelet
simulator's client, and keeps every answer it received (each Allocate's, each
GetResourcesAllocation listing) by the journal record the call wrote. Then, for every pod,
``explain --json`` must show for each record exactly the answer of the call that wrote it, for
exactly the pod's containers that answer covered, with the values received; every other change
to the pod's containers is a move, never a reply.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from journal import read_records
from qrmd.cli import main
from qrmd.sim.kubelet.pods import (
    Pod,
    dedicated_pod,
    reclaimed_pod,
    resource_request,
    shared_pod,
)
from tests.integration.daemon_process import SYNTH_16_2_4, QrmdProcess
from wire.kubelet_client import PluginCallError, PluginConnection
from wire.kubelet_convert import AllocationInfo

pytestmark = pytest.mark.slow

SEED = 20261207
STEPS = 60
RESTART_AT = 30


@dataclass(frozen=True, slots=True)
class Answer:
    """What kubelet received from one call that wrote a journal record."""

    rpc: str
    pod_uid: str  # Allocate's pod; "" for a listing
    container: str  # Allocate's container; "" for a listing
    allocations: dict[str, dict[str, dict[str, Any]]]  # pod → container → sent values
    error: str | None = None

    def for_pod(self, uid: str) -> dict[str, dict[str, Any]]:
        return self.allocations.get(uid, {})


def sent(info: AllocationInfo) -> dict[str, Any]:
    return {
        "allocation_result": info.allocation_result,
        "allocated_quantity": float(info.allocated_quantity),
    }


class Workload:
    """kubelet's side: calls, each answer filed under the record its call wrote."""

    def __init__(self, qrmd: QrmdProcess) -> None:
        self.qrmd = qrmd
        self.connection = PluginConnection(str(qrmd.socket_paths[0]))
        self.answers: dict[int, Answer] = {}
        self.live: dict[str, Pod] = {}
        self.admitted: set[str] = set()

    def last_seq(self) -> int:
        last = 0
        for record in read_records(str(self.qrmd.state_dir)):
            last = record.seq
        return last

    def _filed(self, before: int, answer: Answer) -> None:
        after = self.last_seq()
        assert after - before <= 1, f"one call wrote records {before + 1}-{after}"
        if after == before + 1:
            self.answers[after] = answer

    def admit(self, pod: Pod) -> None:
        for slot in pod.admission_order():
            hint = None
            if pod.qos_level == "dedicated_cores":
                hints = self.connection.get_topology_hints(resource_request(pod, slot, "cpu", None))
                preferred = [h for h in hints or () if h.preferred]
                if not preferred:
                    return  # kubelet's topology manager would reject the pod
                hint = preferred[0]
            request = resource_request(pod, slot, "cpu", hint)
            before = self.last_seq()
            try:
                got = self.connection.allocate(request)
            except PluginCallError as err:
                self._filed(before, Answer("Allocate", pod.uid, slot.container.name, {}, str(err)))
                return
            values = {}
            if got is not None and "cpu" in got:
                values = {pod.uid: {slot.container.name: sent(got["cpu"])}}
            self._filed(before, Answer("Allocate", pod.uid, slot.container.name, values))
            self.admitted.add(pod.uid)
            self.live[pod.uid] = pod

    def listing(self) -> None:
        before = self.last_seq()
        got = self.connection.get_resources_allocation()
        values = {
            uid: {name: sent(resources["cpu"]) for name, resources in containers.items()}
            for uid, containers in got.items()
        }
        self._filed(before, Answer("GetResourcesAllocation", "", "", values))

    def remove(self, uid: str) -> None:
        before = self.last_seq()
        self.connection.remove_pod(uid)
        self._filed(before, Answer("RemovePod", uid, "", {}))
        del self.live[uid]

    def reconnect(self, qrmd: QrmdProcess) -> None:
        self.connection.close()
        self.qrmd = qrmd
        self.connection = PluginConnection(str(qrmd.socket_paths[0]))


def new_pod(rng: random.Random, n: int) -> Pod:
    uid, name, namespace = f"uid-{n}", f"pod-{n}", f"ns-{n % 3}"
    kind = rng.choice(["shared", "shared", "reclaimed", "dedicated"])
    if kind == "shared":
        sidecars = {"sidecar": 1.0} if rng.random() < 0.3 else None
        cpus = rng.choice([1.0, 2.0, 3.0])
        return shared_pod(uid, name, cpus, sidecars=sidecars, namespace=namespace)
    if kind == "reclaimed":
        return reclaimed_pod(uid, name, rng.choice([1000.0, 2000.0]), namespace=namespace)
    return dedicated_pod(uid, name, 2.0, numa_exclusive=False, namespace=namespace)


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Short: the socket path must stay under 107 bytes.
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qx") as root:
        yield Path(root)


def run_workload(workdir: Path) -> Workload:
    rng = random.Random(SEED)
    extra = ["--transition-period", "0s"]
    qrmd = QrmdProcess(workdir / "state", [workdir / "k"], extra).start()
    workload = Workload(qrmd)
    try:
        for step in range(STEPS):
            if step == RESTART_AT:
                qrmd.kill()
                qrmd = QrmdProcess(workdir / "state", [workdir / "k"], extra).start()
                workload.reconnect(qrmd)
            roll = rng.random()
            if roll < 0.45:
                workload.admit(new_pod(rng, step))
            elif roll < 0.8:
                workload.listing()
            elif workload.live:
                workload.remove(rng.choice(sorted(workload.live)))
        workload.listing()
    finally:
        workload.connection.close()
        qrmd.close()
    return workload


def explained(capsys: pytest.CaptureFixture[str], directory: Path, uid: str) -> list[dict]:
    code = main(["journal", "explain", str(directory), uid, "--json", "--topology", SYNTH_16_2_4])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    records: list[dict] = json.loads(captured.out)["records"]
    return records


def test_explain_names_exactly_the_replies_kubelet_received(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = run_workload(workdir)
    answers = workload.answers
    checked = {"Allocate": 0, "GetResourcesAllocation": 0, "moves": 0, "moved after listing": 0}
    for uid in sorted(workload.admitted):
        records = explained(capsys, workdir / "state", uid)
        by_seq = {r["seq"]: r for r in records}
        for record in records:
            seq, reply = record["seq"], record["reply"]
            answer = answers.get(seq)
            covered = {} if answer is None else answer.for_pod(uid)
            where = f"pod {uid} seq {seq} ({record['kind']})"
            if answer is not None and answer.error is not None and answer.pod_uid == uid:
                assert reply is not None and reply["error"], where
            elif covered:
                assert reply is not None, f"{where}: the reply kubelet got is not shown"
                assert answer is not None and reply["recorded"], where
                assert reply["rpc"] == answer.rpc, where
                assert reply["containers"] == covered, where
                checked[reply["rpc"]] += 1
            else:
                assert reply is None and record["replies"] == {}, f"{where}: a reply never sent"
            # The pod's own removal is what kubelet asked for: neither a reply nor a move.
            if answer is not None and answer.rpc == "RemovePod" and answer.pod_uid == uid:
                assert record["moves"] == {}, where
                continue
            # Every other change to the pod's containers is a move, never a reply.
            for change in record["changes"]:
                name = change["container"]
                if reply is not None and name in reply["containers"]:
                    listed = reply["containers"][name]
                    if reply["rpc"] == "GetResourcesAllocation" and (
                        listed["allocation_result"] != change["cpuset_after"]
                    ):
                        assert record["moves"][name].startswith("moved after the listing by")
                        checked["moved after listing"] += 1
                    continue
                assert record["moves"][name].startswith(f"{change['change']} by "), where
                checked["moves"] += 1
        # Every Allocate of the pod that wrote a record is explained, with its reply.
        for seq, answer in answers.items():
            if answer.rpc == "Allocate" and answer.pod_uid == uid and answer.error is None:
                assert seq in by_seq, f"pod {uid}: its Allocate at seq {seq} is not explained"
                assert by_seq[seq]["reply"] is not None
    # The workload reached every case the check is about.
    assert all(count > 0 for count in checked.values()), checked
