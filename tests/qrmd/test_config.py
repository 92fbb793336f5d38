"""``qrmd run``'s configuration: flags, a YAML or TOML file under them, one error naming the key."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.state_store import StoreConfig
from journal import (
    DEFAULT_CHECKPOINT_EVERY_RECORDS,
    DEFAULT_CHECKPOINT_EVERY_S,
    DEFAULT_DURABILITY,
    DEFAULT_RETENTION_MAX_AGE_S,
    DEFAULT_RETENTION_MAX_BYTES,
    Retention,
)
from qrmd.config import (
    OPTIONS,
    PLUGIN_SOCKET_NAME,
    ConfigError,
    DaemonConfig,
    add_arguments,
    config_from_args,
    load_config,
    parse_duration,
)
from qrmd.config_values import settings_of
from qrmd.cpu_plugin.settings import CpuPluginSettings


def _from_argv(*argv: str) -> DaemonConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from_args(parser.parse_args(list(argv)))


def test_defaults_are_the_issues(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    config = _from_argv()
    assert config == DaemonConfig(node_name=socket.gethostname())
    assert config.state_dir == "/var/lib/qrmd"
    assert config.topology == "sysfs"
    assert config.reserved_cpu_cores == 0
    assert config.socket_dirs == ("/var/lib/kubelet/plugins_registry",)
    assert settings_of(CpuPluginSettings, config).socket_paths() == (
        "/var/lib/kubelet/plugins_registry/qrm_cpu_plugin_dynamic.sock",
    )
    assert config.transition_period_s == 30.0
    assert config.durability == "always"
    assert config.metrics_address == ("127.0.0.1", 9316)
    assert (config.max_full_hint_numa_nodes, config.max_hints) == (8, 64)
    assert (config.checkpoint_every_records, config.checkpoint_every_s) == (10_000, 300.0)


@pytest.mark.parametrize(
    ("flag", "field", "journal_default"),
    [
        pytest.param("durability", "durability", DEFAULT_DURABILITY, id="durability"),
        pytest.param(
            "checkpoint-every-records",
            "checkpoint_every_records",
            DEFAULT_CHECKPOINT_EVERY_RECORDS,
            id="the checkpoint record limit",
        ),
        pytest.param(
            "checkpoint-every",
            "checkpoint_every_s",
            DEFAULT_CHECKPOINT_EVERY_S,
            id="the checkpoint time limit",
        ),
        pytest.param(
            "journal-retention-size",
            "journal_retention_max_bytes",
            DEFAULT_RETENTION_MAX_BYTES,
            id="the retention size",
        ),
        pytest.param(
            "journal-retention-age",
            "journal_retention_max_age_s",
            DEFAULT_RETENTION_MAX_AGE_S,
            id="the retention age",
        ),
    ],
)
def test_the_journal_options_default_to_the_journals_own_defaults(
    flag: str, field: str, journal_default: object
) -> None:
    """One definition: the help's default, the config's and the store's are the journal's."""
    option = next(o for o in OPTIONS if o.flag == flag)
    assert option.parse(option.default) == journal_default  # what --help and docs/flags.md show
    assert getattr(DaemonConfig(), field) == journal_default
    store = StoreConfig("/j", "node")
    retention = store.retention or Retention()  # None: the journal's own Retention()
    by_field = {
        "journal_retention_max_bytes": retention.max_bytes,
        "journal_retention_max_age_s": retention.max_age_s,
    }
    assert by_field.get(field, getattr(store, field, None)) == journal_default


def test_the_node_name_comes_from_the_environment_then_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NODE_NAME", "node-from-downward-api")
    assert _from_argv().node_name == "node-from-downward-api"
    assert _from_argv("--node-name", "n1").node_name == "n1"


def test_every_flag_from_the_command_line() -> None:
    config = _from_argv(
        "--state-dir", "/tmp/st", "--topology", "synthetic:cpus=16,sockets=2,numas=4",
        "--reserved-cpu-cores", "2", "--socket-dir", "/tmp/a", "--socket-dir", "/tmp/b",
        "--transition-period", "1m30s", "--enable-reclaim",
        "--qos-enhancement-default", "numa_binding=true",
        "--qos-enhancement-default", "cpuset_pool=batch",
        "--pod-debug-anno-key", "debug.io/a", "--pod-debug-anno-key", "debug.io/b",
        "--durability", "none", "--metrics-address", "off", "--log-level", "DEBUG",
        "--log-format", "json", "--node-name", "node-7",
        "--max-full-hint-numa-nodes", "4", "--max-hints", "16",
        "--checkpoint-every-records", "500", "--checkpoint-every", "1m30s",
    )  # fmt: skip
    assert config == DaemonConfig(
        state_dir="/tmp/st",
        topology="synthetic:cpus=16,sockets=2,numas=4",
        reserved_cpu_cores=2,
        socket_dirs=("/tmp/a", "/tmp/b"),
        transition_period_s=90.0,
        enable_reclaim=True,
        qos_enhancement_defaults=(("numa_binding", "true"), ("cpuset_pool", "batch")),
        pod_debug_anno_keys=("debug.io/a", "debug.io/b"),
        durability="none",
        metrics_address=None,
        log_level="debug",
        log_format="json",
        node_name="node-7",
        max_full_hint_numa_nodes=4,
        max_hints=16,
        checkpoint_every_records=500,
        checkpoint_every_s=90.0,
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("0s", 0.0, id="zero with a unit"),
        pytest.param("0", 0.0, id="a bare zero, as Go accepts"),
        pytest.param("10ms", 0.01, id="milliseconds"),
        pytest.param("1m30s", 90.0, id="minutes and seconds"),
        pytest.param("30s", 30.0, id="the default"),
        pytest.param("1.5h", 5400.0, id="a fraction of hours"),
        pytest.param("250us", 0.00025, id="microseconds"),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["", "3x", "30", "s", "-1s", "1m 30s", "1m30", "ms10", "1.2.3s"],
    ids=repr,
)
def test_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a duration \(use 0s, 10ms, 1m30s\)"):
        parse_duration(text)


@given(st.integers(0, 10**6), st.integers(0, 59), st.integers(0, 999))
@settings(max_examples=50)
def test_durations_add_up(minutes: int, seconds: int, millis: int) -> None:
    assert parse_duration(f"{minutes}m{seconds}s{millis}ms") == pytest.approx(
        minutes * 60 + seconds + millis / 1000
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            {"transition-period": "3x"},
            "--transition-period: '3x' is not a duration (use 0s, 10ms, 1m30s)",
            id="a duration without a unit is refused with the brief's words",
        ),
        pytest.param(
            {"reserved-cpu-cores": "two"},
            "--reserved-cpu-cores: 'two' is not a whole number",
            id="reserved cores not a number",
        ),
        pytest.param(
            {"reserved-cpu-cores": "-1"},
            "--reserved-cpu-cores: -1 is below the minimum 0",
            id="negative reserved cores",
        ),
        pytest.param(
            {"durability": "sometimes"},
            "--durability: 'sometimes' is not one of always, none",
            id="unknown durability",
        ),
        pytest.param(
            {"metrics-address": "9316"},
            "--metrics-address: '9316' is not HOST:PORT or off",
            id="a port without a host",
        ),
        pytest.param(
            {"metrics-address": "localhost:99999"},
            "--metrics-address: 'localhost:99999' is not HOST:PORT or off",
            id="a port out of range",
        ),
        pytest.param(
            {"log-format": "xml"},
            "--log-format: 'xml' is not one of text, json",
            id="unknown log format",
        ),
        pytest.param(
            {"log-level": "loud"},
            "--log-level: 'loud' is not one of debug, info, warning, error",
            id="unknown log level",
        ),
        pytest.param(
            {"qos-enhancement-default": ["numa_binding"]},
            "--qos-enhancement-default: 'numa_binding' is not KEY=VALUE",
            id="an enhancement default without a value",
        ),
        pytest.param(
            {"max-hints": "0"}, "--max-hints: 0 is below the minimum 1", id="no hints at all"
        ),
        pytest.param(
            {"state-dir": ""}, "--state-dir: must not be empty", id="an empty state directory"
        ),
        pytest.param(
            {"checkpoint-every-records": "0"},
            "--checkpoint-every-records: 0 is below the minimum 1",
            id="a checkpoint after no records",
        ),
        pytest.param(
            {"checkpoint-every-records": "1e4"},
            "--checkpoint-every-records: '1e4' is not a whole number",
            id="a record count not a whole number",
        ),
        pytest.param(
            {"checkpoint-every": "300"},
            "--checkpoint-every: '300' is not a duration (use 0s, 10ms, 1m30s)",
            id="a checkpoint interval without a unit",
        ),
        pytest.param(
            {"checkpoint-every": "500ms"},
            "--checkpoint-every: '500ms' is shorter than the minimum 1s",
            id="a checkpoint interval under a second",
        ),
        pytest.param(
            {"checkpoint-every": "0s"},
            "--checkpoint-every: '0s' is shorter than the minimum 1s",
            id="no checkpoint interval",
        ),
    ],
)
def test_a_bad_value_names_its_key(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(flags)
    assert str(err.value) == message


def test_a_socket_path_too_long_is_refused_before_anything_starts() -> None:
    deep = "/tmp/" + "d" * 80
    with pytest.raises(ConfigError) as err:
        load_config({"socket-dir": ["/tmp/ok", deep]})
    path = f"{deep}/{PLUGIN_SOCKET_NAME}"
    assert str(err.value) == (
        f"--socket-dir: socket path {path} is {len(path)} bytes, longer than a unix socket "
        "allows (107); choose a shorter socket directory"
    )


def test_the_longest_socket_path_that_fits() -> None:
    room = 107 - len("/" + PLUGIN_SOCKET_NAME)
    directory = "/tmp/" + "d" * (room - len("/tmp/"))
    config = load_config({"socket-dir": [directory]})
    assert len(settings_of(CpuPluginSettings, config).socket_paths()[0]) == 107
    with pytest.raises(ConfigError, match="108 bytes"):
        load_config({"socket-dir": [directory + "d"]})


def test_a_socket_dir_given_twice_serves_once() -> None:
    assert load_config({"socket-dir": ["/tmp/a", "/tmp/b", "/tmp/a"]}).socket_dirs == (
        "/tmp/a",
        "/tmp/b",
    )


YAML_FILE = """\
state-dir: /srv/qrmd
reserved_cpu_cores: 2
socket-dir: [/tmp/k1, /tmp/k2]
transition-period: 10ms
enable-reclaim: true
qos-enhancement-default: {numa_binding: "true"}
metrics-address: off
checkpoint-every: 10m
checkpoint_every_records: 2000
"""

TOML_FILE = """\
state-dir = "/srv/qrmd"
reserved_cpu_cores = 2
socket-dir = ["/tmp/k1", "/tmp/k2"]
transition-period = "10ms"
enable-reclaim = true
qos-enhancement-default = ["numa_binding=true"]
metrics-address = "off"
checkpoint-every = "10m"
checkpoint_every_records = 2000
"""


@pytest.mark.parametrize(
    ("name", "text"),
    [
        pytest.param("qrmd.yaml", YAML_FILE, id="YAML with dashes and underscores"),
        pytest.param("qrmd.toml", TOML_FILE, id="TOML with dashes and underscores"),
    ],
)
def test_a_config_file(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    config = load_config({}, str(path))
    assert config.state_dir == "/srv/qrmd"
    assert config.reserved_cpu_cores == 2
    assert config.socket_dirs == ("/tmp/k1", "/tmp/k2")
    assert config.transition_period_s == pytest.approx(0.01)
    assert config.enable_reclaim is True
    assert config.qos_enhancement_defaults == (("numa_binding", "true"),)
    assert config.metrics_address is None
    assert (config.checkpoint_every_records, config.checkpoint_every_s) == (2000, 600.0)
    assert config.config_file == str(path)


def test_flags_win_over_the_file_and_replace_its_lists(tmp_path: Path) -> None:
    path = tmp_path / "qrmd.yaml"
    path.write_text(YAML_FILE)
    config = _from_argv(
        "--config", str(path), "--reserved-cpu-cores", "4", "--socket-dir", "/tmp/only"
    )
    assert config.reserved_cpu_cores == 4
    assert config.socket_dirs == ("/tmp/only",)
    assert config.state_dir == "/srv/qrmd"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        pytest.param(
            "q.yaml", "transition-period: 3x\n",
            "--transition-period (in {path}): '3x' is not a duration (use 0s, 10ms, 1m30s)",
            id="a bad file value names the key and the file",
        ),
        pytest.param(
            "q.yaml", "transition-period: 30\n",
            "--transition-period (in {path}): 30 is not a duration (use 0s, 10ms, 1m30s)",
            id="a bare number of seconds is ambiguous",
        ),
        pytest.param(
            "q.yaml", "socket-dirs: [/tmp/a]\n",
            "{path}: unknown key 'socket-dirs'; keys are the flag names of --help",
            id="an unknown key (the reference's plural) is named",
        ),
        pytest.param(
            "q.yaml", "enable-reclaim: maybe\n",
            "--enable-reclaim (in {path}): 'maybe' is not true or false", id="a bad switch",
        ),
        pytest.param(
            "q.yaml", "- state-dir\n",
            "--config: '{path}' must hold a mapping of flag names to values",
            id="a list instead of a mapping",
        ),
        pytest.param(
            "q.toml", "state-dir = \n",
            "--config: '{path}' is not valid TOML: ", id="broken TOML",
        ),
        pytest.param(
            "q.json", "{}", "--config: '{path}' is neither YAML (.yaml, .yml) nor TOML (.toml)",
            id="an unknown file kind",
        ),
    ],
)  # fmt: skip
def test_a_bad_file(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config({}, str(path))
    assert str(err.value).startswith(message.format(path=path))
    assert "\n" not in str(err.value)


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--config: cannot read .*No such file"):
        load_config({}, str(tmp_path / "absent.yaml"))


def test_help_explains_every_flag_with_its_default_and_reference() -> None:
    # Wide, so that argparse does not break a flag name at its hyphens.
    parser = argparse.ArgumentParser(
        formatter_class=lambda prog, **kw: argparse.HelpFormatter(prog, width=999)
    )
    add_arguments(parser)
    text = " ".join(parser.format_help().split())
    for opt in OPTIONS:
        assert f"--{opt.flag}" in text
        assert " ".join(opt.help_text().split()) in text
    for reference in (
        "--qrm-state-dir",
        "--cpu-resource-plugin-reserved",
        "--qrm-socket-dirs",
        "--qos-enhancement-default-values",
        "--qrm-pod-debug-anno-keys",
        "--enable-reclaim",
    ):
        assert f"reference: {reference}" in text
