"""`plumb watch`: the fleet and its open findings, redrawn in place until Ctrl-C."""

from __future__ import annotations

import time
from typing import Annotated

import httpx
import typer
from rich.live import Live

from plumb.aggregator.cli.app import ServerOpt, app, connection, out
from plumb.aggregator.cli.render import watch_view

_TIMEOUT_S = 5.0  # a frame never waits longer than this for the aggregator


def _frame(server: str, client: httpx.Client):
    """One view; an unreachable aggregator shows as a line in it, not as an exit."""
    try:
        rows = client.get(f"{server}/v1/nodes", timeout=_TIMEOUT_S).raise_for_status().json()
        findings = client.get(f"{server}/v1/drift", timeout=_TIMEOUT_S).raise_for_status().json()
        return watch_view(server, rows, findings, None)
    except httpx.HTTPError as exc:
        return watch_view(server, [], [], f"cannot reach the aggregator: {exc}; retrying")


@app.command()
def watch(
    server: ServerOpt = "http://127.0.0.1:8080",
    interval: Annotated[
        float, typer.Option("--interval", "-n", min=0.1, help="seconds between refreshes")
    ] = 2.0,
    iterations: Annotated[
        int, typer.Option(min=0, help="stop after this many refreshes (0: until Ctrl-C)")
    ] = 0,
) -> None:
    """A live view of the fleet, most drifted nodes first, and the open findings.

    Keeps retrying while the aggregator is unreachable. Ctrl-C exits with status 0.
    """
    server = server.rstrip("/")
    done = 0
    try:
        with (
            httpx.Client(**connection()) as client,
            Live(_frame(server, client), console=out, auto_refresh=False) as live,
        ):
            done = 1
            while not iterations or done < iterations:
                time.sleep(interval)
                live.update(_frame(server, client), refresh=True)
                done += 1
    except KeyboardInterrupt:
        pass
