"""``--reference-version`` and the v0.5.47 options: their defaults are the reference's, they
reach the policy's settings, and a v0.5.47 option given at v0.5.3 is refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy.cpu.reference import V0_5_3, V0_5_47, ReferenceOptions
from qrmd.config import OPTIONS, ConfigError, build_context, load_config
from qrmd.cpu_plugin.settings import REFERENCE_OPTIONS, require_reference_level

AT_47 = {"reference-version": "v0.5.47", "topology": "synthetic:cpus=16,sockets=2,numas=4"}


def test_the_default_level_is_v0_5_3_with_the_references_defaults() -> None:
    config = load_config({"topology": "synthetic:cpus=16,sockets=2,numas=4"})
    ctx = build_context(config)
    assert (config.reference_version, ctx.reference_version) == (V0_5_3, V0_5_3)
    assert not ctx.at_v0_5_47
    assert ctx.reference == ReferenceOptions()
    assert ctx.reference.pod_annotation_kept_keys == (
        "pod.kubernetes.io/pod-aggregated-requests",
        "pod.kubernetes.io/inplace-update-resizing",
    )
    assert ctx.reference.shared_cores_hint_optimizer_policies == ("metric_based", "canonical")


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        pytest.param({}, ReferenceOptions(), id="v0.5.47 alone keeps every default"),
        pytest.param(
            {"cpu-numa-hint-prefer-policy": "DYNAMIC_PACKING",
             "cpu-numa-hint-prefer-low-threshold": "0.25"},
            ReferenceOptions(cpu_numa_hint_prefer_policy="dynamic_packing",
                             cpu_numa_hint_prefer_low_threshold=0.25),
            id="the canonical optimizer's policy and threshold",
        ),
        pytest.param(
            {"shared-cores-hint-optimizer-policies": "canonical",
             "enable-snb-high-numa-preference": "true",
             "enable-reclaim-numa-binding": False,
             "enable-metric-preferred-numa-allocation": "false"},
            ReferenceOptions(shared_cores_hint_optimizer_policies=("canonical",),
                             enable_snb_high_numa_preference=True),
            id="an optimizer chain and the switches",
        ),
        pytest.param(
            {"pod-annotation-kept-keys": "a/b, c/d,",
             "numa-binding-result-annotation-key": "x/numa",
             "prefer-use-exist-numa-hint-result": "yes"},
            ReferenceOptions(pod_annotation_kept_keys=("a/b", "c/d"),
                             numa_binding_result_annotation_key="x/numa",
                             prefer_use_exist_numa_hint_result=True),
            id="kept keys comma-separated and the binding result annotation",
        ),
        pytest.param(
            {"enable-reclaim-numa-binding": "true"},
            ReferenceOptions(enable_reclaim_numa_binding=True),
            id="reclaimed cores with NUMA binding switched on",
        ),
        pytest.param(
            {"pod-annotation-kept-keys": ""},
            ReferenceOptions(pod_annotation_kept_keys=()),
            id="an empty kept-keys list keeps none, as the reference's test harness",
        ),
    ],
)  # fmt: skip
def test_the_v0_5_47_options_reach_the_policy(
    flags: dict[str, object], want: ReferenceOptions
) -> None:
    ctx = build_context(load_config({**AT_47, **flags}))
    assert ctx.at_v0_5_47 and ctx.reference_version == V0_5_47
    assert ctx.reference == want


@pytest.mark.parametrize("opt", REFERENCE_OPTIONS, ids=lambda o: f"--{o.flag} at v0.5.3")
def test_a_v0_5_47_option_at_v0_5_3_is_refused_by_name(opt: object) -> None:
    flag = opt.flag  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as err:
        load_config({"topology": "synthetic:cpus=16,sockets=2,numas=4", flag: opt.default})  # type: ignore[attr-defined]
    assert str(err.value).startswith(f"--{flag} only means something at --reference-version")
    assert "v0.5.47" in str(err.value)


def test_a_v0_5_47_option_in_a_file_at_v0_5_3_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "qrmd.yaml"
    path.write_text("enable_snb_high_numa_preference: true\n")
    with pytest.raises(ConfigError, match="--enable-snb-high-numa-preference only means"):
        load_config({}, str(path))
    config = load_config({"reference-version": "v0.5.47"}, str(path))
    assert config.reference.enable_snb_high_numa_preference


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param({"reference-version": "v0.5.4"},
                     "--reference-version: 'v0.5.4' is not one of v0.5.3, v0.5.47",
                     id="an unknown level"),
        pytest.param({**AT_47, "cpu-numa-hint-prefer-policy": "random"},
                     "--cpu-numa-hint-prefer-policy: 'random' is not one of spreading",
                     id="an unknown prefer policy"),
        pytest.param({**AT_47, "cpu-numa-hint-prefer-low-threshold": "half"},
                     "--cpu-numa-hint-prefer-low-threshold: 'half' is not a number",
                     id="a threshold that is not a number"),
        pytest.param({**AT_47, "enable-reclaim-numa-binding": "maybe"},
                     "--enable-reclaim-numa-binding",
                     id="a reclaimed NUMA binding switch that is neither true nor false"),
        pytest.param({**AT_47,
                      "shared-cores-hint-optimizer-policies": "canonical,memory_bandwidth"},
                     "'memory_bandwidth' is not a shared cores hint optimizer qrmd reproduces",
                     id="an optimizer qrmd does not reproduce"),
    ],
)  # fmt: skip
def test_a_bad_value_is_refused_naming_its_flag(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(flags)
    assert message in str(err.value)


def test_every_v0_5_47_option_is_marked_and_the_level_itself_is_not() -> None:
    marked = {o.flag for o in OPTIONS if o.since}
    assert marked >= {o.flag for o in REFERENCE_OPTIONS}
    assert "reference-version" not in marked
    # the rule the other v0.5.47 options reuse: the same check on any marked option
    require_reference_level(V0_5_47, REFERENCE_OPTIONS)
    with pytest.raises(ValueError, match="--enable-reclaim-numa-binding only"):
        require_reference_level(
            V0_5_3, [o for o in REFERENCE_OPTIONS if o.flag == "enable-reclaim-numa-binding"]
        )
