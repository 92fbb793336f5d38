"""Enhancement flattening and malformed enhancements (spec cpu-policy §4.3, §4.5)."""

import json
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.enhancements import (
    CPU_ENHANCEMENT_KEY,
    ENHANCEMENT_KEYS,
    MEMORY_ENHANCEMENT_KEY,
    NETWORK_ENHANCEMENT_KEY,
    _decode,
    cpuset_pool,
    flatten_enhancements,
    is_numa_binding,
    is_numa_exclusive,
)
from policy.cpu.request import RequestError

MEMORY_ALIAS = "legacy.example.com/memory"


def flatten(
    annotations: Mapping[str, str],
    *,
    strict: bool = True,
    aliases: Mapping[str, str] | None = None,
    defaults: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], tuple[str, ...]]:
    return flatten_enhancements(
        annotations, aliases=aliases or {}, defaults=defaults or {}, strict=strict
    )


def test_enhancement_keys_merge_in_sorted_order() -> None:
    assert list(ENHANCEMENT_KEYS) == sorted(ENHANCEMENT_KEYS)


@pytest.mark.parametrize(
    ("annotations", "aliases", "defaults", "want"),
    [
        pytest.param(
            {MEMORY_ENHANCEMENT_KEY: '{"numa_binding":"true","numa_exclusive":"true"}'},
            {},
            {},
            {"numa_binding": "true", "numa_exclusive": "true"},
            id="memory enhancement pairs are lifted",
        ),
        pytest.param({"app": "web"}, {}, {}, {}, id="no enhancement gives nothing"),
        pytest.param(
            {MEMORY_ALIAS: '{"numa_binding":"true"}'},
            {MEMORY_ALIAS: MEMORY_ENHANCEMENT_KEY},
            {},
            {"numa_binding": "true"},
            id="an alias stands for its key",
        ),
        pytest.param(
            {MEMORY_ALIAS: '{"a":"alias"}', MEMORY_ENHANCEMENT_KEY: '{"b":"key"}'},
            {MEMORY_ALIAS: MEMORY_ENHANCEMENT_KEY},
            {},
            {"b": "key"},
            id="the key beats its alias",
        ),
        pytest.param(
            {NETWORK_ENHANCEMENT_KEY: '{"k":"n"}', CPU_ENHANCEMENT_KEY: '{"k":"c"}'},
            {},
            {},
            {"k": "n"},
            id="network is merged after cpu",
        ),
        pytest.param(
            {},
            {},
            {"numa_exclusive": "true"},
            {"numa_exclusive": "true"},
            id="a default is added when unset",
        ),
        pytest.param(
            {MEMORY_ENHANCEMENT_KEY: '{"numa_exclusive":""}'},
            {},
            {"numa_exclusive": "true"},
            {"numa_exclusive": ""},
            id="an empty value set by the pod still beats the default",
        ),
        pytest.param(
            {CPU_ENHANCEMENT_KEY: '{"cpuset_pool":"\\ud800x"}'},
            {},
            {},
            {"cpuset_pool": "\ufffdx"},
            id="a lone surrogate escape decodes to U+FFFD as in Go",
        ),
        pytest.param(
            {CPU_ENHANCEMENT_KEY: '{"cpuset_pool":"\\ud83d\\ude00"}'},
            {},
            {},
            {"cpuset_pool": "\U0001f600"},
            id="a surrogate pair decodes to its character",
        ),
    ],
)
def test_flatten_enhancements(
    annotations: Mapping[str, str],
    aliases: Mapping[str, str],
    defaults: Mapping[str, str],
    want: dict[str, str],
) -> None:
    flattened, _ = flatten(annotations, aliases=aliases, defaults=defaults)
    assert flattened == want


def test_overwriting_a_pair_is_a_warning() -> None:
    annotations = {CPU_ENHANCEMENT_KEY: '{"k":"cpu"}', MEMORY_ENHANCEMENT_KEY: '{"k":"memory"}'}
    assert flatten(annotations) == (
        {"k": "memory"},
        (f"annotation {MEMORY_ENHANCEMENT_KEY}: k='memory' overrides k='cpu'",),
    )


# Malformed enhancements: lenient mode reproduces §4.5 (and warns); strict mode, qrmd's
# default, refuses (DESIGN.md "Time, config, errors": bad input gets a clear error).
MALFORMED = [
    pytest.param('{"numa_binding":"true"', {}, "is not valid JSON", id="truncated JSON"),
    pytest.param("", {}, "is not valid JSON", id="an empty value"),
    pytest.param('{"numa_binding": NaN}', {}, "is not valid JSON", id="NaN, which Go rejects"),
    pytest.param('["numa_binding"]', {}, "holds a JSON array, not an object", id="an array"),
    pytest.param("null", {}, "holds a JSON null, not an object", id="JSON null"),
    pytest.param('"true"', {}, "holds a JSON string, not an object", id="a bare string"),
    pytest.param(
        '{"numa_binding": true, "numa_exclusive": "true"}',
        {"numa_exclusive": "true"},
        "value of 'numa_binding' is a JSON boolean, not a string",
        id="a boolean value",
    ),
    pytest.param(
        '{"numa_binding": {"on": "true"}, "oom_priority": 5, "cpuset_pool": "batch"}',
        {"cpuset_pool": "batch"},
        "value of 'numa_binding' is a JSON object, not a string",
        id="nested and number values",
    ),
    pytest.param(
        '{"oom_priority": 1' + "0" * 5000 + "}",
        {},
        "value of 'oom_priority' is a JSON number, not a string",
        id="a 5000-digit number",
    ),
]


@pytest.mark.parametrize(("text", "kept", "reason"), MALFORMED)
def test_lenient_mode_ignores_malformed_enhancements_with_a_warning(
    text: str, kept: dict[str, str], reason: str
) -> None:
    flattened, warnings = flatten({MEMORY_ENHANCEMENT_KEY: text}, strict=False)
    assert flattened == kept
    assert warnings and reason in warnings[0]
    assert all(w.startswith(f"annotation {MEMORY_ENHANCEMENT_KEY}: ") for w in warnings)
    assert all(w.endswith("; ignored") for w in warnings)


@pytest.mark.parametrize(("text", "kept", "reason"), MALFORMED)
def test_strict_mode_refuses_malformed_enhancements(
    text: str, kept: dict[str, str], reason: str
) -> None:
    with pytest.raises(RequestError) as caught:
        flatten({MEMORY_ENHANCEMENT_KEY: text})
    assert str(caught.value).startswith(f"annotation {MEMORY_ENHANCEMENT_KEY}: ")
    assert reason in str(caught.value)


def test_a_malformed_alias_is_named_with_its_key() -> None:
    with pytest.raises(RequestError, match=rf"^annotation {MEMORY_ALIAS} \(alias of "):
        flatten({MEMORY_ALIAS: "{"}, aliases={MEMORY_ALIAS: MEMORY_ENHANCEMENT_KEY})


@pytest.mark.parametrize(
    ("annotations", "binding", "exclusive", "pool"),
    [
        pytest.param({"numa_binding": "true"}, True, False, "", id="binding alone"),
        pytest.param({"numa_exclusive": "true"}, False, False, "", id="exclusive needs binding"),
        pytest.param({"numa_binding": "true", "numa_exclusive": "true"}, True, True, "", id="both"),
        pytest.param(
            {"numa_binding": "True", "numa_exclusive": "true"},
            False,
            False,
            "",
            id="only lower-case true enables",
        ),
        pytest.param({"cpuset_pool": "batch"}, False, False, "batch", id="a named pool"),
        pytest.param(None, False, False, "", id="nothing set"),
    ],
)
def test_enhancement_predicates(
    annotations: Mapping[str, str] | None, binding: bool, exclusive: bool, pool: str
) -> None:
    assert is_numa_binding(annotations) is binding
    assert is_numa_exclusive(annotations) is exclusive
    assert cpuset_pool(annotations) == pool


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_texts = st.one_of(_json.map(json.dumps), st.text(max_size=30))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(ENHANCEMENT_KEYS), _texts, max_size=3), st.booleans())
def test_garbage_raises_only_request_error(annotations: dict[str, str], strict: bool) -> None:
    try:
        flattened, warnings = flatten(annotations, strict=strict)
    except RequestError:
        assert strict, "lenient mode never refuses"
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in flattened.items())
    assert strict is False or warnings == () or all("overrides" in w for w in warnings)


def _decode_with_loads(source: str, text: str, strict: bool) -> tuple[object, list[str]]:
    """``enhancements._decode`` as it was before its decoder was built once: ``json.loads``
    with the same hooks on every call; its pairs (or the refusal's message) and warnings."""

    def refuse(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    warnings: list[str] = []
    try:
        loads = json.loads  # the reference's call, kept as it was
        decoded = loads(text, parse_constant=refuse, parse_int=lambda _: 0, parse_float=lambda _: 0)
    except (ValueError, RecursionError) as err:
        message = f"annotation {source}: {text[:80]!r} is not valid JSON ({err})"
        if strict:
            return ("refused", message), warnings
        return {}, [f"{message}; ignored"]
    return ("decoded", decoded), warnings


@pytest.mark.parametrize(
    "text",
    [
        '{"numa_binding":"true"}',
        "\ufeff{}",
        '{"a": NaN}',
        '{"a": -Infinity}',
        '{"a": 1e400, "b": 123456789012345678901234567890}',
        '{"a": {"b": ["c", 1.5, null, true]}}',
        "[1, 2]",
        '{"a": "b"',
        " \n\t{} ",
        "[" * 5000,
    ],
    ids=[
        "one pair",
        "a byte-order mark is refused with json.loads's words",
        "NaN is refused",
        "-Infinity is refused",
        "huge numbers are not built",
        "nested values",
        "an array",
        "a truncated object",
        "surrounding whitespace",
        "deep nesting",
    ],
)
def test_the_shared_decoder_refuses_what_json_loads_refused_in_its_words(text: str) -> None:
    reference, _ = _decode_with_loads("m", text, strict=True)
    if reference[0] == "refused":
        with pytest.raises(RequestError) as refused:
            _decode("m", text, True, [])
        assert str(refused.value) == reference[1]
    else:
        warnings: list[str] = []
        _decode("m", text, False, warnings)
        assert not [w for w in warnings if "is not valid JSON" in w]


@settings(max_examples=200)
@given(
    st.text(max_size=40)
    | st.recursive(
        st.none() | st.booleans() | st.floats() | st.text(max_size=5),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(max_size=5), inner),
    ).map(json.dumps)
)
def test_the_shared_decoder_agrees_with_json_loads_on_any_text(text: str) -> None:
    reference, reference_warnings = _decode_with_loads("m", text, strict=False)
    warnings: list[str] = []
    pairs = _decode("m", text, False, warnings)
    if reference == {}:  # json.loads refused it: the same warning, nothing kept
        assert (pairs, warnings) == ({}, reference_warnings)
    else:
        assert not [w for w in warnings if "is not valid JSON" in w]


@pytest.mark.parametrize(
    ("text", "pairs", "warnings"),
    [
        ('{"numa_binding":"true"}', {"numa_binding": "true"}, 0),
        ('{"numa_binding":true}', {}, 1),
        ("[1]", {}, 1),
        ('{"cpuset_pool":"' + "p" * 600 + '"}', {"cpuset_pool": "p" * 600}, 0),
    ],
    ids=[
        "a short text gives its pairs every time",
        "a text with a non-string value warns every time",
        "a text that is not an object warns every time",
        "a long text, decoded without the memo, gives its pairs every time",
    ],
)
def test_a_text_decoded_again_gives_the_same_pairs_and_warnings(
    text: str, pairs: dict[str, str], warnings: int
) -> None:
    for _ in range(3):
        found = flatten_enhancements(
            {MEMORY_ENHANCEMENT_KEY: text}, aliases={}, defaults={}, strict=False
        )
        assert found[0] == pairs
        assert len(found[1]) == warnings


def test_a_strict_refusal_is_raised_every_time() -> None:
    for _ in range(2):
        with pytest.raises(RequestError, match="not a string"):
            flatten_enhancements(
                {MEMORY_ENHANCEMENT_KEY: '{"numa_binding":true}'},
                aliases={},
                defaults={},
                strict=True,
            )


def test_pairs_given_back_are_the_callers_to_change() -> None:
    text = '{"numa_binding":"true"}'
    first, _ = flatten_enhancements(
        {MEMORY_ENHANCEMENT_KEY: text}, aliases={}, defaults={}, strict=False
    )
    first["numa_binding"] = "changed"
    again, _ = flatten_enhancements(
        {MEMORY_ENHANCEMENT_KEY: text}, aliases={}, defaults={}, strict=False
    )
    assert again == {"numa_binding": "true"}
