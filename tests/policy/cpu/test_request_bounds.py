"""Every string of a request is bounded by Kubernetes' own limits (Kubernetes' name limits).

A string at its bound passes; one byte more is refused, naming the field and the numbers, and
the message quotes no more than 80 characters of the offending name.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy import names
from policy.cpu.request import RequestError, validate_request
from tests.policy.cpu.test_request import web_app

# (field, bound): the contract, spelled out again rather than read from the module.
BOUNDS = [
    ("pod_uid", 128),
    ("pod_name", 253),
    ("pod_namespace", 63),
    ("container_name", 63),
    ("pod_role", 253),
    ("pod_type", 253),
    ("resource_name", 253),
]


@pytest.mark.parametrize(
    ("field", "bound"), [pytest.param(f, b, id=f"{f} of {b} bytes passes") for f, b in BOUNDS]
)
def test_a_string_at_its_bound_passes(field: str, bound: int) -> None:
    validate_request(web_app(**{field: "x" * bound}))


@pytest.mark.parametrize(
    ("field", "bound"),
    [pytest.param(f, b, id=f"{f} of {b + 1} bytes is refused") for f, b in BOUNDS],
)
def test_a_string_past_its_bound_is_refused_naming_the_field(field: str, bound: int) -> None:
    with pytest.raises(RequestError) as caught:
        validate_request(web_app(**{field: "x" * (bound + 1)}))
    assert f"{field} is {bound + 1} bytes, more than Kubernetes allows ({bound})" in str(
        caught.value
    )


def test_bytes_not_characters_are_counted() -> None:
    with pytest.raises(RequestError, match="pod_namespace is 64 bytes"):
        validate_request(web_app(pod_namespace="é" * 32))  # 32 characters, 64 bytes


def test_a_four_mebibyte_name_is_refused_without_being_echoed() -> None:
    with pytest.raises(RequestError) as caught:
        validate_request(web_app(pod_name="n" * (4 << 20)))
    message = str(caught.value)
    assert "pod_name is 4194304 bytes" in message
    assert len(message) < 400 and "(4194304 characters)" in message


@pytest.mark.parametrize(
    ("labels", "annotations", "reason"),
    [
        pytest.param(
            {"k" * 318: "v"},
            None,
            "labels key is 318 bytes",
            id="a label key of 318 bytes is refused",
        ),
        pytest.param(
            {"v": "x" * 64},
            None,
            "labels value of 'v' is 64 bytes",
            id="a label value of 64 bytes is refused",
        ),
        pytest.param(
            {"a": "x" * 60},
            {"b": "y" * (256 * 1024 - 60)},
            "labels and annotations hold 262146 bytes together",
            id="labels and annotations past 256 KiB together are refused",
        ),
    ],
)
def test_maps_are_bounded(labels, annotations, reason: str) -> None:
    with pytest.raises(RequestError, match=reason):
        validate_request(web_app(labels=labels, annotations=annotations))


def test_maps_at_their_bounds_pass() -> None:
    labels = {"k" * 317: "v" * 63}
    rest = names.MAX_MAPS_BYTES - 317 - 63 - 1
    validate_request(web_app(labels=labels, annotations={"a": "x" * rest}))


# Any character, lone surrogates included (which ``surrogatepass`` writes as 3 bytes).
_ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=12)


@given(value=_ANY_TEXT)
def test_a_names_size_is_its_utf8_bytes_whatever_its_characters(value: str) -> None:
    size = len(value.encode("utf-8", "surrogatepass"))
    assert names.too_long(value, "pod_name", size) is None
    if size:
        assert names.too_long(value, "pod_name", size - 1) == (
            f"pod_name is {size} bytes, more than Kubernetes allows ({size - 1})"
        )


@given(maps=st.lists(st.none() | st.dictionaries(_ANY_TEXT, _ANY_TEXT, max_size=3), max_size=3))
def test_maps_count_the_utf8_bytes_of_every_key_and_value(
    maps: list[dict[str, str] | None],
) -> None:
    want = sum(
        len(text.encode("utf-8", "surrogatepass"))
        for mapping in maps
        if mapping
        for pair in mapping.items()
        for text in pair
    )
    assert names.map_bytes(*maps) == want


@pytest.mark.parametrize(
    ("namespace", "refused"),
    [
        pytest.param("😀" * 15, False, id="15 four-byte characters (60 bytes) pass"),
        pytest.param("😀" * 16, True, id="16 four-byte characters (64 bytes) are refused"),
        pytest.param("é" * 31 + "x", False, id="63 bytes of two-byte characters pass"),
    ],
)
def test_short_names_of_wide_characters_are_measured(namespace: str, refused: bool) -> None:
    if refused:
        with pytest.raises(RequestError, match="pod_namespace is 64 bytes"):
            validate_request(web_app(pod_namespace=namespace))
    else:
        validate_request(web_app(pod_namespace=namespace))


@pytest.mark.parametrize(
    ("annotation", "refused"),
    [
        pytest.param("€" * (87_381 - 1), False, id="three-byte characters under 256 KiB pass"),
        pytest.param("€" * 87_382, True, id="three-byte characters past 256 KiB are refused"),
    ],
)
def test_maps_of_wide_characters_are_counted_in_bytes(annotation: str, refused: bool) -> None:
    request = web_app(labels=None, annotations={"a": annotation})
    if refused:
        with pytest.raises(RequestError, match="262147 bytes together"):
            validate_request(request)
    else:
        validate_request(request)
