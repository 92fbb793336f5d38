"""The advisor link's flags (qrmd.advisor.settings): names, defaults, checks, enabling."""

from __future__ import annotations

import pytest

from policy.cpu.advisor import decision
from qrmd.advisor.settings import (
    ADVISOR_LINK_WIRED,
    DEFAULT_CPU_ADVISOR_SOCKET,
    DEFAULT_CPU_PLUGIN_SOCKET,
    DEFAULT_UNHEALTHY_AFTER_S,
    AdvisorLinkConfig,
)
from qrmd.config import ConfigError, load_config


def test_the_defaults_are_the_references():
    config = load_config({}).cpu_advisor
    assert config == AdvisorLinkConfig()
    assert config.advisor_socket == DEFAULT_CPU_ADVISOR_SOCKET
    assert config.plugin_socket == DEFAULT_CPU_PLUGIN_SOCKET
    assert (config.unhealthy_after_s, config.call_timeout_s) == (300.0, 2.0)
    assert not config.enabled


def test_the_unhealthy_after_default_is_the_one_the_advisor_decisions_use():
    assert DEFAULT_UNHEALTHY_AFTER_S == decision.DEFAULT_UNHEALTHY_AFTER_S
    assert AdvisorLinkConfig().unhealthy_after_s == DEFAULT_UNHEALTHY_AFTER_S


def test_the_flags_set_the_link():
    config = load_config(
        {
            "cpu-advisor-socket": "/run/a.sock",
            "cpu-plugin-socket": "/run/p.sock",
            "cpu-advisor-unhealthy-after": "90s",
            "cpu-advisor-call-timeout": "500ms",
        }
    ).cpu_advisor
    assert config == AdvisorLinkConfig(False, "/run/a.sock", "/run/p.sock", 90.0, 0.5)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            {"cpu-advisor-call-timeout": "0s"},
            "--cpu-advisor-call-timeout:",
            id="a zero call timeout is refused",
        ),
        pytest.param(
            {"cpu-advisor-unhealthy-after": "soon"},
            "--cpu-advisor-unhealthy-after:",
            id="a malformed duration is refused",
        ),
        pytest.param(
            {"cpu-advisor-socket": "relative.sock"},
            "--cpu-advisor-socket: 'relative.sock' is not an absolute path",
            id="a relative socket path is refused",
        ),
        pytest.param(
            {"cpu-plugin-socket": "/" + "x" * 120},
            "--cpu-plugin-socket: socket path",
            id="a socket path too long for a unix socket is refused",
        ),
        pytest.param(
            {"cpu-plugin-socket": DEFAULT_CPU_ADVISOR_SOCKET},
            "is also --cpu-advisor-socket",
            id="one path for both sockets is refused",
        ),
    ],
)
def test_bad_advisor_settings_are_refused(flags, message):
    with pytest.raises(ConfigError) as caught:
        load_config(flags)
    assert message in str(caught.value)


def test_enabling_the_link_is_accepted_now_that_qrmd_run_wires_it() -> None:
    assert ADVISOR_LINK_WIRED
    assert load_config({"enable-cpu-advisor": True}).cpu_advisor.enabled
