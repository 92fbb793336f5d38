"""The map-entry nil/empty trap of wire.md §1.1, shown as bytes.

`ResourceHintsResponse.resource_hints` is a `map<string, ListOfTopologyHints>`
(field 10). The kubelet reads the entry for the request's resource name:

- key absent, or key with no value (Go's nil)  → no NUMA preference;
- key with an empty `ListOfTopologyHints`       → no feasible placement (pod rejected
  under `restricted`/`single-numa-node`).

Python cannot hold a nil message value: a parsed nil entry and a touched key both become
an empty list, and are written back as `0x12 0x00`. So the conversion layer must say
"no preference" by leaving the key out, and must never read the map with `[...]`, which
creates the key. These tests pin the runtime's behaviour the rule relies on.
"""

from wire.gen import resourceplugin_pb2 as rp

RESOURCE_NAME = b"\x4a\x03cpu"  # field 9 (resource_name), length 3
KEY = b"\x0a\x03cpu"  # map entry field 1 (key)
EMPTY_VALUE = b"\x12\x00"  # map entry field 2 (value), zero length
GO_NIL_ENTRY = b"\x52\x05" + KEY  # field 10 entry with the key only: what Go sends for nil
EMPTY_ENTRY = b"\x52\x07" + KEY + EMPTY_VALUE  # field 10 entry with an empty list


def test_no_preference_leaves_the_key_out() -> None:
    response = rp.ResourceHintsResponse(resource_name="cpu")
    assert response.SerializeToString() == RESOURCE_NAME


def test_reading_with_get_does_not_create_the_key() -> None:
    response = rp.ResourceHintsResponse(resource_name="cpu")
    assert response.resource_hints.get("cpu") is None
    assert "cpu" not in response.resource_hints
    assert response.SerializeToString() == RESOURCE_NAME


def test_touching_the_key_sends_an_empty_list_meaning_infeasible() -> None:
    response = rp.ResourceHintsResponse(resource_name="cpu")
    _ = response.resource_hints["cpu"]  # the trap: indexing creates the entry
    assert response.SerializeToString() == RESOURCE_NAME + EMPTY_ENTRY


def test_go_nil_entry_is_parsed_as_an_empty_list_and_echoed_as_infeasible() -> None:
    parsed = rp.ResourceHintsResponse.FromString(RESOURCE_NAME + GO_NIL_ENTRY)
    # Python cannot tell Go's nil from an empty list once parsed...
    assert "cpu" in parsed.resource_hints
    assert len(parsed.resource_hints["cpu"].hints) == 0
    assert parsed == rp.ResourceHintsResponse.FromString(RESOURCE_NAME + EMPTY_ENTRY)
    # ...and re-serializing turns "no preference" into "no feasible placement".
    assert parsed.SerializeToString() == RESOURCE_NAME + EMPTY_ENTRY


def test_hints_are_sent_as_a_list_under_the_key() -> None:
    response = rp.ResourceHintsResponse(resource_name="cpu")
    response.resource_hints["cpu"].hints.add(nodes=[0], preferred=True)
    hint = b"\x0a\x01\x00" + b"\x10\x01"  # nodes [0] packed, preferred true
    value = b"\x0a" + bytes([len(hint)]) + hint  # ListOfTopologyHints.hints
    entry = KEY + b"\x12" + bytes([len(value)]) + value
    assert response.SerializeToString() == RESOURCE_NAME + b"\x52" + bytes([len(entry)]) + entry
