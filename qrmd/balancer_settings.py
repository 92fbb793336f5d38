"""The memory balancer's settings of ``qrmd run``: value parsers for its flags and the objects
built from them (spec memory-balancer §3, §3.1, §3.2, §4.3; issue 6 item 9).

``qrmd.config`` lists the flags; this module says what each value may be and turns the
validated values into the two objects the daemon wires:

* the **balancer options** of §3 keep the reference's flag names (``--grace-balance-gap-ratio``,
  the vendor-aware ``--force-balance-read-latency-threshold default=80,AMD=600``, …) and become
  one ``policy.balance.BalancerConfig`` through its own decoder (``BalancerConfig.from_json``,
  keyed by the same names), so the command line, the config file and ``qrmd balance plan``
  read them with one set of rules;
* the **metric sources** keep the key names of ``qrmd.host.balancer_sources`` and become one
  ``BalancerSourceSettings`` (``from_mapping``). ``--numa-metrics-source SPEC`` is a shorthand
  for the common choices; a source key given on its own wins over it:

  ==============================  ==========================================================
  SPEC                            means
  ==============================  ==========================================================
  ``file`` / ``file:PATH``        latency and bandwidth from a collector's JSON file
  ``prometheus:URL``              latency and bandwidth scraped from a Prometheus endpoint
  ``resctrl``                     bandwidth from resctrl MBM counters, latency from the file
  ``simulated``                   a simulator, every node quiet (tests, demos)
  ``simulated:pressure=N``        the same with NUMA node ``N`` under latency pressure
  ==============================  ==========================================================

Every parser raises ``ValueError`` with a message that the caller prefixes with the flag.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from policy.balance import BalanceError, BalancerConfig
from qrmd.host.balancer_sources import BalancerSourceSettings, SourceKind

__all__ = [
    "DEFAULT_METRICS_SOURCE",
    "DEFAULT_PLUGIN_REGISTRATION_DIR",
    "MetricsSourceSpec",
    "balancer_value",
    "build_balancer_config",
    "build_source_settings",
    "parse_metrics_source",
    "source_kind",
]

#: katalyst-agent's ``--plugin-registration-dir`` default (§3.2, wire.md §8.3).
DEFAULT_PLUGIN_REGISTRATION_DIR = "/var/lib/katalyst/plugin-socks"
DEFAULT_METRICS_SOURCE = "file"
# The section name ``from_mapping`` puts in front of a key in its messages.
_SECTION = "memory-balancer"

# The source kinds by the names the flags accept (``simulated`` reads better on a command line).
_KIND_NAMES = {str(k): k for k in SourceKind} | {"simulated": SourceKind.SIMULATOR}


def _text(raw: object) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ValueError(f"{raw!r} is not a single value")
    return str(raw)


def _check(flag: str, value: object) -> None:
    """Validate one §3 option with the planner's own decoder."""
    try:
        BalancerConfig.from_json({flag: value}, where="")
    except BalanceError as err:
        message = str(err)
        # The caller names the flag: drop the decoder's own copy of the name.
        for prefix in (f".{flag}", flag):
            message = message.removeprefix(prefix).lstrip(": ")
        raise ValueError(message or str(err)) from None


def balancer_value(flag: str, kind: str) -> Callable[[object], object]:
    """The parser of one §3 option.

    Args:
        flag: the option's reference flag name (``grace-balance-gap-ratio``).
        kind: ``vendor`` (``default=70,AMD=500``, or a mapping in a file), ``int`` (bytes or a
            distance), ``ratio`` (a float), or ``pools`` (comma-separated, or a list).

    Returns:
        A parser giving the value in ``BalancerConfig.from_json``'s form.
    """

    def parse(raw: object) -> object:
        value: object
        if kind == "vendor":
            value = dict(raw) if isinstance(raw, Mapping) else _text(raw)
        elif kind == "int":
            value = _whole(raw)
        elif kind == "ratio":
            value = _ratio(raw)
        elif isinstance(raw, list | tuple):
            value = [_text(p) for p in raw]
        else:
            value = [p.strip() for p in _text(raw).split(",")]
        _check(flag, value)
        return value

    return parse


def _whole(raw: object) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a whole number")
    try:
        value = int(_text(raw))
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number") from None
    if value < 0:
        raise ValueError(f"{value} is negative")
    return value


def _ratio(raw: object) -> float:
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a number")
    try:
        return float(_text(raw))
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None


def source_kind(raw: object) -> str:
    """A source kind name: ``file``, ``prometheus``, ``resctrl``, ``simulated``/``simulator``.

    Raises:
        ValueError: another name.
    """
    text = _text(raw).lower()
    if text not in _KIND_NAMES:
        raise ValueError(f"{raw!r} is not one of file, prometheus, resctrl, simulated")
    return str(_KIND_NAMES[text])


@dataclass(frozen=True, slots=True)
class MetricsSourceSpec:
    """A parsed ``--numa-metrics-source`` (module docstring).

    Attributes:
        keys: the source keys it stands for (``numa-latency-source``, …).
        pressure: simulated NUMA nodes under pressure from the start.
    """

    keys: Mapping[str, object]
    pressure: tuple[int, ...] = ()


def parse_metrics_source(raw: object) -> MetricsSourceSpec:
    """Parse ``--numa-metrics-source`` (module docstring for the forms).

    Raises:
        ValueError: not one of the forms.
    """
    text = _text(raw)
    kind, sep, rest = text.partition(":")
    kind = kind.lower()
    if kind == "file":
        keys: dict[str, object] = {"numa-latency-source": "file"}
        if sep:
            if not rest:
                raise ValueError(f"{text!r} names no file after 'file:'")
            keys["numa-metrics-file"] = rest
        return MetricsSourceSpec(keys)
    if kind == "prometheus":
        if not rest:
            raise ValueError(
                f"{text!r}: give the endpoint, e.g. prometheus:http://host:9100/metrics"
            )
        return MetricsSourceSpec(
            {"numa-latency-source": "prometheus", "numa-metrics-prometheus-url": rest}
        )
    if kind == "resctrl" and not sep:
        return MetricsSourceSpec(
            {"numa-latency-source": "file", "numa-bandwidth-source": "resctrl"}
        )
    if kind in ("simulated", "simulator"):
        return MetricsSourceSpec({"numa-latency-source": "simulator"}, _pressure(text, rest))
    raise ValueError(
        f"{text!r} is not file[:PATH], prometheus:URL, resctrl, simulated or simulated:pressure=N"
    )


def _pressure(text: str, rest: str) -> tuple[int, ...]:
    if not rest:
        return ()
    key, sep, ids = rest.partition("=")
    numas = ids.split("+")
    if key != "pressure" or not sep or not all(n.isdigit() for n in numas):
        raise ValueError(f"{text!r}: expected simulated:pressure=N (or N+M for several nodes)")
    return tuple(sorted({int(n) for n in numas}))


def build_balancer_config(values: Mapping[str, object]) -> BalancerConfig:
    """The ``BalancerConfig`` of the §3 options given (each already checked alone).

    Raises:
        ValueError: the options disagree; the message names the option.
    """
    try:
        return BalancerConfig.from_json(dict(values), where="")
    except BalanceError as err:
        raise ValueError(f"--{str(err).removeprefix('.')}") from None


def build_source_settings(
    spec: MetricsSourceSpec, values: Mapping[str, object]
) -> BalancerSourceSettings:
    """The ``BalancerSourceSettings`` of the shorthand, overridden by the keys given alone.

    Raises:
        ValueError: the settings are invalid together (e.g. ``prometheus`` without a URL); the
            message names the flag.
    """
    merged = {**spec.keys, **values}
    if "numa-latency-source" in values and "numa-bandwidth-source" not in values:
        # A latency source chosen alone takes bandwidth with it, as the key's default says.
        merged.pop("numa-bandwidth-source", None)
    try:
        return BalancerSourceSettings.from_mapping(merged, where=_SECTION)
    except ValueError as err:
        raise ValueError(f"--{str(err).removeprefix(_SECTION + '.')}") from None
