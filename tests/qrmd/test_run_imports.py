"""``qrmd run`` loads only what its start needs (DESIGN.md "Layout"; the restart figure of
bench/bench_wire.py): the modules of every enabled subsystem and of the CPU plugin's serving
path, and none of the tools it does not use on the way — katalyst-agent's checkpoint import
where no such file is, ``importlib.metadata`` for its version, the config file parsers
without ``--config``, the metrics registry and prometheus_client without
``--metrics-address`` (and, with it, until kubelet is served, also on a node that enables the
balancer, CPU pressure eviction or the advisor link), the balance round planner while the
balancer is off, the Allocator's
calls to sys-advisor while the link is off, the offline tools or the simulators.

The imports are checked in a fresh interpreter: this test process has long loaded everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: What ``qrmd run`` imports to build its default subsystems and serve kubelet, then the
#: take-over rule run on a state directory without a katalyst-agent checkpoint next to it.
_START = """
import json, sys
import qrmd.cli, qrmd.commands.run, wire.plugin_server
from qrmd.daemon import SUBSYSTEMS, _builder
from qrmd.store.katalyst_takeover import adopt_katalyst_state
from qrmd.store.takeover_settings import TakeoverSettings
for entry in SUBSYSTEMS[:2]:
    _builder(entry)
adopt_katalyst_state(TakeoverSettings(sys.argv[2]), sys.argv[1], "node", None)
print(json.dumps(sorted(sys.modules)))
"""


def _printed_json(script: str, *args: str) -> Any:
    """What ``script`` prints last as JSON, run in a fresh interpreter at the project's root."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    state = tmp_path_factory.mktemp("state")
    modules: list[str] = _printed_json(_START, str(state), str(state / "cpu_plugin_state"))
    return modules


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param("qrmd.store.katalyst_import", id="no katalyst import without its file"),
        pytest.param("policy.state.katalyst_", id="no katalyst layouts without its file"),
        pytest.param("importlib.metadata", id="no importlib.metadata for the version"),
        pytest.param("tomllib", id="no TOML parser without a config file"),
        pytest.param("yaml", id="no YAML parser without a config file"),
        pytest.param(
            "policy.cpu.pressure.load", id="no CPU pressure decision while it is not enabled"
        ),
        pytest.param(
            "policy.cpu.pressure.suppression", id="no suppression decision while it is not enabled"
        ),
        pytest.param(
            "policy.cpu.pressure.answers", id="no CPU pressure answers while it is not enabled"
        ),
        pytest.param(
            "policy.cpu.pressure.pods", id="no CPU pressure pod quantities while it is not enabled"
        ),
        pytest.param(
            "fractions", id="no fractions while no CPU quantity is parsed (--reserved-cpu-cores)"
        ),
        pytest.param("transitions", id="no transitions machine: the daemon steps tables only"),
        pytest.param("six", id="no six, which only transitions needs"),
        pytest.param(
            "policy.balance.round", id="no balance round planner while the balancer is off"
        ),
        pytest.param("policy.balance.numas", id="no balance NUMA selection while it is off"),
        pytest.param("policy.balance.pods", id="no balance pod selection while it is off"),
        pytest.param("policy.balance.decide", id="no balance decisions while it is off"),
        pytest.param("actors.allocator_advisor", id="no advisor calls while sys-advisor is off"),
        pytest.param("actors.ports.advisor", id="no advisor client while sys-advisor is off"),
        pytest.param("machines.advisor_link", id="no advisor link machine while it is off"),
        pytest.param("policy.cpu.advisor.push", id="no advisor push while sys-advisor is off"),
        pytest.param(
            "policy.cpu.advisor.decision", id="no advisor decisions while sys-advisor is off"
        ),
        pytest.param(
            "policy.cpu.advisor.application", id="no advisor block application while it is off"
        ),
        pytest.param("policy.cpu.advisor.blocks", id="no advisor block cpusets while it is off"),
        pytest.param(
            "policy.cpu.advisor.validation", id="no advisor response checks while it is off"
        ),
        pytest.param("prometheus_client", id="no prometheus client while metrics are off"),
        pytest.param("qrmd.status.metrics", id="no metrics registry while metrics are off"),
        pytest.param("qrmd.status.endpoint", id="no metrics endpoint while metrics are off"),
        pytest.param("qrmd.offline", id="no offline tool"),
        pytest.param("qrmd.sim", id="no simulator"),
    ],
)
def test_the_start_does_not_load(loaded: list[str], prefix: str) -> None:
    assert [name for name in loaded if name.startswith(prefix)] == []


def test_the_start_loads_what_serving_needs(loaded: list[str]) -> None:
    assert {
        "qrmd.store.subsystem",
        "qrmd.cpu_plugin.subsystem",
        "actors.state_store",
        "policy.state.codec",
        "policy.balance.section",
    } <= set(loaded)


#: A default ``qrmd run`` (metrics on, here on a port the kernel picks) started in-process on
#: the real gRPC server: the modules loaded once the CPU plugin has served kubelet's socket,
#: and once the start has returned.
_METRICS_ON = """
import json, os, sys
from qrmd.config import load_config
from qrmd.cpu_plugin import subsystem as cpu_plugin
from qrmd.daemon import Daemon

root = sys.argv[1]
loaded = {}

class Watched:
    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def serve(self, running):
        self._inner.serve(running)
        assert os.listdir(root + "/sock"), "kubelet's socket is served"
        loaded["served"] = sorted(sys.modules)

config = load_config({
    "topology": "synthetic:cpus=8,sockets=1,numas=1",
    "reserved-cpu-cores": "1",
    "state-dir": root + "/state",
    "socket-dir": [root + "/sock"],
    "plugin-registration-dir": root + "/reg",
    "metrics-address": "127.0.0.1:0",
    "durability": "none",
})
watched = {"cpu_plugin": lambda settings, shared: Watched(cpu_plugin.build(settings, shared))}
daemon = Daemon(config, builders=watched)
daemon.start()
loaded["started"] = sorted(sys.modules)
daemon.stop()
print(json.dumps(loaded))
"""


@pytest.fixture(scope="module")
def loaded_with_metrics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    root = tmp_path_factory.mktemp("metrics-on")
    for directory in ("sock", "reg"):
        (root / directory).mkdir()
    modules: dict[str, list[str]] = _printed_json(_METRICS_ON, str(root))
    return modules


@pytest.mark.parametrize(
    "module",
    [
        pytest.param("prometheus_client", id="no prometheus client until kubelet is served"),
        pytest.param("http.server", id="no HTTP server until kubelet is served"),
        pytest.param("qrmd.status.metrics", id="no metrics registry until kubelet is served"),
        pytest.param("qrmd.status.endpoint", id="no endpoint handler until kubelet is served"),
    ],
)
def test_with_metrics_on_the_metrics_stack_loads_after_kubelet_is_served(
    loaded_with_metrics: dict[str, list[str]], module: str
) -> None:
    assert module not in loaded_with_metrics["served"]
    assert module in loaded_with_metrics["started"]


#: The wiring modules of the optional subsystems, imported as ``qrmd run`` builds them when
#: they are enabled (on top of the default start's modules).
_OPTIONAL = """
import json, sys
import qrmd.cli, qrmd.commands.run, wire.plugin_server
from qrmd.daemon import SUBSYSTEMS, _builder
for entry in SUBSYSTEMS:
    if entry.name in sys.argv[1:] or entry.name in ("store", "cpu_plugin"):
        _builder(entry)
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize(
    "subsystem",
    [
        pytest.param("balancer", id="the memory balancer builds without prometheus_client"),
        pytest.param("cpu_pressure", id="CPU pressure eviction builds without prometheus_client"),
        pytest.param("advisor", id="the advisor link builds without prometheus_client"),
        pytest.param("pods", id="the pod source and checkers build without prometheus_client"),
    ],
)
def test_an_enabled_subsystem_loads_its_collector_only_once_kubelet_is_served(
    subsystem: str,
) -> None:
    loaded = _printed_json(_OPTIONAL, subsystem)
    assert f"qrmd.{subsystem}.subsystem" in loaded
    assert [name for name in loaded if name.startswith(("prometheus_client", "http.server"))] == []


#: The pod source's publisher built, fetching nothing yet (the pods wiring builds one).
_PUBLISHER = """
import json, sys, time
from qrmd.host.pod_publisher import PodListPublisher
PodListPublisher(lambda: None, wall=time.time, monotonic=time.monotonic)
print(json.dumps(sorted(sys.modules)))
"""


def test_the_pod_publisher_makes_its_histogram_only_once_it_fetches_or_is_scraped() -> None:
    loaded = _printed_json(_PUBLISHER)
    assert [name for name in loaded if name.startswith("prometheus_client")] == []


#: The journal cause of an advisor decision, in an interpreter that has not loaded the
#: advisor's decision code: writing it loads that code.
_ADVISOR_CAUSE = """
import json, sys
from policy.cpu.cause import AdvisorSilence, cause_of
loaded = "policy.cpu.advisor.decision" in sys.modules
cause = cause_of(AdvisorSilence(10.0, 300.0), 20.0)
print(json.dumps([loaded, list(cause.items()), "policy.cpu.advisor.decision" in sys.modules]))
"""


def test_an_advisor_cause_loads_the_advisor_decision_code_when_it_is_written() -> None:
    before, cause, after = _printed_json(_ADVISOR_CAUSE)
    assert (before, after) == (False, True)
    assert cause == [
        ["rpc", "AdvisorSilence"],
        ["now", 20.0],
        ["silent_since", 10.0],
        ["cause_version", 3],
        ["unhealthy_after_s", 300.0],
    ]
