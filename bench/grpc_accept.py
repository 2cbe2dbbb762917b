"""How fast a grpc.aio server takes new streams while its event loop runs bulk work.

A server process (CPU 0) runs the agents' service with a handler that reads one message and
answers it, as Hello and Welcome, while a task on its loop runs `--piece-ms` of CPU-bound
work and then sleeps `free` ms, for each `--free-ms`; 0 is back to back (a yield only). The
server's CPU from start to the last stream taken, less the pieces', is gRPC's cost per
stream (`grpc_cpu_ms_per_stream`: its threads', and its callbacks' on the loop). A
client process (CPU 1) opens `--streams` streams at once, one channel each, and times each
answer, counting the streams that end unanswered by status. `--max-pending N` sets gRPC's
limit on the streams it holds before the server takes them (its own: 1,000, and some past it
ended at random, all past 3,000), as `ingest.max_pending_streams` does. Writes
bench/results/grpc_accept.json, or `--name`'s.

    .venv/bin/python bench/grpc_accept.py [--streams 1000] [--piece-ms 3] [--free-ms 0,1,3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import time

from harness import RESULTS, free_port

TIMEOUT_S = 120.0


def _burn(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def _server(
    port: int, n: int, piece_ms: float, free_ms: float, pending: int | None, ready, done, out
) -> None:
    import grpc

    from plumb.v1 import agent_pb2, agent_pb2_grpc

    os.sched_setaffinity(0, {0})
    accepted: list[float] = []
    all_in = asyncio.Event()

    class Service(agent_pb2_grpc.AgentServiceServicer):
        async def Connect(self, request_iterator, context):  # noqa: N802
            accepted.append(time.monotonic())
            if len(accepted) == n:
                all_in.set()
            await context.read()
            await context.write(agent_pb2.ConnectResponse(welcome=agent_pb2.Welcome()))
            await asyncio.sleep(TIMEOUT_S)

    async def main() -> None:
        limits = ("grpc.server.max_pending_requests", "grpc.server.max_pending_requests_hard_limit")
        server = grpc.aio.server(options=[(k, pending) for k in limits] if pending else None)
        agent_pb2_grpc.add_AgentServiceServicer_to_server(Service(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        pieces = 0

        async def bulk() -> None:
            nonlocal pieces
            while piece_ms:
                _burn(piece_ms)
                pieces += 1
                await asyncio.sleep(free_ms / 1000)

        work = asyncio.create_task(bulk())
        cpu0 = time.process_time()
        ready.set()
        try:
            await asyncio.wait_for(all_in.wait(), TIMEOUT_S)
        except TimeoutError:
            pass  # reported: fewer accepted than opened
        work.cancel()
        # The server's CPU less the bulk work's: its pieces spin, so their wall time is CPU.
        grpc_cpu_s = time.process_time() - cpu0 - pieces * piece_ms / 1000
        span = accepted[-1] - accepted[0] if len(accepted) > 1 else None
        out.send(
            {
                "accepted": len(accepted),
                "accept_span_s": round(span, 3) if span else None,
                "accepted_per_s": round(len(accepted) / span) if span else None,
                "bulk_pieces": pieces,
                "grpc_cpu_ms_per_stream": round(1000 * grpc_cpu_s / len(accepted), 3)
                if accepted
                else None,
            }
        )
        await asyncio.to_thread(done.wait, TIMEOUT_S)  # until the client has its answers
        os._exit(0)  # the streams are still open; do not wait for them to close

    asyncio.run(main())


def _client(port: int, n: int, out) -> None:
    import grpc

    from plumb.v1 import agent_pb2, agent_pb2_grpc

    os.sched_setaffinity(0, {1 % os.cpu_count()})
    answered: list[float] = []
    errors: list[str] = []

    async def one(i: int) -> None:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        call = agent_pb2_grpc.AgentServiceStub(channel).Connect()
        t = time.monotonic()
        try:
            await call.write(agent_pb2.ConnectRequest(hello=agent_pb2.Hello(node_name=f"n{i}")))
            await call.read()
            answered.append(time.monotonic() - t)
        except grpc.aio.AioRpcError as exc:
            errors.append(exc.code().name)

    async def main() -> None:
        tasks = [asyncio.create_task(one(i)) for i in range(n)]
        await asyncio.wait(tasks, timeout=TIMEOUT_S)
        answered.sort()
        out.send(
            {
                "answered": len(answered),
                "errors": {c: errors.count(c) for c in sorted(set(errors))},
                "answer_p50_s": round(answered[len(answered) // 2], 3) if answered else None,
                "answer_max_s": round(answered[-1], 3) if answered else None,
            }
        )
        os._exit(0)  # the streams stay open on purpose; do not wait for them to close

    asyncio.run(main())


def run_case(n: int, piece_ms: float, free_ms: float, pending: int | None) -> dict:
    ctx = mp.get_context("spawn")
    ready, done = ctx.Event(), ctx.Event()
    (server_in, server_out), (client_in, client_out) = ctx.Pipe(False), ctx.Pipe(False)
    port = free_port()
    server = ctx.Process(
        target=_server, args=(port, n, piece_ms, free_ms, pending, ready, done, server_out)
    )
    server.start()
    if not ready.wait(60):
        raise SystemExit("the server did not start within 60 s")
    client = ctx.Process(target=_client, args=(port, n, client_out))
    client.start()
    merged = {}
    for conn in (client_in, server_in):
        if not conn.poll(TIMEOUT_S + 60):
            raise SystemExit("a side sent no result; see its output above")
        merged.update(conn.recv())
        done.set()
    for p in (client, server):
        p.join(10)
        if p.is_alive():
            p.kill()
    return {"piece_ms": piece_ms, "free_ms": free_ms, **merged}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--piece-ms", type=float, default=3.0)
    p.add_argument("--free-ms", default="0,1,3", help="comma-separated; 0: back to back")
    p.add_argument("--max-pending", type=int, default=None, help="gRPC's pending-stream limit")
    p.add_argument("--name", default="grpc_accept", help="results/<name>.json")
    args = p.parse_args()
    before = list(os.getloadavg())
    cases = [run_case(args.streams, 0.0, 0.0, args.max_pending)]  # an idle loop
    for free in (float(x) for x in args.free_ms.split(",")):
        cases.append(run_case(args.streams, args.piece_ms, free, args.max_pending))
        print(json.dumps(cases[-1]), flush=True)
    result = {
        "benchmark": "grpc_accept",
        "streams": args.streams,
        "max_pending": args.max_pending,
        "cases": cases,
        "load_avg_before": [round(x, 2) for x in before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
