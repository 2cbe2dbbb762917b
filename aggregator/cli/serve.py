"""`plumb serve`: run the aggregator."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plumb.aggregator.cli.app import app, err
from plumb.aggregator.errors import EXIT_CODES, PlumbError
from plumb.logs import LogFormat


@app.command()
def serve(
    grpc_listen: Annotated[str | None, typer.Option(help="agent stream address")] = None,
    http_listen: Annotated[str | None, typer.Option(help="HTTP API address")] = None,
    db: Annotated[str | None, typer.Option(help="SQLAlchemy URL (default: SQLite file)")] = None,
    log_level: Annotated[str | None, typer.Option(help="DEBUG, INFO, WARNING, ERROR")] = None,
    log_format: Annotated[LogFormat | None, typer.Option(help="text or json lines")] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            exists=True,
            file_okay=False,
            help="a recipe folder merged over the shipped recipes (env PLUMB_RECIPES__DATA)",
        ),
    ] = None,
    insecure_agents: Annotated[
        bool,
        typer.Option(
            "--insecure-agents",
            help="accept unauthenticated agents (auth mode none) on a non-loopback address",
        ),
    ] = False,
) -> None:
    """Run the aggregator: gRPC for agents, HTTP for people and Prometheus."""
    import asyncio

    from pydantic import ValidationError

    from plumb.aggregator.ingest.port import listen  # gRPC and the protos only
    from plumb.aggregator.settings import AggregatorSettings
    from plumb.logs import configure_logging

    flags = {
        "grpc_listen": grpc_listen,
        "http_listen": http_listen,
        "db": db,
        "log_level": log_level,
        "log_format": log_format,
        "insecure_agents": insecure_agents or None,  # unset: PLUMB_INSECURE_AGENTS may say
    }
    try:
        given = {k: v for k, v in flags.items() if v is not None}
        if data is not None:  # merged with the other PLUMB_RECIPES__* settings, not over them
            given["recipes"] = {"data": data}
        settings = AggregatorSettings(**given)
    except ValidationError as exc:
        err.print(f"plumb serve: invalid settings:\n{exc}")
        raise typer.Exit(2) from exc
    configure_logging(settings.log_level, settings.log_format)

    async def run() -> None:
        # The agents' port opens before the rest of the aggregator is imported and its state
        # loaded; streams arriving meanwhile are held (aggregator/ingest/port.py).
        port = await listen(settings)
        from plumb.aggregator.process import serve as run_server

        await run_server(settings, port)

    try:
        asyncio.run(run())
    except PlumbError as exc:
        err.print(f"plumb serve: {exc}" + (f"\nhint: {exc.hint}" if exc.hint else ""))
        raise typer.Exit(EXIT_CODES[exc.code]) from exc
