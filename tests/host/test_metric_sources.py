"""NUMA metric and distance sources for the memory balancer (spec memory-balancer §4.1, §4.3,
§4.4): sysfs distances (synthetic trees and this host's), the collector's JSON file, a real HTTP
server serving Prometheus text, resctrl MBM counters on a synthetic tree with an injected clock,
and the fixed source ``--numa-metrics-source simulated`` selects. A metric that cannot be read
is a ``MissingSample`` with its reason, never 0.
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from actors.ports.balancer import NumaDistanceSource, NumaMetricSource
from policy.balance import (
    BalanceError,
    BalanceLevel,
    MissingSample,
    NumaDistance,
    NumaMetrics,
    RoundInputs,
    RoundResult,
    plan_round,
)
from policy.topology.synthetic import generate_dummy_cpu_topology
from qrmd.host.metric_sources import (
    EXPIRED,
    MetricSourceUnavailable,
    SplitNumaMetrics,
    Staleness,
    checked_value,
)
from qrmd.host.metrics_file import MetricsFile
from qrmd.host.metrics_fixed import FixedNumaMetrics, NumaProfile
from qrmd.host.metrics_prometheus import PrometheusNumaMetrics, prometheus_name
from qrmd.host.metrics_resctrl import ResctrlBandwidth, l3_domains_by_numa
from qrmd.host.numa_distances import SysfsNumaDistances, TopologyNumaDistances
from qrmd.host.sysfs_topology import SysfsTopologyError, read_sysfs_topology
from tests.host.sysfs_tree import SysfsTree, put, tree_of

NOW = 1_795_994_721.5  # 2026-11-29T23:25:21.5Z
MISSING = MissingSample


@dataclass
class FakeClock:
    """A clock tests advance by hand; never sleeps."""

    now: float = NOW

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def latencies(sampled: dict[int, NumaMetrics]) -> dict[int, object]:
    return {n: m.read_latency for n, m in sampled.items()}


def bandwidths(sampled: dict[int, NumaMetrics]) -> dict[int, object]:
    return {n: m.read_write_bandwidth for n, m in sampled.items()}


# -- distances (§4.4) ---------------------------------------------------------------------------

TWO_SOCKETS = SysfsTree(
    online="0-3",
    cpus={0: (0, "0"), 1: (0, "1"), 2: (1, "2"), 3: (1, "3")},
    nodes={0: ("0-1", [10, 21, 17]), 1: ("2-3", [21, 10, 28]), 2: ("", [17, 28, 10])},
    node_online="0-2",
    has_memory="0-2",
)


def test_sysfs_distances_include_self_entries_and_memory_only_nodes(tmp_path: Path) -> None:
    source = SysfsNumaDistances(TWO_SOCKETS.write(tmp_path))
    assert isinstance(source, NumaDistanceSource)
    assert dict(source.distances()) == {
        0: (NumaDistance(0, 10), NumaDistance(1, 21), NumaDistance(2, 17)),
        1: (NumaDistance(0, 21), NumaDistance(1, 10), NumaDistance(2, 28)),
        2: (NumaDistance(0, 17), NumaDistance(1, 28), NumaDistance(2, 10)),
    }


def test_sparse_node_ids_map_by_id_not_position(tmp_path: Path) -> None:
    tree = SysfsTree(
        online="0-1",
        cpus={0: (0, "0"), 1: (1, "1")},
        nodes={0: ("0", [10, 20]), 2: ("1", [20, 10])},
        node_online="0,2",
    )
    lists = SysfsNumaDistances(tree.write(tmp_path)).distances()
    assert dict(lists) == {
        0: (NumaDistance(0, 10), NumaDistance(2, 20)),
        2: (NumaDistance(0, 20), NumaDistance(2, 10)),
    }


def test_sysfs_distances_agree_with_the_topology_reader(tmp_path: Path) -> None:
    topology = generate_dummy_cpu_topology(16, 2, 4)
    root = tree_of(topology).write(tmp_path)
    assert (
        SysfsNumaDistances(root).distances()
        == TopologyNumaDistances(read_sysfs_topology(root).distances).distances()
    )
    assert TopologyNumaDistances(topology.distances).distances()[0] == (
        NumaDistance(0, 10),
        NumaDistance(1, 12),
        NumaDistance(2, 21),
        NumaDistance(3, 21),
    )


def test_malformed_distance_file_is_named(tmp_path: Path) -> None:
    root = TWO_SOCKETS.write(tmp_path)
    bad = root / "devices/system/node/node1/distance"
    bad.write_text("21 ten 28\n")
    with pytest.raises(SysfsTopologyError, match=rf"^{bad}: expected distances, got '21 ten 28'$"):
        SysfsNumaDistances(root).distances()


HOST_NODES = Path("/sys/devices/system/node")


@pytest.mark.skipif(not HOST_NODES.is_dir(), reason="this host has no NUMA sysfs")
def test_this_hosts_distances() -> None:
    lists = SysfsNumaDistances().distances()
    nodes = sorted(lists)
    assert nodes, "at least node 0"
    for node, entries in lists.items():
        assert [e.numa_id for e in entries] == nodes
        # Each list is the node's sysfs row, its own entry at the local distance.
        row = (HOST_NODES / f"node{node}" / "distance").read_text().split()
        assert [e.distance for e in entries] == [int(d) for d in row]
        assert entries[nodes.index(node)].distance == 10


# -- shared rules: staleness (§4.3) and values --------------------------------------------------


@pytest.mark.parametrize(
    ("period", "stamp", "age", "expired"),
    [
        pytest.param(0, NOW - 3600, 0, False, id="period 0 (the default): never expires"),
        pytest.param(120, NOW - 120, 0, False, id="exactly one period old is still fresh"),
        pytest.param(120, NOW - 120.5, 0, True, id="older than the period expires"),
        pytest.param(10, NOW - 59, 0, False, id="a period under 60 s is raised to 60 s"),
        pytest.param(10, NOW - 61, 0, True, id="so 61 s old expires with a 10 s period"),
        pytest.param(120, None, 0, False, id="a sample without a timestamp never expires"),
        pytest.param(120, 0.0, 0, False, id="a Unix-0 timestamp never expires"),
    ],
)
def test_staleness(period: float, stamp: float | None, age: float, expired: bool) -> None:
    got = Staleness(period).check(75.0, stamp, NOW + age)
    assert got == (MISSING(EXPIRED) if expired else 75.0)


def test_staleness_refuses_negative_periods() -> None:
    with pytest.raises(ValueError, match="metric-insurance-period: -1 s must be 0"):
        Staleness(-1)


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param(0, 0.0, id="zero is a value"),
        pytest.param(12, 12.0, id="an int"),
        pytest.param(float("nan"), MISSING("x: nan is not a finite number"), id="NaN"),
        pytest.param(float("inf"), MISSING("x: inf is not a finite number"), id="infinity"),
        pytest.param(-1.5, MISSING("x: -1.5 is negative"), id="negative"),
        pytest.param("75", MISSING("x: expected a number, got '75'"), id="text"),
        pytest.param(True, MISSING("x: expected a number, got True"), id="a boolean"),
        pytest.param(10**400, MISSING("x: " + repr(10**400)[:60] + " is too large"), id="huge"),
    ],
)
def test_checked_value(value: object, want: object) -> None:
    assert checked_value(value, "x") == want


# -- the collector's JSON file ------------------------------------------------------------------


def write_metrics(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document))
    return path


def test_metrics_file_reads_both_metrics_per_node(tmp_path: Path) -> None:
    path = write_metrics(
        tmp_path / "numa.json",
        {
            "timestamp": "2026-11-29T23:25:00Z",
            "numas": {
                "0": {"mem.latency.read.numa": 75, "mem.bandwidth.numa": 900},
                "1": {"mem.latency.read.numa": {"value": 50.5}, "mem.bandwidth.numa": 0},
            },
        },
    )
    source = MetricsFile(path, clock=FakeClock())
    assert isinstance(source, NumaMetricSource)
    assert source.sample([0, 1]) == {0: NumaMetrics(75, 900), 1: NumaMetrics(50.5, 0)}


def test_metrics_file_reads_the_configured_latency_metric(tmp_path: Path) -> None:
    path = write_metrics(
        tmp_path / "numa.json",
        {
            "numas": {
                "0": {
                    "mem.latency.read.numa": 75,
                    "mem.latency.amd.l3.miss": 550,
                    "mem.bandwidth.numa": 9,
                }
            }
        },
    )
    source = MetricsFile(path, latency_metric="mem.latency.amd.l3.miss")
    assert source.sample([0]) == {0: NumaMetrics(550, 9)}


@pytest.mark.parametrize(
    ("document", "numa", "latency", "bandwidth"),
    [
        pytest.param(
            {"numas": {"0": {"mem.bandwidth.numa": 1}}},
            0,
            "FILE: numas['0']: no 'mem.latency.read.numa'",
            1.0,
            id="a metric absent from the file is missing",
        ),
        pytest.param(
            {"numas": {}},
            3,
            "FILE: numas['3']: no such NUMA node in the file",
            "FILE: numas['3']: no such NUMA node in the file",
            id="a node absent from the file is missing",
        ),
        pytest.param(
            {"numas": {"0": {"mem.latency.read.numa": -4, "mem.bandwidth.numa": None}}},
            0,
            "FILE: numas['0']['mem.latency.read.numa']: -4.0 is negative",
            "FILE: numas['0']['mem.bandwidth.numa']: expected a number, got None",
            id="a negative or null value is missing, never zero",
        ),
        pytest.param(
            {
                "timestamp": NOW - 300,
                "numas": {
                    "0": {
                        "mem.latency.read.numa": 9,
                        "mem.bandwidth.numa": {"value": 1, "timestamp": NOW - 10},
                    }
                },
            },
            0,
            EXPIRED,
            1.0,
            id="with a 120 s period the 300 s old file expires, a fresh value does not",
        ),
        pytest.param(
            {
                "numas": {
                    "0": {
                        "mem.latency.read.numa": {"value": 1, "when": 0},
                        "mem.bandwidth.numa": {"value": 1, "timestamp": "noon"},
                    }
                }
            },
            0,
            "FILE: numas['0']['mem.latency.read.numa']: expected {'value': ..., 'timestamp': ...}",
            "FILE: numas['0']['mem.bandwidth.numa'].timestamp: 'noon' is not an RFC 3339 timestamp",
            id="a malformed value object names the field",
        ),
    ],
)
def test_metrics_file_missing_values(
    tmp_path: Path, document: object, numa: int, latency: object, bandwidth: object
) -> None:
    path = write_metrics(tmp_path / "numa.json", document)
    source = MetricsFile(path, staleness=Staleness(120), clock=FakeClock())

    def want(x: object) -> object:
        return MISSING(x.replace("FILE", str(path))) if isinstance(x, str) else x

    assert source.sample([numa]) == {numa: NumaMetrics(want(latency), want(bandwidth))}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        pytest.param(None, "FILE: missing", id="no file yet"),
        pytest.param('{"numas": {', "FILE: not JSON: ", id="half-written file"),
        pytest.param("[1]", "FILE: expected a JSON object at the top", id="not an object"),
        pytest.param(
            '{"numa": {}}',
            "FILE: unknown field 'numa' (known: numas, timestamp)",
            id="a typo at the top",
        ),
        pytest.param(
            '{"numas": {}, "timestamp": -5}',
            "FILE: timestamp: -5.0 is negative",
            id="a bad timestamp",
        ),
    ],
)
def test_an_unusable_file_makes_every_node_missing(
    tmp_path: Path, text: str | None, reason: str
) -> None:
    path = tmp_path / "numa.json"
    if text is not None:
        path.write_text(text)
    got = MetricsFile(path).sample([0, 1])
    want_prefix = reason.replace("FILE", str(path))
    for metrics in got.values():
        for sample in (metrics.read_latency, metrics.read_write_bandwidth):
            assert isinstance(sample, MissingSample)
            assert sample.reason.startswith(want_prefix)
    assert sorted(got) == [0, 1]


def test_metrics_file_is_reread_every_round(tmp_path: Path) -> None:
    path = write_metrics(
        tmp_path / "m.json", {"numas": {"0": {"mem.latency.read.numa": 1, "mem.bandwidth.numa": 2}}}
    )
    source = MetricsFile(path)
    assert source.sample([0])[0] == NumaMetrics(1, 2)
    write_metrics(path, {"numas": {"0": {"mem.latency.read.numa": 3, "mem.bandwidth.numa": 4}}})
    assert source.sample([0])[0] == NumaMetrics(3, 4)


# -- Prometheus over real HTTP ------------------------------------------------------------------


@dataclass
class Exporter:
    """A real HTTP server on 127.0.0.1 serving what the test sets."""

    body: str = ""
    status: int = 200
    hold: threading.Event | None = None
    promised_extra_bytes: int = 0
    requests: list[str] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    state = Exporter()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.path)
            if state.hold is not None:
                state.hold.wait(5)
            data = state.body.encode()
            self.send_response(state.status)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data) + state.promised_extra_bytes))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        yield state
    finally:
        if state.hold is not None:
            state.hold.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


NODE_EXPORTER_TEXT = """\
# HELP mem_latency_read_numa Memory read latency per NUMA node.
# TYPE mem_latency_read_numa gauge
mem_latency_read_numa{numa="0"} 75
mem_latency_read_numa{numa="1"} 50.25
# HELP mem_bandwidth_numa Memory read+write bandwidth per NUMA node.
# TYPE mem_bandwidth_numa gauge
mem_bandwidth_numa{numa="0"} 900
mem_bandwidth_numa{numa="1"} 300
# TYPE unrelated_total counter
unrelated_total 3
"""


def test_prometheus_scrape_over_http(exporter: Exporter) -> None:
    exporter.body = NODE_EXPORTER_TEXT
    source = PrometheusNumaMetrics(exporter.url)
    assert isinstance(source, NumaMetricSource)
    assert source.sample([0, 1]) == {0: NumaMetrics(75, 900), 1: NumaMetrics(50.25, 300)}
    assert exporter.requests == ["/metrics"]


def test_prometheus_names_labels_and_matchers_are_configurable(exporter: Exporter) -> None:
    exporter.body = (
        'numa_lat_ns{node="node0",host="a"} 120\n'
        'numa_lat_ns{node="node0",host="b"} 999\n'
        'numa_bw{node="node0",host="a"} 7\n'
    )
    source = PrometheusNumaMetrics(
        exporter.url,
        latency_metric="numa_lat_ns",
        bandwidth_metric="numa_bw",
        numa_label="node",
        match_labels={"host": "a"},
    )
    assert source.sample([0]) == {0: NumaMetrics(120, 7)}


def test_prometheus_missing_ambiguous_and_invalid_samples(exporter: Exporter) -> None:
    exporter.body = (
        'mem_latency_read_numa{numa="0",socket="0"} 70\n'
        'mem_latency_read_numa{numa="0",socket="1"} 80\n'
        'mem_bandwidth_numa{numa="0"} NaN\n'
        'mem_latency_read_numa{numa="1"} 1\n'
    )
    got = PrometheusNumaMetrics(exporter.url).sample([0, 1])
    where = f'{exporter.url}: mem_latency_read_numa{{numa="0"}}'
    assert got[0] == NumaMetrics(
        MISSING(f"{where}: 2 samples (70, 80); set match labels to pick one"),
        MISSING(f'{exporter.url}: mem_bandwidth_numa{{numa="0"}}: nan is not a finite number'),
    )
    assert got[1] == NumaMetrics(
        1.0, MISSING(f'{exporter.url}: mem_bandwidth_numa{{numa="1"}}: no sample')
    )


def test_prometheus_sample_timestamps_follow_the_insurance_period(exporter: Exporter) -> None:
    stamp_ms = int((NOW - 90) * 1000)
    exporter.body = (
        f'mem_latency_read_numa{{numa="0"}} 75 {stamp_ms}\nmem_bandwidth_numa{{numa="0"}} 900\n'
    )
    clock = FakeClock()
    fresh = PrometheusNumaMetrics(exporter.url, staleness=Staleness(120), clock=clock)
    assert fresh.sample([0]) == {0: NumaMetrics(75, 900)}
    clock.advance(31)  # now 121 s old
    assert fresh.sample([0]) == {0: NumaMetrics(MISSING(EXPIRED), 900)}
    assert PrometheusNumaMetrics(exporter.url, clock=clock).sample([0]) == {
        0: NumaMetrics(75, 900)
    }, "off by default"


def test_prometheus_http_error_makes_every_node_missing(exporter: Exporter) -> None:
    exporter.status = 503
    got = PrometheusNumaMetrics(exporter.url).sample([0, 1])
    reason = MISSING(f"scrape {exporter.url}: HTTP 503 Service Unavailable")
    assert got == {0: NumaMetrics(reason, reason), 1: NumaMetrics(reason, reason)}


def test_prometheus_body_cut_short_makes_every_node_missing(exporter: Exporter) -> None:
    exporter.body = NODE_EXPORTER_TEXT
    exporter.promised_extra_bytes = 100  # the exporter closes before sending them
    sample = PrometheusNumaMetrics(exporter.url).sample([0])[0].read_latency
    assert isinstance(sample, MissingSample)
    total = len(NODE_EXPORTER_TEXT) + 100
    assert (
        sample.reason == f"scrape {exporter.url}: body cut short, 100 of {total} bytes never came"
    )


def test_prometheus_garbage_makes_every_node_missing(exporter: Exporter) -> None:
    exporter.body = 'mem_latency_read_numa{numa="0" 75\n'
    sample = PrometheusNumaMetrics(exporter.url).sample([0])[0].read_latency
    assert isinstance(sample, MissingSample)
    assert sample.reason.startswith(f"scrape {exporter.url}: not Prometheus text: ")


def test_prometheus_timeout_makes_every_node_missing(exporter: Exporter) -> None:
    exporter.hold = threading.Event()  # the exporter answers only after the test
    sample = PrometheusNumaMetrics(exporter.url, timeout_s=0.2).sample([0])[0].read_latency
    assert isinstance(sample, MissingSample)
    assert sample.reason.startswith(f"scrape {exporter.url}: ")
    assert "timed out" in sample.reason


def test_prometheus_refused_connection() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/metrics"
    sample = PrometheusNumaMetrics(url, timeout_s=1).sample([0])[0].read_write_bandwidth
    assert isinstance(sample, MissingSample)
    assert sample.reason.startswith(f"scrape {url}: ")
    assert "refused" in sample.reason


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"url": "file:///etc/passwd"}, "expected http://", id="only http(s)"),
        pytest.param({"latency_metric": "mem.latency"}, "is not a Prometheus name", id="dots"),
        pytest.param({"numa_label": "numa-id"}, "is not a Prometheus label", id="label"),
        pytest.param({"timeout_s": 0}, "timeout 0 s must be positive", id="timeout"),
    ],
)
def test_prometheus_settings_are_checked(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"url": "http://127.0.0.1:9100/metrics", **kwargs}
    with pytest.raises(ValueError, match=message):
        PrometheusNumaMetrics(**args)  # type: ignore[arg-type]


def test_prometheus_names_default_to_the_reference_names() -> None:
    assert prometheus_name("mem.latency.amd.l3.miss") == "mem_latency_amd_l3_miss"


# -- resctrl MBM counters ------------------------------------------------------------------------


def resctrl_host(tmp_path: Path, domains: dict[int, int] | None = None) -> tuple[Path, Path]:
    """Sysfs of 8 CPUs on 2 NUMA nodes (0: CPUs 0-1,4-5; 1: CPUs 2-3,6-7), L3 cache ids per
    CPU (default: one L3 per node, L3 0 on node 0, L3 1 on node 1); resctrl with MBM."""
    topology = generate_dummy_cpu_topology(8, 2, 2)
    sysfs = tree_of(topology).write(tmp_path / "sys")
    cpu_l3 = domains or {cpu: (0 if cpu in (0, 1, 4, 5) else 1) for cpu in range(8)}
    for cpu, l3 in cpu_l3.items():
        cache = sysfs / f"devices/system/cpu/cpu{cpu}/cache"
        put(cache / "index0/level", "1\n")
        put(cache / "index0/id", "0\n")
        put(cache / "index3/level", "3\n")
        put(cache / "index3/id", f"{l3}\n")
    resctrl = tmp_path / "resctrl"
    put(resctrl / "info/L3_MON/mon_features", "llc_occupancy\nmbm_total_bytes\nmbm_local_bytes\n")
    return sysfs, resctrl


def set_counter(resctrl: Path, group: str, domain: int, value: int | str) -> None:
    put(resctrl / group / "mon_data" / f"mon_L3_{domain:02d}" / "mbm_total_bytes", f"{value}\n")


def test_l3_domains_map_to_numa_nodes(tmp_path: Path) -> None:
    sysfs, _ = resctrl_host(tmp_path)
    assert read_sysfs_topology(sysfs).cpus_in_numa(0).ids() == (0, 1, 4, 5)
    assert l3_domains_by_numa(sysfs) == {0: {0}, 1: {1}}
    # Two L3 domains in one node (AMD CCXs) both map to it.
    sysfs, _ = resctrl_host(
        tmp_path / "ccx", domains={0: 0, 1: 0, 4: 2, 5: 2, 2: 1, 3: 1, 6: 1, 7: 1}
    )
    assert l3_domains_by_numa(sysfs) == {0: {0}, 2: {0}, 1: {1}}


def test_resctrl_bandwidth_is_a_rate_over_every_control_group(tmp_path: Path) -> None:
    sysfs, resctrl = resctrl_host(tmp_path)
    # The default group, a control group, and monitoring groups (already in their parents').
    groups = ("", "batch", "batch/mon_groups/pod1", "mon_groups/m1")
    for group in groups:
        for domain in (0, 1):
            set_counter(resctrl, group, domain, 1_000_000)
    clock = FakeClock(100.0)
    source = ResctrlBandwidth(resctrl, sysfs, monotonic=clock)
    first = source.sample([0, 1, 2])
    two_samples = MISSING("resctrl: a bandwidth needs two samples; this is the first")
    assert bandwidths(first) == {
        0: two_samples,
        1: two_samples,
        2: MISSING("resctrl: no L3 domain has CPUs on NUMA node 2"),
    }
    assert latencies(first)[0] == MISSING(
        "resctrl measures bandwidth only; latency needs another source"
    )
    # Two seconds later: 5 GiB more on domain 0 over the control groups, 1 GiB on domain 1.
    clock.advance(2.0)
    set_counter(resctrl, "", 0, 1_000_000 + 2 * GIB_BYTES)
    set_counter(resctrl, "batch", 0, 1_000_000 + 3 * GIB_BYTES)
    set_counter(resctrl, "batch/mon_groups/pod1", 0, 1_000_000 + GIB_BYTES)  # within batch's
    set_counter(resctrl, "mon_groups/m1", 1, 1_000_000 + GIB_BYTES)  # within the root's
    set_counter(resctrl, "", 1, 1_000_000 + GIB_BYTES)
    assert bandwidths(source.sample([0, 1])) == {0: 2.5, 1: 0.5}
    # A control group created since the last sample counts from the next one.
    clock.advance(1.0)
    set_counter(resctrl, "fresh", 0, 50 * GIB_BYTES)
    assert bandwidths(source.sample([0]))[0] == 0.0
    clock.advance(1.0)
    set_counter(resctrl, "fresh", 0, 51 * GIB_BYTES)
    assert bandwidths(source.sample([0]))[0] == 1.0


GIB_BYTES = 1 << 30


def test_resctrl_unreadable_or_reset_counters_are_missing(tmp_path: Path) -> None:
    sysfs, resctrl = resctrl_host(tmp_path)
    set_counter(resctrl, "", 0, 5 << 30)
    set_counter(resctrl, "", 1, 5 << 30)
    clock = FakeClock(10.0)
    source = ResctrlBandwidth(resctrl, sysfs, monotonic=clock)
    source.sample([0, 1])
    clock.advance(1.0)
    set_counter(resctrl, "", 0, "Unavailable")
    set_counter(resctrl, "", 1, 1 << 30)  # went backwards: RMID recycled
    path0 = resctrl / "mon_data/mon_L3_00/mbm_total_bytes"
    assert bandwidths(source.sample([0, 1])) == {
        0: MISSING(f"resctrl: {path0} reads 'Unavailable'"),
        1: MISSING(
            "resctrl: mbm_total_bytes of group '.', L3 1, went backwards "
            f"({5 << 30} → {1 << 30}); reset"
        ),
    }
    clock.advance(1.0)
    set_counter(resctrl, "", 1, 2 << 30)
    assert bandwidths(source.sample([1])) == {1: 1.0}, "the next round starts afresh"


def test_resctrl_counters_gone_are_missing_not_zero(tmp_path: Path) -> None:
    sysfs, resctrl = resctrl_host(tmp_path)
    set_counter(resctrl, "", 0, 1)
    set_counter(resctrl, "", 1, 1)
    clock = FakeClock()
    source = ResctrlBandwidth(resctrl, sysfs, monotonic=clock)
    source.sample([0, 1])
    clock.advance(1.0)
    shutil.rmtree(resctrl / "mon_data")  # resctrl unmounted, or monitoring switched off
    assert bandwidths(source.sample([0])) == {
        0: MISSING(f"resctrl: no mbm_total_bytes for L3 0 under {resctrl}")
    }
    clock.advance(1.0)
    set_counter(resctrl, "", 0, 7)
    assert bandwidths(source.sample([0])) == {
        0: MISSING("resctrl: the mbm_total_bytes of L3 0 appeared since the last sample")
    }


def test_resctrl_domain_spanning_nodes_cannot_be_split(tmp_path: Path) -> None:
    sysfs, resctrl = resctrl_host(tmp_path, domains=dict.fromkeys(range(8), 0))
    set_counter(resctrl, "", 0, 1)
    source = ResctrlBandwidth(resctrl, sysfs, monotonic=FakeClock())
    assert bandwidths(source.sample([0])) == {
        0: MISSING(
            "resctrl: L3 domain 0 spans NUMA nodes 0, 1 and has no per-node counters; "
            "its bandwidth cannot be split"
        )
    }


def test_resctrl_sub_numa_clustering_counts_per_node(tmp_path: Path) -> None:
    # One L3 domain over both nodes, split by the kernel into mon_sub_L3_<node> (SNC).
    sysfs, resctrl = resctrl_host(tmp_path, domains=dict.fromkeys(range(8), 0))

    def set_sub(node: int, value: int) -> None:
        put(resctrl / f"mon_data/mon_L3_00/mon_sub_L3_{node:02d}/mbm_total_bytes", f"{value}\n")

    set_sub(0, 0)
    set_sub(1, 0)
    put(resctrl / "mon_data/mon_L3_00/mbm_total_bytes", "0\n")  # the domain's sum: not used
    clock = FakeClock()
    source = ResctrlBandwidth(resctrl, sysfs, monotonic=clock)
    source.sample([0, 1])
    clock.advance(0.5)
    set_sub(0, GIB_BYTES)
    set_sub(1, 2 * GIB_BYTES)
    put(resctrl / "mon_data/mon_L3_00/mbm_total_bytes", f"{3 * GIB_BYTES}\n")
    assert bandwidths(source.sample([0, 1])) == {0: 2.0, 1: 4.0}


def test_resctrl_not_mounted_is_not_available(tmp_path: Path) -> None:
    sysfs, _ = resctrl_host(tmp_path)
    empty = tmp_path / "nothing"
    with pytest.raises(MetricSourceUnavailable, match=rf"cannot read {empty}/info/L3_MON"):
        ResctrlBandwidth(empty, sysfs)


def test_resctrl_without_mbm_is_not_available(tmp_path: Path) -> None:
    sysfs, resctrl = resctrl_host(tmp_path)
    put(resctrl / "info/L3_MON/mon_features", "llc_occupancy\n")
    with pytest.raises(MetricSourceUnavailable, match="does not offer mbm_total_bytes"):
        ResctrlBandwidth(resctrl, sysfs)


def test_resctrl_on_this_host() -> None:
    if Path("/sys/fs/resctrl/info/L3_MON/mon_features").exists():
        source = ResctrlBandwidth()
        assert sorted(source.sample([0])) == [0]
    else:
        with pytest.raises(MetricSourceUnavailable, match="is not available"):
            ResctrlBandwidth()


# -- the fixed source and combining sources -----------------------------------------------------

T4 = {
    0: [(1, 11), (2, 21), (3, 21)],
    1: [(0, 11), (2, 21), (3, 21)],
    2: [(0, 21), (1, 21), (3, 11)],
    3: [(0, 21), (1, 21), (2, 11)],
}


def round_on(metrics: dict[int, NumaMetrics]) -> RoundInputs:
    return RoundInputs(
        now=NOW,
        numa_metrics=metrics,
        distances={k: tuple(NumaDistance(n, d) for n, d in v) for k, v in T4.items()},
        pools={"share": (0, 1), "reclaim": (0, 1, 2, 3)},
        pods=(),
    )


def test_the_fixed_source_quiet_then_under_pressure_force_balances() -> None:
    quiet = FixedNumaMetrics.quiet(range(4))
    assert isinstance(quiet, NumaMetricSource)
    stored = plan_round(round_on(dict(quiet.sample([0, 1, 2, 3]))))
    assert stored.result is RoundResult.STORED and not stored.record.need_balance  # type: ignore[union-attr]
    pressed = quiet.under_pressure([2])
    assert pressed.sample([2]) == {2: NumaMetrics(90, 900)}
    assert quiet.sample([2]) == {2: NumaMetrics(40, 100)}  # built once, never changed
    record = plan_round(round_on(dict(pressed.sample([0, 1, 2, 3])))).record
    assert record is not None and record.balance_level is BalanceLevel.FORCE
    assert record.source_numa is not None and record.source_numa.numa_id == 2


def test_the_fixed_source_reports_unknown_and_unreadable_nodes_missing() -> None:
    fixed = FixedNumaMetrics(
        {0: NumaProfile(60, 100), 1: NumaProfile(50, 90)}, {1: "collector lost node 1"}
    )
    got = fixed.sample([0, 1, 2])
    assert got[0] == NumaMetrics(60, 100)
    assert got[1] == NumaMetrics(MISSING("collector lost node 1"), MISSING("collector lost node 1"))
    assert got[2].read_latency == MISSING("NUMA node 2 is not simulated")
    with pytest.raises(KeyError, match="NUMA node 7 is not simulated"):
        fixed.under_pressure([7])
    with pytest.raises(ValueError, match="simulated read latency -1 must be"):
        NumaProfile(-1, 0)


@pytest.mark.parametrize(
    ("profiles", "unreadable", "numa_ids"),
    [
        pytest.param({0: NumaProfile(60, 100)}, {}, [0, 0, 1],
                     id="a node read again reports the same and an unknown one stays missing"),
        pytest.param({0: NumaProfile(60, 100)}, {0: "lost"}, [0, 1, 0],
                     id="an unreadable node stays missing with its reason"),
        pytest.param({0: NumaProfile(1, 2), 1: NumaProfile(3, 4)}, {}, [1, 0, 1],
                     id="nodes read in any order report their own profile"),
    ],
)  # fmt: skip
def test_the_fixed_source_answers_every_read_as_its_first(
    profiles: dict[int, NumaProfile], unreadable: dict[int, str], numa_ids: list[int]
) -> None:
    # Each node's sample is made once and kept; every later read must equal a fresh source's.
    fixed = FixedNumaMetrics(profiles, unreadable)
    for _ in range(3):
        assert fixed.sample(numa_ids) == FixedNumaMetrics(profiles, unreadable).sample(numa_ids)


@pytest.mark.parametrize(
    "requests",
    [
        pytest.param([[0, 1], [0, 1], [0, 1]], id="the same nodes every round get the same answer"),
        pytest.param([[0, 1], [1], [0, 1], [0, 1, 2]],
                     id="other nodes are answered for those nodes, then the first ones again"),
        pytest.param([[1, 0], [0, 1]], id="the same nodes in another order are another request"),
    ],
)  # fmt: skip
def test_the_fixed_source_answers_each_request_as_a_fresh_source_would(
    requests: list[list[int]],
) -> None:
    # The answer to a request is kept for the next identical one; any other is made anew.
    profiles = {0: NumaProfile(60, 100), 1: NumaProfile(50, 90)}
    fixed = FixedNumaMetrics(profiles, {})
    for numa_ids in requests:
        answer = fixed.sample(numa_ids)
        assert answer == FixedNumaMetrics(profiles, {}).sample(numa_ids)
        assert list(answer) == list(dict.fromkeys(numa_ids))
        # A caller that changes its answer does not change the next one.
        answer[0] = NumaMetrics(1, 1)  # type: ignore[index]


def test_a_fixed_profile_the_inputs_refuse_fails_every_read_not_only_the_first() -> None:
    fixed = FixedNumaMetrics({0: NumaProfile(True, 100)})  # type: ignore[arg-type]
    for _ in range(2):
        with pytest.raises(BalanceError, match="readLatency: expected a number"):
            fixed.sample([0])


def test_split_source_takes_latency_and_bandwidth_from_each(tmp_path: Path) -> None:
    sysfs, resctrl = resctrl_host(tmp_path)
    set_counter(resctrl, "", 0, 0)
    set_counter(resctrl, "", 1, 0)
    clock = FakeClock()
    fixed = FixedNumaMetrics.quiet([0, 1], read_latency=55)
    split = SplitNumaMetrics(fixed, ResctrlBandwidth(resctrl, sysfs, monotonic=clock))
    assert isinstance(split, NumaMetricSource)
    split.sample([0, 1])
    clock.advance(4.0)
    set_counter(resctrl, "", 0, 8 << 30)
    assert split.sample([0, 1]) == {0: NumaMetrics(55, 2.0), 1: NumaMetrics(55, 0.0)}
