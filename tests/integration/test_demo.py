"""``qrmd demo --fast`` end to end: the real daemon, the kubelet simulator, the memory
balancer with a node under pressure, SIGKILL, recovery.

Slow (about 20 s a run, each a real ``qrmd run`` process started twice); marked ``slow``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import parse_synthetic_spec
from qrmd.sim.demo.daemon_process import pid_is_alive
from qrmd.sim.demo.workload import TOPOLOGY

pytestmark = pytest.mark.slow

DEMO_TIMEOUT_S = 60


def run_demo(*flags: str) -> subprocess.CompletedProcess[str]:
    # No COLUMNS: the output is a pipe, as in `make demo > log`, and must not be cut at 80.
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(Path(__file__).parents[2])
    return subprocess.run(
        [sys.executable, "-m", "qrmd", "demo", "--fast", *flags],
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
        env=env,
        check=False,
    )


def test_demo_balances_a_pressured_node_recovers_every_allocation_and_stops() -> None:
    started = time.monotonic()
    done = run_demo()
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    for phase in (
        "1. start qrmd run",
        "2. admit the workload",
        "3. ramp-up",
        "4. delete pods db-replica, api, batch-2",
        "5. memory balancer: NUMA 3 under read-latency pressure",
        "6. kill qrmd with SIGKILL",
        "7. sys-advisor sizes the pools, drops, comes back",
    ):
        assert phase in out
    assert "kubelet registered plugin cpu from" in out
    assert "--reference-version" not in out and "4b." not in out  # the default level's story
    assert "journal recovered 5 allocations, identical: yes" in out
    assert "GetTopologyAwareResources of every container, identical: yes" in out
    assert "0: 23/24, 1: 23/24, 2: 24/24, 3: 24/24" in out  # two reserved CPUs
    assert "…" not in out  # nothing cut to fit 80 columns
    assert "dedicated_cores" in out and "cache/exporter, cache/main" in out
    # Ramped up: the shared pods left the ramp-up cpuset for a share pool smaller than it.
    assert re.search(r"\bs\s+share\s+shared_cores\s+\S+\s+\d+", out)
    assert "NUMA 3 · socket 1" in out
    state = re.search(r"journal and checkpoints kept in (\S+);", out)
    assert state is not None and Path(state.group(1)).is_dir()
    pids = [int(p) for p in re.findall(r"\(pid (\d+)\)", out)]
    assert len(set(pids)) == 2  # started, then restarted after the SIGKILL
    assert not any(pid_is_alive(pid) for pid in pids)  # stopped cleanly at the end
    assert elapsed < DEMO_TIMEOUT_S
    assert f"qrmd journal show {state.group(1)} --kind BalanceRoundRecorded" in out
    check_balance_phase(out, state.group(1))
    # 5b: the squeezed reclaim pool; the suppression plugin offers batch-1 once past 1 s.
    assert "5b. CPU pressure eviction: the reclaim pool squeezed" in out
    assert "GetEvictPods(1 reclaimed pods) → nothing yet" in out
    assert (
        "demo/batch-1: current pool suppression rate 0.50 is over than the pod suppression "
        "tolerance rate 0.30"
    ) in " ".join(out.split())
    check_forgotten_pod(out, state.group(1))
    check_advisor_phase(out)


def journal_records(state_dir: str, pod_uid: str) -> dict[int, dict[str, Any]]:
    """``qrmd journal show --json --pod``: the pod's records by seq."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]))
    shown = subprocess.run(
        [sys.executable, "-m", "qrmd", "journal", "show", state_dir, "--json", "--pod", pod_uid],
        capture_output=True, text=True, timeout=30, env=env, check=True,
    )  # fmt: skip
    records = [json.loads(line) for line in shown.stdout.splitlines()]
    return {r["seq"]: r for r in records}


def cpus_per_numa(cpuset: str) -> dict[int, int]:
    """On the demo's machine, how many of ``cpuset``'s CPUs each NUMA node holds."""
    machine = parse_synthetic_spec(TOPOLOGY)
    cpus = CPUSet.parse(cpuset)
    counts = {n: cpus.intersection(machine.cpus_in_numa(n)).size() for n in machine.numa_nodes()}
    return {n: count for n, count in counts.items() if count}


def test_demo_at_v0_5_47_places_a_numa_bound_shared_pod_and_an_evenly_spread_dedicated_pod() -> (
    None
):
    done = run_demo("--reference-version", "v0.5.47")
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    started = " ".join(out[: out.index("kubelet registered plugin")].split())
    assert re.search(r"started \(pid \d+\): qrmd run .* --reference-version v0\.5\.47", started)
    state = re.search(r"journal and checkpoints kept in (\S+);", out)
    assert state is not None
    told = " ".join(
        out[out.index("4b. v0.5.47 placement") : out.index("5. memory balancer")].split()
    )
    snb = re.search(
        r"feed \(shared_cores, numa_binding\) is bound to NUMA (\d): pool (\S+), annotation "
        r"numa_hint=(\d), CPUs (\S+) now \(journal seq (\d+)\)",
        told,
    )
    assert snb is not None, told
    numa, pool, numa_hint, cpus_now, seq = snb.groups()
    assert (pool, numa_hint) == (f"share-NUMA{numa}", numa)
    assert set(cpus_per_numa(cpus_now)) == {int(numa)}
    # The journal's Allocate of feed, at the seq told: one-node hint, stored in that pool.
    feed = journal_records(state.group(1), "uid-feed")[int(seq)]
    assert feed["cause"]["rpc"] == "Allocate"
    assert feed["cause"]["request"]["hint"]["nodes"] == [int(numa)]
    (stored,) = [e["entry"] for e in feed["events"] if e["kind"] == "ContainerAllocated"]
    assert (stored["owner_pool_name"], stored["annotations"]["numa_hint"]) == (pool, numa)
    answered = feed["cause"]["reply"]["allocation"]["allocation_result"]
    assert set(cpus_per_numa(answered)) == {int(numa)}
    even = re.search(
        r"index \(dedicated_cores, numa_number 2, distribute_evenly_across_numa\) spans NUMA "
        r"(\d), (\d): CPUs (\S+), NUMA \d: (\d+), NUMA \d: (\d+) \(journal seq (\d+)\)",
        told,
    )
    assert even is not None, told
    first, second, cpus, on_first, on_second, seq = even.groups()
    index = journal_records(state.group(1), "uid-index")[int(seq)]
    assert index["cause"]["request"]["hint"]["nodes"] == [int(first), int(second)]
    assert index["cause"]["reply"]["allocation"]["allocation_result"] == cpus
    assert cpus_per_numa(cpus) == {int(first): int(on_first), int(second): int(on_second)}
    assert on_first == on_second == "4"
    # Deleted again: phases 5 and 6 are the v0.5.3 story.
    assert "feed and index deleted again (RemovePod): phases 5 and 6 run" in told
    assert "journal recovered 5 allocations, identical: yes" in out
    check_advisor_v0547(out)


def check_advisor_v0547(out: str) -> None:
    """Phase 7 at v0.5.47: a v0.5.47 sys-advisor asked GetAdvice, whose pools keep off the
    NUMA nodes of dedicated pods."""
    phase = out[out.index("7. sys-advisor sizes the pools") :]
    told = " ".join(phase.split())
    assert "qrmd asks it GetAdvice every 0.2 s with every stored container" in told
    assert re.search(r"the next GetAdvice told it all \d+ stored containers, no push", told)
    assert "sys-advisor back: share sized to" in told
    tables = phase.split("sys-advisor sized share to")
    for table in tables:
        dedicated = {
            int(numa)
            for line in table.splitlines()
            if "dedicated_cores" in line
            for numa in re.findall(r"\b(\d+):\d+", line)
        }
        shares = [line for line in table.splitlines() if re.search(r"\bshare\s+shared_cores", line)]
        assert dedicated and shares, table
        share_numas = {int(numa) for numa in re.findall(r"\b(\d+):\d+", shares[-1])}
        assert share_numas and not share_numas & dedicated, shares[-1]


def check_forgotten_pod(out: str, state_dir: str) -> None:
    """Phase 4: the kubelet forgot batch-2's RemovePod; qrmd's residual-state checker removed
    it, one journaled RemoveResidualPods and no RemovePod for it."""
    phase = out[out.index("4. delete pods") : out.index("5. memory balancer")]
    assert "(the kubelet forgets batch-2's)" in phase
    told = " ".join(phase.split())
    assert "kubelet forgot batch-2: no RemovePod came" in told
    assert "cause RemoveResidualPods [uid-batch-2]" in told
    assert re.search(
        r"kubelet deleted (api, db-replica|db-replica, api): their containers stopped, its "
        r"garbage collection sent RemovePod for each \(journal seq \d+, \d+\)",
        told,
    )
    assert "daemon: qrmd.checkers: residual pods removed: uid-batch-2 (missing from" in told
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]))
    shown = subprocess.run(
        [sys.executable, "-m", "qrmd", "journal", "show", state_dir, "--json",
         "--pod", "uid-batch-2"],
        capture_output=True, text=True, timeout=30, env=env, check=True,
    )  # fmt: skip
    causes = [json.loads(line)["cause"] for line in shown.stdout.splitlines()]
    residual = [c["pod_uids"] for c in causes if c.get("rpc") == "RemoveResidualPods"]
    assert residual == [["uid-batch-2"]]
    assert not [c for c in causes if c.get("rpc") == "RemovePod"]
    # The deleted pods went by the kubelet's RemovePod, as told (not by the residual checker).
    everything = subprocess.run(
        [sys.executable, "-m", "qrmd", "journal", "show", state_dir, "--json"],
        capture_output=True, text=True, timeout=30, env=env, check=True,
    )  # fmt: skip
    all_causes = [json.loads(line)["cause"] for line in everything.stdout.splitlines()]
    removed = sorted(c["pod_uid"] for c in all_causes if c.get("rpc") == "RemovePod")
    assert removed == ["uid-api", "uid-db-replica"]


def check_advisor_phase(out: str) -> None:
    """Phase 7: the advisor's pools (2 CPUs per shared core: web's 4 -> 8, then with report's
    3 and search's 2 -> 18), pods admitted while it is gone, every container pushed back."""
    assert "no sys-advisor is up yet, kubelet is served without it" in out
    assert "sys-advisor sized share to 8 CPUs" in out
    assert re.search(r"report shared_cores: app \(main, hint NUMA \[0, 1, 2, 3\]\) → CPUs", out)
    assert "daemon: pushed 7 of 7 containers to sys-advisor" in out
    assert "sys-advisor back: share sized to 18 CPUs, new pods in" in out
    assert re.search(r"\bs\s+share\s+shared_cores\s+\S+\s+18\s", out)


def balance_rounds(state_dir: str) -> list[dict[str, object]]:
    """The journaled rounds' records, as ``qrmd journal show --json`` prints them."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2]))
    shown = subprocess.run(
        [sys.executable, "-m", "qrmd", "journal", "show", state_dir, "--json",
         "--kind", "BalanceRoundRecorded"],
        capture_output=True, text=True, timeout=30, env=env, check=True,
    )  # fmt: skip
    records = []
    for line in shown.stdout.splitlines():
        for event in json.loads(line)["events"]:
            records.append(event["record"])
    return records


def check_balance_phase(out: str, state_dir: str) -> None:
    """Phase 5 showed a quiet round, a balance round from NUMA 3 with its advice, and the
    eviction offer once; the journal holds the rounds."""
    phase = out[out.index("5. memory balancer") : out.index("6. kill qrmd")]
    # A quiet round first, then the force balance from the pressured node.
    assert re.search(r"round \(journal seq \d+\): no balance: no latency pressure", phase)
    assert re.search(
        r"round \(journal seq \d+\): forceBalance · bandwidth level high · source NUMA 3 → "
        r"destinations 2, 0, 1 · status prepareSuccess",
        phase,
    )
    # The advice names the pressured node as its source and both pods of the balanced pools.
    (advice_line,) = [ln for ln in phase.splitlines() if ln.strip().startswith('{"destNumaList"')]
    advice = json.loads(advice_line)
    assert advice["sourceNuma"] == 3 and advice["destNumaList"] == [2, 0, 1]
    assert [c["podUID"] for c in advice["migrateContainers"]] == ["uid-batch-1", "uid-web"]
    assert advice["totalRSS"] == 4 << 30
    assert phase.count("daemon: numa balance dry run: would migrate pids [] of") == 2
    # The eviction offer over the plugin socket, once.
    assert "registered EvictionPlugin numa_memory_balancer (v1alpha1)" in phase
    assert (
        "GetEvictPods(4 active pods) → demo/batch-1 (force true, plugin numa_memory_balancer): "
        "the memory node 3 is under bandwidth pressure" in phase
    )
    assert "GetEvictPods again → no pod" in phase
    # The journal holds the rounds as the daemon computed them.
    records = balance_rounds(state_dir)
    assert any(not r["needBalance"] for r in records)
    (pressure,) = [r for r in records if r["needBalance"]]
    assert pressure["sourceNuma"]["NumaID"] == 3
    assert pressure["evictPods"] == [{"namespace": "demo", "name": "batch-1", "UID": "uid-batch-1"}]


def test_demo_keep_leaves_the_daemon_running() -> None:
    done = run_demo("--keep")
    assert done.returncode == 0, done.stderr[-2000:]
    match = re.search(r"stop it with: kill -TERM (\d+)", done.stdout)
    assert match is not None
    pid = int(match.group(1))
    try:
        assert pid_is_alive(pid)
        socket_path = re.search(r"socket (\S+qrm_cpu_plugin_dynamic\.sock)", done.stdout)
        assert socket_path is not None and Path(socket_path.group(1)).is_socket()
    finally:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while pid_is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_is_alive(pid)


def test_a_daemon_that_cannot_start_is_one_error_line() -> None:
    work = Path(tempfile.mkdtemp(prefix="qrmd-bad-", dir="/tmp"))
    try:
        state = work / "state"
        state.mkdir()
        (state / "0000000000000001.seg").write_bytes(b"not a journal segment" * 10)
        done = run_demo("--state-dir", str(state))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("qrmd demo: error: phase 1, start qrmd run and register it")
    assert "qrmd run exited with status 2" in line and "corrupt journal record" in line
