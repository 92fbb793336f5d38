"""QoS levels: resolving a request's level and normalising its maps (spec cpu-policy §4.3–§4.6).

**Resolution** (§4.4) reads annotations only, never labels. Each level has a *selector*, a map
of annotation pairs (by default just ``katalyst.kubewharf.io/qos_level: <level>``). Levels are
tried in the fixed order dedicated, reclaimed, shared, system (the reference's order is random,
§15 item 11). For each, count the selector pairs whose key is present with the same value
(``eq``) and with another value (``ne``): both non-zero is a conflict and an error; ``eq`` alone
picks the level; ``ne`` alone on ``shared_cores`` marks the pod "not default". With no match,
"not default" is an error ("can't get valid qos level", e.g. for the value ``foo``), else the
level is ``shared_cores``.

**Normalisation** (§4.5) rewrites labels and annotations once the level is known: the
annotations keep only selector keys plus the flattened enhancement pairs (JSON objects under
the cpu, memory and network enhancement keys, or a configured alias of one; the default key
beats its alias), then configured defaults for missing enhancement keys; labels keep only
selector keys. Both carry the resolved level under the QoS key.

**Malformed enhancements.** The reference logs and ignores an enhancement that is not a JSON
object (it contributes nothing) and drops pairs whose value is not a string. Issue 4 lists
"malformed enhancement JSON" among the bad requests that must get a clear error, and a pod
that asked for ``{"numa_binding": true}`` and silently got no binding is exactly the harm it
means. So by default (``QoSConfig.strict_enhancements``) an enhancement annotation that is not
a JSON object of string values is refused with a ``RequestError``; with it off, qrmd does what
§4.5 says and hands back each ignored part as a warning for the caller to log.

**Debug pods** (§4.6) are recognised by configured annotation keys in the *original*
annotations, before normalisation drops them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from policy.errors import PolicyError
from policy.request import RequestError

__all__ = [
    "CPUSET_POOL_KEY",
    "CPU_ENHANCEMENT_KEY",
    "DEDICATED_CORES",
    "ENHANCEMENT_KEYS",
    "HANDLED_QOS_LEVELS",
    "MEMORY_ENHANCEMENT_KEY",
    "NETWORK_ENHANCEMENT_KEY",
    "NUMA_BINDING_KEY",
    "NUMA_EXCLUSIVE_KEY",
    "QOS_LEVELS",
    "QOS_LEVEL_KEY",
    "RECLAIMED_CORES",
    "SHARED_CORES",
    "SYSTEM_CORES",
    "Normalised",
    "QoSConfig",
    "QoSConfigError",
    "QoSError",
    "check_handled_level",
    "cpuset_pool",
    "is_debug_pod",
    "is_numa_binding",
    "is_numa_exclusive",
    "normalise",
    "resolve_qos_level",
]

QOS_LEVEL_KEY = "katalyst.kubewharf.io/qos_level"

SHARED_CORES = "shared_cores"
DEDICATED_CORES = "dedicated_cores"
RECLAIMED_CORES = "reclaimed_cores"
SYSTEM_CORES = "system_cores"

#: Every level, in the order resolution tries them (§4.4, recommended fixed order).
QOS_LEVELS = (DEDICATED_CORES, RECLAIMED_CORES, SHARED_CORES, SYSTEM_CORES)

#: Levels the CPU policy has Allocate and hint handlers for; system_cores resolves but is
#: refused, as in the reference (§7.1 step 9).
HANDLED_QOS_LEVELS = frozenset({SHARED_CORES, RECLAIMED_CORES, DEDICATED_CORES})

CPU_ENHANCEMENT_KEY = "katalyst.kubewharf.io/cpu_enhancement"
MEMORY_ENHANCEMENT_KEY = "katalyst.kubewharf.io/memory_enhancement"
NETWORK_ENHANCEMENT_KEY = "katalyst.kubewharf.io/network_enhancement"

#: The enhancement annotation keys in the order their pairs are merged (sorted; later wins).
ENHANCEMENT_KEYS = (CPU_ENHANCEMENT_KEY, MEMORY_ENHANCEMENT_KEY, NETWORK_ENHANCEMENT_KEY)

NUMA_BINDING_KEY = "numa_binding"
NUMA_EXCLUSIVE_KEY = "numa_exclusive"
CPUSET_POOL_KEY = "cpuset_pool"

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class QoSError(RequestError):
    """The request's QoS annotations resolve to no level, or to one the policy cannot serve."""


class QoSConfigError(PolicyError):
    """A QoS setting is invalid; raised at start-up, naming the setting."""


def _default_selectors() -> dict[str, dict[str, str]]:
    return {level: {QOS_LEVEL_KEY: level} for level in QOS_LEVELS}


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class QoSConfig:
    """How requests are read: selectors, enhancement aliases and defaults, debug keys (§4.3).

    Build it with :meth:`build` from the operator's options; ``QoSConfig()`` is the default
    configuration.

    Attributes:
        selectors: level → annotation pairs that identify it.
        enhancement_aliases: alias annotation key → the enhancement key it stands for.
        enhancement_defaults: flattened enhancement key → value used when a pod sets none.
        debug_annotation_keys: annotation keys that mark a debug pod (§4.6).
        strict_enhancements: refuse an enhancement annotation that is not a JSON object of
            strings (default) instead of ignoring it as the reference does.
    """

    selectors: Mapping[str, Mapping[str, str]] = field(default_factory=_default_selectors)
    enhancement_aliases: Mapping[str, str] = field(default_factory=dict)
    enhancement_defaults: Mapping[str, str] = field(default_factory=dict)
    debug_annotation_keys: tuple[str, ...] = ()
    strict_enhancements: bool = True

    def __post_init__(self) -> None:
        unknown = sorted(set(self.selectors) - set(QOS_LEVELS))
        if unknown:
            raise QoSConfigError(
                f"QoS selectors name unknown levels {unknown}; levels are {list(QOS_LEVELS)}"
            )
        for alias, key in self.enhancement_aliases.items():
            if key not in ENHANCEMENT_KEYS:
                raise QoSConfigError(
                    f"enhancement alias {alias!r} stands for {key!r}, which is not one of "
                    f"{list(ENHANCEMENT_KEYS)}"
                )
            if not alias or alias in ENHANCEMENT_KEYS:
                raise QoSConfigError(
                    f"enhancement alias {alias!r} for {key!r} must be a different, non-empty key"
                )
        # Freeze copies: the caller's dicts must not change a live configuration.
        selectors = {level: _frozen(pairs) for level, pairs in self.selectors.items()}
        object.__setattr__(self, "selectors", MappingProxyType(selectors))
        object.__setattr__(self, "enhancement_aliases", _frozen(self.enhancement_aliases))
        object.__setattr__(self, "enhancement_defaults", _frozen(self.enhancement_defaults))
        object.__setattr__(self, "debug_annotation_keys", tuple(self.debug_annotation_keys))

    @classmethod
    def build(
        cls,
        *,
        extra_selectors: Mapping[str, Mapping[str, str]] | None = None,
        enhancement_keys: Mapping[str, str] | None = None,
        enhancement_defaults: Mapping[str, str] | None = None,
        debug_annotation_keys: Iterable[str] = (),
        strict_enhancements: bool = True,
    ) -> QoSConfig:
        """Build the configuration from the reference's options (§4.3).

        Args:
            extra_selectors: level → ``k=v`` pairs of the option
                ``pod-annotation-qos-level-<level>-selector``, merged over the default
                selector (the option's value wins on a shared key).
            enhancement_keys: ``default=alias`` entries of ``pod-annotation-qos-enhancements``:
                enhancement key → alias annotation key.
            enhancement_defaults: ``qos-enhancement-default-values`` (flattened key → value).
            debug_annotation_keys: ``qrm-pod-debug-anno-keys``.
            strict_enhancements: see the class.

        Returns:
            The validated configuration.

        Raises:
            QoSConfigError: a selector for an unknown level, an alias for a key that is not an
                enhancement key, or one alias claimed by two enhancement keys. (The reference
                ignores the first two silently; qrmd names them so a typo is seen at start.)
        """
        selectors = _default_selectors()
        for level, pairs in (extra_selectors or {}).items():
            if level not in selectors:
                raise QoSConfigError(
                    f"selector option for unknown QoS level {level!r}; levels are "
                    f"{list(QOS_LEVELS)}"
                )
            selectors[level].update(pairs)
        aliases: dict[str, str] = {}
        for key, alias in (enhancement_keys or {}).items():
            if alias in aliases:
                raise QoSConfigError(
                    f"enhancement alias {alias!r} is given for both {aliases[alias]!r} and {key!r}"
                )
            aliases[alias] = key
        return cls(
            selectors=selectors,
            enhancement_aliases=aliases,
            enhancement_defaults=dict(enhancement_defaults or {}),
            debug_annotation_keys=tuple(debug_annotation_keys),
            strict_enhancements=strict_enhancements,
        )

    @cached_property
    def qos_keys(self) -> frozenset[str]:
        """Every key some level's selector uses: what ``filter_qos`` keeps."""
        return frozenset(key for pairs in self.selectors.values() for key in pairs)


@dataclass(frozen=True, slots=True)
class Normalised:
    """A request's labels and annotations after §4.5, plus what was ignored on the way."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    warnings: tuple[str, ...] = ()


def resolve_qos_level(config: QoSConfig, annotations: Mapping[str, str] | None) -> str:
    """Resolve the QoS level from a request's original annotations (§4.4).

    Args:
        config: selectors to match.
        annotations: the pod's annotations as kubelet sent them (``None`` = none).

    Returns:
        One of :data:`QOS_LEVELS`; ``shared_cores`` when nothing identifies a level.

    Raises:
        QoSError: "qos %v conflicts, matched count %v, mis matched count %v" when a level's
            selector both matches and mismatches; "can't get valid qos level" when the
            shared selector's keys are present with other values and no level matches.
    """
    annotations = annotations or {}
    not_default = False
    for level in QOS_LEVELS:
        matched = mismatched = 0
        for key, value in config.selectors.get(level, {}).items():
            if key in annotations:
                if annotations[key] == value:
                    matched += 1
                else:
                    mismatched += 1
        if matched and mismatched:
            raise QoSError(
                f"qos {level} conflicts, matched count {matched}, mis matched count {mismatched}"
            )
        if matched:
            return level
        if mismatched and level == SHARED_CORES:
            not_default = True
    if not_default:
        raise QoSError("can't get valid qos level")
    return SHARED_CORES


def check_handled_level(level: str) -> None:
    """Refuse a level the CPU policy has no handler for (§7.1 step 9, §8.1 step 4).

    Args:
        level: a resolved level.

    Raises:
        QoSError: "katalyst QoS level: %s is not supported yet" (``system_cores``).
    """
    if level not in HANDLED_QOS_LEVELS:
        raise QoSError(f"katalyst QoS level: {level} is not supported yet")


def is_debug_pod(debug_keys: Iterable[str], annotations: Mapping[str, str] | None) -> bool:
    """Whether a request is for a debug pod: any debug key among its *original* annotations.

    Args:
        debug_keys: configured debug annotation keys (values are irrelevant, §4.6).
        annotations: the annotations before normalisation.

    Returns:
        True if any key is present.
    """
    present = annotations or {}
    return any(key in present for key in debug_keys)


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


def _go_string(text: str) -> str:
    # Go decodes an unpaired \\uD800-style escape as U+FFFD; Python keeps the lone surrogate,
    # which could not even be encoded for the wire.
    return _LONE_SURROGATE.sub("\ufffd", text)


def _decode_enhancement(
    source: str, text: str, strict: bool, warnings: list[str]
) -> dict[str, str]:
    """The string pairs of one enhancement annotation; refuses or warns about the rest."""

    def problem(reason: str) -> None:
        message = f"annotation {source}: {reason}"
        if strict:
            raise RequestError(message)
        warnings.append(f"{message}; ignored")

    try:
        # Numbers are never kept, so do not build them (a 5000-digit int is legal JSON).
        decoded = json.loads(
            text, parse_constant=_reject_constant, parse_int=lambda _: 0, parse_float=lambda _: 0
        )
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


def _flatten_enhancements(
    config: QoSConfig, annotations: Mapping[str, str], warnings: list[str]
) -> dict[str, str]:
    # Which annotation feeds each enhancement key: the key itself, else its alias.
    sources = {key: key for key in ENHANCEMENT_KEYS if key in annotations}
    for alias in sorted(config.enhancement_aliases):
        key = config.enhancement_aliases[alias]
        if alias in annotations and key not in sources:
            sources[key] = alias
    flattened: dict[str, str] = {}
    for key in ENHANCEMENT_KEYS:
        if key not in sources:
            continue
        source = sources[key] if sources[key] == key else f"{sources[key]} (alias of {key})"
        pairs = _decode_enhancement(
            source, annotations[sources[key]], config.strict_enhancements, warnings
        )
        for name, value in pairs.items():
            if flattened.get(name):
                warnings.append(
                    f"annotation {source}: {name}={value!r} overrides {name}={flattened[name]!r}"
                )
            flattened[name] = value
    for name, value in config.enhancement_defaults.items():
        flattened.setdefault(name, value)
    return flattened


def normalise(
    config: QoSConfig,
    qos_level: str,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
) -> Normalised:
    """Rewrite a request's labels and annotations for its resolved level (§4.5).

    Args:
        config: selectors, aliases, defaults and strictness.
        qos_level: the level :func:`resolve_qos_level` returned.
        labels: the pod's labels as sent (``None`` = none).
        annotations: the pod's annotations as sent (``None`` = none).

    Returns:
        New read-only maps (the inputs are not changed) and the warnings of a lenient
        configuration.

    Raises:
        RequestError: with ``strict_enhancements``, an enhancement annotation that is not a
            JSON object of string values (the message names the annotation and the fault).
    """
    warnings: list[str] = []
    source = dict(annotations or {})
    source[QOS_LEVEL_KEY] = qos_level
    normalised = {key: value for key, value in source.items() if key in config.qos_keys}
    # The enhancement side wins a clash, as the reference merges it last.
    normalised.update(_flatten_enhancements(config, source, warnings))
    stamped_labels = {**(labels or {}), QOS_LEVEL_KEY: qos_level}
    kept_labels = {key: value for key, value in stamped_labels.items() if key in config.qos_keys}
    return Normalised(
        labels=MappingProxyType(kept_labels),
        annotations=MappingProxyType(normalised),
        warnings=tuple(warnings),
    )


def is_numa_binding(annotations: Mapping[str, str] | None) -> bool:
    """Whether normalised annotations ask for NUMA binding (``numa_binding == "true"``)."""
    return (annotations or {}).get(NUMA_BINDING_KEY) == "true"


def is_numa_exclusive(annotations: Mapping[str, str] | None) -> bool:
    """Whether normalised annotations ask for exclusive NUMA nodes (needs binding too)."""
    return is_numa_binding(annotations) and (annotations or {}).get(NUMA_EXCLUSIVE_KEY) == "true"


def cpuset_pool(annotations: Mapping[str, str] | None) -> str:
    """The shared pool a pod names in its cpu enhancement (``cpuset_pool``), or ""."""
    return (annotations or {}).get(CPUSET_POOL_KEY, "")
