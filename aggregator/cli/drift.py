"""`plumb drift`: open drift findings as a table; exit 1 while any is critical (for CI)."""

from __future__ import annotations

from typing import Annotated

import typer

from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import drift_table


@app.command()
def drift(
    server: ServerOpt = "http://127.0.0.1:8080",
    node: Annotated[str | None, typer.Option(help="only this node")] = None,
    kind: Annotated[
        str | None, typer.Option(help="recipe, constraint, baseline, pool, health")
    ] = None,
    severity: Annotated[str | None, typer.Option(help="critical, warning or info")] = None,
    output: OutputOpt = Output.table,
) -> None:
    """Open drift findings, most severe first. Exit code 1 when any critical one is open."""
    params = {k: v for k, v in {"node": node, "kind": kind, "severity": severity}.items() if v}
    findings = api_json(server, "/v1/drift", params=params)
    emit(findings, output, lambda found: [drift_table(found)])
    if any(f["severity"] == "critical" for f in findings):
        raise typer.Exit(1)
