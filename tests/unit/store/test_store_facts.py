"""Store: current facts, node rows and change history round-trip; batches are atomic."""

import itertools
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from plumb.aggregator.store import Change, HistoryEntry, NodeUpdate, Store, StoreError
from plumb.facts import Reading, content_hash

READINGS = {
    "host.hostname": Reading.ok("gpu-node-7"),
    "driver.driver_version": Reading.ok("570.86.15"),
    "gpus[0].memory_total_bytes": Reading.ok(85_899_345_920),
    "gpus[1].power_limit_watts": Reading.ok(41.5),
    "gpus[0].persistence_mode": Reading.ok(True),
    "gpus[0].mig_mode_current": Reading.ok(False),
    "gpus[0].power_limit_watts": Reading.ok(0),
    "fabric.fabric_manager_version": Reading.not_supported(),
    "cuda.cuda_runtime_version": Reading.failed("libcudart.so: cannot open shared object"),
}
T0 = datetime(2025, 1, 1, tzinfo=UTC)
OLD, NEW = Reading.ok("550.54.15"), Reading.ok("570.86.15")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _added(node: str, facts: dict[str, Reading], seconds: float = 0, **fields) -> NodeUpdate:
    """`facts` as the node's whole facts, each also in its history as new."""
    changes = tuple(Change(path, None, reading) for path, reading in facts.items())
    return NodeUpdate(node, at(seconds), changes, facts=facts, **fields)


def _sql(url: str, *statements: str) -> object:
    """Runs ``statements`` in one transaction on a connection of its own; the last one's scalar."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                result = conn.execute(text(statement))
            return result.scalar() if result.returns_rows else None
    finally:
        engine.dispose()


def _rows(url: str, table: str) -> int:
    return _sql(url, f"SELECT count(*) FROM {table}")  # type: ignore[return-value]


# A trigger that fails the insert of a change row for path 'boom', in each dialect.
_BOOM = {
    "sqlite": [
        "CREATE TRIGGER boom BEFORE INSERT ON fact_changes WHEN NEW.path = 'boom'"
        " BEGIN SELECT RAISE(ABORT, 'boom'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN IF NEW.path = 'boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$",
        "CREATE TRIGGER boom BEFORE INSERT ON fact_changes FOR EACH ROW EXECUTE FUNCTION boom()",
    ],
}


def test_apply_then_load_round_trips_every_value_type_and_status(store):
    update = _added(
        "gpu-node-7",
        READINGS,
        connected=True,
        boot_id="b-1",
        agent_version="0.1.0",
        last_report_at=at(1),
        content_hash=content_hash(READINGS),
    )
    assert store.apply([update]) == len(READINGS)
    [node] = store.load()
    assert node.facts == READINGS
    assert {p: type(r.value) for p, r in node.facts.items()} == {
        p: type(r.value) for p, r in READINGS.items()
    }
    assert (node.name, node.boot_id, node.agent_version) == ("gpu-node-7", "b-1", "0.1.0")
    assert node.first_seen_at == T0 and node.first_seen_at.tzinfo is not None
    assert node.last_report_at == at(1)
    assert node.connected is False  # nothing is connected when the aggregator starts
    assert node.content_hash == content_hash(READINGS)  # a restart need not hash the facts


def test_values_equal_in_python_but_not_in_type_keep_their_own_type(store):
    # True == 1, False == 0 and 0.0 == -0.0: each must come back as written, whichever a
    # batch (or an earlier one) wrote first.
    first = {"a": Reading.ok(1), "b": Reading.ok(False), "c": Reading.ok(0.0)}
    second = {"a": Reading.ok(True), "b": Reading.ok(0), "c": Reading.ok(-0.0)}
    store.apply([_added("n1", first), _added("n2", second)])
    facts = {n.name: n.facts for n in store.load()}
    assert {p: (type(r.value), str(r.value)) for p, r in facts["n1"].items()} == {
        "a": (int, "1"),
        "b": (bool, "False"),
        "c": (float, "0.0"),
    }
    assert {p: (type(r.value), str(r.value)) for p, r in facts["n2"].items()} == {
        "a": (bool, "True"),
        "b": (int, "0"),
        "c": (float, "-0.0"),
    }


def test_none_fields_leave_the_node_row_unchanged(store):
    store.apply([_added("n", {}, connected=True, boot_id="b-1", agent_version="0.1.0")])
    store.apply([NodeUpdate("n", at(5), last_report_at=at(5))])
    store.apply([NodeUpdate("n", at(6), boot_id="b-2", content_hash="c" * 64)])
    store.apply([NodeUpdate("n", at(7), connected=False)])
    [node] = store.load()
    assert (node.boot_id, node.agent_version, node.last_report_at) == ("b-2", "0.1.0", at(5))
    assert node.content_hash == "c" * 64
    assert node.first_seen_at == T0


def test_an_update_replaces_the_facts_whole_and_its_changes_are_history(store):
    store.apply([_added("n", {"driver.driver_version": OLD, "host.kernel": Reading.ok("6.8")})])
    changes = (
        Change("driver.driver_version", OLD, NEW),
        Change("host.kernel", Reading.ok("6.8"), None),
    )
    assert store.apply([NodeUpdate("n", at(1), changes, facts={"driver.driver_version": NEW})]) == 2
    [node] = store.load()
    assert node.facts == {"driver.driver_version": NEW}
    assert [(e.path, e.new) for e in store.history("n", since=at(1))] == [
        ("host.kernel", None),
        ("driver.driver_version", NEW),
    ]


def test_a_nodes_first_facts_without_changes_are_stored_but_not_history(store):
    assert store.apply([NodeUpdate("n", at(0), facts=READINGS)]) == 0
    assert store.load()[0].facts == READINGS
    assert store.history("n") == []
    store.apply([NodeUpdate("n", at(1), facts={})])  # facts may go down to none at all
    assert store.load()[0].facts == {}


def test_whose_facts_they_are_is_stored_with_them_and_unknown_when_not_said(store):
    store.apply([NodeUpdate("n", at(0), facts=READINGS, facts_own=True, content_hash="c" * 64)])
    assert store.load()[0].facts_own is True
    store.apply([NodeUpdate("n", at(1), connected=True, content_hash="d" * 64)])  # no facts
    assert store.load()[0].facts_own is True
    store.apply([NodeUpdate("n", at(2), facts=READINGS, facts_own=False)])  # an overlay's
    assert store.load()[0].facts_own is False
    store.apply([NodeUpdate("n", at(3), facts={})])  # facts, not said whose: not kept as own
    assert store.load()[0].facts_own is None


def test_load_reads_nodes_across_fetch_chunks_sharing_equal_readings(store, monkeypatch):
    # Chunks end anywhere: every node gets its own facts, and equal readings (of the same
    # status and value type) come back as one object, across paths and nodes.
    monkeypatch.setattr("plumb.aggregator.store.store._LOAD_CHUNK", 2)
    kernel, one, true = Reading.ok("6.8"), Reading.ok(1), Reading.ok(True)
    facts = {"p0": kernel, "p1": kernel, "i": one, "b": true, "gone": Reading.not_supported()}
    store.apply([NodeUpdate(n, at(0), facts=facts) for n in ("a", "b", "c")])
    a, b, c = store.load()
    assert (a.name, b.name, c.name) == ("a", "b", "c")
    assert a.facts == b.facts == c.facts == facts
    assert a.facts["p0"] is a.facts["p1"] is c.facts["p1"]
    assert (type(c.facts["i"].value), type(c.facts["b"].value)) == (int, bool)


def test_nodes_of_one_shape_store_their_own_readings_apart_and_the_rest_alike(url, store):
    shape = {
        "driver.driver_version": Reading.ok("570.86.15"),
        "gpus[0].name": Reading.ok("NVIDIA H100 80GB HBM3"),
        "gpus[1].name": Reading.ok("NVIDIA H100 80GB HBM3"),
    }
    own = {
        name: {
            "host.hostname": Reading.ok(name),
            "host.boot_id": Reading.failed("unreadable"),
            "gpus[0].uuid": Reading.ok(f"GPU-{name}-0"),
            "gpus[1].serial": Reading.ok(f"{name}-1"),
        }
        for name in ("a", "b")
    }
    store.apply([_added(name, {**shape, **own[name]}) for name in ("a", "b")])
    a, b = store.load()
    assert a.facts == {**shape, **own["a"]} and b.facts == {**shape, **own["b"]}
    assert a.facts is not b.facts
    rest = "SELECT rest FROM node_facts WHERE node = '{}'"
    assert _sql(url, rest.format("a")) == _sql(url, rest.format("b"))
    assert '"gpus[1].name"' in _sql(url, rest.format("a"))  # type: ignore[operator]
    for name in ("a", "b"):
        doc = _sql(url, f"SELECT own FROM node_facts WHERE node = '{name}'")
        assert f'"GPU-{name}-0"' in doc and "driver" not in doc  # type: ignore[operator]


def test_a_page_unreadable_mid_load_is_a_store_error_naming_the_load(tmp_path, monkeypatch):
    # A SQLite file of its own, whichever dialect this module runs for: its last page of
    # facts is overwritten, so the scan fails while fetching, after the first rows came.
    url = f"sqlite:///{tmp_path / 'plumb.db'}"
    store = Store(url)
    value = Reading.ok("x" * 50)
    store.apply([_added(f"n{i}", {f"p{j}": value for j in range(20)}) for i in range(50)])
    store.close()
    _sql(url, "PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = _sql(url, "PRAGMA page_size")
    last = _sql(url, "SELECT max(pageno) FROM dbstat WHERE name = 'node_facts'")
    with (tmp_path / "plumb.db").open("r+b") as db:
        db.seek((last - 1) * page_size)  # type: ignore[operator]
        db.write(b"\xff" * page_size)  # type: ignore[operator]
    monkeypatch.setattr("plumb.aggregator.store.store._LOAD_CHUNK", 1)
    store = Store(url)
    try:
        with pytest.raises(StoreError) as failed:
            store.load()
    finally:
        store.close()
    assert str(failed.value).startswith("loading nodes failed on sqlite:///")
    assert "database disk image is malformed" in str(failed.value)
    assert failed.value.retryable is False


def test_a_batch_applies_its_updates_in_order(store):
    path = "driver.driver_version"
    batch = [
        _added("n", {path: OLD}),
        NodeUpdate("n", at(1), (Change(path, OLD, None),), facts={}),
        NodeUpdate("n", at(2), (Change(path, None, NEW),), facts={path: NEW}),
        NodeUpdate("n", at(3), connected=True),
        NodeUpdate("n", at(4), connected=False),
    ]
    assert store.apply(batch) == 3
    assert store.load()[0].facts == {path: NEW}
    assert [e.at for e in store.history("n")] == [at(2), at(1), at(0)]


def test_a_removal_dropping_history_drops_the_node_with_it_in_queue_order(store):
    path = "driver.driver_version"
    store.apply([_added("gone", {path: OLD}), _added("kept", {path: OLD})])
    store.apply(
        [
            NodeUpdate("gone", at(1), (Change(path, OLD, NEW),), facts={path: NEW}),
            NodeUpdate("gone", at(2), removed=True, keep_history=False),
            _added("gone", {path: OLD}),  # the name comes back after: a new node
        ]
    )
    by_name = {n.name: n for n in store.load()}
    assert set(by_name) == {"gone", "kept"}
    assert by_name["gone"].facts == {path: OLD}
    assert [e.at for e in store.history("gone")] == [at(0)]  # the old history went with it
    assert len(store.history("kept")) == 1


def test_a_removal_keeping_history_forgets_the_node_but_not_what_it_ran(store):
    path = "driver.driver_version"
    store.apply([_added("retired", {path: OLD})])
    store.apply([NodeUpdate("retired", at(1), (Change(path, OLD, NEW),), facts={path: NEW})])
    store.apply([NodeUpdate("retired", at(2), removed=True, keep_history=True)])
    assert store.load() == []  # not loaded: the aggregator no longer knows it
    assert [e.at for e in store.history("retired")] == [at(1), at(0)]  # what it ran stays
    store.apply([_added("retired", {path: NEW}, seconds=3)])  # the name comes back
    (back,) = store.load()
    assert back.name == "retired" and back.facts == {path: NEW}


def test_history_is_newest_first_with_since_and_limit(store):
    path = "driver.driver_version"
    store.apply([_added("n", {path: OLD}, 0), _added("other", {path: OLD}, 0)])
    store.apply([NodeUpdate("n", at(10), (Change(path, OLD, NEW),), facts={path: NEW})])
    store.apply([NodeUpdate("n", at(20), (Change(path, NEW, None),), facts={})])
    assert store.history("n") == [
        HistoryEntry(path, NEW, None, at(20)),
        HistoryEntry(path, OLD, NEW, at(10)),
        HistoryEntry(path, None, OLD, at(0)),
    ]
    assert [e.at for e in store.history("n", since=at(10))] == [at(20), at(10)]
    assert [e.at for e in store.history("n", limit=1)] == [at(20)]
    assert store.history("n", limit=0) == []
    assert store.history("missing") == []


def test_changes_at_the_same_instant_come_back_newest_written_first(store):
    store.apply([_added("n", {"a": OLD, "b": OLD, "c": OLD})])
    assert [e.path for e in store.history("n")] == ["c", "b", "a"]


def test_timestamps_in_other_zones_are_stored_and_returned_as_utc(store):
    east = timezone(timedelta(hours=9))
    store.apply([NodeUpdate("n", T0.astimezone(east), (Change("a", None, OLD),), facts={"a": OLD})])
    [entry] = store.history("n", since=T0)
    assert entry.at == T0 and entry.at.utcoffset() == timedelta(0)
    assert store.history("n", since=at(1)) == []


def test_node_exists_and_ping(store):
    assert not store.node_exists("n")
    store.apply([_added("n", {})])
    assert store.node_exists("n")
    store.ping()


def test_data_survives_reopening_the_store(url, store):
    store.apply([_added("n", READINGS)])
    store.close()
    reopened = Store(url)
    try:
        assert reopened.load()[0].facts == READINGS
    finally:
        reopened.close()


@pytest.mark.parametrize(
    "bad",
    [
        NodeUpdate(None, T0),  # type: ignore[arg-type]
        NodeUpdate("", T0),
        NodeUpdate("x" * 254, T0),
        NodeUpdate("n", T0.replace(tzinfo=None)),
        NodeUpdate("n", T0, boot_id="b" * 129),
        NodeUpdate("n", T0, content_hash="h" * 65),
        NodeUpdate("n", T0, (Change("p" * 513, None, OLD),), facts={}),
        NodeUpdate("n", T0, (Change("a\x00b", None, OLD),), facts={}),
        NodeUpdate("n", T0, (Change("a", None, None),), facts={}),
        NodeUpdate("n", T0, (Change("a", None, Reading("broken", 1)),), facts={}),  # type: ignore[arg-type]
        NodeUpdate("n", T0, (Change("a", None, Reading.ok([1])),), facts={}),  # type: ignore[arg-type]
        NodeUpdate("n", T0, (Change("a", None, OLD),)),  # changes, but no facts to store
        NodeUpdate("n", T0, facts_own=True),  # whose facts? none are given
        NodeUpdate("n", T0, facts={"p" * 513: OLD}),
        NodeUpdate("n", T0, facts={"": OLD}),
        NodeUpdate("n", T0, facts={"a": Reading("broken", 1)}),  # type: ignore[arg-type]
        NodeUpdate("n", T0, facts={"a": Reading.ok([1])}),  # type: ignore[arg-type]
        NodeUpdate("n", T0, facts={"a": Reading("error", error="e\x00")}),
        # Wider than the wire's 64 bits, or not a finite number: a JSON document would not
        # give them back as they were.
        NodeUpdate("n", T0, facts={"a": Reading.ok(2**64)}),
        NodeUpdate("n", T0, facts={"a": Reading.ok(-(2**63) - 1)}),
        NodeUpdate("n", T0, facts={"a": Reading.ok(float("inf"))}),
        NodeUpdate("n", T0, (Change("a", None, Reading.ok(float("nan"))),), facts={}),
        # A lone surrogate has no UTF-8 form to store.
        NodeUpdate("n", T0, facts={"a": Reading.ok("gpu \ud800")}),
        NodeUpdate("n", T0, facts={"a\udfff": OLD}),
        NodeUpdate("n", T0, facts={"a": Reading.failed("nvml \ud83d")}),
    ],
)
def test_an_invalid_update_fails_the_whole_batch_and_writes_nothing(url, store, bad):
    with pytest.raises(StoreError, match="^invalid update for node ") as info:
        store.apply([_added("good", READINGS), bad])
    assert not info.value.retryable
    assert store.load() == []
    assert _rows(url, "fact_changes") == 0


def test_a_path_stored_before_is_checked_again_with_each_new_reading(url, store):
    # Paths and readings are checked once each; a good path with a bad reading still fails.
    store.apply([NodeUpdate("n", T0, facts={"host.kernel": OLD})])
    bad = NodeUpdate("m", T0, facts={"host.kernel": Reading.ok("6.8 \ud800")})
    with pytest.raises(StoreError, match="host.kernel: malformed reading"):
        store.apply([bad])
    assert [node.name for node in store.load()] == ["n"]


def test_a_database_failure_mid_batch_rolls_the_whole_batch_back(url, store):
    store.apply([_added("n", {"a": OLD})])
    _sql(url, *_BOOM[url.split(":")[0].split("+")[0]])
    batch = [
        NodeUpdate("n", at(1), (Change("a", OLD, NEW),), facts={"a": NEW}, connected=True),
        _added("m", READINGS),
        _added("x", {"boom": OLD}),
    ]
    with pytest.raises(StoreError, match="writing node updates failed") as info:
        store.apply(batch)
    assert not info.value.retryable
    [node] = store.load()
    assert node.facts == {"a": OLD}
    assert _rows(url, "fact_changes") == 1 and _rows(url, "nodes") == 1
    assert not _sql(url, "SELECT connected FROM nodes")


_names = (f"node-{i}" for i in itertools.count())
_values = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),  # int64 and uint64, as on the wire
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
_readings = st.one_of(
    st.builds(Reading.ok, _values),
    st.just(Reading.not_supported()),
    st.builds(Reading.failed, st.text(st.characters(codec="utf-8", exclude_characters="\x00"))),
)


@settings(max_examples=40, deadline=None)
@given(
    facts=st.dictionaries(
        st.from_regex(r"[a-z_]{1,12}(\[\d\])?\.[a-z_]{1,12}", fullmatch=True), _readings
    )
)
def test_any_facts_round_trip_through_apply_and_load(module_store, facts):
    node = next(_names)
    module_store.apply([_added(node, facts)])
    assert {n.name: n.facts for n in module_store.load()}[node] == facts


@pytest.fixture(scope="module")
def module_store(module_url):
    store = Store(module_url)
    yield store
    store.close()


def test_fleet_history_is_every_nodes_changes_in_the_window_oldest_first(store):
    vbios = "gpus[0].vbios_version"
    store.apply([_added("a", {vbios: OLD}), _added("b", {vbios: OLD})])
    store.apply([NodeUpdate("b", at(20), (Change(vbios, OLD, NEW),), facts={vbios: NEW})])
    store.apply([NodeUpdate("a", at(10), (Change(vbios, OLD, NEW),), facts={vbios: NEW})])
    host = {vbios: NEW, "host.kernel": NEW}
    store.apply([NodeUpdate("a", at(30), (Change("host.kernel", None, NEW),), facts=host)])
    got = store.fleet_history(at(5), at(25))
    assert [(node, e.path, e.at) for node, e in got] == [("a", vbios, at(10)), ("b", vbios, at(20))]
    # LIKE with `_` escaped: "gpus[%].vbios\_version%" must not match "gpus[0].vbiosXversion".
    odd = {**host, "gpus[0].vbiosXversion": NEW}
    store.apply([NodeUpdate("a", at(12), (Change("gpus[0].vbiosXversion", None, NEW),), facts=odd)])
    like = store.fleet_history(at(1), at(40), "gpus[%].vbios\\_version%")
    assert [e.path for _, e in like] == [vbios, vbios]
    assert len(store.fleet_history(at(0), at(40), limit=1)) == 1
