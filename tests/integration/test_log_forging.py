"""Text an agent chose never forges a line in the aggregator's log (issue 16, row 7).

The log format is `time level logger: message key=value ...`: a newline in anything logged
would start a line of the attacker's choosing, as below.
"""

from __future__ import annotations

import grpc
import pytest
from conftest import scrape
from test_ingest_limits import accepted, refused
from test_protocol import FACTS, delta

from plumb import facts as wire
from plumb.v1 import agent_pb2, agent_pb2_grpc

FORGED = "2099-01-01 00:00:00,000 WARNING plumb.aggregator.api: admin token issued name=evil"


@pytest.fixture
async def channel(aggregator):
    async with grpc.aio.insecure_channel(aggregator.grpc) as ch:
        yield ch


def forged_lines(aggregator) -> list[str]:
    return [line for line in aggregator.log().splitlines() if line.startswith("2099-")]


@pytest.mark.parametrize(
    "field", ["agent_version", "boot_id", "capabilities"], ids=lambda f: f"hello-{f}"
)
async def test_a_hello_identity_with_a_control_character_is_refused(aggregator, channel, field):
    value = f"1.0\n{FORGED}"
    hello = agent_pb2.Hello(node_name="forger", agent_version="1.0", boot_id="b-1")
    if field == "capabilities":
        hello.capabilities.append(value)
    else:
        setattr(hello, field, value)
    call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
    details = await refused(call, agent_pb2.ConnectRequest(hello=hello))
    assert "contains a control character" in details
    assert (
        "plumb_ingest_streams_closed_by_aggregator_total",
        {"reason": "malformed_hello"},
        1.0,
    ) in (scrape(aggregator))
    assert aggregator.node("forger") is None
    assert forged_lines(aggregator) == []


async def test_a_refused_fact_path_is_logged_escaped_on_one_line(aggregator, channel):
    call = await accepted(channel, "path-forger")
    path = f"host.kernel\n{FORGED}"
    changed = {path: wire.Reading.ok("6.9")}
    await refused(call, delta(2, changed, FACTS))
    log = aggregator.log()
    assert forged_lines(aggregator) == []
    assert f"host.kernel\\n{FORGED}" in log  # there, but escaped, inside the refusal's line
