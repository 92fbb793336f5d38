"""The L3 cache level read from a host: sysfs ``cache/index3/shared_cpu_list`` and machine files
(cpu-policy-v0.5.47 (b): the level Katalyst v0.5.47's dedicated allocation orders by)."""

from pathlib import Path

import pytest

from policy.topology.build import parse_cpu_list
from policy.topology.model import NO_L3_CACHE
from qrmd.host.machine_file import read_machine_file
from qrmd.host.sysfs_topology import SysfsTopologyError, read_sysfs_topology
from tests.host.sysfs_tree import tree_of
from tests.policy.topology.test_l3_caches import L3_PER_SOCKET_16_2_4
from tests.topologies import SYNTH_16_2_4, SYNTH_256_2_8, cpus


def test_example_machine_file_without_l3_caches_has_one_per_numa_node() -> None:
    topo = read_machine_file(Path("docs/examples/machine-8numa-256cpu.yaml"))
    assert topo.has_default_l3_layout()
    assert topo == SYNTH_256_2_8


# -- sysfs -----------------------------------------------------------------------------------


def test_sysfs_reads_one_l3_per_socket(tmp_path: Path) -> None:
    assert read_sysfs_topology(tree_of(L3_PER_SOCKET_16_2_4).write(tmp_path)) == (
        L3_PER_SOCKET_16_2_4
    )


def test_sysfs_without_index3_has_no_l3(tmp_path: Path) -> None:
    tree = tree_of(SYNTH_16_2_4)
    tree.l3_shared = {}
    topo = read_sysfs_topology(tree.write(tmp_path))
    assert topo.cpu_details.l3_caches() == (NO_L3_CACHE,)
    assert topo.fingerprint() == SYNTH_16_2_4.fingerprint()


def test_sysfs_keeps_only_online_cpus_of_a_cache(tmp_path: Path) -> None:
    topo = read_sysfs_topology(tree_of(L3_PER_SOCKET_16_2_4, offline=cpus("0,8")).write(tmp_path))
    assert topo.cpus_in_l3(1) == cpus("1-3,9-11")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("0-x", "is not a CPU id", id="garbage"),
        pytest.param("4-7", "does not list CPU 0 itself", id="a list without the CPU"),
    ],
)
def test_sysfs_bad_shared_cpu_list_names_the_file(tmp_path: Path, text: str, message: str) -> None:
    tree = tree_of(SYNTH_16_2_4)
    tree.l3_shared[0] = text
    with pytest.raises(SysfsTopologyError, match=f"cpu0/cache/index3/shared_cpu_list: .*{message}"):
        read_sysfs_topology(tree.write(tmp_path))


HOST_CPU = Path("/sys/devices/system/cpu")


@pytest.mark.skipif(not (HOST_CPU / "online").exists(), reason="no Linux sysfs on this machine")
def test_this_host_l3_caches_match_sysfs() -> None:
    topo = read_sysfs_topology()
    for cpu in topo.cpus():
        shared = HOST_CPU / f"cpu{cpu}" / "cache" / "index3" / "shared_cpu_list"
        if not shared.exists():
            assert topo.l3_of(cpu) == NO_L3_CACHE
            continue
        cache = parse_cpu_list(shared.read_text()).intersection(topo.cpus())
        assert topo.l3_of(cpu) == cache.min()
        assert topo.cpus_in_l3(topo.l3_of(cpu)) == cache
