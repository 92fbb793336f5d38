"""Reading machine files: YAML or JSON, the example files, one-line errors naming the file."""

import json
import re
from pathlib import Path

import pytest
import yaml

from policy.topology.machine_file import machine_from_topology
from policy.topology.synthetic import generate_dummy_cpu_topology
from qrmd.host.machine_file import MachineFileReadError, read_machine_file

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
SYNTH_16_2_4 = generate_dummy_cpu_topology(16, 2, 4)


def test_example_8numa_256cpu_is_the_snc4_host() -> None:
    topo = read_machine_file(EXAMPLES / "machine-8numa-256cpu.yaml")
    assert (topo.num_cpus, topo.num_cores, topo.num_sockets, topo.num_numa_nodes) == (
        256,
        128,
        2,
        8,
    )
    assert str(topo.cpus_in_numa(7)) == "112-127,240-255"
    assert topo.cpus_in_core(0).ids() == (0, 128)
    assert topo.distances.as_lists()[0] == [10, 12, 12, 12, 21, 21, 21, 21]
    # Linux numbers this host as the reference's synthetic generator does.
    assert topo == generate_dummy_cpu_topology(256, 2, 8)


def test_example_cxl_host_has_a_memory_only_node() -> None:
    topo = read_machine_file(EXAMPLES / "machine-2socket-cxl.yaml")
    assert topo.numa_nodes() == [0, 1]
    assert topo.distances.nodes() == [0, 1, 2]
    assert topo.num_cpus == 16


@pytest.mark.parametrize(
    ("name", "dump"),
    [
        pytest.param("m.yaml", yaml.safe_dump, id="YAML by .yaml"),
        pytest.param("m.yml", yaml.safe_dump, id="YAML by .yml"),
        pytest.param("m.json", json.dumps, id="JSON by .json"),
        pytest.param("machine", json.dumps, id="JSON sniffed from a brace"),
        pytest.param("machine.txt", yaml.safe_dump, id="YAML otherwise"),
    ],
)
def test_syntax_by_name_or_content(tmp_path: Path, name: str, dump: object) -> None:
    path = tmp_path / name
    path.write_text(dump(machine_from_topology(SYNTH_16_2_4)))  # type: ignore[operator]
    assert read_machine_file(path) == SYNTH_16_2_4


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        pytest.param(
            "m.yaml",
            "sockets:\n  - id: 0\n    id: 1\n",
            "not valid YAML: duplicate key 'id' at line 3, column 5",
            id="YAML duplicate key",
        ),
        pytest.param(
            "m.json",
            '{"sockets": [], "sockets": []}',
            "duplicate key 'sockets'",
            id="JSON duplicate key",
        ),
        pytest.param(
            "m.yaml",
            "sockets: [\n",
            "not valid YAML: expected the node content, but found '<stream end>' at line 2",
            id="YAML syntax error",
        ),
        pytest.param(
            "m.json",
            '{"sockets": [}',
            "not valid JSON: Expecting value at line 1, column 14",
            id="JSON syntax error",
        ),
        pytest.param(
            "m.yaml",
            "!!python/object:os.system {}\n",
            "not valid YAML: could not determine a constructor for the tag",
            id="YAML object tags are refused",
        ),
        pytest.param(
            "m.yaml",
            "sockets:\n  - id: 0\n    numa_nodes:\n      - id: 0\n        cores: [[0, 1], [1]]\n",
            "sockets[0].numa_nodes[0].cores[1]: CPU 1 already in sockets[0].numa_nodes[0].cores[0]",
            id="content error carries the key path",
        ),
        pytest.param(
            "m.yaml", "", "top level: expected a mapping, got nothing (null)", id="empty file"
        ),
    ],
)
def test_bad_files_are_one_error_naming_the_file(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(MachineFileReadError) as caught:
        read_machine_file(path)
    text = str(caught.value)
    assert text.startswith(f"machine file {path}: ")
    assert message in text
    assert "\n" not in text


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(
        MachineFileReadError, match=r"cannot read machine file .*nope\.yaml: No such"
    ):
        read_machine_file(tmp_path / "nope.yaml")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").mkdir()
    with pytest.raises(MachineFileReadError, match=r"cannot read machine file .*d\.yaml"):
        read_machine_file(tmp_path / "d.yaml")


def test_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_bytes(b"\xff\xfe sockets")
    with pytest.raises(MachineFileReadError, match="not UTF-8"):
        read_machine_file(tmp_path / "b.yaml")


def guide_yaml_blocks() -> list[str]:
    text = (EXAMPLES.parent / "topology.md").read_text()
    return re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)


def test_the_guide_machine_file_examples_load(tmp_path: Path) -> None:
    full, compact = guide_yaml_blocks()
    (tmp_path / "full.yaml").write_text(full)
    (tmp_path / "compact.yaml").write_text(compact)
    assert read_machine_file(tmp_path / "full.yaml") == read_machine_file(
        EXAMPLES / "machine-2socket-cxl.yaml"
    )
    topo = read_machine_file(tmp_path / "compact.yaml")
    assert topo.cpus_in_core(15).ids() == (15, 143)
