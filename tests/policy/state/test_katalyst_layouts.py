"""Every katalyst checkpoint layout from v0.5.0 to v0.5.47: checksums, detection, import, export.

The checksums are the ones the reference's own tests quote (``katalyst_upstream``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from policy.errors import CodecError
from policy.state.katalyst_checkpoint import (
    CheckpointCorruptedError,
    CheckpointUnmodelledError,
    export_document,
    imported_state,
    plan_import,
)
from policy.state.katalyst_decode import decode_document
from policy.state.katalyst_detect import layout_by_checksum, layout_by_fields
from policy.state.katalyst_file import checksum_of, encode_document
from policy.state.katalyst_layouts import (
    LAYOUTS,
    RELEASES,
    V0_5_0,
    V0_5_5,
    V0_5_12,
    V0_5_16,
    V0_5_34,
    KatalystLayout,
    layout_of_version,
)
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.policy.state.katalyst_upstream import (
    INVALID_CHECKSUM,
    RECLAIMED_POD,
    SHARED_PODS,
    UPSTREAM_VECTORS,
    upstream_document,
    upstream_text,
)

SYNTH_16_2_4 = generate_dummy_cpu_topology(16, 2, 4)  # the reference tests' dummy machine


def by_layout(**more: Any) -> list[Any]:
    return [
        pytest.param(layout, checksum, id=f"katalyst {tags} {more.get('say', '')}".strip())
        for layout, checksum, tags in UPSTREAM_VECTORS
    ]


@pytest.mark.parametrize(
    ("layout", "checksum"), by_layout(say="gives the checksum its tests quote")
)
def test_each_layout_gives_the_upstream_checksum(layout: KatalystLayout, checksum: int) -> None:
    assert checksum_of(decode_document(upstream_text(checksum)), layout) == checksum


@pytest.mark.parametrize(("layout", "checksum"), by_layout(say="is detected by its checksum"))
def test_each_upstream_file_is_detected_as_its_layout(
    layout: KatalystLayout, checksum: int
) -> None:
    assert layout_by_checksum(decode_document(upstream_text(checksum))) is layout


@pytest.mark.parametrize(("layout", "checksum"), by_layout(say="imports the three pods"))
def test_each_upstream_file_imports(layout: KatalystLayout, checksum: int) -> None:
    plan = plan_import(
        decode_document(upstream_text(checksum)), SYNTH_16_2_4, skip_corruption=False
    )
    assert (plan.layout, plan.layout_verified) == (layout, True)
    assert (plan.containers, plan.pools) == (3, ("reclaim", "share"))
    state = imported_state(plan, SYNTH_16_2_4)
    owners = {info.pod_uid: info.owner_pool_name for info in state.allocation_infos()}
    assert owners == {RECLAIMED_POD: "reclaim", SHARED_PODS[0]: "share", SHARED_PODS[1]: "share"}


def test_the_upstream_invalid_checksum_is_corrupted_under_every_layout() -> None:
    document = decode_document(upstream_text(INVALID_CHECKSUM))
    assert layout_by_checksum(document) is None
    with pytest.raises(CheckpointCorruptedError, match="checkpoint is corrupted"):
        plan_import(document, SYNTH_16_2_4, skip_corruption=False)


@pytest.mark.parametrize(
    ("version", "layout"),
    [
        pytest.param("v0.5.0", V0_5_0, id="v0.5.0 starts the first layout"),
        pytest.param("v0.5.3", V0_5_0, id="v0.5.3 is in the first layout"),
        pytest.param("0.5.4", V0_5_0, id="v0.5.4 ends it and the v may be left out"),
        pytest.param("v0.5.5", V0_5_5, id="v0.5.5 adds the overlap flag"),
        pytest.param("v0.5.11", V0_5_5, id="v0.5.11 still has that layout"),
        pytest.param("v0.5.12", V0_5_12, id="v0.5.12 embeds AllocationMeta"),
        pytest.param("v0.5.15", V0_5_12, id="v0.5.15 still has it"),
        pytest.param("v0.5.16", V0_5_16, id="v0.5.16 adds numa_headroom"),
        pytest.param("v0.5.33", V0_5_16, id="v0.5.33 still has it"),
        pytest.param("v0.5.34", V0_5_34, id="v0.5.34 adds pre-occupation"),
        pytest.param("v0.5.47", V0_5_34, id="v0.5.47 still has it"),
    ],
)
def test_a_release_names_its_layout(version: str, layout: KatalystLayout) -> None:
    assert layout_of_version(version) is layout


@pytest.mark.parametrize(
    "version",
    [
        pytest.param("v0.5.14", id="an untagged number is refused"),
        pytest.param("v0.5.48", id="a release newer than qrmd knows is refused"),
        pytest.param("v0.4.2", id="an older line is refused"),
        pytest.param("latest", id="a word is refused"),
    ],
)
def test_an_unknown_release_is_refused_by_name(version: str) -> None:
    with pytest.raises(CodecError, match=f"katalyst version '{version}' is not a release"):
        layout_of_version(version)


# -- export ---------------------------------------------------------------------------------


def upstream_state() -> Any:
    plan = plan_import(
        decode_document(upstream_text(UPSTREAM_VECTORS[0][1])), SYNTH_16_2_4, skip_corruption=False
    )
    return imported_state(plan, SYNTH_16_2_4)


@pytest.mark.parametrize(
    "version",
    [
        pytest.param(v, id=f"the {v} export is read back as {layout_of_version(v).name}")
        for v in RELEASES
    ],
)
def test_export_is_read_back_as_the_named_layout_with_the_same_state(version: str) -> None:
    state = upstream_state()
    data = encode_document(export_document(state, version), layout_of_version(version))
    document = decode_document(data)
    assert layout_by_checksum(document) is layout_of_version(version)
    plan = plan_import(document, SYNTH_16_2_4, skip_corruption=False)
    assert plan.notes == ()
    again = imported_state(plan, SYNTH_16_2_4)
    assert list(again.allocation_infos()) == list(state.allocation_infos())
    assert again.pools == state.pools


def test_the_default_export_is_the_v0_5_3_layout_for_every_release_of_it() -> None:
    state = upstream_state()
    default = encode_document(export_document(state))
    for version in ("v0.5.0", "v0.5.3", "v0.5.4"):
        assert encode_document(export_document(state, version), V0_5_0) == default


RECORD_V0_5_0 = [
    "pod_uid",
    "pod_namespace",
    "pod_name",
    "container_name",
    "container_type",
    "owner_pool_name",
    "allocation_result",
    "original_allocation_result",
    "topology_aware_assignments",
    "original_topology_aware_assignments",
    "init_timestamp",
    "labels",
    "annotations",
    "qosLevel",
    "request_quantity",
]
# From v0.5.12 the embedded AllocationMeta's fields come first (commonstate/state.go).
RECORD_V0_5_12 = [
    "pod_uid",
    "pod_namespace",
    "pod_name",
    "container_name",
    "container_type",
    "owner_pool_name",
    "labels",
    "annotations",
    "qosLevel",
    "allocation_result",
    "original_allocation_result",
    "topology_aware_assignments",
    "original_topology_aware_assignments",
    "init_timestamp",
    "request_quantity",
]
TOP_V0_5_0 = ["policyName", "machineState", "pod_entries", "checksum"]
OVERLAP = "allow_shared_cores_overlap_reclaimed_cores"
TOP_V0_5_5 = ["policyName", "machineState", "pod_entries", OVERLAP, "checksum"]
TOP_V0_5_16 = ["policyName", "machineState", "numa_headroom", "pod_entries", OVERLAP, "checksum"]
NUMA_V0_5_0 = ["default_cpuset", "allocated_cpuset", "pod_entries"]
NUMA_V0_5_34 = [*NUMA_V0_5_0, "pre_occ_pod_entries"]


@pytest.mark.parametrize(
    ("layout", "top", "numa", "record"),
    [
        pytest.param(V0_5_0, TOP_V0_5_0, NUMA_V0_5_0, RECORD_V0_5_0, id="v0.5.0-v0.5.4 keys"),
        pytest.param(V0_5_5, TOP_V0_5_5, NUMA_V0_5_0, RECORD_V0_5_0, id="v0.5.5 adds the flag"),
        pytest.param(V0_5_12, TOP_V0_5_5, NUMA_V0_5_0, RECORD_V0_5_12, id="v0.5.12 reorders"),
        pytest.param(V0_5_16, TOP_V0_5_16, NUMA_V0_5_0, RECORD_V0_5_12, id="v0.5.16 headroom"),
        pytest.param(V0_5_34, TOP_V0_5_16, NUMA_V0_5_34, RECORD_V0_5_12, id="v0.5.34 pre-occ"),
    ],
)
def test_export_writes_the_keys_of_the_layout_in_go_order(
    layout: KatalystLayout, top: list[str], numa: list[str], record: list[str]
) -> None:
    written = json.loads(encode_document(export_document(upstream_state(), layout.first), layout))
    assert list(written) == top
    assert list(written["machineState"]["0"]) == numa
    assert list(written["pod_entries"][RECLAIMED_POD]["test"]) == record
    if layout.numa_headroom:
        assert written["numa_headroom"] is None  # a fresh reference has none from its advisor
    if layout.pre_occupation:
        assert written["machineState"]["0"]["pre_occ_pod_entries"] is None


def test_export_refuses_a_shared_numa_binding_container_for_releases_with_snb() -> None:
    text = upstream_document(0)
    text["pod_entries"][SHARED_PODS[0]]["test"]["annotations"]["numa_binding"] = "true"
    text["checksum"] = checksum_of(decode_document(json.dumps(text)))
    plan = plan_import(decode_document(json.dumps(text)), SYNTH_16_2_4, skip_corruption=False)
    state = imported_state(plan, SYNTH_16_2_4)  # v0.5.3 ignored numa_binding on shared_cores
    export_document(state, "v0.5.3")
    with pytest.raises(CheckpointUnmodelledError, match=rf"uid {SHARED_PODS[0]}.*SNB"):
        export_document(state, "v0.5.4")


# -- what qrmd does not model ---------------------------------------------------------------

Damage = Callable[[dict[str, Any]], None]


def _shared(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["pod_entries"][SHARED_PODS[0]]["test"]  # type: ignore[no-any-return]


def snb(doc: dict[str, Any]) -> None:
    """The v0.5.47 shape: the container in pool share-NUMA0 with numa_hint, the pool tagged."""
    record = _shared(doc)
    record["annotations"].update(numa_binding="true", numa_hint="0")
    record["owner_pool_name"] = "share-NUMA0"
    doc["pod_entries"]["share-NUMA0"] = {"": {**doc["pod_entries"]["share"][""]}}
    doc["pod_entries"]["share-NUMA0"][""]["pod_uid"] = "share-NUMA0"


def pre_occupation(doc: dict[str, Any]) -> None:
    doc["machineState"]["1"]["pre_occ_pod_entries"] = {
        "gone-pod": {"app": {"pod_uid": "gone-pod", "container_name": "app"}}
    }


def system_cores(doc: dict[str, Any]) -> None:
    record = _shared(doc)
    record.update(qosLevel="system_cores", owner_pool_name="system-a")


def reclaimed_binding(doc: dict[str, Any]) -> None:
    doc["pod_entries"][RECLAIMED_POD]["test"]["annotations"]["numa_hint"] = "3"


def multi_numa_dedicated(doc: dict[str, Any]) -> None:
    record = _shared(doc)
    record["annotations"].update(numa_binding="true")
    record.update(qosLevel="dedicated_cores", owner_pool_name="dedicated")


def overlap(doc: dict[str, Any]) -> None:
    doc[OVERLAP] = True


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(
            snb, "pool share-NUMA0: shared_cores NUMA binding", id="an SNB pool is refused"
        ),
        pytest.param(
            snb,
            rf"pod test/test \(uid {SHARED_PODS[0]}\) container 'test': shared_cores NUMA binding",
            id="an SNB container is refused by pod",
        ),
        pytest.param(
            pre_occupation,
            r"machineState.1.pre_occ_pod_entries: pod uid gone-pod container 'app' holds a pre-occ",
            id="a pre-occupation is refused by pod",
        ),
        pytest.param(
            system_cores, rf"uid {SHARED_PODS[0]}.*system_cores", id="system_cores is refused"
        ),
        pytest.param(
            reclaimed_binding,
            rf"uid {RECLAIMED_POD}.*reclaimed_cores NUMA binding",
            id="a reclaimed container bound to a NUMA node is refused",
        ),
        pytest.param(
            multi_numa_dedicated,
            rf"uid {SHARED_PODS[0]}.*dedicated_cores bound to NUMA nodes \[0, 1, 2\]",
            id="a non-exclusive dedicated container over three NUMA nodes is refused",
        ),
        pytest.param(overlap, f"{OVERLAP} is true", id="the shared/reclaimed overlap is refused"),
    ],
)
def test_a_v0_5_47_file_with_what_qrmd_does_not_model_is_refused(
    damage: Damage, message: str
) -> None:
    doc = upstream_document(0)
    damage(doc)
    doc["checksum"] = checksum_of(decode_document(json.dumps(doc)), V0_5_34)
    document = decode_document(json.dumps(doc))
    assert layout_by_checksum(document) is V0_5_34
    for skip in (False, True):
        with pytest.raises(CheckpointUnmodelledError, match=message):
            plan_import(document, SYNTH_16_2_4, skip_corruption=skip)


def test_a_v0_5_3_file_keeps_numa_binding_on_shared_cores_as_plain_shared() -> None:
    doc = upstream_document(0)
    _shared(doc)["annotations"]["numa_binding"] = "true"  # v0.5.3 ignored it (spec v0.5.47 c6)
    doc["checksum"] = checksum_of(decode_document(json.dumps(doc)), V0_5_0)
    plan = plan_import(decode_document(json.dumps(doc)), SYNTH_16_2_4, skip_corruption=False)
    assert plan.layout is V0_5_0 and plan.containers == 3
    doc["checksum"] = checksum_of(decode_document(json.dumps(doc)), V0_5_5)
    with pytest.raises(CheckpointUnmodelledError, match="shared_cores NUMA binding"):
        plan_import(decode_document(json.dumps(doc)), SYNTH_16_2_4, skip_corruption=False)


def test_numa_headroom_is_dropped_with_a_note() -> None:
    doc = upstream_document(0)
    doc["numa_headroom"] = {"0": 1.5, "3": 2}
    doc["checksum"] = checksum_of(decode_document(json.dumps(doc)), V0_5_16)
    plan = plan_import(decode_document(json.dumps(doc)), SYNTH_16_2_4, skip_corruption=False)
    assert plan.layout is V0_5_16
    assert plan.notes == (
        "numa_headroom {0: 1.5, 3: 2} dropped: the advisor re-sends it every round and qrmd "
        "does not model reclaimed NUMA binding, the only user of it",
    )


@pytest.mark.parametrize(
    ("fields", "layout"),
    [
        pytest.param({}, V0_5_0, id="no later field tells v0.5.0-v0.5.4"),
        pytest.param({OVERLAP: False}, V0_5_5, id="the overlap flag tells v0.5.5 or later"),
        pytest.param({"numa_headroom": {}}, V0_5_16, id="numa_headroom tells v0.5.16 or later"),
        pytest.param({"pre": None}, V0_5_34, id="pre_occ_pod_entries tells v0.5.34 or later"),
    ],
)
def test_a_damaged_file_is_told_by_its_fields_when_corruption_is_skipped(
    fields: dict[str, Any], layout: KatalystLayout
) -> None:
    doc = upstream_document(INVALID_CHECKSUM)
    if "pre" in fields:
        doc["machineState"]["0"]["pre_occ_pod_entries"] = None
    else:
        doc.update(fields)
    document = decode_document(json.dumps(doc))
    assert layout_by_fields(document) is layout
    plan = plan_import(document, SYNTH_16_2_4, skip_corruption=True)
    assert (plan.layout, plan.layout_verified) == (layout, False)
    assert any(f"the katalyst {layout.name} layout its fields suggest" in n for n in plan.notes)


def test_layouts_are_listed_newest_first_and_cover_every_release() -> None:
    assert [layout.first for layout in LAYOUTS] == [
        "v0.5.34",
        "v0.5.16",
        "v0.5.12",
        "v0.5.5",
        "v0.5.0",
    ]
    assert {layout_of_version(v) for v in RELEASES} == set(LAYOUTS)
