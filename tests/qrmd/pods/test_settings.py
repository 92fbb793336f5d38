"""The pod source's flags (qrmd.pods.settings through qrmd.config.load_config)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qrmd.config import ConfigError, load_config
from qrmd.pods.settings import DEFAULT_API_AUTH_TOKEN_FILE, PodSourceSettings


def test_the_defaults_are_katalyst_agents_and_no_pod_source() -> None:
    settings = load_config({}).pod_source
    assert settings == PodSourceSettings()
    assert not settings.enabled
    assert (settings.kubelet_read_only_port, settings.kubelet_secure_port) == (10255, 10250)
    assert settings.api_auth_token_file == DEFAULT_API_AUTH_TOKEN_FILE
    assert (settings.residual_check_period_s, settings.residual_max_age_s) == (30.0, 300.0)
    assert settings.residual_sightings == 10  # §12.4: 10 consecutive 30-s rounds
    assert settings.cpuset_check_period_s == 10.0 and settings.fetch_period_s == 10.0
    assert settings.reclaim_relative_root_cgroup_path == "/kubepods/besteffort"
    assert settings.endpoint().url == "http://localhost:10255/pods"


def test_the_secure_port_with_its_token_and_ca() -> None:
    settings = load_config(
        {
            "pod-source": "kubelet",
            "enable-kubelet-secure-port": True,
            "node-address": "10.0.0.7",
            "kubelet-secure-port": "10443",
            "kubelet-pods-endpoint": "/pods/",
            "api-auth-token-file": "/run/token",
            "kubelet-ca-file": "/etc/kubelet-ca.crt",
            "cpuset-cgroup-root": "/sys/fs/cgroup",
        }
    ).pod_source
    endpoint = settings.endpoint()
    assert endpoint.url == "https://10.0.0.7:10443/pods/"
    assert (endpoint.token_file, endpoint.ca_file) == ("/run/token", "/etc/kubelet-ca.crt")
    assert settings.cpuset_cgroup_root == Path("/sys/fs/cgroup")


@pytest.mark.parametrize(
    ("period", "age", "sightings"),
    [
        pytest.param("30s", "5m", 10, id="the reference's numbers give ten sightings"),
        pytest.param("1s", "5s", 5, id="an age that is a whole number of periods"),
        pytest.param("2s", "5s", 3, id="an age between periods rounds up to the next sighting"),
        pytest.param("5s", "5s", 1, id="an age of one period removes at the first sighting"),
    ],
)
def test_residual_sightings(period: str, age: str, sightings: int) -> None:
    flags = {"residual-check-period": period, "residual-max-age": age}
    assert load_config(flags).pod_source.residual_sightings == sightings


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param({"pod-source": "apiserver"}, "--pod-source: 'apiserver' is not one of",
                     id="an unknown pod source names the choices"),
        pytest.param({"kubelet-read-only-port": "70000"}, "--kubelet-read-only-port: 70000 is not",
                     id="a port beyond 65535 is refused"),
        pytest.param({"kubelet-pods-endpoint": "pods"}, "--kubelet-pods-endpoint: 'pods' must",
                     id="an endpoint path must be absolute"),
        pytest.param({"residual-max-age": "0s"}, "--residual-max-age: '0s' must be longer",
                     id="a zero max age is refused"),
        pytest.param({"pod-source": "kubelet", "enable-kubelet-secure-port": True},
                     "--enable-kubelet-secure-port needs --node-address",
                     id="the secure port needs the node address"),
        pytest.param({"residual-check-period": "1m", "residual-max-age": "30s"},
                     r"--residual-max-age \(30 s\) is shorter than --residual-check-period \(60",
                     id="a max age shorter than the period is refused with both numbers"),
        pytest.param({"enable-syncing-cpu-idle": True},
                     "--enable-syncing-cpu-idle needs --pod-source kubelet",
                     id="syncing cpu idle runs with the checkers, which need a pod source"),
        pytest.param({"pod-source": "kubelet", "enable-syncing-cpu-idle": True,
                      "reclaim-relative-root-cgroup-path": "/"},
                     "--enable-syncing-cpu-idle needs --reclaim-relative-root-cgroup-path",
                     id="syncing cpu idle needs the reclaim cgroup path, as the reference's Start"),
    ],
)  # fmt: skip
def test_bad_values_name_the_flag(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(flags)
