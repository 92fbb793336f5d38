"""QoS enhancements: the JSON annotations a pod tunes its QoS with (spec cpu-policy §4.3, §4.5).

Three annotations may each hold a JSON object of string pairs: the cpu, memory and network
enhancements (wire.md §12.3). Flattening lifts their pairs to the top level, so
``memory_enhancement: '{"numa_binding":"true"}'`` becomes ``numa_binding: "true"``:

1. An operator may name an alias for an enhancement key; the key itself, when the pod sets
   it, always beats its alias.
2. The enhancements are decoded in sorted key order (cpu, memory, network) and merged; a later
   one overwrites an earlier pair (a warning only).
3. Every configured default whose key the pod did not set is added, whatever the QoS level.

The CPU policy reads three flattened keys: ``numa_binding`` (on iff ``"true"``),
``numa_exclusive`` (on iff ``"true"`` *and* binding is on) and ``cpuset_pool`` (the shared pool).

**Malformed enhancements.** The reference logs and ignores an enhancement that is not a JSON
object (it contributes nothing) and drops pairs whose value is not a string. DESIGN.md
("Time, config, errors") counts malformed annotations among the bad input that must get a
clear error, and a pod that asked for ``{"numa_binding": true}`` and silently got no binding
is exactly the harm that rule prevents. So in strict mode (qrmd's default,
``QoSConfig.strict_enhancements``) an enhancement
that is not a JSON object of string values is refused with a ``RequestError``; otherwise qrmd
does what §4.5 says and hands back each ignored part as a warning for the caller to log. (Go's
JSON decoder in fact keeps a non-string pair with an empty value rather than dropping it; qrmd
follows §4.5, which says dropped.) JSON is read as Go reads it: ``NaN`` and ``Infinity`` are
not JSON, and an unpaired surrogate escape decodes to U+FFFD.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache

from policy.cpu.request import RequestError

__all__ = [
    "CPUSET_POOL_KEY",
    "CPU_ENHANCEMENT_KEY",
    "ENHANCEMENT_KEYS",
    "MEMORY_ENHANCEMENT_KEY",
    "NETWORK_ENHANCEMENT_KEY",
    "NUMA_BINDING_KEY",
    "NUMA_EXCLUSIVE_KEY",
    "cpuset_pool",
    "flatten_enhancements",
    "is_numa_binding",
    "is_numa_exclusive",
]

CPU_ENHANCEMENT_KEY = "katalyst.kubewharf.io/cpu_enhancement"
MEMORY_ENHANCEMENT_KEY = "katalyst.kubewharf.io/memory_enhancement"
NETWORK_ENHANCEMENT_KEY = "katalyst.kubewharf.io/network_enhancement"

#: The enhancement annotation keys in the order their pairs are merged (sorted; later wins).
ENHANCEMENT_KEYS = (CPU_ENHANCEMENT_KEY, MEMORY_ENHANCEMENT_KEY, NETWORK_ENHANCEMENT_KEY)

NUMA_BINDING_KEY = "numa_binding"
NUMA_EXCLUSIVE_KEY = "numa_exclusive"
CPUSET_POOL_KEY = "cpuset_pool"

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _reject_constant(name: str) -> object:
    # Python's json accepts NaN and Infinity; Go's (the reference's) does not.
    raise ValueError(f"{name} is not JSON")


#: What ``json.loads(text, **hooks)`` builds on every call, built once: numbers are never kept,
#: so they are not built (a 5000-digit int is legal JSON), and Go's refusals of NaN and
#: Infinity are kept. Decoding through it is ``json.loads`` less its per-call decoder and
#: scanner (2.7 -> 1.3 µs for a one-pair annotation); it holds no state between calls.
_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant, parse_int=lambda _: 0, parse_float=lambda _: 0
)


def _go_string(text: str) -> str:
    # Go decodes an unpaired \\uD800-style escape as U+FFFD; Python keeps the lone surrogate,
    # which could not even be encoded for the wire.
    return _LONE_SURROGATE.sub("\ufffd", text)


#: Enhancement texts up to this many characters are decoded once and remembered: pods of one
#: workload carry the same few texts (``{"numa_binding": "true"}``), and every Allocate and
#: hint decodes them. Longer ones are decoded each time, so the memo stays small.
_REMEMBERED_TEXT_CHARS = 512


def _decode(source: str, text: str, strict: bool, warnings: list[str]) -> dict[str, str]:
    """The string pairs of one enhancement annotation; refuses or warns about the rest."""
    if len(text) > _REMEMBERED_TEXT_CHARS:
        return _decode_text(source, text, strict, warnings)
    pairs, found = _remembered_decode(source, text, strict)
    warnings.extend(found)
    return dict(pairs)


@lru_cache(maxsize=256)
def _remembered_decode(
    source: str, text: str, strict: bool
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """:func:`_decode_text` as immutable values, remembered (a refusal raises, never kept)."""
    warnings: list[str] = []
    pairs = _decode_text(source, text, strict, warnings)
    return tuple(pairs.items()), tuple(warnings)


def _decode_text(source: str, text: str, strict: bool, warnings: list[str]) -> dict[str, str]:

    def problem(reason: str) -> None:
        message = f"annotation {source}: {reason}"
        if strict:
            raise RequestError(message)
        warnings.append(f"{message}; ignored")

    try:
        if text.startswith("\ufeff"):
            # json.loads's own refusal, word for word (the decoder below is what it calls).
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        decoded = _DECODER.decode(text)
    except (ValueError, RecursionError) as err:
        problem(f"{text[:80]!r} is not valid JSON ({err})")
        return {}
    if not isinstance(decoded, dict):
        problem(f"holds a JSON {_json_kind(decoded)}, not an object")
        return {}
    pairs: dict[str, str] = {}
    for key, value in decoded.items():
        if isinstance(value, str):
            pairs[_go_string(key)] = _go_string(value)
        else:
            problem(f"value of {key!r} is a JSON {_json_kind(value)}, not a string")
    return pairs


def flatten_enhancements(
    annotations: Mapping[str, str],
    *,
    aliases: Mapping[str, str],
    defaults: Mapping[str, str],
    strict: bool,
) -> tuple[dict[str, str], tuple[str, ...]]:
    """Lift the pairs of a pod's enhancement annotations to the top level (§4.5).

    Args:
        annotations: the pod's annotations.
        aliases: alias annotation key → the enhancement key it stands for.
        defaults: flattened key → value added when no enhancement sets the key.
        strict: refuse a malformed enhancement instead of ignoring it with a warning.

    Returns:
        The flattened pairs, and warnings for what was ignored or overwritten.

    Raises:
        RequestError: in strict mode, an enhancement annotation that is not a JSON object of
            string values; the message names the annotation (and the alias, if one was used).
    """
    warnings: list[str] = []
    # Which annotation feeds each enhancement key: the key itself, else its alias.
    sources = {key: key for key in ENHANCEMENT_KEYS if key in annotations}
    for alias in sorted(aliases):
        key = aliases[alias]
        if alias in annotations and key not in sources:
            sources[key] = alias
    flattened: dict[str, str] = {}
    for key in ENHANCEMENT_KEYS:
        if key not in sources:
            continue
        source = sources[key] if sources[key] == key else f"{sources[key]} (alias of {key})"
        for name, value in _decode(source, annotations[sources[key]], strict, warnings).items():
            if flattened.get(name):
                warnings.append(
                    f"annotation {source}: {name}={value!r} overrides {name}={flattened[name]!r}"
                )
            flattened[name] = value
    for name, value in defaults.items():
        flattened.setdefault(name, value)
    return flattened, tuple(warnings)


def is_numa_binding(annotations: Mapping[str, str] | None) -> bool:
    """Whether normalised annotations ask for NUMA binding (``numa_binding == "true"``)."""
    return (annotations or {}).get(NUMA_BINDING_KEY) == "true"


def is_numa_exclusive(annotations: Mapping[str, str] | None) -> bool:
    """Whether normalised annotations ask for exclusive NUMA nodes (needs binding too)."""
    return is_numa_binding(annotations) and (annotations or {}).get(NUMA_EXCLUSIVE_KEY) == "true"


def cpuset_pool(annotations: Mapping[str, str] | None) -> str:
    """The shared pool a pod names in its cpu enhancement (``cpuset_pool``), or ""."""
    return (annotations or {}).get(CPUSET_POOL_KEY, "")
