"""Reserved CPUs (spec cpu-policy §3): the quantity, its Kubernetes parsing, the placement."""

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.reserve import (
    ReserveError,
    kubelet_reserved_cores,
    parse_cpu_quantity,
    reserved_cpu_count,
    reserved_cpus,
)
from policy.errors import PolicyError
from tests.topologies import SYNTH_16_2_4, SYNTH_256_2_8, cpus


@pytest.mark.parametrize(
    ("text", "cores"),
    [
        pytest.param("500m", Fraction(1, 2), id="milli"),
        pytest.param("1", Fraction(1), id="whole"),
        pytest.param("1.5", Fraction(3, 2), id="decimal"),
        pytest.param(".5", Fraction(1, 2), id="no integer part"),
        pytest.param("2.", Fraction(2), id="no fraction digits"),
        pytest.param("+3", Fraction(3), id="plus sign"),
        pytest.param("-1", Fraction(-1), id="minus sign parses (refused later)"),
        pytest.param("0", Fraction(0), id="zero"),
        pytest.param("2e3", Fraction(2000), id="decimal exponent"),
        pytest.param("15E-1", Fraction(3, 2), id="negative exponent"),
        pytest.param("2k", Fraction(2000), id="decimal SI kilo"),
        pytest.param("1Ki", Fraction(1024), id="binary SI"),
        pytest.param("250u", Fraction(1, 4000), id="micro"),
        pytest.param("1n", Fraction(1, 10**9), id="nano"),
    ],
)
def test_parse_cpu_quantity(text: str, cores: Fraction) -> None:
    assert parse_cpu_quantity(text) == cores


@pytest.mark.parametrize(
    "text", ["", "m", "1 ", " 1", "1.2.3", "1x", "1e", "1mi", "1KiB", "abc", "1e99", "--1"]
)
def test_bad_quantity_is_a_reserve_error(text: str) -> None:
    with pytest.raises(ReserveError, match=r"quantity|exponent"):
        parse_cpu_quantity(text)


@pytest.mark.parametrize(
    ("kube", "system", "want"),
    [
        pytest.param(None, None, 0, id="no keys reserve nothing"),
        pytest.param("500m", None, 1, id="half a core rounds up to one"),
        pytest.param("500m", "500m", 1, id="halves sum to one"),
        pytest.param("1", "1.5", 3, id="2.5 rounds up to 3"),
        pytest.param(None, "2", 2, id="system only"),
        pytest.param("0.9995", "0.0005", 1, id="summed exactly before rounding"),
        pytest.param("1n", None, 1, id="a nano-core rounds up to a milli, then a core"),
    ],
)
def test_kubelet_reserved_cores(kube: str | None, system: str | None, want: int) -> None:
    assert kubelet_reserved_cores(kube, system) == want


@pytest.mark.parametrize(
    ("kube", "system", "message"),
    [
        pytest.param("x", None, "for kube-reserved failed with error: 'x' is not", id="bad kube"),
        pytest.param("1", "1y", "for system-reserved failed with error: '1y'", id="bad system"),
        pytest.param("-1", None, "for kube-reserved is negative: '-1'", id="negative"),
    ],
)
def test_kubelet_reserved_cores_names_the_bad_field(
    kube: str | None, system: str | None, message: str
) -> None:
    with pytest.raises(ReserveError, match=message):
        kubelet_reserved_cores(kube, system)


@pytest.mark.parametrize(
    ("use_kubelet", "option", "kube", "system", "want"),
    [
        pytest.param(False, 2, "8", "8", 2, id="the option unless told to use the kubelet's"),
        pytest.param(True, 2, "1", "500m", 2, id="the kubelet's reservation when told"),
        pytest.param(True, 7, None, None, 0, id="the kubelet reserving nothing wins"),
        pytest.param(False, 0, None, None, 0, id="the default reserves nothing"),
    ],
)
def test_reserved_cpu_count(
    use_kubelet: bool, option: int, kube: str | None, system: str | None, want: int
) -> None:
    got = reserved_cpu_count(
        use_kubelet_reserved_config=use_kubelet,
        reserved_cpu_cores=option,
        kube_reserved_cpu=kube,
        system_reserved_cpu=system,
    )
    assert got == want


@pytest.mark.parametrize(
    ("topo", "count", "want"),
    [
        pytest.param(SYNTH_16_2_4, 2, "0,2", id="checklist 3: two on (16,2,4) are 0,2"),
        pytest.param(SYNTH_16_2_4, 0, "", id="zero reserves nothing"),
        pytest.param(SYNTH_16_2_4, 5, "0-2,4,6", id="round robin over NUMA nodes"),
        pytest.param(SYNTH_16_2_4, 16, "0-15", id="the whole node"),
        pytest.param(SYNTH_256_2_8, 3, "0,16,32", id="lowest CPU of the first NUMA nodes"),
    ],
)
def test_reserved_cpus(topo, count: int, want: str) -> None:
    got = reserved_cpus(topo, use_kubelet_reserved_config=False, reserved_cpu_cores=count)
    assert got == cpus(want)


def test_reserved_cpus_from_the_kubelet() -> None:
    got = reserved_cpus(
        SYNTH_16_2_4,
        use_kubelet_reserved_config=True,
        reserved_cpu_cores=0,
        kube_reserved_cpu="1",
        system_reserved_cpu="200m",
    )
    assert got == cpus("0,2")


def test_more_than_the_node_fails_like_the_reference() -> None:
    with pytest.raises(ReserveError) as caught:
        reserved_cpus(SYNTH_16_2_4, use_kubelet_reserved_config=False, reserved_cpu_cores=17)
    assert str(caught.value) == (
        "GetCoresReservedForSystem for reservedCPUsNum: 17 failed with error: "
        "takeByNUMABalance for reservedCPUsNum: 17 failed with error: "
        "not enough cpus available to satisfy request: requested=17, available=16"
    )
    assert isinstance(caught.value, PolicyError)


def test_kubelet_quantity_error_has_the_reference_shape() -> None:
    # As in the reference, the outer number is the configured option, not the kubelet's value.
    with pytest.raises(ReserveError) as caught:
        reserved_cpus(
            SYNTH_16_2_4,
            use_kubelet_reserved_config=True,
            reserved_cpu_cores=0,
            kube_reserved_cpu="lots",
        )
    assert str(caught.value).startswith(
        "GetCoresReservedForSystem for reservedCPUsNum: 0 failed with error: "
        "GetKubeletReservedQuantity failed with error: parse cpu quantity for kube-reserved"
    )


def test_negative_option_is_refused() -> None:
    with pytest.raises(ReserveError, match="reserved_cpu_cores must not be negative, got -1"):
        reserved_cpu_count(use_kubelet_reserved_config=False, reserved_cpu_cores=-1)


@settings(max_examples=200, deadline=None)
@given(milli=st.integers(0, 10**6))
def test_milli_quantities_round_up_to_whole_cpus(milli: int) -> None:
    assert kubelet_reserved_cores(f"{milli}m", None) == -(-milli // 1000)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="0123456789.+-eEkKMGTPimnu x", max_size=8))
def test_garbage_quantity_raises_reserve_error_or_parses(text: str) -> None:
    try:
        value = parse_cpu_quantity(text)
    except ReserveError:
        return
    assert isinstance(value, Fraction)
