"""The dedicated allocation options' flags (cpu-policy-v0.5.47 (b)): the reference's names and
defaults, their values in the policy's settings, their refusals naming the flag."""

from __future__ import annotations

import pytest

from qrmd.config import ConfigError, build_context, load_config

AT_47 = {"reference-version": "v0.5.47", "topology": "synthetic:cpus=16,sockets=2,numas=4"}


def test_the_reference_defaults() -> None:
    reference = build_context(load_config(AT_47)).reference
    assert reference.numa_number_annotation_key == "katalyst.kubewharf.io/numa_number"
    assert reference.numa_ids_annotation_key == "katalyst.kubewharf.io/numa_ids"
    assert reference.dedicated_cores_hint_optimizer_policies == ()


def test_custom_annotation_keys_reach_the_policy() -> None:
    flags = {
        **AT_47,
        "numa-number-annotation-key": "example.com/numas",
        "numa-ids-annotation-key": "example.com/numa-ids",
        "dedicated-cores-hint-optimizer-policies": "",
    }
    reference = build_context(load_config(flags)).reference
    assert reference.numa_number_annotation_key == "example.com/numas"
    assert reference.numa_ids_annotation_key == "example.com/numa-ids"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            {"dedicated-cores-hint-optimizer-policies": "memory_bandwidth"},
            "--dedicated-cores-hint-optimizer-policies: 'memory_bandwidth' is a dedicated cores "
            "hint optimizer of the reference that qrmd does not reproduce",
            id="an optimizer of the reference qrmd lacks",
        ),
        pytest.param(
            {"dedicated-cores-hint-optimizer-policies": "canonical"},
            "'canonical' is not a dedicated cores hint optimizer",
            id="a shared cores optimizer is no dedicated one",
        ),
        pytest.param(
            {"numa-number-annotation-key": ""},
            "--numa-number-annotation-key: must not be empty",
            id="an empty annotation key",
        ),
    ],
)
def test_bad_values_are_refused_naming_the_flag(flags: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({**AT_47, **flags})
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("numa-number-annotation-key", "katalyst.kubewharf.io/numa_number"),
        ("numa-ids-annotation-key", "example.com/ids"),
        ("dedicated-cores-hint-optimizer-policies", ""),
    ],
)
def test_each_flag_at_v053_is_refused_by_name(flag: str, value: str) -> None:
    # Even its default value: the flag itself means nothing at v0.5.3.
    with pytest.raises(ConfigError, match=f"--{flag} only means something at"):
        load_config({"topology": AT_47["topology"], flag: value})
