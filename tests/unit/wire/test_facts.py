"""The flat facts form: round trips, diffs, hashes and what counts as malformed."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plumb import facts as wire
from plumb import tree
from plumb.v1 import agent_pb2, facts_pb2

_STRING_LEAVES = [
    "driver.driver_version",
    "host.kernel",
    "host.os_id",
    "gpus[{i}].uuid",
    "gpus[{i}].name",
    "cuda.cuda_toolkit_version",
]
_INT_LEAVES = ["gpus[{i}].ecc_uncorrected_volatile", "gpus[{i}].memory_total_bytes"]
_BOOL_LEAVES = ["gpus[{i}].persistence_mode", "gpus[{i}].ecc_mode_current"]
_FLOAT_LEAVES = ["gpus[{i}].power_limit_watts"]

# The wire refuses a NUL in any string (the database cannot hold one); nothing else.
text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)


def readings(values: st.SearchStrategy) -> st.SearchStrategy[wire.Reading]:
    return st.one_of(
        values.map(wire.Reading.ok),
        st.just(wire.Reading.not_supported()),
        text.filter(bool).map(wire.Reading.failed),
    )


@st.composite
def flat_facts(draw: st.DrawFn) -> dict[str, wire.Reading]:
    """Facts for a node with 0-3 GPUs; every GPU has its index, as collectors guarantee."""
    gpus = draw(st.integers(0, 3))
    out: dict[str, wire.Reading] = {}
    for leaves, values in (
        (_STRING_LEAVES, text),
        (_INT_LEAVES, st.integers(-(2**63), 2**63 - 1)),
        (_BOOL_LEAVES, st.booleans()),
        (_FLOAT_LEAVES, st.floats(allow_nan=False, allow_infinity=False)),
    ):
        for leaf in leaves:
            indexes = range(gpus) if "{i}" in leaf else [0]
            for i in indexes:
                if draw(st.booleans()):
                    out[leaf.format(i=i)] = draw(readings(values))
    for i in range(gpus):
        out[f"gpus[{i}].index"] = wire.Reading.ok(i)
    return out


@given(flat_facts())
def test_flatten_inverts_unflatten(flat):
    assert wire.flatten(wire.unflatten(flat)) == flat


@given(flat_facts(), flat_facts())
def test_applying_the_diff_to_old_facts_gives_new_facts(old, new):
    changed, removed = wire.diff(old, new)
    assert wire.apply_delta(old, changed, removed) == new


@given(flat_facts())
def test_hash_survives_the_wire_round_trip(flat):
    message = facts_pb2.NodeFacts.FromString(wire.unflatten(flat).SerializeToString())
    assert wire.content_hash(wire.flatten(message)) == wire.content_hash(flat)


@given(flat_facts())
def test_delta_facts_survive_the_generic_fact_message(flat):
    for path, reading in flat.items():
        assert wire.from_fact(path, wire.to_fact(reading)) == reading


def test_the_wire_digest_is_the_raw_form_of_the_hash():
    flat = {"driver.driver_version": wire.Reading.ok("550.54.15")}
    digest = wire.content_digest(flat)
    assert len(digest) == 32
    assert wire.hex_digest(digest) == wire.content_hash(flat)


@pytest.mark.parametrize("raw", [b"", b"\x00" * 31, ("0" * 64).encode()])
def test_a_digest_that_is_not_32_bytes_is_malformed(raw):
    with pytest.raises(wire.FactsError, match=f"32-byte SHA-256 digest, got {len(raw)} bytes"):
        wire.hex_digest(raw)


def test_a_heartbeat_carries_the_raw_digest_not_hex():
    # 95 % of a quiet node's stream is heartbeats: a hex hash would double each one.
    digest = wire.content_digest({"driver.driver_version": wire.Reading.ok("550.54.15")})
    beat = agent_pb2.ConnectRequest(heartbeat=agent_pb2.Heartbeat(seq=2**20, content_sha256=digest))
    assert beat.ByteSize() <= 2 + 2 + 4 + 34


def _sha256(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()


def test_the_hash_is_sha256_of_the_sorted_compact_json_of_the_facts():
    flat = {
        "gpus[0].persistence_mode": wire.Reading.ok(True),
        "driver.driver_version": wire.Reading.ok("550.54.15"),
        "cuda.cuda_runtime_version": wire.Reading.failed("libcudart: não encontrado"),
        "fabric.fabric_manager_version": wire.Reading.not_supported(),
    }
    canonical = (
        '{"cuda.cuda_runtime_version":{"error":"libcudart: não encontrado","status":"error",'
        '"value":null},"driver.driver_version":{"status":"ok","value":"550.54.15"},'
        '"fabric.fabric_manager_version":{"status":"not_supported","value":null},'
        '"gpus[0].persistence_mode":{"status":"ok","value":true}}'
    )
    assert wire.content_hash(flat) == _sha256(canonical)
    assert wire.content_hash({}) == _sha256("{}")


def test_equal_values_of_another_type_or_sign_hash_apart_in_any_order():
    # True == 1 and 0.0 == -0.0 in Python; each hashes as its own JSON whichever came first.
    for value, json_text in [(1, "1"), (True, "true"), (-0.0, "-0.0"), (0.0, "0.0"), (1, "1")]:
        flat = {"gpus[0].index": wire.Reading.ok(value)}
        assert wire.content_hash(flat) == _sha256(
            f'{{"gpus[0].index":{{"status":"ok","value":{json_text}}}}}'
        )


def test_the_hash_sorts_the_paths_whatever_order_they_come_in_and_however_often():
    flat = {
        "host.kernel": wire.Reading.ok("6.8"),
        "driver.driver_version": wire.Reading.ok("570.1"),
        "gpus[0].index": wire.Reading.ok(0),
    }
    canonical = (
        '{"driver.driver_version":{"status":"ok","value":"570.1"},'
        '"gpus[0].index":{"status":"ok","value":0},"host.kernel":{"status":"ok","value":"6.8"}}'
    )
    backwards = dict(reversed(flat.items()))
    for facts in (flat, backwards, flat, backwards):
        assert wire.content_hash(facts) == _sha256(canonical)
    # The same paths in the same order, one value moved: the new value is hashed.
    newer = {**flat, "host.kernel": wire.Reading.ok('6.9 "rt"')}
    assert wire.content_hash(newer) == _sha256(canonical.replace('"6.8"', '"6.9 \\"rt\\""'))


@given(flat_facts())
def test_the_hash_is_the_canonical_json_of_any_facts(flat):
    canonical = json.dumps(
        {p: r.to_json() for p, r in flat.items()},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert wire.content_hash(flat) == _sha256(canonical)


def test_hash_differs_when_one_fact_differs():
    a = {"driver.driver_version": wire.Reading.ok("550.54.15")}
    b = {"driver.driver_version": wire.Reading.ok("550.54.14")}
    assert wire.content_hash(a) != wire.content_hash(b)


@pytest.mark.parametrize(
    ("path", "reading", "message"),
    [
        ("driver.nope", wire.Reading.ok("x"), "unknown fact path"),
        ("gpus.uuid", wire.Reading.ok("x"), "unknown fact path"),
        ("gpus[0]", wire.Reading.ok("x"), "names a message"),
        ("driver", wire.Reading.ok("x"), "names a message"),
        ("gpus[0].ecc_uncorrected_volatile", wire.Reading.ok("hot"), "expected a int"),
        ("gpus[999].uuid", wire.Reading.ok("x"), "index beyond"),
        ("driver.driver_version", wire.Reading.ok("x" * 5000), "longer than"),
        ("nccl.libraries[0].path", wire.Reading.ok(7), "expected a string"),
    ],
)
def test_malformed_paths_and_values_are_refused(path, reading, message):
    with pytest.raises(wire.FactsError, match=message):
        wire.apply_delta({}, {path: reading}, [])


def test_a_fact_without_status_is_malformed():
    with pytest.raises(wire.FactsError, match="no status"):
        wire.from_fact("host.kernel", facts_pb2.Fact(string_value="6.8"))


def test_too_many_gpus_is_malformed():
    message = facts_pb2.NodeFacts()
    for _ in range(wire.MAX_REPEATED + 1):
        message.gpus.add()
    with pytest.raises(wire.FactsError, match="more than"):
        wire.flatten(message)


def test_nest_orders_gpus_numerically():
    flat = {f"gpus[{i}].index": wire.Reading.ok(i) for i in range(12)}
    nested = tree.nest(flat)
    assert [g["index"]["value"] for g in nested["gpus"]] == list(range(12))


def test_flatten_shares_equal_readings_but_keeps_signed_zero_apart():
    def node(watts: float) -> dict[str, wire.Reading]:
        flat = {
            "driver.driver_version": wire.Reading.ok("570.1"),
            "gpus[0].power_limit_watts": wire.Reading.ok(watts),
        }
        return wire.flatten(wire.unflatten(flat))

    a, b, c = node(0.0), node(0.0), node(-0.0)
    assert a["driver.driver_version"] is b["driver.driver_version"]  # one copy per fleet
    assert str(c["gpus[0].power_limit_watts"].value) == "-0.0"
    assert wire.content_hash(a) != wire.content_hash(c)


def test_gpus_alike_but_for_their_own_fields_each_flatten_with_their_own_and_nothing_else():
    def node(uuid: str | None, ecc: int, host: str) -> dict[str, wire.Reading]:
        flat = {
            "host.hostname": wire.Reading.ok(host),
            "host.kernel": wire.Reading.ok("6.8.0-1015-aws"),
            "gpus[0].index": wire.Reading.ok(0),
            "gpus[0].name": wire.Reading.ok("NVIDIA H100 80GB HBM3"),
            "gpus[0].ecc_uncorrected_volatile": wire.Reading.ok(ecc),
        }
        if uuid is not None:
            flat["gpus[0].uuid"] = wire.Reading.ok(uuid)
        return flat

    first = node("GPU-1111", 0, "gpu-1")
    same_model = node("GPU-2222", 0, "gpu-2")  # all but its uuid and its hostname alike
    no_uuid = node(None, 0, "gpu-3")
    one_ecc_error = node("GPU-4444", 1, "gpu-4")
    for flat in (first, same_model, no_uuid, one_ecc_error, first):
        assert wire.flatten(wire.unflatten(flat)) == flat


def test_a_gpu_too_large_to_keep_is_flattened_but_not_kept():
    # A GPU's facts less its own are kept by their bytes, unless a node made them large.
    def gpu(text: str) -> dict[str, wire.Reading]:
        flat = {"gpus[0].index": wire.Reading.ok(0)}
        for leaf in ("name", "pci_bus_id", "vbios_version", "inforom_version"):
            flat[f"gpus[0].{leaf}"] = wire.Reading.ok(text)
        return flat

    wire._sections.clear()  # a cache: other tests' GPUs may have filled it to its bound
    small = gpu("alike on many nodes")
    assert wire.flatten(wire.unflatten(small)) == small
    assert len(wire._sections) == 1
    large = gpu("x" * wire.MAX_VALUE_CHARS)  # four of them: 16 KiB and more
    assert wire.flatten(wire.unflatten(large)) == large
    assert len(wire._sections) == 1


@given(flat_facts())
def test_leaves_of_the_nested_tree_are_the_flat_facts(flat):
    assert {p: wire.Reading(**r) for p, r in tree.leaves(tree.nest(flat))} == flat


@pytest.mark.parametrize(
    ("value", "message"),
    [(float("nan"), "not a finite number"), (float("inf"), "not a finite number")],
)
def test_a_bad_float_is_refused_every_time_a_good_one_came_before(value, message):
    def node(watts: float) -> facts_pb2.NodeFacts:
        facts = facts_pb2.NodeFacts()
        leaf = facts.gpus.add().power_limit_watts
        leaf.status, leaf.value = facts_pb2.FACT_STATUS_OK, watts
        return facts

    assert wire.flatten(node(700.0))["gpus[0].power_limit_watts"] == wire.Reading.ok(700.0)
    for _ in range(2):
        with pytest.raises(wire.FactsError, match=message):
            wire.flatten(node(value))


def test_a_string_with_a_nul_is_refused_every_time():
    facts = facts_pb2.NodeFacts()
    facts.driver.driver_version.status = facts_pb2.FACT_STATUS_OK
    facts.driver.driver_version.value = "570.1\x00"
    for _ in range(2):
        with pytest.raises(wire.FactsError, match="NUL"):
            wire.flatten(facts)


def test_equal_leaves_of_each_type_read_as_their_own_type():
    # 1, 1.0 and True are equal (and hash alike) in Python; each leaf keeps its field's type.
    facts = facts_pb2.NodeFacts()
    gpu = facts.gpus.add()
    for leaf, value in [
        (gpu.ecc_uncorrected_volatile, 1),
        (gpu.power_limit_watts, 1.0),
        (gpu.persistence_mode, True),
    ]:
        leaf.status, leaf.value = facts_pb2.FACT_STATUS_OK, value
    for _ in range(2):
        flat = wire.flatten(facts)
        assert type(flat["gpus[0].ecc_uncorrected_volatile"].value) is int
        assert type(flat["gpus[0].power_limit_watts"].value) is float
        assert type(flat["gpus[0].persistence_mode"].value) is bool


def test_unindexed_names_a_path_as_the_drift_rules_do():
    # recipes/drift.yaml's baseline paths; xids repeat within each GPU (facts.proto).
    assert wire.unindexed("gpus[7].vbios_version") == "gpus[].vbios_version"
    assert wire.unindexed("cuda.runtimes[12].version") == "cuda.runtimes[].version"
    assert wire.unindexed("gpus[3].xids[0].count") == "gpus[].xids[].count"
    assert wire.unindexed("driver.driver_version") == "driver.driver_version"
