"""`plumb node NAME`: everything about one node: facts, GPUs, open findings, recent history."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app, out
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import node_tables


@app.command()
def node(
    name: Annotated[str, typer.Argument(help="the node's name, as `plumb nodes` lists it")],
    removed: Annotated[
        str | None, typer.Argument(metavar="[NAME]", help="with `rm`: the node to remove")
    ] = None,
    server: ServerOpt = "http://127.0.0.1:8080",
    history: Annotated[int, typer.Option(min=1, max=10_000, help="recent changes to show")] = 20,
    output: OutputOpt = Output.table,
) -> None:
    """Every fact of one node, a per-GPU table, open findings with remediation, recent changes.

    `plumb node rm NAME` forgets a node whose agent is gone (admin); its history stays in the
    database unless the aggregator's nodes.keep_history is off.
    JSON and YAML give `{node, findings, history}`. Exit codes: 0 ok, 3 no such node,
    5 aggregator unreachable, 8 the node's agent still streams.
    """
    if name == "rm" and removed is not None:
        api_json(server, f"/v1/nodes/{quote(removed, safe='')}", method="DELETE")
        out.print(f"removed node {removed}")
        return
    path = f"/v1/nodes/{quote(name, safe='')}"
    body = {
        "node": api_json(server, path),
        "findings": api_json(server, f"{path}/drift"),
        "history": api_json(server, f"{path}/history", params={"limit": history}),
    }
    emit(body, output, lambda b: node_tables(b["node"], b["findings"], b["history"]))
