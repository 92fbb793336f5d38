"""CPUSet list format and set operations (spec cpu-policy §1.1)."""

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.topology.cpuset import CPUSet


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


# -- formatting (§1.1) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "text"),
    [
        pytest.param([], "", id="empty set formats as empty text"),
        pytest.param([0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11", id="the spec's example"),
        pytest.param([5], "5", id="a run of one is a single id"),
        pytest.param([4, 5], "4-5", id="a run of two is a range"),
        pytest.param([1023, 0], "0,1023", id="ids far apart on a 1024-CPU node"),
    ],
)
def test_format(ids: list[int], text: str) -> None:
    assert str(CPUSet(ids)) == text


# -- parsing (§1.1) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "formatted"),
    [
        pytest.param("0-0", "0", id="a one-element range"),
        pytest.param("+1-+3", "1-3", id="plus signs on both range ends"),
        pytest.param("7,7,7", "7", id="duplicates collapse"),
        pytest.param("1-2-3", "", id="a lone three-part piece leaves the set empty"),
        pytest.param("0-1-2-3,4-5", "4-5", id="four parts are ignored too"),
        pytest.param("1--2,6", "6", id="a doubled dash makes three parts, ignored"),
        pytest.param("3-1,2", "2", id="a reversed range next to a single"),
        pytest.param("007", "7", id="leading zeros"),
    ],
)
def test_parse_more(text: str, formatted: str) -> None:
    parsed = CPUSet.parse(text)
    assert str(parsed) == formatted
    assert parsed.is_initialized


@pytest.mark.parametrize(
    "text",
    ["1 ", "1, 2", "1-2 ", "0x1", "1.5", ",", "1,", "½", "١", "1-2,a-b", "-"],
)
def test_bad_text_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="invalid cpuset"):
        CPUSet.parse(text)


# -- the initialized flag and the nil set (§1.1) ---------------------------------------------


def test_nil_behaves_as_empty_for_every_query() -> None:
    nil = CPUSet.uninitialized()
    assert nil.size() == 0 and len(nil) == 0 and nil.is_empty() and not nil
    assert not nil.contains(0) and 0 not in nil
    assert nil.to_sorted_list() == [] and str(nil) == ""
    assert nil.is_subset_of(CPUSet()) and CPUSet().is_subset_of(nil)


@pytest.mark.parametrize(
    "operation",
    [
        pytest.param(lambda s: s.union(CPUSet.uninitialized()), id="union"),
        pytest.param(lambda s: CPUSet.union_all([s, s]), id="union_all"),
        pytest.param(lambda s: s.intersection(s), id="intersection"),
        pytest.param(lambda s: s.difference(s), id="difference"),
        pytest.param(lambda s: s.clone(), id="clone"),
        pytest.param(lambda s: s.filter(lambda cpu: True), id="filter"),
    ],
)
def test_every_operation_yields_an_initialized_set(operation) -> None:
    result = operation(CPUSet.uninitialized())
    assert result.is_initialized and result.is_empty()
    assert result == CPUSet()


def test_nil_and_initialized_empty_differ_but_hold_the_same_cpus() -> None:
    nil, empty = CPUSet.uninitialized(), CPUSet()
    assert not nil.equals(empty) and nil != empty
    assert nil.same_cpus(empty)
    assert nil == CPUSet.from_json("nil")


# -- JSON (§1.1) ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "ids", "initialized"),
    [
        pytest.param("nil", [], False, id="nil decodes to the uninitialized set"),
        pytest.param("", [], True, id="empty string decodes to an initialized empty set"),
        pytest.param("0-3", [0, 1, 2, 3], True, id="list format decodes"),
        pytest.param("1-2-3,9", [9], True, id="three-part pieces are ignored in JSON too"),
    ],
)
def test_from_json(value: str, ids: list[int], initialized: bool) -> None:
    decoded = CPUSet.from_json(value)
    assert decoded.to_sorted_list() == ids
    assert decoded.is_initialized is initialized


@pytest.mark.parametrize(
    ("cpuset", "encoded"),
    [
        pytest.param(CPUSet.uninitialized(), "nil", id="nil encodes as nil"),
        pytest.param(CPUSet(), "", id="empty encodes as empty text"),
        pytest.param(CPUSet([0, 1, 2, 3]), "0-3", id="list format"),
    ],
)
def test_to_json(cpuset: CPUSet, encoded: str) -> None:
    assert cpuset.to_json() == encoded
    assert CPUSet.from_json(encoded) == cpuset


@pytest.mark.parametrize("value", [None, 3, ["0-3"], {"cpus": "0"}, b"0-3", "1-x", " 1"])
def test_from_json_refuses_non_strings_and_bad_text(value: object) -> None:
    with pytest.raises(ValueError):
        CPUSet.from_json(value)


# -- set operations (§1.1) ------------------------------------------------------------------


A = CPUSet.parse("0-3,8")
B = CPUSet.parse("2-5")


@pytest.mark.parametrize(
    ("result", "want"),
    [
        pytest.param(A.union(B), "0-5,8", id="union"),
        pytest.param(A | B, "0-5,8", id="| is union"),
        pytest.param(A.union(B, CPUSet([10])), "0-5,8,10", id="union of several"),
        pytest.param(CPUSet.union_all([A, B, CPUSet([9])]), "0-5,8-9", id="union_all"),
        pytest.param(CPUSet.union_all([]), "", id="union_all of nothing"),
        pytest.param(A.intersection(B), "2-3", id="intersection"),
        pytest.param(A & B, "2-3", id="& is intersection"),
        pytest.param(A.difference(B), "0-1,8", id="difference"),
        pytest.param(A - B, "0-1,8", id="- is difference"),
        pytest.param(A.filter(lambda cpu: cpu % 2 == 0), "0,2,8", id="filter"),
        pytest.param(A.add(9, 10), "0-3,8-10", id="add returns the grown set"),
        pytest.param(A.clone(), "0-3,8", id="clone"),
    ],
)
def test_set_operations(result: CPUSet, want: str) -> None:
    assert result == CPUSet.parse(want)


def test_operations_never_mutate() -> None:
    before = str(A)
    A.add(20)
    A.union(B)
    A.difference(B)
    assert str(A) == before


def test_queries() -> None:
    assert A.size() == 5 and len(A) == 5
    assert A.contains(8) and not A.contains(7) and not A.contains(-1)
    assert 8 in A and "8" not in A
    assert A.to_sorted_list() == [0, 1, 2, 3, 8] and list(A) == [0, 1, 2, 3, 8]
    assert A.min() == 0 and B.min() == 2
    assert A.mask == 0b1_0000_1111
    assert CPUSet.parse("2-3").is_subset_of(A) and not B.is_subset_of(A)
    assert CPUSet.parse("2-3") <= A
    assert A.equals(CPUSet.parse("8,0-3"))


def test_min_of_empty_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        CPUSet().min()


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: CPUSet([3, -1]), id="negative id"),
        pytest.param(lambda: CPUSet.from_mask(-1), id="negative mask"),
    ],
)
def test_negative_ids_are_refused(build) -> None:
    with pytest.raises(ValueError, match="non-negative"):
        build()


def test_sets_are_hashable_values() -> None:
    assert {CPUSet.parse("0-3"): "a"}[CPUSet([3, 2, 1, 0])] == "a"
    assert len({CPUSet.parse("1"), CPUSet([1]), CPUSet.from_mask(2)}) == 1


@pytest.mark.parametrize("cpuset", [CPUSet.uninitialized(), CPUSet(), CPUSet.parse("0-3,700")])
def test_pickle_keeps_members_and_flag(cpuset: CPUSet) -> None:
    copied = pickle.loads(pickle.dumps(cpuset))
    assert copied == cpuset and copied.is_initialized == cpuset.is_initialized


# -- properties ------------------------------------------------------------------------------

cpu_sets = st.builds(CPUSet, st.sets(st.integers(0, 1100), max_size=80))
#: Sets of long runs, the common shape on a node (pools, NUMA nodes, sockets).
run_sets = st.builds(
    lambda runs: CPUSet(c for start, length in runs for c in range(start, start + length)),
    st.lists(st.tuples(st.integers(0, 1100), st.integers(1, 300)), max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(cpuset=cpu_sets)
def test_list_format_round_trips(cpuset: CPUSet) -> None:
    text = str(cpuset)
    assert CPUSet.parse(text) == cpuset
    assert CPUSet.from_json(cpuset.to_json()) == cpuset
    assert " " not in text and not text.startswith(",") and not text.endswith(",")


@settings(max_examples=200, deadline=None)
@given(a=cpu_sets, b=cpu_sets)
def test_operations_agree_with_python_sets(a: CPUSet, b: CPUSet) -> None:
    sa, sb = set(a), set(b)
    assert set(a.union(b)) == sa | sb
    assert set(a.intersection(b)) == sa & sb
    assert set(a.difference(b)) == sa - sb
    assert a.is_subset_of(b) == (sa <= sb)
    assert a.size() == len(sa)


# Pieces that keep ids small: garbage made of digits would otherwise ask for huge masks.
_garbage_pieces = st.sampled_from(["0", "1", "7", "12", "+", "-", ",", " ", "x", "", ".", "٣"])


@settings(max_examples=300, deadline=None)
@given(text=st.lists(_garbage_pieces, max_size=10).map("".join))
def test_garbage_raises_value_error_or_parses(text: str) -> None:
    try:
        parsed = CPUSet.parse(text)
    except ValueError as err:
        assert "invalid cpuset" in str(err)
        return
    assert CPUSet.parse(str(parsed)) == parsed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("65536", "exceeds the largest CPU id 65535", id="one past the largest id"),
        pytest.param("0-99999999999", "exceeds the largest CPU id", id="a range to a huge id"),
        pytest.param("9" * 5000, "exceeds the largest CPU id", id="thousands of digits"),
    ],
)
def test_ids_beyond_any_machine_are_refused(text: str, message: str) -> None:
    # Not in the spec: the reference would try to build the set and run out of memory.
    with pytest.raises(ValueError, match=message):
        CPUSet.parse(text)


def test_the_largest_id_and_leading_zeros_parse() -> None:
    assert CPUSet.parse("65535").to_sorted_list() == [65535]
    assert CPUSet.parse("0000000000000000007,+0").to_sorted_list() == [0, 7]


def _runs_of_members(ids: list[int]) -> str:
    """The list format built member by member: the definition the fast formatting must meet."""
    pieces: list[tuple[int, int]] = []
    for cpu in ids:
        if pieces and pieces[-1][1] == cpu - 1:
            pieces[-1] = (pieces[-1][0], cpu)
        else:
            pieces.append((cpu, cpu))
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in pieces)


@settings(max_examples=300, deadline=None)
@given(cpuset=st.one_of(cpu_sets, run_sets))
def test_format_is_the_maximal_runs_of_the_members(cpuset: CPUSet) -> None:
    assert str(cpuset) == _runs_of_members(list(cpuset))


@settings(max_examples=200, deadline=None)
@given(st.frozensets(st.integers(min_value=0, max_value=300), max_size=80))
def test_list_format_is_the_runs_of_the_ids_each_time(ids: frozenset[int]) -> None:
    runs: list[list[int]] = []
    for cpu in sorted(ids):
        if runs and runs[-1][1] == cpu - 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    want = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
    assert str(CPUSet(ids)) == want
    assert str(CPUSet(ids)) == want  # a new set of the same CPUs: the remembered text
