"""``qrmd topology --json`` output read back wherever a machine file is accepted: the same
topology (same fingerprint) for every shape a machine file can describe, and a clear refusal
for a document that was edited, a foreign format, or a shape no machine file describes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.topology.model import CPUTopology
from qrmd.cli import main
from qrmd.commands.topology import topology_document
from qrmd.host.machine_file import MachineFileReadError, read_machine_file
from qrmd.host.topology_source import load_topology
from tests.qrmd.offline.scenario import write_scenario
from tests.topologies import (
    HYBRID_12_1_2,
    NO_HT_8_2_2,
    SYNTH_16_2_4,
    SYNTH_96_2_4,
    SYNTH_256_2_8,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def saved(tmp_path: Path, topology: CPUTopology, source: str = "test") -> Path:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(topology_document(topology, source)))
    return path


# Not REVERSED_CORES_16_2_4: a machine file numbers a core by its lowest CPU (cpu-policy §1.2),
# so core ids that run backwards are a shape only sysfs can give.
SHAPES = [
    pytest.param(SYNTH_16_2_4, id="the synthetic 16-CPU 4-NUMA node"),
    pytest.param(SYNTH_96_2_4, id="the demo's 96-CPU node"),
    pytest.param(SYNTH_256_2_8, id="a 256-CPU 8-NUMA node"),
    pytest.param(NO_HT_8_2_2, id="a node without hyper-threading"),
    pytest.param(HYBRID_12_1_2, id="a hybrid node with single-thread cores"),
    pytest.param(
        read_machine_file(EXAMPLES / "machine-2socket-cxl.yaml"), id="a node with CXL memory"
    ),
    pytest.param(
        read_machine_file(EXAMPLES / "machine-8numa-256cpu.yaml"), id="the SNC-4 256-CPU host"
    ),
]


@pytest.mark.parametrize("topology", SHAPES)
def test_the_json_document_reads_back_as_the_same_topology(
    tmp_path: Path, topology: CPUTopology
) -> None:
    again = read_machine_file(saved(tmp_path, topology))
    assert again.fingerprint() == topology.fingerprint()
    assert again == topology


def test_the_document_is_a_topology_spec_too(tmp_path: Path) -> None:
    assert load_topology(str(saved(tmp_path, SYNTH_16_2_4))) == SYNTH_16_2_4


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        pytest.param(
            lambda d: d["numa_nodes"][0]["cores"].pop(),
            "states fingerprint 'eee915c2b69b16f5' but describes topology",
            id="a core deleted by hand",
        ),
        pytest.param(
            lambda d: d.update(format="qrmd-topology/9"),
            "format 'qrmd-topology/9' is not 'qrmd-topology/1'",
            id="a format this qrmd does not read",
        ),
        pytest.param(
            lambda d: d.pop("numa_nodes"),
            "(a qrmd-topology/1 document): numa_nodes missing or not a list",
            id="a missing key",
        ),
        pytest.param(
            lambda d: d["sockets"][1].update(cpus="0-3"),
            "numa_nodes[2].cores[0] [4, 12] is in no socket's cpus",
            id="a core in no socket",
        ),
    ],
)
def test_a_document_that_is_not_what_qrmd_wrote_is_refused(
    tmp_path: Path, edit: object, message: str
) -> None:
    document = topology_document(SYNTH_16_2_4, "test")
    edit(document)  # type: ignore[operator]
    path = tmp_path / "node.json"
    path.write_text(json.dumps(document))
    with pytest.raises(MachineFileReadError) as caught:
        read_machine_file(path)
    assert str(caught.value).startswith(f"machine file {path}")
    assert message in str(caught.value)


def test_the_odd_count_synthetic_shape_points_to_its_spec(tmp_path: Path) -> None:
    spec = "synthetic:cpus=10,sockets=1,numas=2"
    path = saved(tmp_path, load_topology(spec), spec)
    with pytest.raises(
        MachineFileReadError, match=r"counts 10 CPUs but places 8.*synthetic:cpus=10"
    ):
        read_machine_file(path)


def test_journal_verify_takes_the_saved_document_as_the_nodes_topology(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = write_scenario(tmp_path / "journal")
    assert main(["topology", "--topology", "synthetic:cpus=16,sockets=2,numas=4", "--json"]) == 0
    (tmp_path / "node.json").write_text(capsys.readouterr().out)
    code = main(
        ["journal", "verify", str(scenario.directory), "--topology", str(tmp_path / "node.json")]
    )
    assert code == 0 and capsys.readouterr().out.rstrip().endswith("ok")
