"""NUMA latency and bandwidth scraped from a Prometheus text endpoint (spec memory-balancer
§4.1, §4.3).

Where a node exporter already publishes per-NUMA memory latency and bandwidth, the balancer
scrapes it each round over HTTP (the text exposition format, version 0.0.4, parsed with
``prometheus_client``'s parser)::

    # TYPE mem_latency_read_numa gauge
    mem_latency_read_numa{numa="0"} 75
    mem_latency_read_numa{numa="1"} 50 1795994721500
    mem_bandwidth_numa{numa="0"} 900

* Metric names are configurable. By default they are the reference's names with dots turned
  into underscores (Prometheus names allow no dots): ``mem_latency_read_numa`` (AMD:
  ``mem_latency_amd_l3_miss``) and ``mem_bandwidth_numa``.
* The NUMA node is a label (``numa`` by default, configurable) whose value is the id, ``"0"``
  or ``"node0"``. ``match_labels`` keeps only samples carrying those label values, for an
  endpoint that serves several hosts or devices; two samples left for one node is ambiguous and
  that node's metric is missing, naming both.
* A sample's optional timestamp (milliseconds in the text) is its measurement time for the
  insurance period (§4.3); without one it never expires.

A failed scrape (refused, timed out, HTTP error, unparsable text) makes every node's metrics
``MissingSample`` naming the URL and the error: never a zero. ``urllib`` with a timeout is
enough: one small GET per round, from the balancer's own thread.
"""

from __future__ import annotations

import http.client
import math
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from policy.balance import MissingSample, NumaMetrics
from policy.balance.inputs import Sample
from qrmd.host.metric_sources import (
    BANDWIDTH_METRIC,
    DEFAULT_LATENCY_METRIC,
    Staleness,
    checked_value,
    missing_everywhere,
)
from qrmd.host.source_settings import prometheus_name

__all__ = ["MAX_RESPONSE_BYTES", "PrometheusNumaMetrics", "prometheus_name"]

#: A scrape larger than this is refused rather than parsed.
MAX_RESPONSE_BYTES = 16 << 20

_NUMA_VALUE = re.compile(r"(?:node)?(\d+)")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class _ScrapeError(Exception):
    """The endpoint could not be read or parsed; every node's metrics are missing."""


class PrometheusNumaMetrics:
    """The ``NumaMetricSource`` port on a Prometheus text endpoint.

    Args:
        url: the ``http://`` or ``https://`` address to scrape.
        latency_metric: the latency metric's Prometheus name.
        bandwidth_metric: the bandwidth metric's Prometheus name.
        numa_label: the label holding the NUMA id.
        match_labels: label values a sample must carry to count.
        timeout_s: the scrape's connect and read timeout.
        staleness: the insurance period (§4.3); off by default.
        clock: the current Unix time, injected for tests.

    Raises:
        ValueError: the URL, a name or the timeout is invalid; the message names it.
    """

    def __init__(
        self,
        url: str,
        *,
        latency_metric: str = prometheus_name(DEFAULT_LATENCY_METRIC),
        bandwidth_metric: str = prometheus_name(BANDWIDTH_METRIC),
        numa_label: str = "numa",
        match_labels: Mapping[str, str] | None = None,
        timeout_s: float = 2.0,
        staleness: Staleness | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"prometheus url {url!r}: expected http://HOST[:PORT]/PATH")
        for what, name in (("latency", latency_metric), ("bandwidth", bandwidth_metric)):
            if not _METRIC_NAME.fullmatch(name):
                raise ValueError(f"prometheus {what} metric {name!r} is not a Prometheus name")
        match = dict(match_labels or {})
        for label in (numa_label, *match):
            if not _LABEL_NAME.fullmatch(label):
                raise ValueError(f"prometheus label {label!r} is not a Prometheus label name")
        if not math.isfinite(timeout_s) or timeout_s <= 0:
            raise ValueError(f"prometheus timeout {timeout_s!r} s must be positive")
        self._url = url
        self._latency_metric = latency_metric
        self._bandwidth_metric = bandwidth_metric
        self._numa_label = numa_label
        self._match = match
        self._timeout_s = timeout_s
        self._staleness = staleness or Staleness()
        self._clock = clock

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        """Scrape the endpoint now (``NumaMetricSource``)."""
        try:
            found = self._scrape()
        except _ScrapeError as exc:
            return missing_everywhere(numa_ids, str(exc))
        now = self._clock()
        return {
            numa: NumaMetrics(
                self._value(found, self._latency_metric, numa, now),
                self._value(found, self._bandwidth_metric, numa, now),
            )
            for numa in numa_ids
        }

    def _scrape(self) -> dict[tuple[str, int], list[tuple[float, float | None]]]:
        """(metric, NUMA id) → every matching (value, timestamp) in the scrape."""
        request = urllib.request.Request(self._url, headers={"Accept": "text/plain"})
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                body = response.read(MAX_RESPONSE_BYTES + 1)
                # A bounded read stops quietly at a connection closed early; what the
                # Content-Length promised and never came is still counted here.
                unsent = getattr(response, "length", None) or 0
        except urllib.error.HTTPError as exc:
            raise _ScrapeError(f"scrape {self._url}: HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            raise _ScrapeError(f"scrape {self._url}: {exc.reason}") from None
        except (OSError, ValueError, http.client.HTTPException) as exc:
            # Timeouts, resets, a body cut short (IncompleteRead), a bad status line.
            raise _ScrapeError(f"scrape {self._url}: {exc or type(exc).__name__}") from None
        if len(body) > MAX_RESPONSE_BYTES:
            raise _ScrapeError(f"scrape {self._url}: response over {MAX_RESPONSE_BYTES} bytes")
        if unsent:
            raise _ScrapeError(
                f"scrape {self._url}: body cut short, {unsent} of {len(body) + unsent} bytes "
                "never came"
            )
        wanted = {self._latency_metric, self._bandwidth_metric}
        found: dict[tuple[str, int], list[tuple[float, float | None]]] = {}
        try:
            for family in text_string_to_metric_families(body.decode("utf-8")):
                for sample in family.samples:
                    if sample.name not in wanted or not self._matches(sample.labels):
                        continue
                    numa = _numa_id(sample.labels.get(self._numa_label))
                    if numa is None:
                        continue
                    found.setdefault((sample.name, numa), []).append(
                        (sample.value, _seconds(sample.timestamp))
                    )
        except (ValueError, TypeError, IndexError, UnicodeDecodeError) as exc:
            raise _ScrapeError(f"scrape {self._url}: not Prometheus text: {exc}") from None
        return found

    def _matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self._match.items())

    def _value(
        self,
        found: Mapping[tuple[str, int], list[tuple[float, float | None]]],
        metric: str,
        numa: int,
        now: float,
    ) -> Sample:
        where = f'{self._url}: {metric}{{{self._numa_label}="{numa}"}}'
        samples = found.get((metric, numa), [])
        if not samples:
            return MissingSample(f"{where}: no sample")
        if len(samples) > 1:
            values = ", ".join(f"{v:g}" for v, _ in samples)
            return MissingSample(
                f"{where}: {len(samples)} samples ({values}); set match labels to pick one"
            )
        value, stamp = samples[0]
        return self._staleness.check(checked_value(value, where), stamp, now)


def _numa_id(value: str | None) -> int | None:
    if value is None:
        return None
    match = _NUMA_VALUE.fullmatch(value)
    return int(match.group(1)) if match else None


def _seconds(timestamp: object) -> float | None:
    # prometheus_client gives a float of seconds (or a Timestamp object in OpenMetrics text).
    if timestamp is None:
        return None
    if isinstance(timestamp, int | float):
        return float(timestamp)
    return float(str(timestamp))
