"""A real agent refuses check specs out of range, whoever sends them (issue 16, row 15).

The agent trusts the aggregator with nothing it runs, so the aggregator here is a stand-in
gRPC server in the test, sending the RunChecks a compromised or buggy aggregator could send,
to a real `plumb-agent --simulate` process.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import grpc

from plumb.v1 import agent_pb2, agent_pb2_grpc

# (timeout_s sent, what the agent must answer): written from agent/checks/params.py's bound.
SPECS = [
    (1e300, "refused: timeout_s 1e+300 is outside (0, 3600]"),
    (-5.0, "refused: timeout_s -5 is outside (0, 3600]"),
    (float("nan"), "refused: timeout_s nan is outside (0, 3600]"),
    (float("inf"), "refused: timeout_s inf is outside (0, 3600]"),
]


class RunsChecks(agent_pb2_grpc.AgentServiceServicer):
    """Acks the agent's facts, sends one RunChecks after the first Ack, queues the results."""

    def __init__(self, checks: list[agent_pb2.CheckSpec]):
        self.checks = checks
        self.results: asyncio.Queue[agent_pb2.CheckResult] = asyncio.Queue()

    async def Connect(self, request_iterator, context):  # noqa: N802
        await context.read()  # Hello
        welcome = agent_pb2.Welcome(
            session_id="s-1", report_settings=agent_pb2.ReportSettings(heartbeat_interval_s=30)
        )
        await context.write(agent_pb2.ConnectResponse(welcome=welcome))
        sent = False
        while (msg := await context.read()) is not grpc.aio.EOF:
            kind = msg.WhichOneof("message")
            if kind in ("full_facts", "delta"):
                seq = getattr(msg, kind).seq
                await context.write(agent_pb2.ConnectResponse(ack=agent_pb2.Ack(seq=seq)))
                if not sent:
                    sent = True
                    run = agent_pb2.RunChecks(request_id="r-1", checks=self.checks)
                    await context.write(agent_pb2.ConnectResponse(run_checks=run))
            elif kind == "check_result":
                await self.results.put(msg.check_result)


async def test_the_agent_refuses_out_of_range_check_timeouts_and_runs_the_rest(start_agent):
    checks = [agent_pb2.CheckSpec(id="driver-nvml", timeout_s=t) for t, _ in SPECS]
    checks.append(agent_pb2.CheckSpec(id="driver-nvml", timeout_s=10))
    servicer = RunsChecks(checks)
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        start_agent(SimpleNamespace(grpc=f"127.0.0.1:{port}"), "spec-target")
        results = []
        async with asyncio.timeout(60):
            while len(results) < len(checks):
                results.append(await servicer.results.get())
    finally:
        await server.stop(0)
    answered = [(r.status, r.message) for r in results]
    assert answered[: len(SPECS)] == [("error", why) for _, why in SPECS]
    assert answered[-1][0] == "pass", answered[-1]  # a timeout in range still runs
