"""`plumb changes`: the fleet's fact changes grouped into events (GET /v1/changes)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app
from plumb.aggregator.cli.drift import since_time
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import changes_table

When = Annotated[
    datetime | None,
    typer.Option(
        help="a duration back from now (30m, 6h, 2d) or an ISO time",
        metavar="DURATION|TIME",
        parser=since_time,
    ),
]


@app.command()
def changes(
    server: ServerOpt = "http://127.0.0.1:8080",
    since: When = None,
    until: When = None,
    pool: Annotated[
        str | None, typer.Option(help="only this pool (eks/h100/ubuntu/any/any)")
    ] = None,
    fact: Annotated[
        str | None, typer.Option(help="a fact and what lies under it: nccl, gpus[*].vbios_version")
    ] = None,
    output: OutputOpt = Output.table,
) -> None:
    """What changed across the fleet, newest first.

    One line per fact transition on the nodes of a pool, with the findings it opened or
    closed and the validations that followed. The window is the 24 hours before --until
    (default now) unless --since says otherwise.

    Exit codes: 0 ok, 2 bad option, 5 aggregator unreachable.
    """
    params = {"pool": pool, "fact": fact}
    if since is not None:
        params["since"] = since.isoformat()
    if until is not None:
        params["until"] = until.isoformat()
    events = api_json(server, "/v1/changes", params={k: v for k, v in params.items() if v})
    emit(events, output, lambda found: [changes_table(found)])
