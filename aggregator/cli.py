"""`plumb`: run the aggregator, and ask a running one about the cluster."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import httpx
import typer
from pydantic import ValidationError
from rich.console import Console

from aggregator.errors import STATUS, PlumbError
from aggregator.render import nodes_table
from aggregator.settings import AggregatorSettings
from plumb.logs import configure_logging

app = typer.Typer(
    help="Plumb: the live truth of a GPU cluster's software stack.",
    no_args_is_help=True,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)

ServerOpt = Annotated[
    str, typer.Option("--server", envvar="PLUMB_SERVER", help="aggregator HTTP URL")
]


@app.command()
def serve(
    grpc_listen: Annotated[str | None, typer.Option(help="agent stream address")] = None,
    http_listen: Annotated[str | None, typer.Option(help="HTTP API address")] = None,
    db: Annotated[str | None, typer.Option(help="SQLAlchemy URL (default: SQLite file)")] = None,
    log_level: Annotated[str | None, typer.Option(help="DEBUG, INFO, WARNING, ERROR")] = None,
) -> None:
    """Run the aggregator: gRPC for agents, HTTP for people and Prometheus."""
    from aggregator.server import serve as run_server

    flags = {
        "grpc_listen": grpc_listen,
        "http_listen": http_listen,
        "db": db,
        "log_level": log_level,
    }
    try:
        settings = AggregatorSettings(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:
        err.print(f"plumb serve: invalid settings:\n{exc}")
        raise typer.Exit(2) from exc
    configure_logging(settings.log_level)
    try:
        asyncio.run(run_server(settings))
    except PlumbError as exc:
        err.print(f"plumb serve: {exc}" + (f"\nhint: {exc.hint}" if exc.hint else ""))
        raise typer.Exit(STATUS[exc.code][2]) from exc


@app.command()
def nodes(server: ServerOpt = "http://127.0.0.1:8080") -> None:
    """Table of every node: GPUs, driver, CUDA, connection and report age."""
    rows = _get(server, "/v1/nodes")
    out.print(nodes_table(rows))


@app.command()
def demo(
    keep: Annotated[bool, typer.Option(help="keep running until Ctrl-C after the tour")] = False,
) -> None:
    """Start an aggregator and six simulated GPU nodes, and show a driver upgrade arrive."""
    from aggregator.demo import run_demo

    sys.exit(run_demo(out, keep=keep))


def _get(server: str, path: str) -> list | dict:
    """GET a JSON API path; exit with the error's status when the server says no."""
    try:
        resp = httpx.get(server.rstrip("/") + path, timeout=10)
    except httpx.HTTPError as exc:
        err.print(
            f"cannot reach the aggregator at {server}: {exc}\n"
            "hint: start one with `plumb serve`, or pass --server / PLUMB_SERVER"
        )
        raise typer.Exit(STATUS["unavailable"][2]) from exc
    if resp.status_code >= 400:
        body = resp.json()
        err.print(
            f"{body.get('message', resp.text)}"
            + (f"\nhint: {body['hint']}" if body.get("hint") else "")
        )
        raise typer.Exit(STATUS.get(body.get("code", "internal"), STATUS["internal"])[2])
    return resp.json()


def main() -> None:
    app()
