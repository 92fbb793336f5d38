"""Resolving --topology SPECs: sysfs, sysfs:ROOT, synthetic:..., machine files."""

import json
from pathlib import Path

import pytest
import yaml

from policy.topology.machine_file import machine_from_topology
from policy.topology.model import TopologyError
from policy.topology.synthetic import generate_dummy_cpu_topology
from qrmd.host.sysfs_topology import read_sysfs_topology
from qrmd.host.topology_source import load_topology
from tests.host.sysfs_tree import tree_of

SYNTH_16_2_4 = generate_dummy_cpu_topology(16, 2, 4)


@pytest.mark.skipif(not Path("/sys/devices/system/cpu/online").exists(), reason="no sysfs")
def test_sysfs_is_this_host() -> None:
    assert load_topology("sysfs") == read_sysfs_topology()


def test_sysfs_root(tmp_path: Path) -> None:
    tree_of(SYNTH_16_2_4).write(tmp_path)
    assert load_topology(f"sysfs:{tmp_path}") == SYNTH_16_2_4


def test_synthetic() -> None:
    assert load_topology("synthetic:cpus=16,sockets=2,numas=4") == SYNTH_16_2_4


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        pytest.param("m.yaml", "{path}", id="path ending .yaml"),
        pytest.param("m.YML", "{path}", id="suffix in capitals"),
        pytest.param("m.json", "{path}", id="path ending .json"),
        pytest.param("machine", "file:{path}", id="file: prefix for any name"),
    ],
)
def test_machine_file(tmp_path: Path, name: str, spec: str) -> None:
    path = tmp_path / name
    doc = machine_from_topology(SYNTH_16_2_4)
    path.write_text(json.dumps(doc) if name.endswith(".json") else yaml.safe_dump(doc))
    assert load_topology(spec.format(path=path)) == SYNTH_16_2_4


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("foo", "unknown topology spec 'foo': expected 'sysfs'", id="unknown spec"),
        pytest.param("machine", "unknown topology spec", id="a path without a machine-file suffix"),
        pytest.param("sysfs:", "names no path after 'sysfs:'", id="sysfs with empty root"),
        pytest.param("file:", "names no path after 'file:'", id="file with empty path"),
        pytest.param(
            "sysfs:/nonexistent", "/nonexistent/devices/system/cpu/online: missing", id="no tree"
        ),
        pytest.param("/nonexistent/m.yaml", "cannot read machine file", id="no machine file"),
        pytest.param(
            "synthetic:cpus=16,sockets=3,numas=4",
            "invalid NUMA number: 4 and socket number: 3",
            id="impossible synthetic shape",
        ),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        load_topology(spec)
