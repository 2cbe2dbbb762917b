"""`plumb gate POOL`: a pool's rollout gate (GET /v1/gates/{pool}); exit 0 open, 1 closed,
so Argo CD, Flux or an upgrade controller can wait on it (a hook Job retrying the command)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import gate_table


@app.command()
def gate(
    pool: Annotated[str, typer.Argument(help="the pool: eks/h100/ubuntu/training/any")],
    server: ServerOpt = "http://127.0.0.1:8080",
    output: OutputOpt = Output.table,
) -> None:
    """Whether a rollout may go on from POOL's canaries to the rest of it: open once every
    canary node (label plumb.dev/canary=true by default) runs a new stack, passed validation
    at it and has no open health or straggler finding; closed, with every reason, else.

    Exit codes: 0 open, 1 closed, 2 bad option, 3 unknown pool, 5 aggregator unreachable.
    """
    found = api_json(server, f"/v1/gates/{quote(pool, safe='/')}")
    emit(found, output, lambda g: [gate_table(g)])
    if found["state"] != "open":
        raise typer.Exit(1)
