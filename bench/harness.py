"""What the benchmark scripts share: a free loopback port and a bounded wait on the API."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx

R = TypeVar("R")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
