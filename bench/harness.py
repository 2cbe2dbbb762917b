"""What the benchmark scripts share: a free loopback port, a bounded wait on the API, and the
API access a benchmarked aggregator gets."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx

# The tests' helpers (free ports, PostgreSQL) serve the benchmarks too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from ports import free_port  # noqa: E402

R = TypeVar("R")
RESULTS = Path(__file__).parent / "results"

BENCH_TOKEN = "bench-admin-token-0123456789"
# Send with calls that need the admin scope (POST /v1/validations).
ADMIN_HEADERS = {"Authorization": f"Bearer {BENCH_TOKEN}"}


def serve_env(workdir: Path) -> dict[str, str]:
    """PLUMB_* settings for a benchmarked `plumb serve`: anonymous read, BENCH_TOKEN as admin,
    and a rate limit far above what one benchmark client sends, so the figures measure the
    aggregator and not its limiter."""
    tokens = workdir / "bench-api-tokens"
    tokens.write_text(f"bench admin {BENCH_TOKEN}\n")
    return {
        "PLUMB_API__ANONYMOUS_READ": "true",
        "PLUMB_API__TOKENS_FILE": str(tokens),
        "PLUMB_API__RATE_PER_S": "1000000",
        "PLUMB_API__BURST": "1000000",
    }


async def wait_for(
    get: Callable[[], Awaitable[R]],
    ok: Callable[[R], bool],
    timeout_s: float = 30.0,
    interval_s: float = 0.05,
) -> R:
    """Call `get` until `ok` accepts its result; TimeoutError past `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            resp = await get()
            if ok(resp):
                return resp
        except httpx.HTTPError:
            pass
        await asyncio.sleep(interval_s)
    raise TimeoutError("benchmark condition not reached")


def write_result(name: str, result: dict) -> Path:
    """Write `result`, with the machine, its load and the time of measuring, as
    results/NAME.json."""
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        # 1, 5 and 15 minute load averages as the run ends: what else the cores were doing.
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
    result["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    return out


async def start_serve(
    workdir: Path, db: str, **env: str
) -> tuple[asyncio.subprocess.Process, str, str]:
    """A `plumb serve` on loopback (`serve_env` plus `env`) on `db`, ready: its process, gRPC
    address and HTTP base URL."""
    grpc_addr, http_port = f"127.0.0.1:{free_port()}", free_port()
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("plumb")),
        "serve", "--grpc-listen", grpc_addr, "--http-listen", f"127.0.0.1:{http_port}",
        "--db", db, "--log-level", "WARNING",
        env={**os.environ, "PYTHONUNBUFFERED": "1", **serve_env(workdir), **env},
    )  # fmt: skip
    base = f"http://127.0.0.1:{http_port}"
    async with httpx.AsyncClient(base_url=base) as http:
        await wait_for(lambda: http.get("/readyz"), lambda r: r.status_code == 200, 120)
    return proc, grpc_addr, base
