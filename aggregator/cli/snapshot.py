"""`plumb snapshot`: the cluster's (or one node's) live facts, as Plumb's or AICR's document."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app, connection, err
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import nodes_table
from plumb.aggregator.errors import EXIT_CODES


class SnapshotFormat(StrEnum):
    """Whose document shape to write."""

    plumb = "plumb"
    aicr = "aicr"


@app.command()
def snapshot(
    server: ServerOpt = "http://127.0.0.1:8080",
    node: Annotated[str | None, typer.Option(help="only this node")] = None,
    format: Annotated[
        SnapshotFormat,
        typer.Option("--format", help="plumb, or aicr: NVIDIA AICR's Snapshot (kind: Snapshot)"),
    ] = SnapshotFormat.plumb,
    output: OutputOpt = Output.yaml,
) -> None:
    """Every node's facts as one document (YAML by default).

    `--format aicr` writes AICR Snapshots, one YAML document per node (`---` apart), that AICR's
    tools read. Exit codes: 0 ok, 3 no such node, 5 aggregator unreachable.
    """
    params = {"node": node} if node else {}
    if format is SnapshotFormat.plumb:
        body = api_json(server, "/v1/snapshot", params=params)
        emit(body, output, lambda b: [nodes_table(b["nodes"])])
        return
    if output in (Output.table, Output.wide):
        err.print("an AICR snapshot is a document: use -o yaml or -o json")
        raise typer.Exit(EXIT_CODES["invalid_input"])
    import yaml

    docs = list(yaml.safe_load_all(_aicr_yaml(server, params)))
    if output is Output.yaml:
        typer.echo(yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True), nl=False)
    else:
        emit(docs[0] if node and docs else docs, output, lambda _: [])


def _aicr_yaml(server: str, params: dict[str, str]) -> str:
    """The AICR YAML text; on failure, api_json repeats the call to report it and exit."""
    import httpx

    try:
        resp = httpx.get(
            server.rstrip("/") + "/v1/snapshot",
            params={**params, "format": "aicr"},
            timeout=30,
            **connection(server),
        )
    except httpx.HTTPError:
        resp = None
    if resp is None or resp.status_code >= 400:
        api_json(server, "/v1/snapshot", params={**params, "format": "aicr"})  # exits
    assert resp is not None
    return resp.text
