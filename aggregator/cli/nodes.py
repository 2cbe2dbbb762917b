"""`plumb nodes`: the live nodes, one row each, with their status, stack, pool and findings."""

from __future__ import annotations

from typing import Annotated

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import fleet_table

PoolOpt = Annotated[str | None, typer.Option(help="only this pool, e.g. eks/h100/ubuntu/any/any")]
DriftedOpt = Annotated[bool, typer.Option("--drifted", help="only nodes with open findings")]


def fetch_nodes(server: str, pool: str | None = None, drifted: bool = False) -> list[dict]:
    """`/v1/nodes`, filtered by the server."""
    params: dict[str, str] = {}
    if pool:
        params["pool"] = pool
    if drifted:
        params["drifted"] = "true"
    return api_json(server, "/v1/nodes", params=params)


@app.command()
def nodes(
    server: ServerOpt = "http://127.0.0.1:8080",
    pool: PoolOpt = None,
    drifted: DriftedOpt = False,
    output: OutputOpt = Output.table,
) -> None:
    """Every node, down ones first: status (up, stale, down), pool, GPUs, driver, CUDA, open
    findings by severity, report age. `-o wide` adds NCCL, CUDA runtime, OS and kernel.

    Exit codes: 0 ok, 2 bad option, 5 aggregator unreachable.
    """
    rows = fetch_nodes(server, pool, drifted)
    emit(rows, output, lambda r: [fleet_table(r)], lambda r: [fleet_table(r, wide=True)])
