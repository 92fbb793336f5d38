"""``qrmd topology``: the human view, the --json document, and one-line errors (exit 2)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from policy.topology.synthetic import generate_dummy_cpu_topology
from qrmd.cli import main
from tests.host.sysfs_tree import put, tree_of

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "docs" / "examples"
HAS_SYSFS = Path("/sys/devices/system/cpu/online").exists()


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["topology", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_human_view_of_synthetic_96(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "--topology", "synthetic:cpus=96,sockets=2,numas=4")
    assert (code, err) == (0, "")
    assert "96 CPUs · 48 cores · 2 sockets · 4 NUMA nodes · 2 threads per core" in out
    fingerprint = generate_dummy_cpu_topology(96, 2, 4).fingerprint()
    assert f"fingerprint {fingerprint}" in out
    assert "socket 1 · CPUs 24-47,72-95 · 24 cores" in out
    assert "NUMA 3 · CPUs 36-47,84-95 · 12 cores" in out
    assert "(0,48)" in out and "(47,95)" in out
    # node, its socket, its distance row
    assert re.search(r"^ *0 +0 +10 +12 +21 +21 *$", out, re.MULTILINE)
    assert re.search(r"^ *3 +1 +21 +21 +12 +10 *$", out, re.MULTILINE)


def test_human_view_marks_memory_only_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--topology", str(EXAMPLES / "machine-2socket-cxl.yaml"))
    assert code == 0
    assert "2 NUMA nodes + 1 memory-only" in out
    assert re.search(r"^ *2\* +memory-only +14 +24 +10 *$", out, re.MULTILINE)
    assert "* memory-only NUMA node: memory, no CPUs" in out


def test_human_view_of_a_numa_node_spanning_sockets(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    machine = tmp_path / "nps0.yaml"
    machine.write_text(
        "sockets:\n"
        "  - {id: 0, numa_nodes: [{id: 0, cores: [[0, 4], [1, 5]]}]}\n"
        "  - {id: 1, numa_nodes: [{id: 0, cores: [[2, 6], [3, 7]]}]}\n"
    )
    code, out, _ = run_cli(capsys, "--topology", str(machine))
    assert code == 0
    assert "NUMA 0 · CPUs 0-1,4-5 · 2 cores" in out  # socket 0's share
    assert "NUMA 0 · CPUs 2-3,6-7 · 2 cores" in out  # socket 1's share


def test_wide_distance_matrix_is_not_cut(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--topology", "synthetic:cpus=256,sockets=4,numas=32")
    assert code == 0
    assert "…" not in out
    assert re.search(r"^ *31 +3 +21( +21){23}( +12){7} +10 *$", out, re.MULTILINE)


def test_synthetic_quirk_shows_placed_cpus(capsys: pytest.CaptureFixture[str]) -> None:
    # §1.3: (6,1,2) has an odd CPU count per NUMA node; only CPUs 0,1,3,4 are placed.
    code, out, _ = run_cli(capsys, "--topology", "synthetic:cpus=6,sockets=1,numas=2")
    assert code == 0
    assert "6 CPUs (4 placed) · 3 cores" in out


@pytest.mark.skipif(not HAS_SYSFS, reason="no sysfs")
def test_default_is_this_host(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys)
    assert code == 0
    assert out.startswith("Topology from sysfs\n")
    n = os.cpu_count()
    assert f"{n} CPU{'s' if n != 1 else ''} · " in out


def test_json_document_is_complete_and_stable(capsys: pytest.CaptureFixture[str]) -> None:
    spec = "synthetic:cpus=8,sockets=2,numas=2"
    code, out, _ = run_cli(capsys, "--topology", spec, "--json")
    assert code == 0
    assert json.loads(out) == {
        "format": "qrmd-topology/1",
        "source": spec,
        "fingerprint": generate_dummy_cpu_topology(8, 2, 2).fingerprint(),
        "num_cpus": 8,
        "num_cores": 4,
        "num_sockets": 2,
        "num_numa_nodes": 2,
        "cpus_per_core": 2,
        "threads_per_core": [2],
        "cpus": "0-7",
        "sockets": [
            {"id": 0, "cpus": "0-1,4-5", "numa_nodes": [0], "num_cores": 2},
            {"id": 1, "cpus": "2-3,6-7", "numa_nodes": [1], "num_cores": 2},
        ],
        "numa_nodes": [
            {
                "id": 0,
                "sockets": [0],
                "cpus": "0-1,4-5",
                "cores": [{"id": 0, "cpus": [0, 4]}, {"id": 1, "cpus": [1, 5]}],
            },
            {
                "id": 1,
                "sockets": [1],
                "cpus": "2-3,6-7",
                "cores": [{"id": 2, "cpus": [2, 6]}, {"id": 3, "cpus": [3, 7]}],
            },
        ],
        "memory_only_numa_nodes": [],
        "distances": {"nodes": [0, 1], "rows": {"0": [10, 21], "1": [21, 10]}},
        "l3_caches": ["0-1,4-5", "2-3,6-7"],
    }
    assert '"numa_nodes": [0],' in out  # short number lists stay on one line


def test_json_document_of_memory_only_host(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys, "--topology", str(EXAMPLES / "machine-2socket-cxl.yaml"), "--json"
    )
    doc = json.loads(out)
    assert code == 0
    assert doc["memory_only_numa_nodes"] == [2]
    assert [n["id"] for n in doc["numa_nodes"]] == [0, 1]
    assert doc["distances"] == {
        "nodes": [0, 1, 2],
        "rows": {"0": [10, 21, 14], "1": [21, 10, 24], "2": [14, 24, 10]},
    }


@pytest.mark.skipif(not HAS_SYSFS, reason="no sysfs")
def test_json_of_this_host(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--json")
    doc = json.loads(out)
    assert code == 0
    assert doc["num_cpus"] == os.cpu_count()
    assert sum(len(c["cpus"]) for n in doc["numa_nodes"] for c in n["cores"]) == doc["num_cpus"]


def broken_machine(tmp_path: Path) -> str:
    path = tmp_path / "broken.yaml"
    path.write_text("sockets:\n  - id: 0\n    numa_nodes:\n      - {id: 0, cores: [[0], [0]]}\n")
    return str(path)


def broken_sysfs(tmp_path: Path) -> str:
    tree_of(generate_dummy_cpu_topology(8, 2, 2)).write(tmp_path)
    put(tmp_path / "devices/system/node/node1/distance", "21 ten\n")
    return f"sysfs:{tmp_path}"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            lambda _: "synthetic:cpus=15,sockets=2,numas=4",
            "invalid cpu number: 15 and NUMA number: 4",
            id="impossible synthetic shape",
        ),
        pytest.param(
            lambda _: "synthetic:cpus=16", "missing sockets, numas", id="incomplete synthetic spec"
        ),
        pytest.param(
            broken_machine,
            "broken.yaml: sockets[0].numa_nodes[0].cores[1]: CPU 0 already in",
            id="broken machine file",
        ),
        pytest.param(
            lambda p: str(p / "absent.json"), "cannot read machine file", id="missing machine file"
        ),
        pytest.param(
            broken_sysfs,
            "node1/distance: expected distances, got '21 ten'",
            id="malformed sysfs file",
        ),
        pytest.param(lambda _: "numa4", "unknown topology spec 'numa4'", id="unknown spec"),
    ],
)
def test_bad_input_is_one_error_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spec, message: str
) -> None:
    code, out, err = run_cli(capsys, "--topology", spec(tmp_path))
    assert code == 2
    assert out == ""
    assert err.startswith("qrmd topology: error: ")
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


QRMD_SCRIPT = Path(sys.executable).parent / "qrmd"


@pytest.mark.skipif(not QRMD_SCRIPT.exists(), reason="qrmd console script not installed")
def test_installed_console_script() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ok = subprocess.run(
        [
            QRMD_SCRIPT,
            "topology",
            "--topology",
            str(EXAMPLES / "machine-8numa-256cpu.yaml"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert (doc["num_cpus"], doc["num_numa_nodes"]) == (256, 8)
    bad = subprocess.run(
        [QRMD_SCRIPT, "topology", "--topology", "synthetic:cpus=96,sockets=5,numas=4"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stderr == "qrmd topology: error: invalid NUMA number: 4 and socket number: 5\n"
