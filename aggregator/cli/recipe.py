"""`plumb recipe` and `plumb query`: resolved recipes, by criteria, from a node's facts or
from an AICR snapshot; `plumb recipe list`: the catalog's overlays and whether they resolve.

With `--data DIR` (AICR's external catalog) the recipe is resolved here, from the shipped
recipes with DIR merged over them, rather than by the aggregator, which knows only its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape

from plumb.aggregator.cli import choices
from plumb.aggregator.cli.app import Output, OutputOpt, ServerOpt, api_json, app, err
from plumb.aggregator.cli.output import emit
from plumb.aggregator.cli.render import Sheet, recipe_tables
from plumb.aggregator.errors import EXIT_CODES, PlumbError

recipe_app = typer.Typer(no_args_is_help=False, add_completion=False)
app.add_typer(recipe_app, name="recipe")

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
DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data",
        exists=True,
        file_okay=False,
        help="a recipe folder merged over the shipped recipes (same-named files replace"
        " theirs, registry.yaml merges by component); resolves here, not on the aggregator",
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


def document_of(path: Path) -> Any:
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


def criteria_file_of(path: Path) -> dict[str, Any]:
    """The criteria in an AICR RecipeCriteria file; exit 2 naming what is wrong."""
    from plumb.aggregator.aicr import criteria_from_recipe_criteria

    try:
        return criteria_from_recipe_criteria(document_of(path))
    except PlumbError as exc:
        _refuse(path, exc)


def criteria_of(
    flags: dict[str, str],
    node: str | None,
    criteria_file: Path | None,
    snapshot: Path | None,
    data: Path | None,
    what: str,
) -> dict[str, Any]:
    """The criteria a recipe command was given: an AICR criteria file's, with the flags set
    away from `any` over them; exit 2 for more than one source, or --node with --data
    (`what` says what --data does there)."""
    if sum(x is not None for x in (node, criteria_file, snapshot)) > 1:
        err.print("give at most one of --node, --criteria and --snapshot")
        raise typer.Exit(EXIT_CODES["invalid_input"])
    if node and data:
        err.print(f"--data {what} here from recipe files; --node needs the aggregator's facts")
        raise typer.Exit(EXIT_CODES["invalid_input"])
    criteria: dict[str, Any] = criteria_file_of(criteria_file) if criteria_file else {}
    criteria.update({k: v for k, v in flags.items() if v != "any" or k not in criteria})
    return criteria


def _fetch(
    server: str, node: str | None, snapshot: Path | None, criteria: dict[str, Any]
) -> dict[str, Any]:
    if node:
        return api_json(server, f"/v1/nodes/{node}/recipe")
    if snapshot:
        # YAML timestamps and the like become text: the body is JSON.
        doc = json.loads(json.dumps(document_of(snapshot), default=str))
        body = {"snapshot": doc, "criteria": criteria}
        return api_json(server, "/v1/recipe", method="POST", body=body)
    return api_json(server, "/v1/recipe", params=criteria)


def load_data(data: Path | None):
    """The catalog with `data` merged over the shipped recipes; exit 2 listing every problem
    in DIR by file, line and key."""
    from plumb.aggregator.recipes import RecipeError, load_catalog

    try:
        return load_catalog(data=data)
    except RecipeError as exc:
        typer.echo(str(exc), err=True)  # whole lines: each names a file, line and key
        raise typer.Exit(EXIT_CODES["invalid_input"]) from exc


def resolve_here(data: Path, snapshot: Path | None, criteria: dict[str, Any]) -> dict[str, Any]:
    """The recipe resolved in this process from the shipped recipes with `data` merged."""
    from plumb.aggregator.aicr import resolve_snapshot
    from plumb.aggregator.recipes import Criteria, ResolutionCache, resolve

    catalog = load_data(data)
    try:
        if snapshot:
            return resolve_snapshot(
                ResolutionCache(catalog), document_of(snapshot), criteria
            ).to_dict()
        return resolve(catalog, Criteria(**criteria)).to_dict()
    except PlumbError as exc:
        err.print(str(exc) + (f"\nhint: {exc.hint}" if exc.hint else ""), markup=False)
        raise typer.Exit(EXIT_CODES[exc.code]) from exc


@recipe_app.callback(invoke_without_command=True)
def recipe(
    ctx: typer.Context,
    server: ServerOpt = "http://127.0.0.1:8080",
    node: Node = None,
    service: Service = "any",
    accelerator: Accelerator = "any",
    os: Os = "any",
    intent: Intent = "any",
    platform: Platform = "any",
    criteria_file: CriteriaFile = None,
    snapshot: SnapshotFile = None,
    data: DataDir = None,
    output: OutputOpt = Output.table,
) -> None:
    """The recipe for criteria (flags, an AICR criteria file or an AICR snapshot), or for
    --node's live facts; `plumb recipe list` lists the overlays."""
    if ctx.invoked_subcommand is not None:
        return
    flags = dict(service=service, accelerator=accelerator, os=os, intent=intent, platform=platform)
    criteria = criteria_of(flags, node, criteria_file, snapshot, data, "resolves")
    if data:
        body = resolve_here(data, snapshot, criteria)
    else:
        body = _fetch(server, node, snapshot, criteria)
    emit(body, output, recipe_tables)


@recipe_app.command("list")
def recipe_list(data: DataDir = None, output: OutputOpt = Output.table) -> None:
    """Every overlay of the recipes (with --data merged), its criteria, and whether asking
    for those criteria resolves to a recipe that applies it."""
    from plumb.aggregator.recipes import list_overlays

    rows = [row.to_dict() for row in list_overlays(load_data(data))]
    emit(rows, output, _list_table)


def _list_table(rows: list[dict[str, Any]]) -> list[Sheet]:
    sheet = Sheet(
        f"{len(rows)} overlays",
        ["OVERLAY", "CRITERIA", "MIXINS", "RESOLVES", "COMPONENTS"],
        fixed=("OVERLAY", "RESOLVES"),
    )
    for row in rows:
        crit = ", ".join(f"{k}={v}" for k, v in row["criteria"].items()) or "any"
        if not row["resolves"]:
            state = f"[red]no[/]: {escape(row['problem'])}"
        elif row["warnings"] and row["name"] != "base":
            state = f"[yellow]yes[/], {len(row['warnings'])} warning(s)"
        else:
            state = "[green]yes[/]"
        sheet.rows.append(
            [
                escape(row["name"]),
                escape(crit),
                escape(", ".join(row["mixins"]) or "-"),
                state,
                str(row["components"]),
            ]
        )
    return [sheet]


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
