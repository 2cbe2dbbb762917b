"""`plumb recipe` and `plumb query`: resolved recipes, by criteria, from a node's facts or
from an AICR snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from plumb.aggregator.cli import choices
from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app, err
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import recipe_tables
from plumb.aggregator.errors import EXIT_CODES, PlumbError

Node = Annotated[str | None, typer.Option(help="resolve from this node's live facts")]


def _one_of(key: str):
    """Checks a criteria flag against the recipes' values; `any` needs no look-up."""
    return choices.one_of(key, choices.criteria(key), default="any")


Service = Annotated[
    str, typer.Option(help="eks, gke, aks, oke, kind, on-prem … or any", parser=_one_of("service"))
]
Accelerator = Annotated[
    str, typer.Option(help="h100, h200, a100, l4 … or any", parser=_one_of("accelerator"))
]
Os = Annotated[str, typer.Option("--os", help="ubuntu, cos, rhel … or any", parser=_one_of("os"))]
Intent = Annotated[str, typer.Option(help="training, inference or any", parser=_one_of("intent"))]
Platform = Annotated[
    str, typer.Option(help="kubeflow, dynamo … or any", parser=_one_of("platform"))
]


CriteriaFile = Annotated[
    Path | None,
    typer.Option(
        "--criteria",
        "-c",
        exists=True,
        dir_okay=False,
        help="an AICR RecipeCriteria file (YAML or JSON); flags other than `any` override it",
    ),
]
SnapshotFile = Annotated[
    Path | None,
    typer.Option(
        "--snapshot",
        "-s",
        exists=True,
        dir_okay=False,
        help="an AICR Snapshot (YAML or JSON): resolve for the criteria it implies, as "
        "`aicr recipe -s` does; flags other than `any` override them",
    ),
]


def _document(path: Path) -> Any:
    """A YAML or JSON file from the user, read within the bounds of untrusted input; exit 2
    naming what is wrong."""
    from plumb.aggregator.untrusted import load_yaml

    try:
        return load_yaml(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        err.print(f"cannot read {path}: {exc}")
        raise typer.Exit(EXIT_CODES["invalid_input"]) from exc
    except PlumbError as exc:
        _refuse(path, exc)


def _refuse(path: Path, exc: PlumbError) -> NoReturn:
    err.print(f"{path}: {exc}" + (f"\nhint: {exc.hint}" if exc.hint else ""))
    raise typer.Exit(EXIT_CODES[exc.code]) from exc


def _criteria_file(path: Path) -> dict[str, Any]:
    """The criteria in an AICR RecipeCriteria file; exit 2 naming what is wrong."""
    from plumb.aggregator.aicr import criteria_from_recipe_criteria

    try:
        return criteria_from_recipe_criteria(_document(path))
    except PlumbError as exc:
        _refuse(path, exc)


def _fetch(
    server: str, node: str | None, snapshot: Path | None, criteria: dict[str, Any]
) -> dict[str, Any]:
    if node:
        return api_json(server, f"/v1/nodes/{node}/recipe")
    if snapshot:
        # YAML timestamps and the like become text: the body is JSON.
        doc = json.loads(json.dumps(_document(snapshot), default=str))
        body = {"snapshot": doc, "criteria": criteria}
        return api_json(server, "/v1/recipe", method="POST", body=body)
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
    criteria_file: CriteriaFile = None,
    snapshot: SnapshotFile = None,
    output: OutputOpt = Output.table,
) -> None:
    """The recipe for criteria (flags, an AICR criteria file or an AICR snapshot), or for
    --node's live facts."""
    if sum(x is not None for x in (node, criteria_file, snapshot)) > 1:
        err.print("give at most one of --node, --criteria and --snapshot")
        raise typer.Exit(EXIT_CODES["invalid_input"])
    flags = dict(service=service, accelerator=accelerator, os=os, intent=intent, platform=platform)
    criteria: dict[str, Any] = _criteria_file(criteria_file) if criteria_file else {}
    criteria.update({k: v for k, v in flags.items() if v != "any" or k not in criteria})
    emit(_fetch(server, node, snapshot, criteria), output, recipe_tables)


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
        emit(value, Output.yaml, lambda v: ())
    else:
        typer.echo(str(value))
