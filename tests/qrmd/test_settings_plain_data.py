"""Reading the settings is plain data (DESIGN.md "Layout": each subsystem's settings): importing
``qrmd.config`` or a subsystem's settings module loads the standard library and qrmd's own
settings modules, never gRPC, protobuf, pykka, prometheus_client, ``wire``, ``actors`` or
asyncio; and where a setting's default is a value ``wire`` also holds, the two agree.

The imports are checked in a fresh interpreter: this test process has long loaded everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qrmd.balancer.settings import DEFAULT_PLUGIN_REGISTRATION_DIR
from qrmd.config_values import MAX_SOCKET_PATH_BYTES
from qrmd.cpu_plugin.settings import DEFAULT_MAX_CONNECTIONS, PLUGIN_NAME
from wire import eviction_server, plugin_server, plugin_socket, sockets

ROOT = Path(__file__).resolve().parents[2]
#: Top-level packages a settings import must not load.
HEAVY = ("grpc", "grpc_tools", "google", "pykka", "prometheus_client", "wire", "actors", "asyncio")
SETTINGS_MODULES = (
    "qrmd.config",
    "qrmd.config_values",
    "qrmd.store.settings",
    "qrmd.store.takeover_settings",
    "qrmd.cpu_plugin.settings",
    "qrmd.cpu_plugin.connection_cap",
    "qrmd.advisor.settings",
    "qrmd.pods.settings",
    "qrmd.balancer.settings",
    "qrmd.cpu_pressure.settings",
)


def _heavy_loaded_by(module: str) -> list[str]:
    probe = (
        f"import json, sys; import {module}; "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


@pytest.mark.parametrize("module", SETTINGS_MODULES)
def test_importing_the_settings_loads_nothing_heavy(module: str) -> None:
    assert _heavy_loaded_by(module) == []


@pytest.mark.parametrize(
    ("settings_value", "wire_value"),
    [
        pytest.param(PLUGIN_NAME, plugin_server.PLUGIN_NAME, id="the plugin socket's name"),
        pytest.param(
            DEFAULT_MAX_CONNECTIONS,
            plugin_socket.DEFAULT_MAX_CONNECTIONS,
            id="the connection cap's default",
        ),
        pytest.param(
            DEFAULT_PLUGIN_REGISTRATION_DIR,
            str(eviction_server.DEFAULT_SOCKET_DIR),
            id="the eviction plugins' registration directory",
        ),
        pytest.param(
            MAX_SOCKET_PATH_BYTES, sockets.MAX_SOCKET_PATH_BYTES, id="the longest socket path"
        ),
    ],
)
def test_a_default_the_settings_share_with_wire_is_the_same(
    settings_value: object, wire_value: object
) -> None:
    assert settings_value == wire_value
