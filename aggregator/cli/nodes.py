"""`plumb nodes`: the live nodes as a table."""

from __future__ import annotations

from aggregator.cli.app import ServerOpt, api_json, app, out
from aggregator.render import nodes_table


@app.command()
def nodes(server: ServerOpt = "http://127.0.0.1:8080") -> None:
    """Table of every node: GPUs, driver, CUDA, connection and report age."""
    out.print(nodes_table(api_json(server, "/v1/nodes")))
