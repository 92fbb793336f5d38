"""The pieces every ``qrmd run`` setting is made of: the ``Option`` row and the value parsers
(DESIGN.md "Time, config, errors").

A parser takes the raw value, a flag's string or a config file's value (a YAML or TOML
number, string, list or mapping), and returns the checked value or raises ``ValueError``
whose message the caller prefixes with the flag: ``--transition-period: '3x' is not a
duration (use 0s, 10ms, 1m30s)``. ``qrmd.config`` lists the daemon's options and
``qrmd.balancer.settings`` the memory balancer's, both with these.

A subsystem's settings are a frozen dataclass of plain values whose fields are the validated
configuration's fields of the same name (``settings_of`` builds one; ``qrmd.subsystem``'s
``SubsystemSettings`` is what the daemon asks of it), and it declares the unix sockets it
serves as ``Socket`` rows, so the root checks every path and counts every capped socket
without knowing which subsystem serves it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol, TypeVar

__all__ = [
    "MAX_SOCKET_PATH_BYTES",
    "ConfigError",
    "Option",
    "Socket",
    "SubsystemSettings",
    "choice",
    "comma_list",
    "count",
    "duration",
    "nonempty",
    "parse_duration",
    "period",
    "positive_duration",
    "real_number",
    "settings_of",
    "single_value",
    "socket_file",
    "socket_path",
    "switch",
    "whole_number",
]


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key and the value."""


# -- value parsers: each takes the raw value (a flag's string, or a file's value) ---------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|us|µs|ns|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_duration(text: str) -> float:
    """A Go-style duration (``30s``, ``10ms``, ``1m30s``, ``0``) in seconds.

    Raises:
        ValueError: not a non-negative duration with units.
    """
    bad = ValueError(f"{text!r} is not a duration (use 0s, 10ms, 1m30s)")
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            raise bad
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(text):
        raise bad
    return total


def single_value(raw: object) -> str:
    """The raw value as text; a list, mapping or boolean is not a single value."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ValueError(f"{raw!r} is not a single value")
    return str(raw)


def nonempty(raw: object) -> str:
    """Non-empty text."""
    text = single_value(raw)
    if not text:
        raise ValueError("must not be empty")
    return text


def duration(raw: object) -> float:
    """A duration with units (``30s``), in seconds; a bare number is refused."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a duration (use 0s, 10ms, 1m30s)")
    return parse_duration(single_value(raw))


def whole_number(raw: object) -> int:
    """A whole number, of any sign (``"12"`` or a file's ``12``); a boolean is not one."""
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a whole number")
    try:
        return int(single_value(raw))
    except ValueError:
        raise ValueError(f"{raw!r} is not a whole number") from None


def count(minimum: int) -> Callable[[object], int]:
    """A parser of whole numbers of at least ``minimum``."""

    def parse(raw: object) -> int:
        value = whole_number(raw)
        if value < minimum:
            raise ValueError(f"{value} is below the minimum {minimum}")
        return value

    return parse


def choice(*choices: str) -> Callable[[object], str]:
    """A parser of one of ``choices`` (any case), lowered."""

    def parse(raw: object) -> str:
        text = single_value(raw).lower()
        if text not in choices:
            raise ValueError(f"{raw!r} is not one of {', '.join(choices)}")
        return text

    return parse


def comma_list(raw: object) -> tuple[str, ...]:
    """A comma-separated list (``a,b``; the reference's Go string slices) or a file's list;
    empty items are dropped, so ``""`` is the empty list."""
    items = raw if isinstance(raw, list | tuple) else single_value(raw).split(",")
    return tuple(text for text in (single_value(item).strip() for item in items) if text)


def real_number(raw: object) -> float:
    """A number (``0.5``, ``"1e-3"``), not a boolean, not NaN."""
    if isinstance(raw, bool):
        raise ValueError(f"{raw!r} is not a number")
    try:
        value = float(single_value(raw))
    except ValueError:
        raise ValueError(f"{raw!r} is not a number") from None
    if math.isnan(value):
        raise ValueError(f"{raw!r} is not a number")
    return value


def switch(raw: object) -> bool:
    """A boolean: ``true``/``yes``/``1`` or ``false``/``no``/``0``, or a file's boolean."""
    if isinstance(raw, bool):
        return raw
    text = single_value(raw).lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise ValueError(f"{raw!r} is not true or false")


def period(raw: object) -> float:
    """A duration (``90s``) or a number of seconds (a config file's ``90``), not negative."""
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        if not raw >= 0:
            raise ValueError(f"{raw!r} s must be 0 or more")
        return float(raw)
    text = single_value(raw)
    try:
        value = float(text)
    except ValueError:
        return parse_duration(text)
    if not value >= 0:
        raise ValueError(f"{raw!r} s must be 0 or more")
    return value


def positive_duration(raw: object) -> float:
    """A duration longer than zero, in seconds."""
    value = duration(raw)
    if value <= 0:
        raise ValueError(f"{raw!r} must be longer than 0s")
    return value


#: Longest unix socket path: ``sizeof(sun_path)`` is 108 bytes including the terminating NUL
#: (the kernel's limit; ``wire.sockets`` refuses such a path again when it binds).
MAX_SOCKET_PATH_BYTES = 107


def socket_path(directory: str, name: str) -> str:
    """The absolute socket path ``<directory>/<name>.sock``, refused if a unix socket cannot
    hold it, so the daemon refuses to start rather than fail once it has recovered.

    Raises:
        ValueError: the path is longer than ``MAX_SOCKET_PATH_BYTES``; the message names it.
    """
    return _fits(_joined(directory, name))


def _joined(directory: str, name: str) -> str:
    return os.path.abspath(os.path.join(directory, f"{name}.sock"))


def socket_file(raw: object) -> str:
    """An absolute socket path that a unix socket can hold.

    Raises:
        ValueError: relative, or longer than ``MAX_SOCKET_PATH_BYTES``.
    """
    path = nonempty(raw)
    if not path.startswith("/"):
        raise ValueError(f"{path!r} is not an absolute path")
    return _fits(path)


def _fits(path: str) -> str:
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH_BYTES:
        raise ValueError(
            f"socket path {path} is {size} bytes, longer than a unix socket allows "
            f"({MAX_SOCKET_PATH_BYTES}); choose a shorter socket directory"
        )
    return path


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its flag, config key, parser, default, help and reference flag."""

    flag: str
    field: str
    parse: Callable[[object], Any]
    default: str
    help: str
    reference: str = ""
    metavar: str | None = None
    repeatable: bool = False
    switch: bool = False
    #: Options whose values are collected by key into one object (``balancer``: the
    #: ``BalancerConfig``; ``sources``: the metric sources; ``advisor``: the
    #: ``AdvisorLinkConfig``), ``field`` being the key.
    group: str = ""
    #: The reference level the option belongs to (``policy.cpu.reference``): "" for every
    #: level; ``v0.5.47`` for an option that only means something there, which the settings
    #: refuse at any other level (``qrmd.cpu_plugin.settings.require_reference_level``).
    since: str = ""

    def help_text(self) -> str:
        """The ``--help`` line: what it does, its default and the reference flag."""
        ref = f"; reference: {self.reference}" if self.reference else ""
        return f"{self.help} (default: {self.default}{ref})"


@dataclass(frozen=True, slots=True)
class Socket:
    """A unix socket a subsystem serves, as its settings declare it.

    Attributes:
        flag: the option that places it (``socket-dir``), named when its path is refused.
        path: the socket's absolute path, not yet checked (``check``).
        max_connections: the most connections it accepts at once, counted against the
            open-file limit at start (``qrmd.cpu_plugin.connection_cap``); None: not counted.
    """

    flag: str
    path: str
    max_connections: int | None = None

    @classmethod
    def in_directory(
        cls, flag: str, directory: str, name: str, max_connections: int | None = None
    ) -> Socket:
        """The socket ``<directory>/<name>.sock``, made absolute."""
        return cls(flag, _joined(directory, name), max_connections)

    def check(self) -> str:
        """The path, refused if a unix socket cannot hold it.

        Raises:
            ValueError: longer than ``MAX_SOCKET_PATH_BYTES``; the message names the path.
        """
        return _fits(self.path)


class SubsystemSettings(Protocol):
    """A subsystem's settings: a frozen dataclass of plain values, each field the validated
    configuration's field of the same name (built by ``qrmd.config_values.settings_of``)."""

    @property
    def enabled(self) -> bool:
        """Whether the configuration asks for the subsystem (a disabled one is never built)."""
        ...

    def sockets(self) -> Sequence[Socket]:
        """The unix sockets it serves when enabled (none when not): the root refuses a path a
        unix socket cannot hold, naming the socket's flag, and counts each socket with a
        connection cap against the open-file limit."""
        ...


_Settings = TypeVar("_Settings")


def settings_of(kind: type[_Settings], config: object) -> _Settings:
    """A subsystem's settings (a dataclass) of the validated configuration: each field is the
    configuration's field of the same name.

    The names and types agree by construction of the option rows (each row's ``field``); a
    test checks every subsystem's settings type against ``DaemonConfig``.

    Raises:
        AttributeError: the configuration has no field of that name (a bug the test catches).
    """
    return kind(**{f.name: getattr(config, f.name) for f in fields(kind)})  # type: ignore[arg-type]
