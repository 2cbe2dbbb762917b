"""Random and mutated agent streams against a real aggregator: it stays up and consistent.

Each example opens one stream over a real gRPC channel and sends raw bytes: a Hello, then
valid, mutated (seq, hash, status, byte flips) or random FullFacts, deltas and heartbeats.
After each stream: the aggregator answers /healthz, never ended the stream with INTERNAL or
UNKNOWN, and each node holds exactly the facts of the last message it acked (or is absent
if it acked none). At the end the database and the live state agree, node by node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from conftest import until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plumb import facts as wire
from plumb import tree
from plumb.aggregator.store import Store
from plumb.v1 import agent_pb2

NODES = ["fuzz-0", "fuzz-1", "fuzz-2"]  # few names, so streams meet state left by others
CONNECT = "/plumb.v1.AgentService/Connect"
# Bounded by count: about 30 s on a loaded 2-core machine; the seed varies per run.
EXAMPLES = 150

# The wire refuses a NUL in any string; the rest of Unicode is fair game.
_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
_LEAVES: list[tuple[str, st.SearchStrategy]] = [
    ("host.kernel", _TEXT),
    ("driver.driver_version", _TEXT),
    ("gpus[{i}].name", _TEXT),
    ("gpus[{i}].ecc_uncorrected_volatile", st.integers(-(2**63), 2**63 - 1)),
    ("gpus[{i}].persistence_mode", st.booleans()),
    ("gpus[{i}].power_limit_watts", st.floats(allow_nan=False, allow_infinity=False)),
]


@st.composite
def readings(draw: st.DrawFn, values: st.SearchStrategy) -> wire.Reading:
    return draw(
        st.one_of(
            values.map(wire.Reading.ok),
            st.just(wire.Reading.not_supported()),
            _TEXT.filter(bool).map(wire.Reading.failed),
        )
    )


@st.composite
def flat_facts(draw: st.DrawFn) -> dict[str, wire.Reading]:
    out: dict[str, wire.Reading] = {}
    gpus = draw(st.integers(0, 2))
    for leaf, values in _LEAVES:
        for i in range(gpus) if "{i}" in leaf else [0]:
            if draw(st.booleans()):
                out[leaf.format(i=i)] = draw(readings(values))
    out.update({f"gpus[{i}].index": wire.Reading.ok(i) for i in range(gpus)})
    return out


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with a few bytes flipped, dropped or inserted."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(out)))
        action = draw(st.sampled_from(["flip", "drop", "insert"]))
        if action == "insert" or at == len(out):
            out[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif action == "drop":
            del out[at]
        else:
            out[at] ^= draw(st.integers(1, 255))
    return bytes(out)


@dataclass
class Stream:
    """The bytes of one stream, and the facts messages they carry by seq, as the agent meant."""

    node: str
    sent: list[bytes] = field(default_factory=list)
    facts: list[tuple[int, str]] = field(default_factory=list)  # (seq, content_hash)


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    """A Hello, then a run of valid, mutated and random messages as one agent might send."""
    node = draw(st.sampled_from(NODES))
    stream = Stream(node)
    hello = agent_pb2.ConnectRequest(
        hello=agent_pb2.Hello(node_name=node, agent_version="fuzz", boot_id="b")
    )
    stream.sent.append(hello.SerializeToString())
    current: dict[str, wire.Reading] = {}
    seq = 0
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["full", "delta", "heartbeat"]))
        seq += draw(st.sampled_from([1, 1, 1, 0, 2, -1]))
        if kind == "full" or not current:
            current = draw(flat_facts())
            msg = agent_pb2.ConnectRequest(
                full_facts=agent_pb2.FullFacts(
                    seq=max(seq, 0),
                    content_sha256=wire.content_digest(current),
                    facts=wire.unflatten(current),
                )
            )
        elif kind == "delta":
            new = {**current, **draw(flat_facts())}
            for path in draw(st.lists(st.sampled_from(sorted(new)), max_size=2)):
                new.pop(path, None)
            changed, removed = wire.diff(current, new)
            current = new
            msg = agent_pb2.ConnectRequest(
                delta=agent_pb2.FactsDelta(
                    seq=max(seq, 0), content_sha256=wire.content_digest(new), removed=removed
                )
            )
            for path, reading in changed.items():
                msg.delta.changed[path].CopyFrom(wire.to_fact(reading))
        else:
            msg = agent_pb2.ConnectRequest(
                heartbeat=agent_pb2.Heartbeat(
                    seq=max(seq, 0), content_sha256=wire.content_digest(current)
                )
            )
        how = draw(st.sampled_from(["valid", "valid", "hash", "status", "bytes", "random"]))
        if how == "hash" and kind != "heartbeat":
            getattr(msg, msg.WhichOneof("message")).content_sha256 = bytes(32)
        elif how == "status" and msg.WhichOneof("message") == "delta" and msg.delta.changed:
            path = sorted(msg.delta.changed)[0]
            msg.delta.changed[path].status = draw(st.integers(0, 2**31 - 1))
        data = msg.SerializeToString()
        if how == "bytes":
            data = draw(mutated(data))
        elif how == "random":
            data = draw(st.binary(max_size=300))
        stream.sent.append(data)
        try:
            parsed = agent_pb2.ConnectRequest.FromString(data)
        except Exception:
            continue  # the aggregator cannot parse it either: it can be no acked message
        kind = parsed.WhichOneof("message")
        if kind in ("full_facts", "delta"):
            inner = getattr(parsed, kind)
            stream.facts.append((inner.seq, inner.content_sha256.hex()))
    return stream


def send(channel: grpc.Channel, stream: Stream) -> tuple[grpc.StatusCode, list[int]]:
    """Send the stream, close it, and return its final status and the seqs acked."""
    call = channel.stream_stream(
        CONNECT,
        request_serializer=None,  # raw bytes: the aggregator does the parsing
        response_deserializer=agent_pb2.ConnectResponse.FromString,
    )
    acked: list[int] = []
    try:
        for response in call(iter(stream.sent), timeout=10):
            if response.WhichOneof("message") == "ack":
                acked.append(response.ack.seq)
    except grpc.RpcError as exc:
        return exc.code(), acked
    return grpc.StatusCode.OK, acked


def held(aggregator, name: str) -> str | None:
    """The content hash of the node's facts, after checking it matches the facts served."""
    resp = aggregator.get(f"/v1/nodes/{name}")
    if resp.status_code == 404:
        return None
    node = resp.json()
    served = {
        path: wire.Reading(doc["status"], doc.get("value"), doc.get("error"))
        for path, doc in tree.leaves(node["facts"])
    }
    assert wire.content_hash(served) == node["content_hash"], f"{name}: facts differ from hash"
    return node["content_hash"]


def test_random_and_mutated_streams_leave_the_aggregator_up_and_consistent(aggregator):
    expected: dict[str, str] = {}  # node -> hash of the last facts message it acked
    with grpc.insecure_channel(aggregator.grpc) as channel:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(streams())
        def check(stream: Stream) -> None:
            code, acked = send(channel, stream)
            assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), code
            assert aggregator.get("/healthz").status_code == 200
            if acked:
                hashes = {h for seq, h in stream.facts if seq == acked[-1]}
                assert held(aggregator, stream.node) in hashes
                expected[stream.node] = held(aggregator, stream.node)
            else:
                assert held(aggregator, stream.node) == expected.get(stream.node)

        check()
    assert expected, "no example was ever acked: the generator is broken"

    def stored() -> dict[str, str]:
        store = Store(aggregator.db)
        try:
            return {n.name: wire.content_hash(n.facts) for n in store.load()}
        finally:
            store.close()

    until(lambda: stored() == expected, what="the database to match the live state")
