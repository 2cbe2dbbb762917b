"""`plumb recipe` and `plumb query`: resolved recipes, by criteria or from a node's facts."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
import yaml

from aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app, out
from aggregator.render import recipe_tables

Node = Annotated[str | None, typer.Option(help="resolve from this node's live facts")]
Service = Annotated[str, typer.Option(help="eks, gke, aks, oke, kind, on-prem … or any")]
Accelerator = Annotated[str, typer.Option(help="h100, h200, a100, l4 … or any")]
Os = Annotated[str, typer.Option("--os", help="ubuntu, cos, rhel … or any")]
Intent = Annotated[str, typer.Option(help="training, inference or any")]
Platform = Annotated[str, typer.Option(help="kubeflow, dynamo … or any")]


def _fetch(server: str, node: str | None, criteria: dict[str, str]) -> dict[str, Any]:
    if node:
        return api_json(server, f"/v1/nodes/{node}/recipe")
    return api_json(server, "/v1/recipe", params=criteria)


@app.command()
def recipe(
    server: ServerOpt = "http://127.0.0.1:8080",
    node: Node = None,
    service: Service = "any",
    accelerator: Accelerator = "any",
    os: Os = "any",
    intent: Intent = "any",
    platform: Platform = "any",
    output: OutputOpt = Output.table,
) -> None:
    """The recipe for criteria, or for --node from its live facts."""
    criteria = dict(
        service=service, accelerator=accelerator, os=os, intent=intent, platform=platform
    )
    body = _fetch(server, node, criteria)
    if output is Output.json:
        out.print_json(json.dumps(body))
    elif output is Output.yaml:
        out.print(yaml.safe_dump(body, sort_keys=False), end="", markup=False)
    else:
        for table in recipe_tables(body):
            out.print(table)


@app.command()
def query(
    selector: Annotated[str, typer.Argument(help="e.g. components.gpu-operator.version")],
    server: ServerOpt = "http://127.0.0.1:8080",
    node: Node = None,
    service: Service = "any",
    accelerator: Accelerator = "any",
    os: Os = "any",
    intent: Intent = "any",
    platform: Platform = "any",
) -> None:
    """One value of a recipe: a scalar prints bare, anything else as YAML."""
    params = dict(
        selector=selector,
        service=service,
        accelerator=accelerator,
        os=os,
        intent=intent,
        platform=platform,
    )
    if node:
        params["node"] = node
    value = api_json(server, "/v1/query", params=params)["value"]
    if isinstance(value, dict | list):
        out.print(yaml.safe_dump(value, sort_keys=False), end="", markup=False)
    else:
        out.print(str(value), markup=False)
