"""Each subsystem's settings are a frozen dataclass of plain values read from the validated
configuration in one place (``qrmd.config_values.settings_of``), and each declares the unix
sockets it serves: the configuration refuses any declared path a unix socket cannot hold,
naming the flag that placed it, and the daemon counts every capped one against the
open-file limit (``qrmd.subsystem``, ``qrmd.config.declared_sockets``).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping

import pytest

from qrmd.config import SUBSYSTEM_SETTINGS, ConfigError, DaemonConfig, declared_sockets, load_config
from qrmd.config_values import Socket, settings_of
from qrmd.cpu_plugin.settings import CpuPluginSettings
from qrmd.daemon import SUBSYSTEMS

#: The daemon's own settings (``DAEMON_OPTIONS`` and where they were read from), read by
#: ``qrmd.daemon`` and ``qrmd.commands.run`` rather than by a subsystem.
DAEMON_OWN = {"metrics_address", "log_level", "log_format", "config_file"}
CONFIG_FIELDS = {f.name: f for f in dataclasses.fields(DaemonConfig)}
CONFIG_HINTS = typing.get_type_hints(DaemonConfig)
#: Short enough for every socket name under it; and one too long for any.
SHORT = "/tmp/qs"
LONG = "/tmp/" + "d" * 100


def _default(f: dataclasses.Field[object]) -> object:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


@pytest.mark.parametrize("kind", SUBSYSTEM_SETTINGS, ids=lambda kind: kind.__name__)
def test_a_settings_field_is_the_configurations_field_of_its_name_type_and_default(
    kind: type,
) -> None:
    hints = typing.get_type_hints(kind)
    assert dataclasses.is_dataclass(kind)
    for f in dataclasses.fields(kind):
        assert f.name in CONFIG_FIELDS, f"{kind.__name__}.{f.name} is no DaemonConfig field"
        assert hints[f.name] == CONFIG_HINTS[f.name], f"{kind.__name__}.{f.name}'s type"
        assert _default(f) == _default(CONFIG_FIELDS[f.name]), f"{kind.__name__}.{f.name}"


@pytest.mark.parametrize("kind", SUBSYSTEM_SETTINGS, ids=lambda kind: kind.__name__)
def test_settings_are_frozen(kind: type) -> None:
    settings = kind()
    name = dataclasses.fields(settings)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(settings, name, getattr(settings, name))


def test_every_setting_but_the_daemons_own_belongs_to_a_subsystem() -> None:
    read = {f.name for kind in SUBSYSTEM_SETTINGS for f in dataclasses.fields(kind)}
    assert set(CONFIG_FIELDS) - read == DAEMON_OWN, (
        "add the new DaemonConfig field to its subsystem's settings dataclass"
    )


def test_the_daemons_list_and_the_configurations_name_the_same_settings_in_order() -> None:
    assert tuple(entry.settings for entry in SUBSYSTEMS) == SUBSYSTEM_SETTINGS


def test_settings_are_read_from_the_validated_configuration() -> None:
    config = load_config({"socket-dir": ["/tmp/a", "/tmp/b"], "max-connections": "64"})
    settings = settings_of(CpuPluginSettings, config)
    assert (settings.socket_dirs, settings.max_connections) == (("/tmp/a", "/tmp/b"), 64)


def _flags(**flags: object) -> Mapping[str, object]:
    return {"socket-dir": [SHORT], "plugin-registration-dir": SHORT, **flags}


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param(
            _flags(),
            [Socket("socket-dir", f"{SHORT}/qrm_cpu_plugin_dynamic.sock", 1024)],
            id="a node with nothing enabled serves one plugin socket per socket directory",
        ),
        pytest.param(
            _flags(**{"socket-dir": ["/tmp/a", "/tmp/b"], "max-connections": "64"}),
            [
                Socket("socket-dir", "/tmp/a/qrm_cpu_plugin_dynamic.sock", 64),
                Socket("socket-dir", "/tmp/b/qrm_cpu_plugin_dynamic.sock", 64),
            ],
            id="each socket directory's plugin socket is capped at --max-connections",
        ),
        pytest.param(
            _flags(**{"enable-memory-balancer": True, "max-connections": "64"}),
            [
                Socket("socket-dir", f"{SHORT}/qrm_cpu_plugin_dynamic.sock", 64),
                Socket("plugin-registration-dir", f"{SHORT}/numa_memory_balancer.sock", 64),
            ],
            id="the balancer's eviction socket counts as one more capped plugin socket",
        ),
        pytest.param(
            _flags(**{"enable-cpu-pressure-eviction": True}),
            [
                Socket("socket-dir", f"{SHORT}/qrm_cpu_plugin_dynamic.sock", 1024),
                Socket("plugin-registration-dir", f"{SHORT}/cpu-pressure-load-plugin.sock"),
                Socket("plugin-registration-dir", f"{SHORT}/cpu-pressure-suppression-plugin.sock"),
            ],
            id="the CPU pressure plugins' two sockets are declared but not counted for the cap",
        ),
        pytest.param(
            _flags(**{"enable-cpu-advisor": True, "cpu-plugin-socket": "/tmp/qs/cpu.sock"}),
            [
                Socket("socket-dir", f"{SHORT}/qrm_cpu_plugin_dynamic.sock", 1024),
                Socket("cpu-plugin-socket", "/tmp/qs/cpu.sock"),
            ],
            id="the advisor link serves GetCheckpoint on its own uncapped socket",
        ),
    ],
)
def test_the_enabled_subsystems_declare_the_sockets_they_serve(
    flags: Mapping[str, object], expected: list[Socket]
) -> None:
    assert list(declared_sockets(load_config(flags))) == expected


@pytest.mark.parametrize(
    ("flags", "refused"),
    [
        pytest.param(
            {"socket-dir": [LONG]}, "--socket-dir", id="a long socket directory is refused"
        ),
        pytest.param(
            {"plugin-registration-dir": LONG},
            "",
            id="a long registration directory is accepted while nothing serves there",
        ),
        pytest.param(
            {"plugin-registration-dir": LONG, "enable-memory-balancer": True},
            "--plugin-registration-dir",
            id="a long registration directory is refused when the balancer serves there",
        ),
        pytest.param(
            {"plugin-registration-dir": LONG, "enable-cpu-pressure-eviction": True},
            "--plugin-registration-dir",
            id="a long registration directory is refused when the CPU pressure plugins serve there",
        ),
    ],
)
def test_a_declared_socket_path_too_long_is_refused_naming_its_flag(
    flags: Mapping[str, object], refused: str
) -> None:
    if not refused:
        load_config(flags)
        return
    with pytest.raises(ConfigError) as err:
        load_config(flags)
    assert str(err.value).startswith(f"{refused}: socket path ")
    assert str(err.value).endswith(
        "longer than a unix socket allows (107); choose a shorter socket directory"
    )
