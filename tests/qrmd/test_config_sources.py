"""Where settings come from: flag > environment (``QRMD_<FLAG>``) > file; duplicate file keys;
``--help`` grouped by concern (operator basics)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from qrmd.config import (
    OPTIONS,
    ConfigError,
    add_arguments,
    env_name,
    environment_values,
    help_group,
    load_config,
)


@pytest.mark.parametrize(
    ("file_value", "env_value", "flag_value", "want"),
    [
        pytest.param("3", None, None, 3, id="the file alone sets it"),
        pytest.param("3", "2", None, 2, id="the environment wins over the file"),
        pytest.param("3", "2", "1", 1, id="a flag wins over both"),
        pytest.param(None, "2", None, 2, id="the environment alone sets it"),
    ],
)
def test_flag_beats_environment_beats_file(
    tmp_path: Path, file_value: str | None, env_value: str | None, flag_value: str | None, want: int
) -> None:
    config_file = tmp_path / "qrmd.yaml"
    config_file.write_text(f"reserved_cpu_cores: {file_value}\n" if file_value else "{}\n")
    environ = {} if env_value is None else {"QRMD_RESERVED_CPU_CORES": env_value}
    flags = {} if flag_value is None else {"reserved-cpu-cores": flag_value}
    config = load_config(flags, str(config_file), environment_values(environ))
    assert config.reserved_cpu_cores == want


def test_repeatable_and_key_value_flags_take_comma_separated_lists() -> None:
    environ = {
        "QRMD_SOCKET_DIR": "/tmp/a,/tmp/b",
        "QRMD_QOS_ENHANCEMENT_DEFAULT": "numa_binding=false,cpuset_pool=batch",
    }
    config = load_config({}, None, environment_values(environ))
    assert config.socket_dirs == ("/tmp/a", "/tmp/b")
    assert config.qos_enhancement_defaults == (("numa_binding", "false"), ("cpuset_pool", "batch"))


def test_a_bad_environment_value_names_its_variable() -> None:
    with pytest.raises(ConfigError, match=r"--transition-period \(from \$QRMD_TRANSITION_PERIOD\)"):
        load_config({}, None, environment_values({"QRMD_TRANSITION_PERIOD": "3x"}))


def test_every_flag_has_an_environment_variable() -> None:
    assert env_name("state-dir") == "QRMD_STATE_DIR"
    names = [env_name(o.flag) for o in OPTIONS]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            "reserved_cpu_cores: 2\nreserved-cpu-cores: 3\n", id="yaml with both spellings"
        ),
    ],
)
def test_a_key_given_twice_in_a_file_is_an_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "qrmd.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="'reserved_cpu_cores' and 'reserved-cpu-cores'"):
        load_config({}, str(path))


def test_a_key_given_twice_in_a_toml_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "qrmd.toml"
    path.write_text('reserved_cpu_cores = 2\n"reserved-cpu-cores" = 3\n')
    with pytest.raises(ConfigError, match="both set --reserved-cpu-cores"):
        load_config({}, str(path))


def test_help_is_grouped_by_subsystem() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    text = parser.format_help()
    for title in (
        "CPU plugin options:",
        "state store options:",
        "sys-advisor link options:",
        "memory balancer options:",
        "pod source and checkers options:",
        "CPU pressure eviction options:",
        "metrics, health and logs options:",
    ):
        assert title in text
    assert help_group(next(o for o in OPTIONS if o.flag == "state-dir")) == "state store"
    assert help_group(next(o for o in OPTIONS if o.flag == "socket-dir")) == "CPU plugin"
