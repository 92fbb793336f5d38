"""Taking a node over, end to end, through the real ``qrmd run`` (docs/takeover.md): a state
built by the kubelet simulator is exported to the reference's ``cpu_plugin_state``, imported
into a fresh state directory, and ``qrmd run`` on it answers GetResourcesAllocation and
GetTopologyAwareResources exactly as before; and the same for a ``cpu_plugin_state`` as the
reference writes it (``tests/fixtures/katalyst``)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from qrmd.sim.kubelet import KubeletSimulator, dedicated_pod, reclaimed_pod, shared_pod
from qrmd.version import VERSION
from tests.integration.daemon_process import (
    REPO,
    SYNTH_16_2_4,
    PluginClient,
    QrmdProcess,
    wait_for,
)
from wire.gen import resourceplugin_pb2 as rp

pytestmark = pytest.mark.slow

FIXTURE = REPO / "tests" / "fixtures" / "katalyst" / "cpu_plugin_state"
NODE = "takeover-node"


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qt") as root:
        yield Path(root)


def qrmd_journal(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "qrmd.cli", "journal", *argv, "--topology", SYNTH_16_2_4],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(REPO), "NODE_NAME": NODE, "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def answers(
    socket: Path,
) -> tuple[rp.GetResourcesAllocationResponse, dict[tuple[str, str], object]]:
    """GetResourcesAllocation, and GetTopologyAwareResources of every container it lists."""
    client = PluginClient(socket)
    try:
        listing = client.plugin.GetResourcesAllocation(
            rp.GetResourcesAllocationRequest(), timeout=10
        )
        aware = {}
        for pod, containers in sorted(listing.pod_resources.items()):
            for name in sorted(containers.container_resources):
                aware[(pod, name)] = client.plugin.GetTopologyAwareResources(
                    rp.GetTopologyAwareResourcesRequest(pod_uid=pod, container_name=name),
                    timeout=10,
                )
        return listing, aware
    finally:
        client.close()


def start(workdir: Path, name: str, started: list[QrmdProcess]) -> QrmdProcess:
    proc = QrmdProcess(workdir / name, [workdir / f"k-{name}"], ["--node-name", NODE])
    started.append(proc)
    return proc.start()


@pytest.fixture
def started() -> Iterator[list[QrmdProcess]]:
    procs: list[QrmdProcess] = []
    yield procs
    for proc in procs:
        proc.close()


def test_a_simulated_node_exported_and_imported_answers_as_before(
    workdir: Path, started: list[QrmdProcess]
) -> None:
    old = start(workdir, "old", started)
    sim = KubeletSimulator([workdir / "k-old"], [0, 1, 2, 3], reconcile_period_s=0.3)
    with sim:
        sim.kubelet.endpoints.wait_registered("cpu", timeout_s=20)
        wait_for(lambda: old.http("/readyz")[0] == 200, 10, "/readyz once kubelet registered")
        sim.kubelet.admit(dedicated_pod("uid-db", "db", 2, numa_exclusive=True))
        sim.kubelet.admit(shared_pod("uid-web", "web", 2, sidecars={"log": 1}))
        sim.kubelet.admit(shared_pod("uid-api", "api", 1.5))
        sim.kubelet.admit(reclaimed_pod("uid-batch", "batch", 1500))

        def settled() -> bool:
            listing, _ = answers(old.socket_paths[0])
            return len(listing.pod_resources) == 4 and all(
                a.resource_allocation["cpu"].allocation_result
                for c in listing.pod_resources.values()
                for a in c.container_resources.values()
            )

        wait_for(settled, 20, "every pod allocated")
        pass_now = sim.passes
        sim.wait_for_pass(pass_now + 4, timeout_s=20)  # > 1 s: ramp-up has ended
    before = answers(old.socket_paths[0])
    old.signal(15)
    assert old.wait(10) == 0

    qrmd_journal("export-katalyst", str(workdir / "old"), str(workdir / "cpu_plugin_state"))
    qrmd_journal("import-katalyst", str(workdir / "new"), str(workdir / "cpu_plugin_state"))
    new = start(workdir, "new", started)
    assert answers(new.socket_paths[0]) == before


def test_a_reference_checkpoint_is_served_as_the_reference_held_it(
    workdir: Path, started: list[QrmdProcess]
) -> None:
    said = qrmd_journal("import-katalyst", str(workdir / "state"), str(FIXTURE))
    assert "3 containers" in said
    proc = start(workdir, "state", started)
    # No kubelet here: alive, but not ready, and the start-up line names the release.
    assert proc.http("/livez") == (200, "ok\n")
    status, why = proc.http("/readyz")
    assert status == 503 and "not registered with kubelet" in why
    assert f"qrmd serving: qrmd {VERSION};" in proc.log()
    listing, aware = answers(proc.socket_paths[0])
    held = {
        pod: {
            n: a.resource_allocation["cpu"].allocation_result
            for n, a in c.container_resources.items()
        }
        for pod, c in listing.pod_resources.items()
    }
    assert held == {
        "uid-web": {"app": "1,3-4,9,11-12"},
        "uid-batch": {"app": "5,8,10,13"},
        "uid-db": {"app": "6-7,14-15"},
    }
    db = aware[("uid-db", "app")].container_topology_aware_resources.allocated_resources["cpu"]
    assert [(q.node, q.resource_value) for q in db.topology_aware_quantity_list] == [(3, 4.0)]
    proc.signal(15)
    assert proc.wait(10) == 0
    # Start-up and the queries changed nothing the reference would see.
    qrmd_journal("export-katalyst", str(workdir / "state"), str(workdir / "again"))
    assert (workdir / "again").read_bytes() == FIXTURE.read_bytes()
