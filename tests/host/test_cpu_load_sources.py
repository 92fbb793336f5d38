"""Containers' CPU load for the load pressure plugin: the collector's JSON file (with an
injected clock for staleness), a real HTTP server serving Prometheus text, the fixed source, and
the ``--cpu-load-metrics-source`` SPEC. A load that cannot be read is a ``MissingLoad`` with
its reason, never 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actors.ports.cpu_load import ContainerLoadSource, MissingLoad
from qrmd.host.cpu_load_sources import (
    FileContainerLoads,
    FixedContainerLoads,
    PrometheusContainerLoads,
    build_container_load_source,
)
from tests.host.test_metric_sources import Exporter, exporter  # noqa: F401 (the fixture)

NOW = 1_795_994_721.0
WANTED = [("uid-web", "main"), ("uid-api", "main")]


def write(path: Path, document: object) -> Path:
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_every_source_is_a_container_load_source(tmp_path: Path) -> None:
    for source in (
        FileContainerLoads(tmp_path / "x"),
        PrometheusContainerLoads("http://127.0.0.1:1/metrics"),
        FixedContainerLoads(),
    ):
        assert isinstance(source, ContainerLoadSource)


def test_the_file_gives_each_containers_load(tmp_path: Path) -> None:
    path = write(
        tmp_path / "load.json",
        {"timestamp": NOW - 10, "containers": {"uid-web/main": 3.5, "uid-api/main": 0}},
    )
    source = FileContainerLoads(path, max_age_s=90, clock=lambda: NOW)
    assert source.sample(WANTED) == {("uid-web", "main"): 3.5, ("uid-api", "main"): 0.0}


@pytest.mark.parametrize(
    ("document", "web", "api"),
    [
        pytest.param(
            {"containers": {"uid-web/main": 1}},
            1.0,
            "no load for uid-api/main",
            id="a container absent from the file is missing, not 0",
        ),
        pytest.param(
            {"containers": {"uid-web/main": -1, "uid-api/main": "2"}},
            "-1 is not a non-negative number",
            "'2' is not a number",
            id="a negative or textual load is missing",
        ),
        pytest.param(
            {"timestamp": NOW - 91, "containers": {"uid-web/main": 1, "uid-api/main": 1}},
            "stale (91 s old)",
            "stale (91 s old)",
            id="a file older than the maximum age makes every load missing",
        ),
        pytest.param("{not json", "not JSON", "not JSON", id="malformed JSON"),
        pytest.param([1, 2], "expected", "expected", id="not a map of containers"),
    ],
)
def test_what_the_file_cannot_give_is_missing_with_its_reason(
    tmp_path: Path, document: object, web: object, api: object
) -> None:
    path = write(tmp_path / "load.json", document)
    got = FileContainerLoads(path, max_age_s=90, clock=lambda: NOW).sample(WANTED)
    for key, want in zip(WANTED, (web, api), strict=True):
        if isinstance(want, str):
            value = got[key]
            assert isinstance(value, MissingLoad) and want in value.reason, value
        else:
            assert got[key] == want


def test_no_file_makes_every_load_missing(tmp_path: Path) -> None:
    got = FileContainerLoads(tmp_path / "absent.json").sample(WANTED)
    assert all(isinstance(v, MissingLoad) and "absent.json" in v.reason for v in got.values())


PROMETHEUS_TEXT = """\
# TYPE cpu_load_1min_container gauge
cpu_load_1min_container{pod_uid="uid-web",container="main"} 4.25
cpu_load_1min_container{pod_uid="uid-api",container="main",host="a"} 1
cpu_load_1min_container{pod_uid="uid-api",container="main",host="b"} 2
unrelated 7
"""


def test_prometheus_scrape_over_http(exporter: Exporter) -> None:  # noqa: F811
    exporter.body = PROMETHEUS_TEXT
    got = PrometheusContainerLoads(exporter.url).sample(WANTED)
    assert got[("uid-web", "main")] == 4.25
    api = got[("uid-api", "main")]
    assert isinstance(api, MissingLoad) and "2 samples" in api.reason


def test_a_failed_scrape_makes_every_load_missing(exporter: Exporter) -> None:  # noqa: F811
    exporter.status = 500
    got = PrometheusContainerLoads(exporter.url).sample(WANTED)
    assert all(isinstance(v, MissingLoad) and "scrape of" in v.reason for v in got.values())


def test_the_fixed_source_answers_what_it_was_built_with_and_idle_otherwise() -> None:
    source = FixedContainerLoads({("uid-web", "main"): 9.0})
    assert source.sample(WANTED) == {
        ("uid-web", "main"): 9.0,
        ("uid-api", "main"): 0.0,
    }


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        pytest.param("file", FileContainerLoads, id="file"),
        pytest.param("file:/tmp/l.json", FileContainerLoads, id="file with a path"),
        pytest.param("prometheus:http://127.0.0.1:9/m", PrometheusContainerLoads, id="prometheus"),
        pytest.param("simulated", FixedContainerLoads, id="simulated"),
    ],
)
def test_the_spec_names_the_source(spec: str, kind: type) -> None:
    assert isinstance(build_container_load_source(spec), kind)


@pytest.mark.parametrize(
    "spec", ["cgroup", "prometheus:ftp://x", "psi", "simulated:pressure=1"], ids=repr
)
def test_an_unknown_spec_is_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        build_container_load_source(spec)


def test_the_file_default_path(tmp_path: Path) -> None:
    source = build_container_load_source("file")
    assert isinstance(source, FileContainerLoads)
    assert str(source.path) == "/run/qrmd/cpu-load.json"


def test_a_body_cut_short_makes_every_load_missing(exporter: Exporter) -> None:  # noqa: F811
    exporter.body = PROMETHEUS_TEXT
    exporter.promised_extra_bytes = 100
    got = PrometheusContainerLoads(exporter.url, timeout_s=1).sample(WANTED)
    assert all(isinstance(v, MissingLoad) and "scrape of" in v.reason for v in got.values())
