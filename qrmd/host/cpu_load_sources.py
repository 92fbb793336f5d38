"""Containers' 1-minute CPU load for the load pressure plugin: the ``ContainerLoadSource``
adapters and ``--cpu-load-metrics-source`` (spec cpu-policy §12.7; katalyst-core v0.5.3 reads
``cpu.load.1min.container`` from its metrics server).

==============================  ==============================================================
SPEC                            the source
==============================  ==============================================================
``file`` / ``file:PATH``        a JSON file an external collector rewrites (default
                                ``/run/qrmd/cpu-load.json``)
``prometheus:URL``              a Prometheus text endpoint, metric ``cpu_load_1min_container``
                                with labels ``pod_uid`` and ``container``
``simulated``                   every container idle: load 0 (the demo; trying the plugins)
==============================  ==============================================================

The file (write a temporary file and rename it over the old one)::

    {"timestamp": 1795994721, "containers": {"<pod uid>/<container>": 3.5, ...}}

``timestamp`` (Unix seconds, optional) older than ``max_age_s`` makes every load missing
("stale"); so does an unreadable file or malformed JSON. A container absent from the file, or a
value that is not a non-negative number, is missing for that container. Never a zero.

**No cgroup source.** cgroup v2 ``cpu.stat`` and ``cpu.pressure`` are not faithful stand-ins
for a 1-minute load: ``usage_usec`` over an interval is the CPUs a container *used*, which its
pool's cpuset caps, so a pool's summed usage never exceeds the pool's size and neither bound
(the size, 1.8 × the size) could ever be crossed; PSI's ``some avg60`` is a share of time
with a task waiting, not a count of runnable tasks. A faithful stand-in counts the running and
uninterruptible threads of the container's ``cgroup.threads`` as ``/proc/loadavg`` does, with
its 1-minute decay; that needs each container's cgroup, hence its container ID from a pod
source, which ``qrmd run`` does not have yet. Until then a collector that can (malachite, a
node exporter) feeds the file or the Prometheus source.

**The simulated source** answers fixed loads (``FixedContainerLoads``): nothing outside the
daemon can change them. The settable stand-in that tests and simulations drive from their own
thread is ``qrmd.sim.host.cpu_load.SimulatedContainerLoads``; the daemon never imports
``qrmd.sim``.
"""

from __future__ import annotations

import http.client
import json
import math
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from actors.ports.cpu_load import ContainerKey, ContainerLoadSource, MissingLoad

__all__ = [
    "DEFAULT_LOAD_FILE",
    "FileContainerLoads",
    "FixedContainerLoads",
    "PrometheusContainerLoads",
    "build_container_load_source",
]

DEFAULT_LOAD_FILE = "/run/qrmd/cpu-load.json"
#: The Prometheus name of ``cpu.load.1min.container`` (Prometheus names allow no dots).
PROMETHEUS_METRIC = "cpu_load_1min_container"
#: A file or scrape larger than this is refused rather than parsed.
MAX_BYTES = 16 << 20

Loads = dict[ContainerKey, float | MissingLoad]


def _checked(value: object, where: str) -> float | MissingLoad:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return MissingLoad(f"{where}: {value!r:.40} is not a number")
    if not math.isfinite(value) or value < 0:
        return MissingLoad(f"{where}: {value!r} is not a non-negative number")
    return float(value)


def _all_missing(containers: Sequence[ContainerKey], reason: str) -> Loads:
    return {key: MissingLoad(reason) for key in containers}


class FileContainerLoads:
    """Loads from a collector's JSON file, read afresh at each collection.

    Args:
        path: the file.
        max_age_s: a file whose ``timestamp`` is older than this is stale (every load
            missing); 0 never expires.
        clock: Unix seconds now.
    """

    def __init__(
        self, path: Path | str, *, max_age_s: float = 0.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = Path(path)
        self._max_age_s = max_age_s
        self._clock = clock

    def sample(self, containers: Sequence[ContainerKey]) -> Loads:
        """Each container's load from the file (module docstring)."""
        try:
            with self.path.open("rb") as f:
                raw = f.read(MAX_BYTES + 1)
            if len(raw) > MAX_BYTES:
                return _all_missing(containers, f"{self.path}: larger than {MAX_BYTES} bytes")
            document = json.loads(raw)
        except OSError as err:
            return _all_missing(containers, f"{self.path}: {err.strerror or err}")
        except (ValueError, RecursionError) as err:
            return _all_missing(containers, f"{self.path}: not JSON: {err}")
        if not isinstance(document, dict) or not isinstance(document.get("containers"), dict):
            return _all_missing(containers, f'{self.path}: expected {{"containers": {{...}}}}')
        stamp = document.get("timestamp")
        if stamp is not None and self._max_age_s > 0:
            if isinstance(stamp, bool) or not isinstance(stamp, int | float):
                return _all_missing(
                    containers, f"{self.path}: timestamp {stamp!r:.40} is not Unix seconds"
                )
            age = self._clock() - stamp
            if age > self._max_age_s:
                return _all_missing(containers, f"{self.path}: stale ({age:.0f} s old)")
        values = document["containers"]
        out: Loads = {}
        for pod, name in containers:
            key = f"{pod}/{name}"
            if key not in values:
                out[(pod, name)] = MissingLoad(f"{self.path}: no load for {key}")
            else:
                out[(pod, name)] = _checked(values[key], f"{self.path}: {key}")
        return out


class PrometheusContainerLoads:
    """Loads scraped from a Prometheus text endpoint at each collection.

    Args:
        url: the endpoint.
        metric: the metric name (``cpu_load_1min_container``).
        timeout_s: the scrape's timeout.
    """

    def __init__(
        self, url: str, *, metric: str = PROMETHEUS_METRIC, timeout_s: float = 2.0
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"{url!r} is not an http(s) URL")
        self.url = url
        self._metric = metric
        self._timeout_s = timeout_s

    def sample(self, containers: Sequence[ContainerKey]) -> Loads:
        """Each container's load from one scrape; a failed scrape makes every load missing."""
        try:
            with urllib.request.urlopen(self.url, timeout=self._timeout_s) as response:
                body = response.read(MAX_BYTES + 1)
                promised = response.headers.get("Content-Length")
            if len(body) > MAX_BYTES:
                return _all_missing(containers, f"{self.url}: larger than {MAX_BYTES} bytes")
            if promised is not None and promised.isdigit() and int(promised) != len(body):
                cut = f"body cut short, {len(body)} of {promised} bytes came"
                return _all_missing(containers, f"scrape of {self.url} failed: {cut}")
            # prometheus_client (the whole package comes with its parser) loads at the first
            # scrape, not while the daemon starts.
            from prometheus_client.parser import text_string_to_metric_families  # noqa: PLC0415

            found: dict[ContainerKey, list[float]] = {}
            for family in text_string_to_metric_families(body.decode("utf-8", "replace")):
                for s in family.samples:
                    if s.name != self._metric:
                        continue
                    key = (s.labels.get("pod_uid", ""), s.labels.get("container", ""))
                    found.setdefault(key, []).append(s.value)
        except (OSError, http.client.HTTPException, ValueError) as err:
            return _all_missing(containers, f"scrape of {self.url} failed: {err}")
        out: Loads = {}
        for key in containers:
            values = found.get(key, [])
            if not values:
                out[key] = MissingLoad(f"{self.url}: no {self._metric} for {key[0]}/{key[1]}")
            elif len(values) > 1:
                out[key] = MissingLoad(f"{self.url}: {len(values)} samples for {key[0]}/{key[1]}")
            else:
                out[key] = _checked(values[0], f"{self.url}: {key[0]}/{key[1]}")
        return out


class FixedContainerLoads:
    """Loads that stay as built; a container without one is idle (load 0)."""

    def __init__(self, loads: Mapping[ContainerKey, float | MissingLoad] | None = None) -> None:
        self._loads = dict(loads or {})

    def sample(self, containers: Sequence[ContainerKey]) -> Loads:
        """Each container's load; 0 for one never given a load."""
        return {key: self._loads.get(key, 0.0) for key in containers}


def build_container_load_source(
    spec: str, *, max_age_s: float = 0.0, clock: Callable[[], float] = time.time
) -> ContainerLoadSource:
    """The source ``--cpu-load-metrics-source SPEC`` names (module docstring).

    Args:
        spec: the SPEC.
        max_age_s: a file older than this is stale (the daemon passes three sync periods).
        clock: Unix seconds now.

    Raises:
        ValueError: an unknown SPEC, or a URL that is not http(s).
    """
    kind, _, arg = spec.partition(":")
    if kind == "file":
        return FileContainerLoads(arg or DEFAULT_LOAD_FILE, max_age_s=max_age_s, clock=clock)
    if kind == "prometheus":
        return PrometheusContainerLoads(arg)
    if kind == "simulated" and not arg:
        return FixedContainerLoads()
    raise ValueError(
        f"{spec!r} is not a CPU load source: use file[:PATH], prometheus:URL or simulated"
    )
