"""Each sub-command loads only what it uses (qrmd.cli): a node's daemon starts without the
demo, the simulators (``qrmd.sim``), the journal's offline tools or rich, and an on-call
laptop's `qrmd journal` without the daemon.

The import sets come from real processes (``python -X importtime``, or a fresh interpreter's
``sys.modules``), so an import made late, inside a function the command runs, counts too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# The stand-ins for peers and for the host and the demo that drives the daemon with them
# (DESIGN.md "Layout": never imported by production code), the journal's offline tools (the
# daemon never imports them; qrmd.forensics was their home before qrmd.offline), and the
# terminal rendering they use.
SIM_AND_OFFLINE = ("qrmd.sim", "qrmd.offline", "qrmd.forensics")
NOT_FOR_THE_DAEMON = (*SIM_AND_OFFLINE, "rich")
# What a node that leaves a subsystem off never needs (qrmd.daemon imports each one's wiring
# only when it is enabled): the advisor link, the memory balancer, CPU pressure eviction, the
# pod source's checkers; and the machine-file and YAML parsers when neither --config nor
# --topology names a file.
NOT_FOR_A_RUN_WITH_SUBSYSTEMS_OFF = (
    "qrmd.advisor.subsystem",
    "qrmd.balancer.subsystem",
    "qrmd.cpu_pressure.subsystem",
    "qrmd.pods.subsystem",
    "qrmd.host.cpu_vendor",
    "qrmd.host.migrate",
    "qrmd.host.pod_publisher",
    "actors.memory_balancer",
    "actors.cpu_pressure",
    "actors.checkers",
    "actors.advisor_link",
    "wire.advisor_client",
    "wire.advisor_server",
    "qrmd.host.machine_file",
    "yaml",
)
# The journal's offline tools: a node writes and recovers its journal without reading it back
# for forensics, walking it or repairing it.
NOT_FOR_ANY_RUN = ("journal.forensics", "journal.repair", "journal.walk", "qrmd.offline")


def _imported(stderr: str) -> set[str]:
    """Module names from ``-X importtime`` lines (``import time: self | cumulative | name``)."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                names.add(name)
    return names


def _offenders(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_qrmd_run_serves_without_importing_the_demo_simulators_rich_or_what_is_off(
    tmp_path: Path,
) -> None:
    sockets = tmp_path / "sock"
    sockets.mkdir()
    argv = [
        sys.executable, "-X", "importtime", "-m", "qrmd.cli", "run",
        "--state-dir", str(tmp_path / "state"),
        "--topology", "synthetic:cpus=16,sockets=2,numas=4",
        "--socket-dir", str(sockets),
        "--plugin-registration-dir", str(tmp_path / "reg"),
        "--metrics-address", "off",
        "--durability", "none",
    ]  # fmt: skip
    daemon = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        # Serving means started: every start-up import has happened by then.
        deadline = time.monotonic() + 60
        while not any(sockets.iterdir()):
            if daemon.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"qrmd run did not start serving: {daemon.stderr.read()[-2000:]}")  # type: ignore[union-attr]
            time.sleep(0.05)
        daemon.send_signal(signal.SIGTERM)
        _, stderr = daemon.communicate(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    modules = _imported(stderr)
    assert "qrmd.daemon" in modules  # the listing is real
    assert _offenders(modules, NOT_FOR_THE_DAEMON) == []
    assert _offenders(modules, NOT_FOR_A_RUN_WITH_SUBSYSTEMS_OFF) == []
    assert _offenders(modules, NOT_FOR_ANY_RUN) == []


@pytest.mark.parametrize(
    ("argv", "absent"),
    [
        pytest.param(
            ["journal", "--help"],
            ("qrmd.daemon", "qrmd.commands.run", "qrmd.commands.demo"),
            id="qrmd journal does not load the daemon",
        ),
        pytest.param(
            ["topology", "--topology", "synthetic:cpus=8,sockets=1,numas=1"],
            ("qrmd.daemon", "grpc", "qrmd.sim"),
            id="qrmd topology loads neither the daemon nor grpc nor the demo",
        ),
    ],
)
def test_a_forensic_command_loads_only_what_it_uses(
    argv: list[str], absent: tuple[str, ...]
) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "qrmd.cli", *argv],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert _offenders(_imported(done.stderr), absent) == []


# What `qrmd run` imports, in a fresh interpreter: the CLI's path to the run command (its
# parser and option rows), the daemon, and the wiring of each subsystem the configuration
# enables; then the modules loaded under the given prefixes.
_RUN_IMPORTS = """
import importlib, json, sys
from qrmd import cli
cli.build_parser("run")
from qrmd import daemon
from qrmd.config import load_config
from qrmd.config_values import settings_of
config = load_config(json.loads(sys.argv[1]))
entries = [e for e in daemon.SUBSYSTEMS if settings_of(e.settings, config).enabled]
for entry in entries:
    importlib.import_module(entry.module)
enabled = [e.name for e in entries]
prefixes = sys.argv[2:]
loaded = sorted(m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in prefixes))
print(json.dumps({"enabled": enabled, "loaded": loaded}))
"""


@pytest.mark.parametrize(
    ("settings", "enabled"),
    [
        pytest.param({}, ["store", "cpu_plugin"], id="qrmd run with its default subsystems"),
        pytest.param(
            {
                "enable-memory-balancer": True,
                "numa-metrics-source": "simulated:pressure=0",
                "enable-cpu-pressure-eviction": True,
                "cpu-load-metrics-source": "simulated",
                "pod-source": "kubelet",
                "enable-cpu-advisor": True,
            },
            ["store", "cpu_plugin", "balancer", "cpu_pressure", "pods", "advisor"],
            id="qrmd run with every subsystem on and the simulated sources named",
        ),
    ],
)
def test_qrmd_run_imports_no_simulator_demo_or_offline_tool(
    settings: dict[str, object], enabled: list[str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _RUN_IMPORTS, json.dumps(settings), *SIM_AND_OFFLINE],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer["enabled"] == enabled  # the wiring the daemon would build was imported
    assert answer["loaded"] == []
