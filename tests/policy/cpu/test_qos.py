"""QoS resolution, normalisation and debug pods (spec cpu-policy §4.3–§4.6; §16 items 6, 7, 10)."""

import json
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.enhancements import is_numa_binding, is_numa_exclusive
from policy.cpu.qos import (
    CPU_ENHANCEMENT_KEY,
    ENHANCEMENT_KEYS,
    MEMORY_ENHANCEMENT_KEY,
    NETWORK_ENHANCEMENT_KEY,
    QOS_LEVEL_KEY,
    QOS_LEVELS,
    QoSConfig,
    QoSConfigError,
    QoSError,
    check_handled_level,
    is_debug_pod,
    normalise,
    resolve_qos_level,
)
from policy.cpu.request import RequestError

DEFAULT = QoSConfig()
LENIENT = QoSConfig(strict_enhancements=False)
LEGACY = "legacy.example.com/qos"
# Legacy selectors as an operator might add them with pod-annotation-qos-level-*-selector.
WITH_LEGACY = QoSConfig.build(
    extra_selectors={
        "dedicated_cores": {LEGACY: "exclusive"},
        "shared_cores": {LEGACY: "normal"},
        "reclaimed_cores": {LEGACY: "best-effort"},
    }
)
# Two levels claiming the same pair: only the fixed order decides.
OVERLAPPING = QoSConfig.build(
    extra_selectors={"reclaimed_cores": {"team": "batch"}, "dedicated_cores": {"team": "batch"}}
)


def test_levels_are_tried_in_the_recommended_order() -> None:
    assert QOS_LEVELS == ("dedicated_cores", "reclaimed_cores", "shared_cores", "system_cores")
    assert list(ENHANCEMENT_KEYS) == sorted(ENHANCEMENT_KEYS)


@pytest.mark.parametrize(
    ("config", "annotations", "want"),
    [
        pytest.param(DEFAULT, None, "shared_cores", id="no annotations at all is shared_cores"),
        pytest.param(DEFAULT, {"app": "web"}, "shared_cores", id="no QoS annotation is shared"),
        pytest.param(
            DEFAULT, {QOS_LEVEL_KEY: "shared_cores"}, "shared_cores", id="shared_cores is shared"
        ),
        pytest.param(
            DEFAULT, {QOS_LEVEL_KEY: "dedicated_cores"}, "dedicated_cores", id="dedicated resolves"
        ),
        pytest.param(
            DEFAULT, {QOS_LEVEL_KEY: "reclaimed_cores"}, "reclaimed_cores", id="reclaimed resolves"
        ),
        pytest.param(
            DEFAULT, {QOS_LEVEL_KEY: "system_cores"}, "system_cores", id="system_cores resolves"
        ),
        pytest.param(
            WITH_LEGACY,
            {LEGACY: "exclusive"},
            "dedicated_cores",
            id="an extra selector pair matches",
        ),
        pytest.param(
            WITH_LEGACY,
            {LEGACY: "best-effort", QOS_LEVEL_KEY: "reclaimed_cores"},
            "reclaimed_cores",
            id="default and extra pair agreeing match",
        ),
        pytest.param(
            QoSConfig.build(extra_selectors={"reclaimed_cores": {LEGACY: "be"}}),
            {LEGACY: "other"},
            "shared_cores",
            id="a mismatch on a level other than shared still defaults to shared",
        ),
        pytest.param(
            OVERLAPPING, {"team": "batch"}, "dedicated_cores", id="overlap resolves by fixed order"
        ),
    ],
)
def test_resolve_qos_level(
    config: QoSConfig, annotations: Mapping[str, str] | None, want: str
) -> None:
    assert resolve_qos_level(config, annotations) == want


@pytest.mark.parametrize(
    ("config", "annotations", "message"),
    [
        pytest.param(
            DEFAULT,
            {QOS_LEVEL_KEY: "foo"},
            "can't get valid qos level",
            id="unknown value foo is an error",
        ),
        pytest.param(
            DEFAULT, {QOS_LEVEL_KEY: ""}, "can't get valid qos level", id="empty value is an error"
        ),
        pytest.param(
            WITH_LEGACY,
            {LEGACY: "unknown"},
            "can't get valid qos level",
            id="an extra key with an unknown value is an error",
        ),
        pytest.param(
            WITH_LEGACY,
            {LEGACY: "exclusive", QOS_LEVEL_KEY: "shared_cores"},
            "qos dedicated_cores conflicts, matched count 1, mis matched count 1",
            id="half a selector matching is a conflict",
        ),
    ],
)
def test_resolve_qos_level_refuses(
    config: QoSConfig, annotations: Mapping[str, str], message: str
) -> None:
    with pytest.raises(QoSError) as caught:
        resolve_qos_level(config, annotations)
    assert str(caught.value) == message


def test_labels_are_never_consulted() -> None:
    # resolve_qos_level reads annotations only; normalise then stamps the level on labels.
    normalised = normalise(DEFAULT, "shared_cores", {QOS_LEVEL_KEY: "dedicated_cores"}, None)
    assert normalised.labels == {QOS_LEVEL_KEY: "shared_cores"}


def test_spec_4_5_example_verbatim() -> None:
    annotations = {
        QOS_LEVEL_KEY: "dedicated_cores",
        MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true","numa_exclusive":"true"}',
    }
    level = resolve_qos_level(DEFAULT, annotations)
    normalised = normalise(DEFAULT, level, {"app": "db"}, annotations)
    assert normalised.annotations == {
        "katalyst.kubewharf.io/qos_level": "dedicated_cores",
        "numa_binding": "true",
        "numa_exclusive": "true",
    }
    assert normalised.labels == {"katalyst.kubewharf.io/qos_level": "dedicated_cores"}
    assert normalised.warnings == ()
    assert is_numa_binding(normalised.annotations) and is_numa_exclusive(normalised.annotations)


MEMORY_ALIAS = "legacy.example.com/memory"
ALIASED = QoSConfig.build(enhancement_keys={MEMORY_ENHANCEMENT_KEY: MEMORY_ALIAS})
EXCLUSIVE_BY_DEFAULT = QoSConfig.build(enhancement_defaults={"numa_exclusive": "true"})


@pytest.mark.parametrize(
    ("config", "level", "annotations", "want"),
    [
        pytest.param(
            DEFAULT,
            "shared_cores",
            {"app": "web", "kubernetes.io/config.seen": "x"},
            {QOS_LEVEL_KEY: "shared_cores"},
            id="other annotations are dropped and the level is stamped",
        ),
        pytest.param(
            DEFAULT,
            "shared_cores",
            None,
            {QOS_LEVEL_KEY: "shared_cores"},
            id="absent annotations become the level alone",
        ),
        pytest.param(
            DEFAULT,
            "shared_cores",
            {CPU_ENHANCEMENT_KEY: '{"cpuset_pool":"batch"}'},
            {QOS_LEVEL_KEY: "shared_cores", "cpuset_pool": "batch"},
            id="cpu enhancement names the shared pool",
        ),
        pytest.param(
            WITH_LEGACY,
            "dedicated_cores",
            {LEGACY: "exclusive", "other": "x"},
            {LEGACY: "exclusive", QOS_LEVEL_KEY: "dedicated_cores"},
            id="extra selector keys are kept",
        ),
        pytest.param(
            ALIASED,
            "dedicated_cores",
            {MEMORY_ALIAS: '{"numa_binding":"true"}'},
            {QOS_LEVEL_KEY: "dedicated_cores", "numa_binding": "true"},
            id="an alias stands for its enhancement key",
        ),
        pytest.param(
            ALIASED,
            "dedicated_cores",
            {
                MEMORY_ALIAS: '{"numa_binding":"true","numa_exclusive":"true"}',
                MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true"}',
            },
            {QOS_LEVEL_KEY: "dedicated_cores", "numa_binding": "true"},
            id="the default key wins over its alias",
        ),
        pytest.param(
            EXCLUSIVE_BY_DEFAULT,
            "dedicated_cores",
            {MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true"}'},
            {QOS_LEVEL_KEY: "dedicated_cores", "numa_binding": "true", "numa_exclusive": "true"},
            id="a default fills a missing enhancement key",
        ),
        pytest.param(
            EXCLUSIVE_BY_DEFAULT,
            "dedicated_cores",
            {MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true","numa_exclusive":"false"}'},
            {QOS_LEVEL_KEY: "dedicated_cores", "numa_binding": "true", "numa_exclusive": "false"},
            id="a default never overrides the pod",
        ),
        pytest.param(
            EXCLUSIVE_BY_DEFAULT,
            "shared_cores",
            None,
            {QOS_LEVEL_KEY: "shared_cores", "numa_exclusive": "true"},
            id="defaults apply whatever the level",
        ),
        pytest.param(
            DEFAULT,
            "shared_cores",
            {
                NETWORK_ENHANCEMENT_KEY: '{"k":"network"}',
                CPU_ENHANCEMENT_KEY: '{"k":"cpu","c":"1"}',
                MEMORY_ENHANCEMENT_KEY: '{"k":"memory","m":"2"}',
            },
            {QOS_LEVEL_KEY: "shared_cores", "k": "network", "c": "1", "m": "2"},
            id="enhancements merge in sorted key order, the last winning",
        ),
        pytest.param(
            DEFAULT,
            "shared_cores",
            {MEMORY_ENHANCEMENT_KEY: json.dumps({QOS_LEVEL_KEY: "dedicated_cores"})},
            {QOS_LEVEL_KEY: "dedicated_cores"},
            id="the enhancement side wins a clash with the QoS key as in the reference",
        ),
        pytest.param(
            DEFAULT,
            "shared_cores",
            {CPU_ENHANCEMENT_KEY: '{"cpuset_pool":"\\ud800x"}'},
            {QOS_LEVEL_KEY: "shared_cores", "cpuset_pool": "\ufffdx"},
            id="a lone surrogate escape decodes to U+FFFD as in Go",
        ),
        pytest.param(
            DEFAULT,
            "shared_cores",
            {CPU_ENHANCEMENT_KEY: " {} "},
            {QOS_LEVEL_KEY: "shared_cores"},
            id="an empty object contributes nothing",
        ),
    ],
)
def test_normalise_annotations(
    config: QoSConfig,
    level: str,
    annotations: Mapping[str, str] | None,
    want: Mapping[str, str],
) -> None:
    normalised = normalise(config, level, None, annotations)
    assert normalised.annotations == want
    assert normalised.labels == {QOS_LEVEL_KEY: level}


def test_normalise_leaves_its_inputs_alone() -> None:
    labels = {"app": "web"}
    annotations = {MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true"}'}
    normalise(DEFAULT, "dedicated_cores", labels, annotations)
    assert labels == {"app": "web"}
    assert annotations == {MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true"}'}


def test_normalised_labels_keep_only_selector_keys() -> None:
    labels = {LEGACY: "normal", "app": "web", QOS_LEVEL_KEY: "reclaimed_cores"}
    normalised = normalise(WITH_LEGACY, "shared_cores", labels, None)
    assert normalised.labels == {LEGACY: "normal", QOS_LEVEL_KEY: "shared_cores"}


def test_strict_config_refuses_what_lenient_ignores() -> None:
    annotations = {MEMORY_ENHANCEMENT_KEY: '{"numa_binding": true}'}
    lenient = normalise(LENIENT, "shared_cores", None, annotations)
    assert lenient.annotations == {QOS_LEVEL_KEY: "shared_cores"} and len(lenient.warnings) == 1
    with pytest.raises(RequestError, match="value of 'numa_binding' is a JSON boolean"):
        normalise(DEFAULT, "shared_cores", None, annotations)


def test_strict_error_names_the_alias_the_pod_used() -> None:
    with pytest.raises(RequestError, match=f"annotation {MEMORY_ALIAS} \\(alias of "):
        normalise(ALIASED, "shared_cores", None, {MEMORY_ALIAS: "{"})


def test_a_losing_alias_is_never_decoded() -> None:
    annotations = {MEMORY_ALIAS: "not json", MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true"}'}
    normalised = normalise(ALIASED, "dedicated_cores", None, annotations)
    assert normalised.annotations["numa_binding"] == "true" and normalised.warnings == ()


DEBUG_KEYS = ("debug.example.com/profile", "debug.example.com/attach")


@pytest.mark.parametrize(
    ("keys", "annotations", "want"),
    [
        pytest.param(DEBUG_KEYS, {"debug.example.com/attach": ""}, True, id="any debug key counts"),
        pytest.param(
            DEBUG_KEYS, {"debug.example.com/profile": "false"}, True, id="the value is irrelevant"
        ),
        pytest.param(DEBUG_KEYS, {"app": "web"}, False, id="no debug key is no debug pod"),
        pytest.param(DEBUG_KEYS, None, False, id="no annotations is no debug pod"),
        pytest.param((), {"debug.example.com/attach": ""}, False, id="no keys configured"),
    ],
)
def test_is_debug_pod(
    keys: tuple[str, ...], annotations: Mapping[str, str] | None, want: bool
) -> None:
    assert is_debug_pod(keys, annotations) is want


def test_system_cores_is_not_handled() -> None:
    with pytest.raises(QoSError, match=r"^katalyst QoS level: system_cores is not supported yet$"):
        check_handled_level("system_cores")
    for level in ("shared_cores", "dedicated_cores", "reclaimed_cores"):
        check_handled_level(level)


def test_default_selectors_match_each_level_by_the_qos_key() -> None:
    assert DEFAULT.selectors == {level: {QOS_LEVEL_KEY: level} for level in QOS_LEVELS}
    assert DEFAULT.qos_keys == {QOS_LEVEL_KEY}
    assert WITH_LEGACY.selectors["dedicated_cores"] == {
        QOS_LEVEL_KEY: "dedicated_cores",
        LEGACY: "exclusive",
    }


def test_config_is_frozen_against_its_sources() -> None:
    extra = {"dedicated_cores": {LEGACY: "exclusive"}}
    config = QoSConfig.build(extra_selectors=extra)
    extra["dedicated_cores"][LEGACY] = "changed"
    assert config.selectors["dedicated_cores"][LEGACY] == "exclusive"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"extra_selectors": {"gold_cores": {"a": "b"}}},
            "selector option for unknown QoS level 'gold_cores'",
            id="a selector for an unknown level",
        ),
        pytest.param(
            {"enhancement_keys": {"katalyst.kubewharf.io/gpu_enhancement": "x"}},
            "which is not one of",
            id="an alias for a key that is not an enhancement key",
        ),
        pytest.param(
            {"enhancement_keys": {CPU_ENHANCEMENT_KEY: "x", MEMORY_ENHANCEMENT_KEY: "x"}},
            "enhancement alias 'x' is given for both",
            id="one alias for two enhancement keys",
        ),
        pytest.param(
            {"enhancement_keys": {CPU_ENHANCEMENT_KEY: MEMORY_ENHANCEMENT_KEY}},
            "must be a different, non-empty key",
            id="an alias that is itself an enhancement key",
        ),
    ],
)
def test_bad_config_is_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(QoSConfigError, match=message):
        QoSConfig.build(**options)  # type: ignore[arg-type]


_keys = st.sampled_from([QOS_LEVEL_KEY, LEGACY, *ENHANCEMENT_KEYS, MEMORY_ALIAS, "app"])
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
_annotation_values = st.one_of(
    st.sampled_from([*QOS_LEVELS, "foo", "exclusive", "normal"]),
    st.text(max_size=20),
    _json_values.map(json.dumps),
)
GARBAGE_CONFIGS = [
    QoSConfig.build(
        extra_selectors={"dedicated_cores": {LEGACY: "exclusive"}},
        enhancement_keys={MEMORY_ENHANCEMENT_KEY: MEMORY_ALIAS},
        enhancement_defaults={"numa_binding": "false"},
        strict_enhancements=strict,
    )
    for strict in (True, False)
]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(GARBAGE_CONFIGS),
    st.dictionaries(_keys, _annotation_values, max_size=5),
    st.dictionaries(_keys, st.text(max_size=5), max_size=3),
)
def test_garbage_annotations_raise_only_our_errors(
    config: QoSConfig, annotations: dict[str, str], labels: dict[str, str]
) -> None:
    try:
        level = resolve_qos_level(config, annotations)
    except QoSError:
        return
    assert level in QOS_LEVELS
    try:
        normalised = normalise(config, level, labels, annotations)
    except RequestError:
        assert config.strict_enhancements, "the lenient configuration never refuses"
        return
    assert set(normalised.labels) <= config.qos_keys
    assert normalised.labels[QOS_LEVEL_KEY] == level
    assert all(isinstance(v, str) for v in normalised.annotations.values())
    assert "numa_binding" in normalised.annotations
