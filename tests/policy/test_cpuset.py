"""CPUSet list format and set operations (spec cpu-policy §1.1)."""

import pytest

from policy.cpuset import CPUSet


@pytest.mark.parametrize(
    ("text", "ids", "formatted"),
    [
        pytest.param("", [], "", id="empty text is the empty set"),
        pytest.param("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11", id="runs and singles"),
        pytest.param("3,1,2", [1, 2, 3], "1-3", id="unsorted input formats as one run"),
        pytest.param("5-3", [], "", id="reversed range adds nothing"),
        pytest.param("1-2-3,7", [7], "7", id="three-part piece is ignored"),
        pytest.param("+4", [4], "4", id="leading plus accepted"),
    ],
)
def test_parse_and_format(text: str, ids: list[int], formatted: str) -> None:
    s = CPUSet.parse(text)
    assert s.to_sorted_list() == ids
    assert str(s) == formatted


@pytest.mark.parametrize("text", [" 1", "a", "1-", "1,,2", "-1", "1-x"])
def test_bad_text_names_the_piece(text: str) -> None:
    with pytest.raises(ValueError, match="invalid cpuset"):
        CPUSet.parse(text)


def test_nil_json_round_trip() -> None:
    nil = CPUSet.from_json("nil")
    assert not nil.is_initialized and nil.is_empty()
    assert nil.to_json() == "nil"
    assert nil != CPUSet() and nil.same_cpus(CPUSet())
    assert nil.clone() == CPUSet()
    assert CPUSet.parse("1-2").to_json() == "1-2"
